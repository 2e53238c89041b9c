"""Summary statistics of the benchmarks' samples: one definition for every bench."""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], fraction: float) -> float:
    """The nearest-rank percentile: the smallest sample that at least `fraction` of the samples
    do not exceed (`fraction` 0.99 is p99; 1.0 is the largest). Raises ValueError for no samples,
    or for a fraction outside (0, 1]."""
    if not 0 < fraction <= 1:
        raise ValueError(f"percentile: fraction must be in (0, 1], got {fraction}")
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile: no samples; a bench reports none rather than a figure")
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]
