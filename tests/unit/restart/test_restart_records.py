"""Restart records are signed for their group and refused when they are not the operator's own:
a forged body, a changed image, a pod of another namespace, a missing signature, a record of
another group copied over. The refusal deletes and creates nothing, and clears the record."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from podgroup_operator.api.models import PodGroup
from podgroup_operator.constants import LABEL_SUB_GROUP, EventType, Phase, Reason
from podgroup_operator.domain.restart import (
    RESTART_PODS,
    RESTART_PODS_PACKED,
    RESTARTING_UIDS,
    Nothing,
    Refuse,
    Restart,
    Resume,
    recreation_body,
)
from podgroup_operator.domain.restart_records import (
    DIGEST_PREFIX,
    RESTART_PODS_DIGEST,
    RecordOwner,
    canonical_record,
    record_digest,
    record_problems,
)
from tests.builders import privileged_pod
from tests.unit.restart.helpers import (
    NO_BACKOFF,
    RECORD_KEY,
    World,
    apply_status_patch,
    at,
    gang,
    member,
    members,
    plan_restart,
    running_status,
)

OWNER = RecordOwner("default", "gang", "uid-of-gang")
OTHER_KEY = bytes(range(1, 33))


def honest() -> tuple[list[str], list[dict[str, Any]], str]:
    """A record as the operator writes it: UIDs, bodies and their signature."""
    pods = members("RRF")
    uids = [p["metadata"]["uid"] for p in pods]
    bodies = [recreation_body(p) for p in pods]
    return uids, bodies, record_digest(RECORD_KEY, OWNER, uids, bodies)


# --- the pure check -------------------------------------------------------------------------


def test_an_honest_record_passes() -> None:
    uids, bodies, digest = honest()
    assert digest.startswith(DIGEST_PREFIX)
    assert record_problems(RECORD_KEY, OWNER, uids, bodies, digest) == []


def test_an_honest_record_passes_after_a_round_trip_through_json_with_nulls_dropped() -> None:
    """What the API server stores and gives back: keys in another order, nulls gone."""
    uids, bodies, digest = honest()
    bodies[0]["metadata"]["labels"] = {"b": "1", "a": "2"}
    digest = record_digest(RECORD_KEY, OWNER, uids, bodies)
    read_back = copy.deepcopy(bodies)
    read_back[0]["metadata"]["labels"] = {"a": "2", "b": "1"}
    bodies[1]["spec"]["priority"] = None
    assert record_digest(RECORD_KEY, OWNER, reversed(uids), read_back) == digest
    assert canonical_record(OWNER, uids, bodies) == canonical_record(OWNER, uids, read_back)


def test_a_changed_image_is_refused() -> None:
    uids, bodies, digest = honest()
    bodies[1]["spec"]["containers"][0]["image"] = "evil:latest"
    (problem,) = record_problems(RECORD_KEY, OWNER, uids, bodies, digest)
    assert f"status.{RESTART_PODS_DIGEST} does not match" in problem


def test_a_forged_body_added_is_refused() -> None:
    uids, bodies, digest = honest()
    (problem,) = record_problems(RECORD_KEY, OWNER, uids, [*bodies, privileged_pod()], digest)
    assert "does not match" in problem


def test_a_uid_added_is_refused() -> None:
    """`restartingUIDs` is signed too: its deletes are the operator's decision alone."""
    uids, bodies, digest = honest()
    (problem,) = record_problems(RECORD_KEY, OWNER, [*uids, "another"], bodies, digest)
    assert "does not match" in problem


def test_a_pod_in_another_namespace_is_refused_whatever_the_signature() -> None:
    """Even signed (with the key, as no tenant can): the namespace is checked on its own."""
    body = privileged_pod("kube-system")
    digest = record_digest(RECORD_KEY, OWNER, [], [body])
    (problem,) = record_problems(RECORD_KEY, OWNER, [], [body], digest)
    assert "restartPods[0] (root) is in namespace 'kube-system'" in problem
    assert "not the PodGroup's namespace 'default'" in problem


def test_a_missing_signature_is_refused_with_every_problem_named() -> None:
    problems = record_problems(RECORD_KEY, OWNER, [], [privileged_pod("b"), privileged_pod()], None)
    assert len(problems) == 2
    assert "restartPods[0] (root) is in namespace 'b'" in problems[0]
    assert f"status.{RESTART_PODS_DIGEST} is missing" in problems[1]


@pytest.mark.parametrize(
    "owner",
    [
        RecordOwner("default", "other", "uid-of-gang"),
        RecordOwner("default", "gang", "uid-of-a-new-gang-of-that-name"),
        RecordOwner("team-b", "gang", "uid-of-gang"),
    ],
)
def test_a_record_of_another_group_copied_over_is_refused(owner: RecordOwner) -> None:
    """The signature binds namespace, name and uid: a group deleted and made again under the
    same name does not inherit its predecessor's record either."""
    uids, bodies, digest = honest()
    problems = record_problems(RECORD_KEY, owner, uids, bodies, digest)
    assert any("does not match" in problem for problem in problems)


def test_a_record_signed_under_another_key_is_refused() -> None:
    uids, bodies, _ = honest()
    forged = record_digest(OTHER_KEY, OWNER, uids, bodies)
    assert record_problems(RECORD_KEY, OWNER, uids, bodies, forged) != []


def test_a_short_key_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 32 bytes"):
        record_digest(b"short", OWNER, [], [])


# --- the plan -------------------------------------------------------------------------------


def recorded(status: dict[str, Any]) -> PodGroup:
    """A restarting gang whose status holds `status`'s record fields (and nothing signs it)."""
    return gang(policy=NO_BACKOFF, status={**running_status(phase=Phase.PENDING), **status})


def test_the_plan_refuses_a_forged_record_creating_and_deleting_nothing() -> None:
    pods = members("RRR")
    group = recorded(
        {
            RESTARTING_UIDS: [pods[0]["metadata"]["uid"]],
            RESTART_PODS: [privileged_pod("kube-system"), privileged_pod()],
            RESTART_PODS_DIGEST: "hmac-sha256:" + "0" * 64,
        }
    )
    plan = plan_restart(group, pods, at(100))
    assert isinstance(plan, Refuse)
    assert plan.status_patch == {
        "status": {
            RESTARTING_UIDS: None,
            RESTART_PODS: None,
            RESTART_PODS_PACKED: None,
            RESTART_PODS_DIGEST: None,
        }
    }
    assert plan.event.type is EventType.WARNING
    assert plan.event.reason is Reason.RESTART_RECORD_REFUSED
    assert "namespace 'kube-system'" in plan.event.message
    assert "does not match" in plan.event.message
    assert not hasattr(plan, "delete")
    assert not hasattr(plan, "recreate")


def test_a_group_without_policy_refuses_a_record_too() -> None:
    group = gang(policy=None, status={RESTART_PODS: [privileged_pod()]})
    plan = plan_restart(group, members("RR"), at(100))
    assert isinstance(plan, Refuse)


def test_once_refused_and_cleared_the_group_goes_on_without_a_restart() -> None:
    world = World(recorded({RESTART_PODS: [privileged_pod()]}), members("RRR"))
    refusal = world.plan(at(100))
    assert isinstance(refusal, Refuse)
    world.carry_out(refusal)
    assert world.group.status.restart_pods == []
    assert isinstance(world.plan(at(101)), Nothing)
    assert [event.reason for event in world.events] == [Reason.RESTART_RECORD_REFUSED]


def test_an_honest_record_changed_after_it_was_written_is_refused() -> None:
    """The record of a real restart, its image changed in the status: refused, not resumed."""
    world = World(gang(policy=NO_BACKOFF, status=running_status()), members("RRF"))
    restart = world.plan(at(100))
    assert isinstance(restart, Restart)
    world.write_status(restart)
    body = world.group.model_dump(mode="json", by_alias=True, exclude_none=True)
    forged = copy.deepcopy(body["status"][RESTART_PODS])
    forged[0]["spec"]["containers"][0]["image"] = "evil"
    world.group = apply_status_patch(world.group, {"status": {RESTART_PODS: forged}})
    world.delete(restart)
    world.finish_deletions()

    plan = world.plan(at(101))
    assert isinstance(plan, Refuse)
    assert "does not match" in plan.event.message


def test_a_restart_resumed_from_its_status_alone_still_verifies_and_recreates() -> None:
    """A new leader (or the same operator after a crash) reads the record back: it verifies,
    and the members are created."""
    world = World(gang(policy=NO_BACKOFF, status=running_status()), members("RRF"))
    restart = world.plan(at(100))
    assert isinstance(restart, Restart)
    assert restart.status_patch["status"][RESTART_PODS_DIGEST].startswith(DIGEST_PREFIX)
    world.write_status(restart)  # ... and the operator dies here
    world.delete(restart)
    world.finish_deletions()

    resumed = world.plan(at(101))
    assert isinstance(resumed, Resume)
    assert [body["metadata"]["name"] for body in resumed.recreate] == ["m0", "m1", "m2"]


def test_a_sub_group_restart_is_signed_and_resumes() -> None:
    """The records of `scope: SubGroup` restarts are signed like the whole group's."""
    pods = [
        member(i, letter, labels={LABEL_SUB_GROUP: "abc"[i // 2]})
        for i, letter in enumerate("RRRFRR")
    ]
    status = running_status(running=6, scheduled=6)
    subs = [{"name": part, "minMember": 2} for part in "abc"]
    policy = {**NO_BACKOFF, "scope": "SubGroup"}
    group = gang(4, policy=policy, status=status, subGroups=subs, minSubGroup=2)
    world = World(group, pods)
    plan = world.plan(at(60))
    assert isinstance(plan, Restart), plan
    assert plan.event.reason is Reason.SUB_GROUP_RESTARTED
    world.write_status(plan)
    assert world.group.status.restart_pods_digest is not None
    world.delete(plan)
    world.finish_deletions()
    resumed = world.plan(at(61))
    assert isinstance(resumed, Resume), resumed
    assert [body["metadata"]["name"] for body in resumed.recreate] == ["m2", "m3"]


@pytest.mark.parametrize("metadata", ["a string", ["a", "list"], None, {"name": 3}])
def test_a_record_of_garbage_is_refused_not_a_crash(metadata: Any) -> None:
    """Whatever a status writer puts in a body, the plan names it and refuses it."""
    group = recorded({RESTART_PODS: [{"metadata": metadata, "spec": {}}]})
    plan = plan_restart(group, members("RRR"), at(100))
    assert isinstance(plan, Refuse)
    assert "pods to create: ?/" in plan.event.message
