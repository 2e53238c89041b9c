"""Other schedulers' PodGroups in our terms, and our status in theirs (pure translation)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.domain.dialects import (
    ANNOTATION_TOPOLOGY,
    differs,
    koordinator_status,
    mirror_body,
    mirror_labels,
    mirror_of,
    native_status,
    owned_by,
    queue_mapping,
    translate,
    translate_koordinator,
    translate_native,
    translate_volcano,
    volcano_status,
)

FABRIC = {"fabric": ("example.com/block", "example.com/rack", "kubernetes.io/hostname")}


def volcano(spec: dict[str, Any], **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{c.VOLCANO_GROUP}/{c.VOLCANO_VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "team", "uid": "u1", "annotations": annotations},
        "spec": spec,
    }


def koord(minimum: Any = 2, **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "g", "namespace": "team", "annotations": annotations},
        "spec": {"minMember": minimum},
    }


def status(phase: str, *conditions: tuple[str, str, str], **counts: int) -> dict[str, Any]:
    return {
        "phase": phase,
        "conditions": [
            {"type": t, "status": s, "reason": r, "message": f"{r} here"} for t, s, r in conditions
        ],
        **counts,
    }


# --- Volcano ---------------------------------------------------------------------------------
def test_a_volcano_podgroup_as_its_docs_write_it_maps_min_member_and_resources() -> None:
    found = translate_volcano(
        volcano({"minMember": 3, "minResources": {"cpu": "3"}, "queue": "default"}), {}
    )
    assert found.spec == {"minMember": 3, "minResources": {"cpu": "3"}}
    assert (found.notes, found.errors) == ((), ())


QUOTAS = {("team", "research"): "team/research", ("other", "shared"): "org/shared"}


def quota_of(namespace: str, name: str) -> str | None:
    """A stand-in for `QuotaTree.resolve` as the mirrors call it."""
    return QUOTAS.get((namespace, name))


def test_a_volcano_queue_naming_no_elastic_quota_is_said_and_charges_as_before() -> None:
    for quotas in (None, quota_of):
        found = translate_volcano(volcano({"minMember": 1, "queue": "missing"}), {}, quotas)
        (note,) = found.notes
        assert note.reason == c.DialectReason.QUEUE_IGNORED
        assert note.text.startswith("spec.queue: queue 'missing' is not charged")
        assert "Create an ElasticQuota" in note.message and "namespace team" in note.message
        assert found.quota is None
    assert queue_mapping("default", "team", quota_of) == (None, None)
    assert queue_mapping(None, "team", quota_of) == (None, None)


def test_a_volcano_queue_maps_to_the_elastic_quota_of_its_name() -> None:
    found = translate_volcano(volcano({"minMember": 1, "queue": "research"}), {}, quota_of)
    assert found.quota == "research"
    (note,) = found.notes
    assert note.reason == c.DialectReason.QUEUE_MAPPED
    assert note.text.startswith("spec.queue: queue 'research' is charged to ElasticQuota team/")
    assert f"{c.LABEL_ELASTIC_QUOTA}=research" in note.message
    body = mirror_body(c.Dialect.VOLCANO, volcano({}), found.spec, found.quota)
    assert body["metadata"]["labels"] == {
        c.LABEL_MIRROR_OF: c.Dialect.VOLCANO.value,
        c.LABEL_ELASTIC_QUOTA: "research",
    }
    too_long = "q" * 64  # no label value: it cannot name the quota on the mirror
    assert queue_mapping(too_long, "team", lambda ns, name: "team/" + name)[0] is None


def test_a_quota_label_on_the_source_is_carried_and_wins_over_the_queue() -> None:
    source = volcano({"minMember": 1, "queue": "research"})
    source["metadata"]["labels"] = {c.LABEL_KOORD_QUOTA_NAME: "mine"}
    found = translate(c.Dialect.VOLCANO, source, {}, quota_of)
    assert (found.quota, found.notes) == ("mine", ())
    native = translate(
        c.Dialect.KOORDINATOR,
        {
            **koord(),
            "metadata": {"name": "g", "namespace": "team", "labels": {c.LABEL_ELASTIC_QUOTA: "k"}},
        },
        {},
    )
    assert native.quota == "k"


def test_mirror_labels_set_and_remove_the_quota_label_keeping_the_others() -> None:
    current = {"app": "x", c.LABEL_ELASTIC_QUOTA: "old", c.LABEL_MIRROR_OF: "volcano"}
    assert mirror_labels(c.Dialect.VOLCANO, "new", current) == {
        "app": "x",
        c.LABEL_ELASTIC_QUOTA: "new",
        c.LABEL_MIRROR_OF: "volcano",
    }
    assert mirror_labels(c.Dialect.VOLCANO, None, current) == {
        "app": "x",
        c.LABEL_MIRROR_OF: "volcano",
    }


def test_a_volcano_priority_class_is_left_to_the_pods_and_said() -> None:
    (note,) = translate_volcano(volcano({"minMember": 1, "priorityClassName": "hi"}), {}).notes
    assert note.field == "spec.priorityClassName" and "'hi'" in note.message


def test_an_absent_volcano_min_member_is_one_and_said() -> None:
    found = translate_volcano(volcano({}), {})
    assert found.spec == {"minMember": 1}
    assert found.notes[0].field == "spec.minMember"


def test_min_task_member_makes_one_leaf_sub_group_per_task() -> None:
    found = translate_volcano(
        volcano({"minMember": 3, "minTaskMember": {"ps": 1, "worker": 2, "idle": 0}}), {}
    )
    assert found.errors == ()
    assert found.spec["subGroups"] == [
        {"name": "ps", "minMember": 1},
        {"name": "worker", "minMember": 2},
    ]


def test_bad_volcano_fields_are_each_named_with_the_fix() -> None:
    found = translate_volcano(
        volcano({"minMember": -1, "minTaskMember": {"Worker_1": 2, "ps": "x"}}), {}
    )
    assert found.errors == (
        "spec.minMember: must be a whole number of at least 1, not -1; set it to the members "
        "that must run together",
        "spec.minTaskMember[Worker_1]: 'Worker_1' is not a DNS label (lowercase letters, "
        "digits, '-', at most 63); name the task so, as a sub-group is named after it",
        "spec.minTaskMember[ps]: must be a whole number of at least 1, not 'x'; or 0 for a "
        "task with no minimum",
    )


def test_min_task_member_and_sub_group_policy_together_are_refused() -> None:
    found = translate_volcano(
        volcano(
            {
                "minMember": 2,
                "minTaskMember": {"a": 1},
                "subGroupPolicy": [{"name": "p", "subGroupSize": 2, "matchLabelKeys": ["k"]}],
            }
        ),
        {},
    )
    assert found.errors[0].startswith("spec.minTaskMember: set minTaskMember or subGroupPolicy")


def test_a_sub_group_policy_is_a_template_sub_group_with_its_network_topology() -> None:
    policy = {
        "name": "replica",
        "subGroupSize": 4,
        "minSubGroups": 2,
        "matchLabelKeys": ["example.com/replica"],
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
    }
    found = translate_volcano(volcano({"minMember": 8, "subGroupPolicy": [policy]}), FABRIC)
    assert found.errors == ()
    assert found.spec["minSubGroup"] == 2
    assert found.spec["subGroups"] == [
        {
            "name": "replica",
            "minMember": 4,
            "matchLabelKeys": ["example.com/replica"],
            "topologyConstraint": {
                "topology": "fabric",
                "preferredTopologyLevel": "kubernetes.io/hostname",
                "requiredTopologyLevel": "kubernetes.io/hostname",
            },
        }
    ]


def test_a_sub_group_policy_without_match_label_keys_is_refused_naming_the_field() -> None:
    found = translate_volcano(
        volcano({"minMember": 2, "subGroupPolicy": [{"name": "p", "subGroupSize": 2}]}), {}
    )
    assert found.errors[0].startswith("spec.subGroupPolicy[0].matchLabelKeys: required here")


@pytest.mark.parametrize(
    ("network", "expected"),
    [
        (
            {"mode": "hard", "highestTierAllowed": 2},
            {"requiredTopologyLevel": "example.com/rack"},
        ),
        ({"mode": "hard", "highestTierAllowed": 9}, {}),
        ({"mode": "soft"}, {}),
        (
            {"mode": "hard", "highestTierName": "example.com/block"},
            {"requiredTopologyLevel": "example.com/block"},
        ),
    ],
    ids=["tier 2 is the rack", "beyond every tier", "soft", "by tier name"],
)
def test_volcano_network_tiers_count_from_the_finest_level(
    network: dict[str, Any], expected: dict[str, str]
) -> None:
    found = translate_volcano(volcano({"minMember": 2, "networkTopology": network}), FABRIC)
    assert found.errors == ()
    assert found.spec["topologyConstraint"] == {
        "topology": "fabric",
        "preferredTopologyLevel": "kubernetes.io/hostname",
        **expected,
    }


def test_volcano_tiers_without_one_topology_to_map_to_are_said_not_mapped() -> None:
    two = {**FABRIC, "other": ("zone",)}
    network = {"mode": "hard", "highestTierAllowed": 1}
    found = translate_volcano(volcano({"minMember": 2, "networkTopology": network}), two)
    assert "topologyConstraint" not in found.spec
    (note,) = found.notes
    assert note.field == "spec.networkTopology" and ANNOTATION_TOPOLOGY in note.message
    named = translate_volcano(
        volcano({"minMember": 2, "networkTopology": network}, **{ANNOTATION_TOPOLOGY: "other"}),
        two,
    )
    assert named.spec["topologyConstraint"]["requiredTopologyLevel"] == "zone"


def test_a_bad_network_topology_mode_is_refused() -> None:
    found = translate_volcano(volcano({"minMember": 2, "networkTopology": {"mode": "x"}}), FABRIC)
    assert found.errors == ("spec.networkTopology.mode: must be hard or soft, not 'x'",)


def test_our_own_rules_refuse_what_the_volcano_fields_break() -> None:
    found = translate_volcano(volcano({"minMember": 2, "minResources": {"cpu": "lots"}}), {})
    assert found.errors and found.errors[0].startswith("spec.minResources.cpu")


# --- Koordinator -----------------------------------------------------------------------------
def test_koordinator_annotations_map_to_timeout_mode_and_gang_group() -> None:
    found = translate_koordinator(
        koord(
            3,
            **{
                c.ANNOTATION_KOORD_WAITING_TIME: "1h30m",
                c.ANNOTATION_KOORD_MODE: "NonStrict",
                c.ANNOTATION_KOORD_GROUPS: json.dumps(["team/g", "h"]),
            },
        )
    )
    assert found.errors == ()
    assert found.spec == {
        "minMember": 3,
        "scheduleTimeoutSeconds": 5400,
        "mode": "NonStrict",
        "gangGroup": ["team/g", "team/h"],
    }


def test_koordinator_total_number_and_match_policy_are_said_not_mapped() -> None:
    found = translate_koordinator(
        koord(
            2,
            **{
                c.ANNOTATION_KOORD_TOTAL_NUMBER: "4",
                c.ANNOTATION_KOORD_MATCH_POLICY: "waiting-and-running",
            },
        )
    )
    assert [n.field for n in found.notes] == [
        f"annotation {c.ANNOTATION_KOORD_TOTAL_NUMBER}",
        f"annotation {c.ANNOTATION_KOORD_MATCH_POLICY}",
    ]
    once = translate_koordinator(koord(2, **{c.ANNOTATION_KOORD_MATCH_POLICY: "once-satisfied"}))
    assert once.notes == ()


def test_bad_koordinator_annotations_are_each_named_with_the_fix() -> None:
    found = translate_koordinator(
        koord(
            0,
            **{
                c.ANNOTATION_KOORD_WAITING_TIME: "soon",
                c.ANNOTATION_KOORD_MODE: "Loose",
                c.ANNOTATION_KOORD_GROUPS: "[1]",
            },
        )
    )
    fields = [e.split(":")[0] for e in found.errors]
    assert fields == [
        "spec.minMember",
        f"annotation {c.ANNOTATION_KOORD_WAITING_TIME}",
        f"annotation {c.ANNOTATION_KOORD_MODE}",
        f"annotation {c.ANNOTATION_KOORD_GROUPS}",
    ]
    assert "use Strict or NonStrict" in found.errors[2]


# --- native ----------------------------------------------------------------------------------
def test_a_native_gang_policy_is_its_min_count_and_basic_is_one() -> None:
    gang = {"spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}}
    assert translate_native(gang).spec == {"minMember": 4}
    assert translate_native({"spec": {"schedulingPolicy": {"basic": {}}}}).spec == {"minMember": 1}


def test_a_native_podgroup_without_a_policy_is_refused_naming_the_fix() -> None:
    (error,) = translate_native({"spec": {}}).errors
    assert error.startswith("spec.schedulingPolicy: set gang: {minCount: N}")
    (error,) = translate_native({"spec": {"schedulingPolicy": {"gang": {"minCount": 0}}}}).errors
    assert error.startswith("spec.schedulingPolicy.gang.minCount: must be a whole number")


def test_translate_picks_the_dialect() -> None:
    assert translate(c.Dialect.KOORDINATOR, koord(5), {}).spec == {"minMember": 5}
    assert translate(c.Dialect.VOLCANO, volcano({"minMember": 2}), {}).spec == {"minMember": 2}


# --- mirrors ---------------------------------------------------------------------------------
def test_a_mirror_is_named_as_its_source_labelled_and_owned_by_it() -> None:
    source = volcano({"minMember": 2})
    body = mirror_body(c.Dialect.VOLCANO, source, {"minMember": 2})
    assert body["metadata"]["name"] == "job" and body["metadata"]["namespace"] == "team"
    assert mirror_of(body) is c.Dialect.VOLCANO
    assert owned_by(body, source)
    assert not owned_by(body, {"metadata": {"uid": "other"}})
    assert mirror_of({"metadata": {"labels": {c.LABEL_MIRROR_OF: "nobody"}}}) is None
    assert mirror_of({"metadata": {}}) is None


# --- status ----------------------------------------------------------------------------------
UNSCHEDULABLE = c.ConditionType.UNSCHEDULABLE


@pytest.mark.parametrize(
    ("ours", "phase"),
    [
        (status("Pending"), "Inqueue"),
        (status("Pending", (UNSCHEDULABLE, "True", "NotEnoughTasks")), "Inqueue"),
        (status("Pending", (UNSCHEDULABLE, "True", "NotEnoughResources")), "Pending"),
        (status("Pending", (UNSCHEDULABLE, "True", "SchedulingGated")), "Pending"),
        (status("Running"), "Running"),
        (status("Unknown"), "Unknown"),
        (status("Finished"), "Completed"),
        (status("Failed"), "Completed"),
    ],
)
def test_our_phase_in_volcano_s_words(ours: dict[str, Any], phase: str) -> None:
    assert volcano_status(ours)["phase"] == phase


def test_volcano_status_keeps_the_counts_and_its_two_condition_types() -> None:
    ours = status(
        "Running",
        (UNSCHEDULABLE, "False", "GangSchedulable"),
        ("QuotaReserved", "True", "QuotaReserved"),
        running=3,
        succeeded=1,
        scheduled=4,
    )
    found = volcano_status(ours)
    assert (found["running"], found["succeeded"], found["failed"]) == (3, 1, 0)
    assert [x["type"] for x in found["conditions"]] == [UNSCHEDULABLE]
    assert "scheduled" not in found


def test_koordinator_status_says_scheduled_before_the_members_run() -> None:
    ours = status("Pending", (c.ConditionType.SCHEDULED, "True", "GangScheduled"), scheduled=2)
    ours["scheduleStartTime"] = "2026-01-01T00:00:00Z"
    found = koordinator_status(ours)
    assert found["phase"] == "Scheduled" and found["scheduled"] == 2
    assert found["scheduleStartTime"] == "2026-01-01T00:00:00Z"
    assert koordinator_status(status("Running", running=2))["phase"] == "Running"


def test_the_v1beta1_native_condition_latches_and_keeps_other_writers_conditions() -> None:
    waiting = status("Pending", (UNSCHEDULABLE, "True", "NotEnoughResources"))
    other = {"type": "Someone", "status": "True"}
    found = native_status(c.Dialect.NATIVE_V1BETA1, waiting, {"conditions": [other]})
    assert found["conditions"][0] == other
    cond = found["conditions"][1]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "PodGroupInitiallyScheduled",
        "False",
        "Unschedulable",
    )
    assert cond["message"] == "NotEnoughResources here"
    running = native_status(c.Dialect.NATIVE_V1BETA1, status("Running"), found)
    assert running["conditions"][1]["status"] == "True"
    # Members lost later: v1beta1's condition stays True, v1alpha2's follows.
    again = native_status(c.Dialect.NATIVE_V1BETA1, waiting, running)
    assert again["conditions"][1]["status"] == "True"
    alpha = native_status(c.Dialect.NATIVE_V1ALPHA2, status("Running"), {})
    assert alpha["conditions"][0]["type"] == "PodGroupScheduled"
    assert (
        native_status(c.Dialect.NATIVE_V1ALPHA2, waiting, alpha)["conditions"][0]["status"]
        == "False"
    )


def test_a_status_differs_only_when_a_written_key_changes() -> None:
    current = {
        "phase": "Running",
        "running": 2,
        "conditions": [{"type": "A", "lastTransitionTime": "t1"}],
    }
    assert not differs(current, {"phase": "Running", "conditions": [{"type": "A"}]})
    assert differs(current, {"running": 3})
    assert differs({}, {"phase": "Inqueue"})
