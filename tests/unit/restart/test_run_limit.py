"""A gang past its maxRunSeconds is stopped whole (domain/run_limit.py), counted from the
status's runningTime so that an operator restart neither resets nor forgets it."""

from __future__ import annotations

from datetime import timedelta

from podgroup_operator.constants import LABEL_KUEUE_MAX_EXEC_TIME, EventType, Phase, Reason
from podgroup_operator.domain.restart import Fail
from podgroup_operator.domain.run_limit import RunsUntil, plan_run_limit
from tests.unit.restart.helpers import (
    T0,
    apply_status_patch,
    at,
    gang,
    iso,
    members,
    running_status,
)


def test_within_the_limit_it_says_when_to_look_again() -> None:
    group = gang(policy=None, status=running_status(), maxRunSeconds=100)
    assert plan_run_limit(group, members("RRR"), at(99)) == RunsUntil(T0 + timedelta(seconds=100))


def test_past_the_limit_the_gang_fails_whole_and_its_live_members_go() -> None:
    group = gang(policy=None, status=running_status(), maxRunSeconds=100)
    plan = plan_run_limit(group, members("RRS"), at(100))
    assert isinstance(plan, Fail)
    assert [m.name for m in plan.delete] == ["m0", "m1"]  # the succeeded one stays
    assert all(m.uid for m in plan.delete)  # deleted with a UID precondition
    assert plan.event.type is EventType.WARNING and plan.event.reason is Reason.RUN_TIME_EXCEEDED
    assert "maxRunSeconds 100" in plan.event.message
    failed = apply_status_patch(group, plan.status_patch)
    assert failed.status.phase == Phase.FAILED
    assert plan_run_limit(failed, members("RRS"), at(200)) is None  # Failed latches


def test_the_members_limits_count_when_the_spec_has_none() -> None:
    pods = members("RR")
    pods[0]["spec"]["activeDeadlineSeconds"] = 50
    pods[1]["metadata"].setdefault("labels", {})[LABEL_KUEUE_MAX_EXEC_TIME] = "70"
    group = gang(2, policy=None, status=running_status())
    assert plan_run_limit(group, pods, at(60)) == RunsUntil(T0 + timedelta(seconds=70))
    assert isinstance(plan_run_limit(group, pods, at(70)), Fail)
    del pods[1]["metadata"]["labels"][LABEL_KUEUE_MAX_EXEC_TIME]
    assert plan_run_limit(group, pods, at(1000)) is None  # one member without a limit: none


def test_no_limit_or_not_running_yet_does_nothing() -> None:
    assert (
        plan_run_limit(gang(policy=None, status=running_status()), members("RRR"), at(10**6))
        is None
    )
    pending = gang(policy=None, status={"phase": Phase.PENDING}, maxRunSeconds=1)
    assert plan_run_limit(pending, members("PPP"), at(10**6)) is None


def test_a_gang_restarted_by_its_policy_gets_its_whole_limit_again() -> None:
    status = running_status(lastRestartTime=iso(at(80)), restarts=1)
    group = gang(policy=None, status=status, maxRunSeconds=100)
    assert plan_run_limit(group, members("RRR"), at(150)) == RunsUntil(at(180))
