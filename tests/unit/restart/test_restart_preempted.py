"""A gang broken by a preemption is restarted without being charged: the restart counter, the
limit and the backoff are for the gang's own failures, not for a higher-priority gang's needs."""

from __future__ import annotations

import pytest

from podgroup_operator.constants import Phase
from podgroup_operator.domain.restart import Fail, Restart, Wait
from tests.unit.restart.helpers import POLICY, at, gang, iso, members, plan_restart, running_status


@pytest.mark.parametrize("restarts", [0, 3], ids=["fresh", "limit-reached"])
def test_a_preempted_gang_restarts_at_once_and_is_not_charged(restarts: int) -> None:
    group = gang(policy=POLICY, status=running_status(restarts=restarts))

    plan = plan_restart(group, members("DDD"), at(5), preempted_at=at(4))

    assert isinstance(plan, Restart)  # no backoff Wait, no RestartLimitExceeded
    patch = plan.status_patch["status"]
    assert patch["phase"] == Phase.PENDING
    assert patch.get("restarts", restarts) == restarts
    assert patch["lastRestartTime"] == iso(at(5))
    assert "preempted" in plan.event.message


def test_a_preemption_before_the_last_restart_does_not_excuse_a_new_break() -> None:
    status = running_status(restarts=1, lastRestartTime=iso(at(10)))
    group = gang(policy=POLICY, status=status)

    plan = plan_restart(group, members("DDD"), at(20), preempted_at=at(4))

    assert isinstance(plan, Wait)  # the ordinary, charged path: backoff first


def test_fail_gang_still_fails_when_preempted() -> None:
    group = gang(policy={**POLICY, "action": "FailGang"}, status=running_status())

    plan = plan_restart(group, members("DDD"), at(5), preempted_at=at(4))

    assert isinstance(plan, Fail)
