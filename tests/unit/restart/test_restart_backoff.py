"""Exponential backoff with a cap, measured from status.lastFailureTime, so that it survives an
operator restart: the plan is a function of the written status, never of a process's memory."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podgroup_operator.api.limits import MAX_SECONDS
from podgroup_operator.api.models import RestartPolicy
from podgroup_operator.constants import Phase
from podgroup_operator.domain.restart import Restart, Wait, backoff_delay
from tests.unit.restart.helpers import (
    POLICY,
    World,
    apply_status_patch,
    at,
    gang,
    iso,
    members,
    plan_restart,
    running_status,
)


def policy(backoff: int = 10, cap: int = 300) -> RestartPolicy:
    return RestartPolicy(backoff_seconds=backoff, max_backoff_seconds=cap, max_restarts=100)


def test_the_delay_doubles_per_restart_up_to_the_cap() -> None:
    delays = [backoff_delay(policy(), n).total_seconds() for n in range(8)]
    assert delays == [10, 20, 40, 80, 160, 300, 300, 300]


@pytest.mark.parametrize(
    ("backoff", "cap", "restarts", "seconds"),
    [(0, 300, 5, 0), (10, 5, 0, 5), (10, 0, 3, 0), (1, 300, 10**9, 300), (7, 31_536_000, 3, 56)],
    ids=["no-backoff", "cap-below-base", "zero-cap", "huge-count", "uncapped"],
)
def test_delay_edges(backoff: int, cap: int, restarts: int, seconds: int) -> None:
    assert backoff_delay(policy(backoff, cap), restarts) == timedelta(seconds=seconds)


def test_a_policy_stored_before_the_bounds_cannot_overflow_the_wait() -> None:
    """`maxBackoffSeconds: 1000000000000` froze its group's status with a traceback per second:
    `now + delay` overflowed. The delay is clamped to one year, whatever the stored policy says."""
    stored = RestartPolicy.model_construct(
        backoff_seconds=10**15, max_backoff_seconds=1_000_000_000_000, max_restarts=3
    )
    assert backoff_delay(stored, 0) == timedelta(seconds=MAX_SECONDS)
    assert backoff_delay(stored, 10**9) == timedelta(seconds=MAX_SECONDS)
    group = gang(status=unknown_since(100))
    group.spec.policy = stored
    plan = plan_restart(group, members("RRF"), at(101))
    assert isinstance(plan, Wait)
    assert plan.until == at(100) + timedelta(seconds=MAX_SECONDS)


def unknown_since(failed: int, restarts: int = 0, **extra: str) -> dict[str, object]:
    return running_status(
        phase=Phase.UNKNOWN, lastFailureTime=iso(at(failed)), restarts=restarts, **extra
    )


def test_the_restart_waits_for_the_backoff_after_the_last_failure() -> None:
    status = unknown_since(100, restarts=2, lastRestartTime=iso(at(50)))
    group = gang(status=status)
    pods = members("RRF")

    early = plan_restart(group, pods, at(139))
    due = plan_restart(group, pods, at(140))

    assert isinstance(early, Wait)
    assert early.until == at(140)  # 10 * 2**2 after the failure at 100
    assert early.status_patch is None
    assert "restart 3 of 3" in early.message
    assert isinstance(due, Restart)
    assert due.status_patch["status"]["restarts"] == 3


def test_the_backoff_is_honoured_across_operator_restarts() -> None:
    """Two operator processes, one before and one after a crash, see the same inputs and so
    compute the same plan; nothing is remembered between calls."""
    status = unknown_since(100, restarts=1, lastRestartTime=iso(at(50)))
    pods = members("RFF")
    first = plan_restart(gang(status=status), pods, at(110))
    after_crash = plan_restart(gang(status=status), [dict(p) for p in pods], at(110))
    assert first == after_crash
    assert isinstance(first, Wait)
    assert first.until == at(120)


def test_a_failure_the_status_does_not_record_yet_starts_the_clock_in_the_status() -> None:
    """The status still says Running (the lifecycle has not written the loss): the Wait plan
    writes lastFailureTime, so the deadline stays put when planned again later."""
    world = World(gang(status=running_status()), members("RRF"))

    wait = world.plan(at(100))
    assert isinstance(wait, Wait)
    assert wait.until == at(110)
    assert wait.status_patch == {"status": {"lastFailureTime": iso(at(100))}}

    world.carry_out(wait)
    again = world.plan(at(105))  # e.g. in a new operator process
    assert isinstance(again, Wait)
    assert again.until == at(110)
    assert again.status_patch is None
    assert isinstance(world.plan(at(110)), Restart)


def test_a_failure_of_an_earlier_incarnation_does_not_shorten_the_backoff() -> None:
    """lastFailureTime before lastRestartTime belongs to the gang that was restarted."""
    status = running_status(restarts=1, lastFailureTime=iso(at(10)), lastRestartTime=iso(at(30)))
    plan = plan_restart(gang(status=status), members("RRF"), at(500))
    assert isinstance(plan, Wait)
    assert plan.until == at(520)
    assert plan.status_patch == {"status": {"lastFailureTime": iso(at(500))}}


def test_a_new_loss_during_the_backoff_moves_the_deadline() -> None:
    """lastFailureTime is the newest loss: the gang restarts once it has been quiet."""
    group = gang(status=unknown_since(100))
    first = plan_restart(group, members("RRF"), at(105))
    later = plan_restart(
        apply_status_patch(group, {"status": {"lastFailureTime": iso(at(107))}}),
        members("RFF"),
        at(108),
    )
    assert isinstance(first, Wait)
    assert isinstance(later, Wait)
    assert (first.until, later.until) == (at(110), at(117))


@given(
    restarts=st.integers(0, 12),
    backoff=st.integers(0, 100),
    cap=st.integers(0, 1000),
    failed=st.integers(0, 1000),
    elapsed=st.integers(0, 3000),
)
def test_a_restart_never_comes_before_the_backoff_has_passed(
    restarts: int, backoff: int, cap: int, failed: int, elapsed: int
) -> None:
    spec = {**POLICY, "maxRestarts": 100, "backoffSeconds": backoff, "maxBackoffSeconds": cap}
    status = unknown_since(failed, restarts=restarts)
    now = at(failed + elapsed)
    plan = plan_restart(gang(policy=spec, status=status), members("RRF"), now)
    delay = min(backoff * 2**restarts, cap)
    if elapsed >= delay:
        assert isinstance(plan, Restart)
    else:
        assert isinstance(plan, Wait)
        assert plan.until == at(failed + delay)
        assert plan.until > now
