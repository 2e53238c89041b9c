"""The bind pacer: more binds in flight while they are answered fast, fewer when they are not."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podgroup_operator.scheduling.pacing import (
    MIN_SAMPLES,
    PERIOD_SECONDS,
    WINDOW_SECONDS,
    BindPacer,
)


class Feed:
    """Answers to a pacer on a clock of our own: whole periods of one latency at a time."""

    def __init__(self, floor: int = 32, ceiling: int = 256, target: float = 0.15) -> None:
        self.pacer = BindPacer(floor=floor, ceiling=ceiling, target_seconds=target)
        self.now = 0.0

    def periods(self, seconds: float, count: int = 1) -> list[int]:
        """`count` periods of MIN_SAMPLES answers of `seconds` each; the limit after each."""
        limits = []
        step = PERIOD_SECONDS / (MIN_SAMPLES - 1)
        for _ in range(count):
            start = self.now
            for n in range(MIN_SAMPLES):
                self.now = start + n * step
                limit = self.pacer.observe(seconds, self.now)
            limits.append(limit)
        return limits


def test_it_starts_at_the_floor() -> None:
    assert Feed().pacer.limit == 32


def test_fast_answers_raise_the_limit_half_again_a_period_up_to_the_ceiling() -> None:
    assert Feed().periods(0.01, count=7) == [48, 72, 108, 162, 243, 256, 256]


def test_a_decision_moves_the_limit_a_quarter_of_the_way_in_proportion() -> None:
    feed = Feed(floor=1, ceiling=1000)
    feed.pacer.limit = 100
    assert feed.periods(0.3) == [84]  # 100 x (0.15 / 0.3) ** 0.25


def test_a_window_of_one_latency_moves_the_limit_as_far_as_one_full_step_would() -> None:
    """The decisions that read the same answers move the limit by target / median together:
    here 100 x 0.15 / 0.3. Once the window holds answers at the target again, it holds."""
    feed = Feed(floor=1, ceiling=1000)
    feed.pacer.limit = 100
    assert feed.periods(0.3, count=4) == [84, 71, 60, 50]
    # The window still holds the slow answers for two more decisions, then the limit holds.
    assert feed.periods(0.15, count=6) == [42, 35, 35, 35, 35, 35]


def test_a_wave_of_slow_answers_shorter_than_half_the_window_does_not_move_the_limit() -> None:
    """Answers come in waves the binds in flight do not cause: one slow period among answers
    at the target leaves the window's median at the target."""
    feed = Feed(floor=1, ceiling=1000)
    feed.pacer.limit = 100
    assert feed.periods(0.15, count=4) == [100, 100, 100, 100]
    assert feed.periods(1.5) == [100]
    assert feed.periods(0.15, count=4) == [100, 100, 100, 100]


def test_slow_answers_cut_a_quarter_a_period_but_never_under_the_floor() -> None:
    feed = Feed()
    feed.periods(0.01, count=5)
    assert feed.pacer.limit == 243
    # The first two slow periods are not yet most of the window: its median is still fast.
    limits = feed.periods(2.0, count=12)
    assert limits == [256, 256, 192, 144, 108, 81, 61, 46, 34, 32, 32, 32]


def test_the_limit_moves_once_a_period_however_many_answers_come() -> None:
    feed = Feed()
    for _ in range(1000):
        assert feed.pacer.observe(0.01, 0.0) == 32  # all in the first instant
    assert feed.pacer.observe(0.01, PERIOD_SECONDS) == 48
    assert feed.pacer.observe(0.01, PERIOD_SECONDS * 1.5) == 48


def test_a_period_with_too_few_answers_waits_for_more() -> None:
    feed = Feed()
    step = WINDOW_SECONDS / MIN_SAMPLES
    limits = [feed.pacer.observe(0.01, step * n) for n in range(MIN_SAMPLES)]
    assert limits == [32] * (MIN_SAMPLES - 1) + [48]


def test_answers_older_than_the_window_do_not_count() -> None:
    """Answers too sparse to put MIN_SAMPLES in one window never move the limit: too few are
    recent enough to say anything about the queue now."""
    feed = Feed()
    limits = [feed.pacer.observe(0.01, WINDOW_SECONDS * n) for n in range(4 * MIN_SAMPLES)]
    assert limits == [32] * (4 * MIN_SAMPLES)


def test_the_median_decides_so_a_few_slow_answers_do_not_lower_the_limit() -> None:
    feed = Feed()
    answers = [0.05] * 9 + [5.0] * 4
    limits = [feed.pacer.observe(s, PERIOD_SECONDS * n / 12) for n, s in enumerate(answers)]
    assert limits[-1] == 42  # 32 x (0.15 / 0.05) ** 0.25: the median, 0.05 s, decides


def test_answers_of_no_time_at_all_count_as_fast() -> None:
    assert Feed().periods(0.0) == [48]


@pytest.mark.parametrize(
    ("floor", "ceiling", "target", "message"),
    [
        (0, 10, 0.1, "1 <= floor <= ceiling, got 0 and 10"),
        (20, 10, 0.1, "1 <= floor <= ceiling, got 20 and 10"),
        (1, 10, 0.0, "a positive target, got 0.0"),
    ],
)
def test_a_pacer_that_could_not_work_is_refused_with_the_values(
    floor: int, ceiling: int, target: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        BindPacer(floor=floor, ceiling=ceiling, target_seconds=target)


@given(
    floor=st.integers(1, 64),
    extra=st.integers(0, 512),
    answers=st.lists(
        st.tuples(st.floats(0.0, 10.0, allow_nan=False), st.floats(0.0, 1.0, allow_nan=False)),
        max_size=500,
    ),
)
def test_the_limit_stays_between_floor_and_ceiling_whatever_the_answers(
    floor: int, extra: int, answers: list[tuple[float, float]]
) -> None:
    pacer = BindPacer(floor=floor, ceiling=floor + extra, target_seconds=0.15)
    now = 0.0
    for seconds, gap in answers:
        now += gap
        assert floor <= pacer.observe(seconds, now) <= floor + extra
