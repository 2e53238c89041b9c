"""`spec.policy.scope: SubGroup`: a broken sub-group restarted alone, the group when its own
minimum breaks."""

from __future__ import annotations

from typing import Any

from podgroup_operator.constants import LABEL_SUB_GROUP, Phase, Reason
from podgroup_operator.domain.restart import Nothing, Restart, Wait
from tests.unit.restart.helpers import NO_BACKOFF, POLICY, at, gang, iso, member, plan_restart

SUBS = [{"name": "a", "minMember": 2}, {"name": "b", "minMember": 2}, {"name": "c", "minMember": 2}]


def story(letters: str) -> list[dict[str, Any]]:
    """Members m0..m5, two per sub-group a, b, c, in the states their letters name."""
    return [
        member(i, letter, labels={LABEL_SUB_GROUP: "abc"[i // 2]})
        for i, letter in enumerate(letters)
        if letter != "-"
    ]


def group(policy: dict[str, Any], **spec: Any) -> Any:
    status = {
        "phase": Phase.RUNNING,
        "running": 6,
        "scheduled": 6,
        "runningTime": iso(at(0)),
    }
    status.update(spec.pop("status", {}))
    return gang(
        spec.pop("min_member", 4),
        policy=policy,
        status=status,
        subGroups=SUBS,
        **{"minSubGroup": 2, **spec},
    )


SCOPED = {**NO_BACKOFF, "scope": "SubGroup"}


def test_a_broken_sub_group_is_restarted_alone() -> None:
    """The group stays Running (the lifecycle records no break of the group): the sub-group's
    own break triggers."""
    pods = story("RRRFRR")
    plan = plan_restart(group(SCOPED), pods, at(60))
    assert isinstance(plan, Restart), plan
    assert sorted(ref.name for ref in plan.delete) == ["m2", "m3"]
    assert sorted(body["metadata"]["name"] for body in plan.recreate) == []
    assert plan.event.reason == Reason.SUB_GROUP_RESTARTED
    assert plan.event.message.startswith("restart 1 of 3: sub-group b: m3 failed")
    assert "the other sub-groups keep running" in plan.event.message
    status = plan.status_patch["status"]
    assert status["restarts"] == 1 and status["lastRestartTime"] == iso(at(60))
    assert "phase" not in status  # the lifecycle keeps the group's phase
    assert sorted(status["restartingUIDs"]) == sorted(p["metadata"]["uid"] for p in pods[2:4])
    assert len(status["restartPods"]) == 2  # bare members, recreated once their names are free


def test_the_group_is_restarted_whole_when_its_min_sub_group_breaks() -> None:
    plan = plan_restart(group(SCOPED), story("RFRFRR"), at(60))
    assert isinstance(plan, Restart), plan
    assert plan.event.reason == Reason.GANG_RESTARTED
    assert len(plan.delete) == 6


def test_the_group_is_restarted_whole_when_its_min_member_breaks() -> None:
    """minMember 5 over the others' 4 live members: the group's own minimum breaks."""
    plan = plan_restart(group(SCOPED, min_member=5), story("RRRFRR"), at(60))
    assert isinstance(plan, Restart), plan
    assert plan.event.reason == Reason.GANG_RESTARTED


def test_the_default_scope_restarts_the_group_once_it_breaks() -> None:
    assert isinstance(plan_restart(group(NO_BACKOFF), story("RRRFRR"), at(60)), Nothing)
    broke = group(NO_BACKOFF, status={"lastFailureTime": iso(at(50))})
    plan = plan_restart(broke, story("RRRFRR"), at(60))
    assert isinstance(plan, Restart) and plan.event.reason == Reason.GANG_RESTARTED


def test_a_sub_group_restart_waits_for_the_backoff_and_records_the_failure() -> None:
    scoped = {**POLICY, "scope": "SubGroup"}
    first = plan_restart(group(scoped), story("RRRFRR"), at(60))
    assert isinstance(first, Wait), first
    assert first.until == at(70)
    assert first.status_patch == {"status": {"lastFailureTime": iso(at(60))}}
    plan = plan_restart(
        group(scoped, status={"lastFailureTime": iso(at(55))}), story("RRRFRR"), at(60)
    )
    assert isinstance(plan, Wait), plan
    assert plan.until == at(65)
    assert "sub-group b" in plan.message


def test_a_failure_that_breaks_no_sub_group_restarts_nothing() -> None:
    subs = [{"name": "a", "minMember": 1}, {"name": "b", "minMember": 2}]
    body = gang(
        3,
        policy=SCOPED,
        status={"phase": Phase.RUNNING, "running": 4, "runningTime": iso(at(0))},
        subGroups=subs,
    )
    pods = [
        member(0, "R", labels={LABEL_SUB_GROUP: "a"}),
        member(1, "F", labels={LABEL_SUB_GROUP: "a"}),
        member(2, "R", labels={LABEL_SUB_GROUP: "b"}),
        member(3, "R", labels={LABEL_SUB_GROUP: "b"}),
    ]
    assert isinstance(plan_restart(body, pods, at(60)), Nothing)


def test_the_restart_limit_still_fails_the_group() -> None:
    plan = plan_restart(group(SCOPED, status={"restarts": 3}), story("RRRFRR"), at(60))
    assert not isinstance(plan, Restart | Wait | Nothing)
    assert plan.event.reason == Reason.RESTART_LIMIT_EXCEEDED


def test_a_preempted_sub_group_is_repaired_at_once_and_not_counted() -> None:
    """A preemption took sub-group b (its members being deleted): repaired without the backoff
    and without a restart charged, even with every restart used."""
    scoped = {**POLICY, "scope": "SubGroup"}
    pods = story("RRDDRR")
    body = group(scoped, status={"restarts": 3})
    plan = plan_restart(body, pods, at(60), preempted_at=at(59))
    assert isinstance(plan, Restart), plan
    assert plan.event.reason == Reason.SUB_GROUP_RESTARTED
    assert plan.event.message.startswith("preempted, not counted: sub-group b:")
    assert plan.delete == ()  # already being deleted
    status = plan.status_patch["status"]
    assert "restarts" not in status and status["lastRestartTime"] == iso(at(60))
    assert len(status["restartPods"]) == 2
    # A preemption before the last restart is an old one: the break is charged as usual.
    stale = group(scoped, status={"restarts": 3, "lastRestartTime": iso(at(59))})
    again = plan_restart(stale, pods, at(60), preempted_at=at(58))
    assert not isinstance(again, Restart)
    assert again.event.reason == Reason.RESTART_LIMIT_EXCEEDED


def test_a_sub_group_whose_bare_members_are_gone_is_repaired_and_they_recreated() -> None:
    """Preempted members may be gone before the reconcile sees them being deleted: the kept
    bodies of lost bare members break their sub-group and come back with the repair."""
    pods = story("RRRRRR")
    present, lost = pods[:2] + pods[4:], pods[2:4]
    plan = plan_restart(group(SCOPED), present, at(60), preempted_at=at(59), lost=lost)
    assert isinstance(plan, Restart), plan
    assert plan.event.reason == Reason.SUB_GROUP_RESTARTED
    assert "sub-group b: m2 gone; m3 gone" in plan.event.message
    assert plan.delete == ()
    assert sorted(b["metadata"]["name"] for b in plan.recreate) == ["m2", "m3"]
    assert plan.status_patch["status"]["restartingUIDs"] == []
    # Gone from two sub-groups: minSubGroup 2 of 3 breaks, and the whole group restarts.
    whole = plan_restart(group(SCOPED), pods[4:], at(60), preempted_at=at(59), lost=pods[:4])
    assert isinstance(whole, Restart) and whole.event.reason == Reason.GANG_RESTARTED
