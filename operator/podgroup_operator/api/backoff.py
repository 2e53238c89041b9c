"""Exponential backoff, the one rule behind every retry that waits longer each time.

The scheduler's retries of a refused gang, the isolation of objects whose processing raised,
the restart policy's wait between restarts, the informers' retries, the repeats of a waiting
gang's FailedScheduling Events and the writes of a contested status all use it; it lives in
`api/` because both halves of the pure core (`scheduling/`, `domain/`) need it and neither may
import the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from podgroup_operator.api.limits import clamp_seconds


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff between failed attempts: initial, doubling, capped."""

    initial_seconds: float = 1.0
    max_seconds: float = 300.0

    def delay(self, failed_attempts: int) -> timedelta:
        """No delay before the first attempt; then initial * 2**(failures-1), at most the cap.

        Both ends are clamped to a year (a policy stored before the CRD had bounds once made
        `now + delay` overflow), and so is the exponent, so that a million failures do not
        build a huge integer."""
        if failed_attempts <= 0:
            return timedelta(0)
        exponent = min(failed_attempts - 1, 62)
        initial, cap = clamp_seconds(self.initial_seconds), clamp_seconds(self.max_seconds)
        return timedelta(seconds=min(initial * (2**exponent), cap))
