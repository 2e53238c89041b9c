"""A Strict gang held partly bound past its schedule timeout: the members bound (by someone
else, or before an operator was killed between a gang's binds) hold nodes the rest may never
join. The scheduler's ScheduleTimeout verdict (`timed_out_at`) lets the policy free them."""

from __future__ import annotations

from typing import Any

import pytest

from podgroup_operator.constants import Phase, Reason
from podgroup_operator.domain.restart import Fail, Idle, Nothing, Restart, Resume
from tests.unit.restart.helpers import (
    NO_BACKOFF,
    POLICY,
    World,
    at,
    gang,
    iso,
    members,
    plan_restart,
)


@pytest.mark.parametrize("letters", ["BBP", "RBP", "RPP"])
def test_a_strict_gang_held_partly_bound_past_its_timeout_restarts_at_once(
    letters: str,
) -> None:
    group = gang(policy=POLICY, status={"phase": Phase.PENDING})

    plan = plan_restart(group, members(letters), at(70), timed_out_at=at(60))

    assert isinstance(plan, Restart)  # at once: the timeout was the wait, no backoff
    patch = plan.status_patch["status"]
    assert patch["restarts"] == 1  # charged: maxRestarts bounds a gang that keeps timing out
    assert patch["lastRestartTime"] == iso(at(70))
    assert [ref.name for ref in plan.delete] == ["m0", "m1", "m2"]  # the waiting one too
    held = letters.count("B") + letters.count("R")
    assert f"{held} of minMember 3 members hold nodes (m0 on node-a" in plan.event.message
    assert plan.event.reason == Reason.GANG_RESTARTED


def test_the_restarted_gang_is_not_restarted_again_for_the_same_timeout() -> None:
    world = World(gang(policy=NO_BACKOFF, status={"phase": Phase.PENDING}), members("BBP"))
    plan = plan_restart(world.group, world.pods, at(70), timed_out_at=at(60))
    assert isinstance(plan, Restart)
    world.carry_out(plan)
    world.finish_deletions()
    for _ in range(2):  # recreate the bare members, then clear the restart's progress
        resume = plan_restart(world.group, world.pods, at(75), timed_out_at=at(60))
        assert isinstance(resume, Resume), resume
        world.carry_out(resume)
    assert len(world.pods) == 3 and not world.group.status.restarting_uids
    world.pods[0]["spec"]["nodeName"] = "node-b"  # someone binds one member of the new one

    again = plan_restart(world.group, world.pods, at(80), timed_out_at=at(60))

    assert isinstance(again, Nothing) and again.why is Idle.NOT_TRIGGERED
    assert world.restarts() == 1
    # The new incarnation's own timeout counts.
    assert isinstance(plan_restart(world.group, world.pods, at(200), timed_out_at=at(190)), Restart)


@pytest.mark.parametrize(
    ("letters", "timed_out_at", "fields"),
    [
        ("BBP", None, {}),  # the scheduler has not given up
        ("PPP", at(60), {}),  # nothing held: nothing to free
        ("BBB", at(60), {}),  # minMember bound: not partly bound
        ("SPP", at(60), {}),  # what is bound has succeeded: it holds nothing
        ("BBP", at(60), {"mode": "NonStrict"}),  # holds members on purpose
    ],
    ids=["not-timed-out", "none-bound", "all-bound", "succeeded", "non-strict"],
)
def test_no_restart_unless_strict_timed_out_and_partly_bound(
    letters: str, timed_out_at: object, fields: dict[str, Any]
) -> None:
    group = gang(policy=POLICY, status={"phase": Phase.PENDING}, **fields)

    plan = plan_restart(group, members(letters), at(70), timed_out_at=timed_out_at)  # type: ignore[arg-type]

    assert isinstance(plan, Nothing) and plan.why is Idle.NOT_TRIGGERED


def test_without_a_policy_the_owner_decides() -> None:
    group = gang(policy=None, status={"phase": Phase.PENDING})

    plan = plan_restart(group, members("BBP"), at(70), timed_out_at=at(60))

    assert isinstance(plan, Nothing) and plan.why is Idle.NO_POLICY


def test_fail_gang_fails_and_frees_what_it_holds() -> None:
    group = gang(policy={**POLICY, "action": "FailGang"}, status={"phase": Phase.PENDING})

    plan = plan_restart(group, members("RBP"), at(70), timed_out_at=at(60))

    assert isinstance(plan, Fail)
    assert plan.status_patch["status"]["phase"] == Phase.FAILED
    assert [ref.name for ref in plan.delete] == ["m0", "m1", "m2"]
    assert "schedule timeout" in plan.event.message


def test_the_restart_limit_still_holds() -> None:
    status = {"phase": Phase.PENDING, "restarts": 3, "lastRestartTime": iso(at(10))}
    group = gang(policy=POLICY, status=status)

    plan = plan_restart(group, members("BBP"), at(70), timed_out_at=at(60))

    assert isinstance(plan, Fail)
    assert plan.event.reason == Reason.RESTART_LIMIT_EXCEEDED


def test_a_gang_that_ran_whole_is_left_to_the_break_rules() -> None:
    """Running since its last restart: a member lost is the first trigger's, with its backoff;
    the timeout (of the members that replace it) adds nothing."""
    group = gang(policy=POLICY, status={"phase": Phase.RUNNING, "running": 3, "scheduled": 3})

    plan = plan_restart(group, members("RRR"), at(70), timed_out_at=at(60))

    assert isinstance(plan, Nothing) and plan.why is Idle.NOT_TRIGGERED
