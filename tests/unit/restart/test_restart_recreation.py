"""Bare members are recreated by the operator from their own body; owned members by their owner."""

from __future__ import annotations

import copy
import json
import random

from podgroup_operator.api.models import unpack_pods
from podgroup_operator.constants import SCHEDULER_NAME, Reason
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.domain.restart import (
    PACKED_PODS_MAX_CHARS,
    RESTART_PODS,
    RESTART_PODS_PACKED,
    RESTARTING_UIDS,
    Fail,
    Restart,
    Resume,
    has_controller,
    recreation_body,
)
from podgroup_operator.domain.restart_records import RESTART_PODS_DIGEST
from tests.unit.restart.helpers import (
    NO_BACKOFF,
    World,
    at,
    gang,
    member,
    owned,
    plan_restart,
    running_status,
    signed,
)


def lived_pod() -> dict[str, object]:
    """A bare member as the apiserver returns it after a life on a node."""
    body = member(0, "F", labels={"app": "trainer"}, annotations={"note": "kept"})
    body["metadata"].update(
        {
            "resourceVersion": "4711",
            "generation": 1,
            "generateName": "m-",
            "deletionTimestamp": "2026-03-01T12:00:00Z",
            "deletionGracePeriodSeconds": 30,
            "finalizers": ["example.com/cleanup"],
            "managedFields": [{"manager": "kubelet"}],
            "ownerReferences": [{"kind": "ConfigMap", "name": "cfg", "uid": "c"}],
        }
    )
    body["spec"].update(
        {
            "hostname": "m0",
            "subdomain": "gang",
            "ephemeralContainers": [{"name": "debug", "image": "busybox"}],
        }
    )
    body["status"].update({"reason": "OutOfcpu", "hostIP": "10.0.0.1"})
    return body


def test_the_recreated_body_keeps_identity_and_spec_and_drops_the_old_life() -> None:
    old = lived_pod()
    before = copy.deepcopy(old)

    body = recreation_body(old)

    assert old == before  # the input is not modified
    assert body["apiVersion"] == "v1"
    assert body["kind"] == "Pod"
    assert body["metadata"] == {
        "name": "m0",
        "namespace": "default",
        "labels": old["metadata"]["labels"],
        "annotations": {"note": "kept"},
        "ownerReferences": [{"kind": "ConfigMap", "name": "cfg", "uid": "c"}],
    }
    assert "status" not in body
    assert "nodeName" not in body["spec"]
    assert "ephemeralContainers" not in body["spec"]
    assert body["spec"]["schedulerName"] == SCHEDULER_NAME  # the gang scheduler places it again
    assert body["spec"]["containers"] == old["spec"]["containers"]
    assert (body["spec"]["hostname"], body["spec"]["subdomain"]) == ("m0", "gang")
    assert group_key_of(body) == ("default", "gang")  # still a member of the group


def test_the_recreated_body_shares_nothing_with_the_old_pod() -> None:
    old = lived_pod()
    body = recreation_body(old)
    body["spec"]["containers"][0]["image"] = "changed"
    body["metadata"]["labels"]["app"] = "changed"
    assert old["spec"]["containers"][0]["image"] == "registry.local/sim:latest"
    assert old["metadata"]["labels"]["app"] == "trainer"


def test_recreating_a_recreation_gives_the_same_body() -> None:
    body = recreation_body(lived_pod())
    assert recreation_body(body) == body


def test_only_a_controlling_owner_makes_a_pod_owned() -> None:
    assert has_controller(owned(member(0, "R")))
    assert not has_controller(lived_pod())  # a ConfigMap owner without controller: true
    assert not has_controller(member(0, "R"))


def test_a_mixed_gang_recreates_only_its_bare_members() -> None:
    pods = [owned(member(0, "R"), kind="StatefulSet"), member(1, "F"), member(2, "R")]
    restart = plan_restart(gang(policy=NO_BACKOFF, status=running_status()), pods, at(100))

    assert isinstance(restart, Restart)
    assert [ref.name for ref in restart.delete] == ["m0", "m1", "m2"]
    assert restart.recreate == ()  # the old pods still hold the names
    kept = restart.status_patch["status"]["restartPods"]
    assert kept == [recreation_body(pods[1]), recreation_body(pods[2])]
    assert "bare pods" in restart.event.message


def test_a_bare_member_being_deleted_is_recreated_from_the_body_still_visible() -> None:
    pods = [member(0, "R"), member(1, "R"), member(2, "D")]
    world = World(gang(policy=NO_BACKOFF, status=running_status()), pods)
    restart = world.plan(at(100))
    assert isinstance(restart, Restart)
    assert [ref.name for ref in restart.delete] == ["m0", "m1"]  # m2 is already going
    world.carry_out(restart)
    world.finish_deletions()

    resume = world.plan(at(101))

    assert isinstance(resume, Resume)
    assert [body["metadata"]["name"] for body in resume.recreate] == ["m0", "m1", "m2"]


def test_an_owed_recreation_whose_name_is_free_goes_with_the_next_restart() -> None:
    """The restarted gang ran whole (more members than minMember) before the earlier restart
    recreated m7, and fails again: the new restart also creates m7 and deletes the straggler."""
    owed = recreation_body(member(7, "R"))
    straggler = member(5, "R")
    status = running_status(
        restartingUIDs=[straggler["metadata"]["uid"]], restartPods=[owed], restarts=1
    )
    group = signed(gang(min_member=2, policy=NO_BACKOFF, status=status))
    pods = [member(0, "R"), member(1, "F"), straggler]

    plan = plan_restart(group, pods, at(5))

    assert isinstance(plan, Restart)
    assert plan.recreate == (owed,)
    assert [ref.name for ref in plan.delete] == ["m0", "m1", "m5"]
    new_status = plan.status_patch["status"]
    assert [b["metadata"]["name"] for b in new_status["restartPods"]] == ["m0", "m1", "m5", "m7"]
    assert set(new_status["restartingUIDs"]) == {p["metadata"]["uid"] for p in pods}


def test_during_the_backoff_an_owed_recreation_is_made_first() -> None:
    owed = recreation_body(member(7, "R"))
    status = running_status(restartingUIDs=["gone-uid"], restartPods=[owed], restarts=1)
    group = signed(gang(min_member=2, status=status))  # backoff 20s: not due
    plan = plan_restart(group, [member(0, "R"), member(1, "F")], at(5))
    assert plan == Resume(delete=(), recreate=(owed,), status_patch=None)


def annotated_members(note: str) -> list[dict[str, object]]:
    """Three bare members (the third failed), each carrying `note` as an annotation."""
    return [member(i, letter, annotations={"note": note}) for i, letter in enumerate("RRF")]


def test_bodies_too_many_to_write_plainly_are_packed_and_recreated_from_the_record() -> None:
    """A gang of a few hundred bare members (kubectl's last-applied annotation doubles each)
    wrote more than etcd takes in one status: its restart was refused on every attempt."""
    note = "x" * 30_000  # three bodies: about 90 KB of JSON, over PLAIN_PODS_MAX_BYTES
    world = World(gang(policy=NO_BACKOFF, status=running_status()), annotated_members(note))
    restart = world.plan(at(100))
    assert isinstance(restart, Restart)
    record = restart.status_patch["status"]
    assert record[RESTART_PODS] is None
    packed = record[RESTART_PODS_PACKED]
    assert len(packed) < 2_000
    assert [body["metadata"]["name"] for body in unpack_pods(packed)] == ["m0", "m1", "m2"]

    world.carry_out(restart)
    world.finish_deletions()
    recreate = world.plan(at(101))  # as a new leader would, from the status alone
    assert isinstance(recreate, Resume)
    assert [body["metadata"]["name"] for body in recreate.recreate] == ["m0", "m1", "m2"]
    assert all(body["metadata"]["annotations"] == {"note": note} for body in recreate.recreate)
    world.carry_out(recreate)
    complete = world.plan(at(102))
    assert isinstance(complete, Resume)
    assert complete.status_patch == {
        "status": {
            RESTARTING_UIDS: None,
            RESTART_PODS: None,
            RESTART_PODS_PACKED: None,
            RESTART_PODS_DIGEST: None,
        }
    }


def test_bodies_too_large_even_packed_fail_the_gang_naming_the_fix() -> None:
    noise = random.Random(7).randbytes(300_000).hex()  # barely compresses
    world = World(gang(policy=NO_BACKOFF, status=running_status()), annotated_members(noise))
    plan = world.plan(at(100))
    assert isinstance(plan, Fail)
    assert plan.event.reason == Reason.GANG_FAILED
    assert f"more than {PACKED_PODS_MAX_CHARS // 1024} KiB" in plan.event.message
    assert "give the members a controller" in plan.event.message
    assert plan.status_patch["status"]["phase"] == "Failed"
    assert len(json.dumps(plan.status_patch)) < 10_000  # the bodies are not written
