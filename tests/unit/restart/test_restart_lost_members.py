"""Bare members gone before the restart (a taint manager's eviction, `kubectl delete`, the pod
GC) come back with the rest, from the bodies kept when they were first seen, up to the count
the gang ran with."""

from __future__ import annotations

from podgroup_operator.domain.restart import (
    Restart,
    Resume,
    bare_members,
    lost_members,
    recreation_body,
)
from tests.unit.restart.helpers import (
    NO_BACKOFF,
    World,
    at,
    gang,
    member,
    owned,
    plan_restart,
    running_status,
)

KEY = ("default", "gang")


def test_the_kept_bodies_are_the_bare_members_by_name() -> None:
    pods = [member(0, "R"), owned(member(1, "R")), member(2, "D"), member(3, "R", group="other")]
    assert sorted(bare_members(KEY, pods)) == ["m0", "m2"]


def test_the_lost_are_kept_bodies_whose_name_no_pod_holds() -> None:
    known = bare_members(KEY, [member(i, "R") for i in range(4)])
    assert lost_members(known, [member(0, "R"), member(2, "D")]) == [known["m1"], known["m3"]]
    assert lost_members(known, [member(i, "P") for i in range(4)]) == []


def test_a_member_deleted_outright_is_recreated_with_the_rest() -> None:
    """The issue's second scenario: 4 bare members, one gone whole before the restart."""
    seen = [member(i, "R") for i in range(4)]
    known = bare_members(KEY, seen)
    pods = seen[:3]
    group = gang(4, policy=NO_BACKOFF, status=running_status(running=4, scheduled=4))

    plan = plan_restart(group, pods, at(100), lost=lost_members(known, pods), ran_with=4)

    assert isinstance(plan, Restart)
    assert [ref.name for ref in plan.delete] == ["m0", "m1", "m2"]
    assert plan.recreate == (recreation_body(seen[3]),)  # its name is free already
    kept = plan.status_patch["status"]["restartPods"]
    assert [body["metadata"]["name"] for body in kept] == ["m0", "m1", "m2", "m3"]
    assert "m3 gone" in plan.event.message
    assert "recreating 4 bare pods" in plan.event.message


def test_the_whole_gang_comes_back_once_the_names_are_free() -> None:
    seen = [member(i, "R") for i in range(4)]
    known = bare_members(KEY, seen)
    world = World(gang(4, policy=NO_BACKOFF, status=running_status()), seen[:3])
    restart = plan_restart(
        world.group, world.pods, at(100), lost=lost_members(known, world.pods), ran_with=4
    )
    assert isinstance(restart, Restart)
    world.carry_out(restart)
    world.finish_deletions()

    resume = world.plan(at(101))  # from the status alone, as a new leader would

    assert isinstance(resume, Resume)
    names = {body["metadata"]["name"] for body in resume.recreate}
    names |= {body["metadata"]["name"] for body in restart.recreate}
    assert names == {"m0", "m1", "m2", "m3"}


def test_no_more_come_back_than_the_gang_ran_with() -> None:
    """m3 was deleted on purpose while the gang ran on on three: it stays gone."""
    seen = [member(i, "R") for i in range(5)]
    known = bare_members(KEY, seen)
    pods = [member(0, "R"), member(1, "R"), member(2, "F")]
    group = gang(3, policy=NO_BACKOFF, status=running_status())

    plan = plan_restart(group, pods, at(100), lost=lost_members(known, pods), ran_with=4)

    assert isinstance(plan, Restart)
    kept = plan.status_patch["status"]["restartPods"]
    assert [body["metadata"]["name"] for body in kept] == ["m0", "m1", "m2", "m3"]


def test_every_lost_member_comes_back_when_the_count_is_unknown() -> None:
    seen = [member(i, "R") for i in range(4)]
    known = bare_members(KEY, seen)
    pods = [member(0, "R"), member(1, "F")]
    group = gang(3, policy=NO_BACKOFF, status=running_status())

    plan = plan_restart(group, pods, at(100), lost=lost_members(known, pods))

    assert isinstance(plan, Restart)
    assert {body["metadata"]["name"] for body in plan.recreate} == {"m2", "m3"}
