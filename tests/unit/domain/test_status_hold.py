"""The hold-or-write decision of a status write (domain/status_hold.py), with times as numbers:
no clock, no sleep."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podgroup_operator import constants as c
from podgroup_operator.api.models import Condition, PodGroupStatus
from podgroup_operator.domain.scheduling_status import Verdict
from podgroup_operator.domain.status_hold import (
    CONTESTED_AFTER,
    CONTESTED_FIRST_SECONDS,
    CONTESTED_LONGEST_SECONDS,
    STARTING_LAG_FACTOR,
    Hold,
    HoldClock,
    HoldClocks,
    HoldTuning,
    change_hold,
    contest_hold,
    first_status_hold,
    only_progress,
    starting_wait,
)

TUNING = HoldTuning(count_delay=2.0, binding_delay=60.0, starting_delay=10.0, starting_longest=30.0)
NEW = PodGroupStatus()
PLACED = Verdict(placed=True)
REFUSED = Verdict(placed=False, reason=c.Reason.NOT_ENOUGH_RESOURCES, message="0 of 2 fit")
NO_CLOCKS = HoldClocks()


def first(
    verdict: Verdict | None,
    *,
    scheduled: int = 0,
    clocks: HoldClocks = NO_CLOCKS,
    now: float = 100.0,
    phase: str | None = c.Phase.PENDING,
    written: PodGroupStatus = NEW,
    tuning: HoldTuning = TUNING,
    lags: tuple[float, ...] = (),
) -> Hold | None:
    return first_status_hold(written, phase, scheduled, 2, verdict, clocks, now, tuning, lags)


# --- a group's first status ----------------------------------------------------------------------


def test_a_first_pending_nobody_judged_is_held_the_count_delay_from_now() -> None:
    assert first(None) == Hold(HoldClock.COUNTS, since=100.0, until=102.0)


def test_a_first_pending_is_held_from_its_running_clock_and_written_when_it_runs_out() -> None:
    clocks = HoldClocks(counts_since=99.0)
    assert first(None, clocks=clocks, now=100.0) == Hold(HoldClock.COUNTS, 99.0, 101.0)
    assert first(None, clocks=clocks, now=101.0) is None


def test_a_refusal_is_written_at_once() -> None:
    assert first(REFUSED) is None


@pytest.mark.parametrize("phase", [c.Phase.RUNNING, c.Phase.FAILED, None])
def test_a_first_status_other_than_pending_is_written_at_once(phase: str | None) -> None:
    assert first(PLACED, phase=phase, scheduled=2) is None


def test_a_group_with_a_status_is_not_held_as_a_first_status() -> None:
    assert first(None, written=PodGroupStatus(phase=c.Phase.PENDING)) is None


def test_no_count_delay_holds_nothing() -> None:
    assert first(None, tuning=HoldTuning(count_delay=0)) is None


def test_a_placed_gang_still_binding_waits_the_binding_delay_from_the_placement() -> None:
    assert first(PLACED, scheduled=1) == Hold(HoldClock.COUNTS, 100.0, 160.0)
    clocks = HoldClocks(counts_since=100.0)
    assert first(PLACED, scheduled=1, clocks=clocks, now=159.9) is not None
    assert first(PLACED, scheduled=1, clocks=clocks, now=160.0) is None


def test_a_bound_gang_waits_the_starting_delay_on_its_own_clock() -> None:
    """The BOUND clock starts when minMember members are bound, whatever the COUNTS clock says."""
    clocks = HoldClocks(counts_since=0.0)
    assert first(PLACED, scheduled=2, clocks=clocks) == Hold(HoldClock.BOUND, 100.0, 110.0)
    clocks = HoldClocks(counts_since=0.0, bound_since=100.0)
    assert first(PLACED, scheduled=2, clocks=clocks, now=110.0) is None


def test_the_starting_wait_is_never_shorter_than_the_count_delay() -> None:
    tuning = HoldTuning(count_delay=5.0, starting_delay=1.0)
    assert first(PLACED, scheduled=2, tuning=tuning) == Hold(HoldClock.BOUND, 100.0, 105.0)


# --- how long a bound gang waits to start ---------------------------------------------------------


def test_the_starting_wait_is_the_fixed_delay_until_gangs_start_slowly() -> None:
    assert starting_wait((), TUNING) == 10.0
    assert starting_wait((1.0, 2.0, 3.0), TUNING) == 10.0


def test_slow_starts_lengthen_the_starting_wait_to_twice_their_median_at_most_the_longest() -> None:
    assert starting_wait((6.0, 7.0, 100.0), TUNING) == STARTING_LAG_FACTOR * 7.0
    assert starting_wait((20.0,), TUNING) == 30.0
    lags = (8.0,)
    assert first(PLACED, scheduled=2, lags=lags) == Hold(HoldClock.BOUND, 100.0, 116.0)


@given(st.lists(st.floats(min_value=0, max_value=1e6), max_size=40))
def test_the_starting_wait_stays_between_the_fixed_delay_and_the_longest(lags: list[float]) -> None:
    assert TUNING.starting_delay <= starting_wait(lags, TUNING) <= TUNING.starting_longest


# --- changes of a group that has a status ---------------------------------------------------------


def cond(kind: str, status: str, reason: str, message: str = "") -> Condition:
    return Condition(type=kind, status=status, reason=reason, message=message)


PENDING = PodGroupStatus(phase=c.Phase.PENDING)


def change(
    fields: set[str],
    computed: PodGroupStatus,
    *,
    written: PodGroupStatus = PENDING,
    verdict: Verdict | None = None,
    clocks: HoldClocks = NO_CLOCKS,
    now: float = 100.0,
) -> Hold | None:
    return change_hold(fields, written, computed, 2, verdict, clocks, now, TUNING, ())


def test_counts_alone_are_progress_held_the_count_delay() -> None:
    computed = PodGroupStatus(phase=c.Phase.PENDING, scheduled=1)
    assert change({"scheduled"}, computed) == Hold(HoldClock.COUNTS, 100.0, 102.0)
    assert change({"scheduled"}, computed, clocks=HoldClocks(counts_since=98.0)) is None


def test_a_phase_change_is_written_at_once() -> None:
    computed = PodGroupStatus(phase=c.Phase.RUNNING, scheduled=2, running=2)
    assert change({"phase", "scheduled", "running"}, computed) is None


def test_a_condition_restating_counts_is_progress_and_one_changing_reason_is_not() -> None:
    short = cond(c.ConditionType.UNSCHEDULABLE, "True", c.Reason.NOT_ENOUGH_TASKS, "1 of 2")
    written = PodGroupStatus(phase=c.Phase.PENDING, conditions=[short])
    restated = short.model_copy(update={"message": "0 of 2"})
    assert only_progress({"conditions"}, written, PodGroupStatus(conditions=[restated]))
    other = short.model_copy(update={"reason": c.Reason.NOT_ENOUGH_RESOURCES})
    assert not only_progress({"conditions"}, written, PodGroupStatus(conditions=[other]))
    assert not only_progress({"conditions"}, written, PodGroupStatus(conditions=[]))  # gone


def test_scheduled_turning_true_is_progress_and_other_conditions_turning_are_not() -> None:
    scheduled = cond(c.ConditionType.SCHEDULED, "True", c.Reason.GANG_SCHEDULED)
    assert only_progress({"conditions"}, PENDING, PodGroupStatus(conditions=[scheduled]))
    preempted = cond(c.ConditionType.PREEMPTED, "True", c.Reason.PREEMPTED)
    assert not only_progress({"conditions"}, PENDING, PodGroupStatus(conditions=[preempted]))


def test_a_placed_pending_gangs_progress_is_held_as_its_first_status_would_be() -> None:
    binding = PodGroupStatus(phase=c.Phase.PENDING, scheduled=1)
    assert change({"scheduled"}, binding, verdict=PLACED) == Hold(HoldClock.COUNTS, 100.0, 160.0)
    bound = PodGroupStatus(phase=c.Phase.PENDING, scheduled=2)
    assert change({"scheduled"}, bound, verdict=PLACED) == Hold(HoldClock.BOUND, 100.0, 110.0)


def test_a_running_gangs_counts_wait_only_the_count_delay_even_when_placed() -> None:
    written = PodGroupStatus(phase=c.Phase.RUNNING, running=2)
    computed = PodGroupStatus(phase=c.Phase.RUNNING, running=3)
    hold = change({"running"}, computed, written=written, verdict=PLACED)
    assert hold == Hold(HoldClock.COUNTS, 100.0, 102.0)


# --- contested writes ----------------------------------------------------------------------------


def test_a_contest_holds_only_from_its_third_write_doubling_up_to_the_longest() -> None:
    for times in range(CONTESTED_AFTER):
        assert contest_hold(times, last_write=100.0, now=100.0) is None
    first_hold = 100.0 + CONTESTED_FIRST_SECONDS
    assert contest_hold(CONTESTED_AFTER, 100.0, 100.0) == first_hold
    assert contest_hold(CONTESTED_AFTER, 100.0, first_hold) is None
    assert contest_hold(CONTESTED_AFTER + 1, 100.0, 100.0) == 100.0 + 2 * CONTESTED_FIRST_SECONDS
    assert contest_hold(CONTESTED_AFTER + 40, 100.0, 100.0) == 100.0 + CONTESTED_LONGEST_SECONDS
