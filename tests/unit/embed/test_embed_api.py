"""The public embedding API: bodies a controller sends, and statuses it reads back."""

from __future__ import annotations

import copy
from types import MappingProxyType
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.api import embed
from podgroup_operator.api.models import PodGroup, PodGroupSpec

JOB: dict[str, Any] = {
    "apiVersion": "example.podgroup.dev/v1",
    "kind": "CRDJob",
    "metadata": {"name": "train", "namespace": "team-a", "uid": "1234-abcd"},
    "spec": {"replicas": 3},
}


def test_podgroup_is_owned_by_the_job_so_the_garbage_collector_deletes_it() -> None:
    group = embed.podgroup_for(JOB, min_member=3)

    assert group["apiVersion"] == c.API_VERSION and group["kind"] == c.KIND
    assert group["metadata"]["name"] == "train"
    assert group["metadata"]["namespace"] == "team-a"
    assert group["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "example.podgroup.dev/v1",
            "kind": "CRDJob",
            "name": "train",
            "uid": "1234-abcd",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert group["spec"] == {"minMember": 3}


def test_podgroup_spec_carries_every_option_and_parses_as_the_operator_reads_it() -> None:
    group = embed.podgroup_for(
        JOB,
        name="train-gang",
        min_member=2,
        min_resources={"cpu": "4"},
        total_resources={"cpu": "8", "nvidia.com/gpu": 2},
        schedule_timeout_seconds=60,
        policy=embed.RestartPolicy(max_restarts=5),
        labels={"team": "a"},
    )

    assert group["metadata"]["name"] == "train-gang"
    assert group["metadata"]["labels"] == {"team": "a"}
    assert group["spec"] == {
        "minMember": 2,
        "minResources": {"cpu": "4"},
        "totalResources": {"cpu": "8", "nvidia.com/gpu": 2},
        "scheduleTimeoutSeconds": 60,
        "policy": {
            "action": "RestartGang",
            "maxRestarts": 5,
            "backoffSeconds": 10,
            "maxBackoffSeconds": 300,
        },
    }
    parsed = PodGroup.model_validate(group)
    assert parsed.key == ("team-a", "train-gang")
    assert parsed.spec == PodGroupSpec.model_validate(group["spec"])


def test_policy_may_be_given_as_a_mapping_and_is_left_out_when_unset() -> None:
    with_policy = embed.podgroup_for(JOB, min_member=1, policy={"action": "FailGang"})
    assert with_policy["spec"]["policy"]["action"] == c.PolicyAction.FAIL_GANG
    assert "policy" not in embed.podgroup_for(JOB, min_member=1)["spec"]


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"min_member": 0}, "min_member"),
        ({"min_member": True}, "min_member"),
        ({"min_member": 1, "total_resources": {"cpu": "-1"}}, "negative"),
        (
            {"min_member": 1, "min_resources": {"cpu": "8"}, "total_resources": {"cpu": "4"}},
            "is below spec.minResources.cpu 8",
        ),
        ({"min_member": 1, "policy": {"action": "Reboot"}}, "action"),
        ({"min_member": 1, "schedule_timeout_seconds": 0}, "schedule_timeout_seconds"),
        ({"min_member": 1, "name": "Not_A_Name"}, "Not_A_Name"),
        ({"min_member": 1, "name": "x" * 64}, "at most 63"),
    ],
)
def test_invalid_specs_are_refused_with_the_reason(options: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        embed.podgroup_for(JOB, **options)


def test_an_owner_not_yet_created_has_no_uid_and_is_refused() -> None:
    unsaved = copy.deepcopy(JOB)
    del unsaved["metadata"]["uid"]
    with pytest.raises(ValueError, match=r"metadata\.uid"):
        embed.podgroup_for(unsaved, min_member=1)
    with pytest.raises(ValueError, match="apiVersion, kind"):
        embed.owner_reference({"metadata": {"name": "x", "uid": "u"}})


def test_owner_reference_for_pods_may_be_a_non_controller_reference() -> None:
    reference = embed.owner_reference(JOB, controller=False)
    assert reference["controller"] is False and reference["blockOwnerDeletion"] is True


def test_as_member_labels_the_pod_and_routes_it_to_the_gang_scheduler() -> None:
    pod = {
        "metadata": {"name": "train-0", "labels": {"app": "train"}},
        "spec": {"containers": [{"name": "w", "image": "x"}], "schedulerName": "default"},
    }
    original = copy.deepcopy(pod)

    member = embed.as_member(pod, "train")

    assert member["metadata"]["labels"] == {"app": "train", c.LABEL_POD_GROUP: "train"}
    assert member["spec"]["schedulerName"] == c.SCHEDULER_NAME
    assert member["spec"]["containers"] == pod["spec"]["containers"]
    assert pod == original, "the input must not be mutated"
    member["spec"]["containers"][0]["image"] = "y"
    assert pod == original, "the result must not share nested objects with the input"


def test_as_member_can_leave_the_scheduler_alone() -> None:
    member = embed.as_member({"metadata": {}, "spec": {}}, "g", route_to_gang_scheduler=False)
    assert member["metadata"]["labels"] == {c.LABEL_POD_GROUP: "g"}
    assert "schedulerName" not in member["spec"]


def test_as_member_refuses_a_pod_that_already_names_another_group() -> None:
    labelled = {"metadata": {"labels": {c.LABEL_POD_GROUP: "other"}}}
    annotated = {"metadata": {"annotations": {c.ANNOTATION_GROUP_NAME: "other"}}}
    for pod in (labelled, annotated):
        with pytest.raises(ValueError, match="'other'"):
            embed.as_member(pod, "train")
    same = {"metadata": {"annotations": {c.ANNOTATION_GROUP_NAME: "train"}}}
    assert embed.as_member(same, "train")["metadata"]["labels"][c.LABEL_POD_GROUP] == "train"


def test_member_selector_selects_what_as_member_labels() -> None:
    assert embed.member_selector("train") == f"{c.LABEL_POD_GROUP}=train"
    with pytest.raises(ValueError):
        embed.member_selector("bad name")


UNKNOWN_STATUS = {
    "phase": "Unknown",
    "running": 2,
    "failed": 1,
    "scheduled": 2,
    "writtenBySomeoneElse": True,
    "conditions": [
        {
            "type": "Unschedulable",
            "status": "True",
            "reason": "PodFailed",
            "message": "a member failed; 2 of minMember 3 members running or succeeded",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "transitionID": "t-1",
        }
    ],
}


def test_read_status_gives_typed_phase_counters_and_conditions() -> None:
    status = embed.read_status({"metadata": {"name": "train"}, "status": UNKNOWN_STATUS})

    assert status.phase is embed.Phase.UNKNOWN
    assert (status.running, status.failed, status.scheduled) == (2, 1, 2)
    unschedulable = embed.condition(status, embed.ConditionType.UNSCHEDULABLE)
    assert unschedulable is not None
    assert unschedulable.status == c.ConditionStatus.TRUE
    assert unschedulable.reason == c.Reason.POD_FAILED
    assert unschedulable.last_transition_time is not None
    assert embed.condition(status, embed.ConditionType.SCHEDULED) is None
    assert embed.is_broken(status)


def test_read_status_accepts_read_only_mapping_views_such_as_kopf_bodies() -> None:
    frozen = MappingProxyType(
        {
            "status": MappingProxyType(
                {**UNKNOWN_STATUS, "conditions": (UNKNOWN_STATUS["conditions"][0],)}
            )
        }
    )
    assert embed.read_status(frozen).phase is embed.Phase.UNKNOWN


def test_a_group_the_operator_has_not_seen_reads_as_an_empty_status() -> None:
    status = embed.read_status({"metadata": {"name": "train"}})
    assert status.phase is None and status.running == 0 and status.conditions == []
    assert not embed.is_broken(status)


@pytest.mark.parametrize("phase", [p for p in c.Phase if p is not c.Phase.UNKNOWN])
def test_only_unknown_is_broken(phase: c.Phase) -> None:
    assert not embed.is_broken(embed.read_status({"status": {"phase": phase.value}}))


def test_the_public_names_are_exported_and_exist() -> None:
    assert set(embed.__all__) >= {
        "podgroup_for",
        "as_member",
        "owner_reference",
        "read_status",
        "condition",
        "is_broken",
        "RestartPolicy",
        "PodGroupStatus",
        "Phase",
        "ConditionType",
    }
    assert all(hasattr(embed, name) for name in embed.__all__)


def test_a_status_left_by_scheduler_plugins_reads_without_its_phase() -> None:
    """A controller reading a group migrated from scheduler-plugins must not crash on it: the
    operator rewrites that phase, and until then it reads as none."""
    status = embed.read_status({"status": {"phase": "Scheduled", "running": 3}})
    assert (status.phase, status.running) == (None, 3)
    assert not embed.is_broken(status)
