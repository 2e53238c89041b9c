"""The one percentile every bench reports (bench/stats.py): nearest rank."""

from __future__ import annotations

import pytest

from podgroup_operator.bench.stats import percentile


def test_the_nearest_rank_is_the_smallest_sample_that_the_fraction_does_not_exceed() -> None:
    samples = [float(v) for v in range(100, 0, -1)]  # unsorted: the function sorts
    assert percentile(samples, 0.50) == 50.0
    assert percentile(samples, 0.99) == 99.0
    assert percentile(samples, 1.0) == 100.0
    assert percentile(samples, 0.001) == 1.0


def test_p99_of_few_samples_is_the_largest_and_p50_of_two_the_first() -> None:
    assert percentile([3.0, 1.0, 2.0], 0.99) == 3.0
    assert percentile([0.1, 0.5], 0.50) == 0.1


@pytest.mark.parametrize("fraction", [0.0, -0.5, 1.5])
def test_a_fraction_outside_zero_to_one_is_refused_by_name(fraction: float) -> None:
    with pytest.raises(ValueError, match="fraction must be in"):
        percentile([1.0], fraction)


def test_no_samples_is_refused_rather_than_reported_as_zero() -> None:
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 0.5)
