"""FailGang and an exhausted restart budget: Failed at once, terminal, with a reason; members
that still hold or wait for resources are deleted, terminated ones kept for their logs."""

from __future__ import annotations

import pytest

from podgroup_operator.constants import ConditionStatus, ConditionType, EventType, Phase, Reason
from podgroup_operator.domain.conditions import find_condition
from podgroup_operator.domain.restart import Fail, Idle, Nothing
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
    signed,
)


def exhausted(restarts: int = 3) -> dict[str, object]:
    return running_status(
        phase=Phase.UNKNOWN,
        restarts=restarts,
        lastRestartTime=iso(at(10)),
        lastFailureTime=iso(at(90)),
    )


@pytest.mark.parametrize(
    ("policy", "status", "reason"),
    [
        (POLICY, exhausted(), Reason.RESTART_LIMIT_EXCEEDED),
        ({**POLICY, "maxRestarts": 0}, running_status(), Reason.RESTART_LIMIT_EXCEEDED),
        ({**POLICY, "action": "FailGang"}, running_status(), Reason.GANG_FAILED),
        ({**POLICY, "action": "FailGang", "maxRestarts": 0}, exhausted(), Reason.GANG_FAILED),
    ],
    ids=["limit-reached", "no-restarts-allowed", "fail-gang", "fail-gang-any-count"],
)
def test_giving_up_fails_the_group_at_once(
    policy: dict[str, object], status: dict[str, object], reason: Reason
) -> None:
    group = gang(policy=policy, status=status)
    pods = members("RPFS")

    plan = plan_restart(group, pods, at(91))  # well inside any backoff: failing does not wait

    assert isinstance(plan, Fail)
    assert plan.event.type is EventType.WARNING
    assert plan.event.reason is reason
    patch = plan.status_patch["status"]
    assert patch["phase"] == Phase.FAILED
    assert patch["completionTime"] == iso(at(91))
    assert "restarts" not in patch  # nothing was restarted
    failed = apply_status_patch(group, plan.status_patch)
    condition = find_condition(failed.status.conditions, ConditionType.UNSCHEDULABLE)
    assert condition is not None
    assert (condition.status, condition.reason) == (ConditionStatus.TRUE, reason)
    assert condition.message == plan.event.message
    # Running and pending members go; failed and succeeded ones stay for inspection.
    assert [ref.name for ref in plan.delete] == ["m0", "m1"]


def test_the_limit_message_says_how_many_restarts_were_used() -> None:
    plan = plan_restart(gang(status=exhausted()), members("RRF"), at(91))
    assert isinstance(plan, Fail)
    assert plan.event.message.startswith("3 of maxRestarts 3 restarts used: m2 failed")


def test_within_the_limit_the_gang_is_not_failed() -> None:
    plan = plan_restart(gang(status=exhausted(restarts=2)), members("RRF"), at(91))
    assert not isinstance(plan, Fail)


def test_a_failed_group_stays_failed() -> None:
    world = World(gang(status=exhausted()), members("RRF"))
    world.carry_out(world.plan(at(91)))
    assert world.group.status.phase is Phase.FAILED
    world.finish_deletions()

    plan = world.plan(at(500))

    assert isinstance(plan, Nothing)
    assert plan.why is Idle.TERMINAL


def test_giving_up_abandons_a_restart_in_progress() -> None:
    """The restarted gang ran, failed again and used the last restart while an old straggler
    is still there: Fail deletes it too and clears the restart's progress."""
    old = members("R", group="gang")
    old[0]["metadata"]["name"] = "old"
    status = exhausted()
    status["restartingUIDs"] = [old[0]["metadata"]["uid"]]
    status["restartPods"] = []
    plan = plan_restart(signed(gang(status=status)), members("RRF") + old, at(91))
    assert isinstance(plan, Fail)
    assert "old" in [ref.name for ref in plan.delete]
    assert plan.status_patch["status"]["restartingUIDs"] is None
    assert plan.status_patch["status"]["restartPods"] is None
