"""Which pods belong to which group: every key, their precedence, conflicts, lightweight gangs."""

from __future__ import annotations

from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.domain.membership import (
    LightweightGang,
    group_key_of,
    group_name_of,
    lightweight_gang_of,
    membership_conflict,
    membership_keys,
    missing_group_message,
)
from tests.builders import pod


@pytest.mark.parametrize(
    ("labels", "annotations"),
    [
        ({c.LABEL_POD_GROUP: "gang"}, {}),
        ({}, {c.ANNOTATION_GROUP_NAME: "gang"}),
        ({c.LABEL_LIGHTWEIGHT_NAME: "gang"}, {}),
        ({}, {c.ANNOTATION_KOORD_NAME: "gang"}),
        ({c.LABEL_KOORD_POD_GROUP: "gang"}, {}),
        ({c.LABEL_KUEUE_POD_GROUP_NAME: "gang"}, {c.ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT: "2"}),
    ],
    ids=[
        "scheduler-plugins label",
        "volcano annotation",
        "lightweight label",
        "koordinator",
        "koordinator label",
        "kueue",
    ],
)
def test_every_supported_key_makes_a_member_in_the_pods_own_namespace(
    labels: dict[str, str], annotations: dict[str, str]
) -> None:
    member = pod("p", "team-a", labels=labels, annotations=annotations)
    assert group_key_of(member) == ("team-a", "gang")


def test_a_pod_without_keys_or_with_empty_values_belongs_to_no_group() -> None:
    assert group_key_of(pod("p")) is None
    assert group_key_of(pod("p", group="")) is None
    assert group_key_of(pod("p", group_annotation="")) is None


def test_a_pod_without_namespace_belongs_to_no_group() -> None:
    stray = pod("p", group="gang")
    del stray["metadata"]["namespace"]
    assert group_name_of(stray) == "gang"
    assert group_key_of(stray) is None


@pytest.mark.parametrize(
    ("labels", "annotations", "winner"),
    [
        (
            {c.LABEL_POD_GROUP: "label", c.LABEL_LIGHTWEIGHT_NAME: "light"},
            {c.ANNOTATION_GROUP_NAME: "annotation", c.ANNOTATION_KOORD_NAME: "koord"},
            "label",
        ),
        (
            {c.LABEL_LIGHTWEIGHT_NAME: "light"},
            {c.ANNOTATION_GROUP_NAME: "annotation", c.ANNOTATION_KOORD_NAME: "koord"},
            "annotation",
        ),
        ({c.LABEL_LIGHTWEIGHT_NAME: "light"}, {c.ANNOTATION_KOORD_NAME: "koord"}, "light"),
        ({c.LABEL_POD_GROUP: ""}, {c.ANNOTATION_GROUP_NAME: "annotation"}, "annotation"),
        (
            {c.LABEL_POD_GROUP: "label", c.LABEL_KOORD_POD_GROUP: "koord"},
            {c.ANNOTATION_GROUP_NAME: "annotation"},
            "label",
        ),
        ({c.LABEL_KOORD_POD_GROUP: "koord"}, {c.ANNOTATION_GROUP_NAME: "annotation"}, "koord"),
        (
            {c.LABEL_KOORD_POD_GROUP: "koord", c.LABEL_LIGHTWEIGHT_NAME: "light"},
            {c.ANNOTATION_KOORD_NAME: "koord-gang"},
            "koord",
        ),
        (
            {c.LABEL_KUEUE_POD_GROUP_NAME: "kueue"},
            {c.ANNOTATION_KOORD_NAME: "koord-gang"},
            "koord-gang",
        ),
        ({c.LABEL_KUEUE_POD_GROUP_NAME: "kueue", c.LABEL_POD_GROUP: "label"}, {}, "label"),
    ],
    ids=[
        "label first",
        "annotation second",
        "lightweight label third",
        "empty is absent",
        "scheduler-plugins label before koordinator's",
        "koordinator label before volcano annotation",
        "koordinator label before lightweight keys",
        "kueue last",
        "kueue after podgroup keys",
    ],
)
def test_keys_are_read_in_order_of_precedence(
    labels: dict[str, str], annotations: dict[str, str], winner: str
) -> None:
    assert group_name_of(pod("p", labels=labels, annotations=annotations)) == winner


def test_disagreeing_label_and_annotation_are_reported_and_the_label_wins() -> None:
    member = pod("p", "team-a", group="by-label", group_annotation="by-annotation")

    conflict = membership_conflict(member)

    assert group_key_of(member) == ("team-a", "by-label")
    assert conflict is not None
    assert conflict.pod == ("team-a", "p")
    assert (conflict.key, conflict.group) == (c.LABEL_POD_GROUP, "by-label")
    assert conflict.ignored == ((c.ANNOTATION_GROUP_NAME, "by-annotation"),)
    assert "by-annotation" in conflict.message
    assert c.LABEL_POD_GROUP in conflict.message


def test_keys_repeating_the_same_name_are_no_conflict() -> None:
    assert membership_conflict(pod("p", group="gang", group_annotation="gang")) is None
    assert membership_conflict(pod("p", group="gang")) is None
    assert membership_conflict(pod("p")) is None


def test_a_conflict_lists_only_the_keys_that_disagree() -> None:
    member = pod(
        "p",
        group="gang",
        group_annotation="gang",
        annotations={c.ANNOTATION_KOORD_NAME: "other"},
    )
    conflict = membership_conflict(member)
    assert conflict is not None
    assert conflict.ignored == ((c.ANNOTATION_KOORD_NAME, "other"),)


def test_membership_keys_name_every_key_and_label_keys_only_the_selectable_ones() -> None:
    assert membership_keys() == (
        c.FIELD_SCHEDULING_GROUP,
        c.LABEL_POD_GROUP,
        c.LABEL_KOORD_POD_GROUP,
        c.ANNOTATION_GROUP_NAME,
        c.LABEL_LIGHTWEIGHT_NAME,
        c.ANNOTATION_KOORD_NAME,
        c.LABEL_KUEUE_POD_GROUP_NAME,
    )


def test_a_coscheduling_lightweight_gang_reports_its_min_available() -> None:
    member = pod(
        "p",
        labels={c.LABEL_LIGHTWEIGHT_NAME: "light", c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE: "4"},
    )
    assert lightweight_gang_of(member) == LightweightGang(
        name="light", min_available=4, extra={c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE: "4"}
    )


def test_a_koordinator_gang_reports_its_minimum_and_passes_its_settings_through() -> None:
    annotations = {
        c.ANNOTATION_KOORD_NAME: "koord",
        c.ANNOTATION_KOORD_MIN_AVAILABLE: "2",
        c.ANNOTATION_KOORD_WAITING_TIME: "30s",
        c.ANNOTATION_KOORD_MODE: "NonStrict",
        c.ANNOTATION_KOORD_GROUPS: '["default/koord","default/other"]',
    }
    gang = lightweight_gang_of(pod("p", annotations=annotations))
    assert gang is not None
    name, min_available, extra = gang
    assert (name, min_available) == ("koord", 2)
    assert extra == {k: v for k, v in annotations.items() if k != c.ANNOTATION_KOORD_NAME}


@pytest.mark.parametrize("raw", [None, "", "0", "-1", "two", "1.5", "٣"])
def test_a_missing_or_invalid_minimum_is_none_and_kept_raw(raw: str | None) -> None:
    labels = {c.LABEL_LIGHTWEIGHT_NAME: "light"}
    if raw is not None:
        labels[c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE] = raw
    gang = lightweight_gang_of(pod("p", labels=labels))
    assert gang is not None
    assert gang.min_available is None
    assert gang.extra.get(c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE) == raw


def test_a_kueue_pod_group_is_a_lightweight_gang_of_its_total_count() -> None:
    """The name is a label and the count an annotation: Kueue admits the group whole, so its
    minimum is every pod of it."""
    member = pod(
        "p",
        labels={c.LABEL_KUEUE_POD_GROUP_NAME: "kq", "kueue.x-k8s.io/queue-name": "user-queue"},
        annotations={c.ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT: "3"},
    )
    assert lightweight_gang_of(member) == LightweightGang(
        name="kq", min_available=3, extra={c.ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT: "3"}
    )
    # The count as a label is not Kueue's: no minimum.
    mislabelled = pod(
        "p",
        labels={c.LABEL_KUEUE_POD_GROUP_NAME: "kq", c.ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT: "3"},
    )
    gang = lightweight_gang_of(mislabelled)
    assert gang is not None and gang.min_available is None


def test_the_koordinator_label_names_a_podgroup_and_makes_no_lightweight_gang() -> None:
    """`pod-group.scheduling.sigs.k8s.io: NAME` (no `/name`) is Koordinator's key for a
    PodGroup object: once treated as a near miss, it makes a member now."""
    member = pod("p", "team", labels={c.LABEL_KOORD_POD_GROUP: "train"})
    assert group_key_of(member) == ("team", "train")
    assert lightweight_gang_of(member) is None
    assert missing_group_message(member) == (
        "PodGroup train does not exist in namespace team; create it or fix the pod's label "
        f"{c.LABEL_KOORD_POD_GROUP}. The pod is not counted."
    )


def test_two_dialects_naming_different_groups_are_a_conflict_naming_both() -> None:
    member = pod(
        "p",
        "team",
        labels={c.LABEL_KOORD_POD_GROUP: "koord", c.LABEL_KUEUE_POD_GROUP_NAME: "kueue"},
        annotations={c.ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT: "2"},
    )
    conflict = membership_conflict(member)
    assert conflict is not None
    assert (conflict.key, conflict.group) == (c.LABEL_KOORD_POD_GROUP, "koord")
    assert conflict.ignored == ((c.LABEL_KUEUE_POD_GROUP_NAME, "kueue"),)
    assert all(
        part in conflict.message
        for part in ("'koord'", "'kueue'", c.LABEL_KOORD_POD_GROUP, c.LABEL_KUEUE_POD_GROUP_NAME)
    )


def test_no_lightweight_gang_when_a_podgroup_key_decides_membership() -> None:
    member = pod("p", group="real", labels={c.LABEL_LIGHTWEIGHT_NAME: "light"})
    assert group_name_of(member) == "real"
    assert lightweight_gang_of(member) is None
    assert lightweight_gang_of(pod("p", group_annotation="real")) is None
    assert lightweight_gang_of(pod("p")) is None


def test_a_missing_group_is_warned_naming_the_key_and_the_fix() -> None:
    body = pod("p", "team", group="train")
    assert missing_group_message(body) == (
        f"PodGroup train does not exist in namespace team; create it or fix the pod's label "
        f"{c.LABEL_POD_GROUP}. The pod is not counted."
    )
    assert missing_group_message(pod("p", "team")) is None


@pytest.mark.parametrize("name", ["Train_1", "x" * 254, "-train"])
def test_a_name_no_podgroup_can_have_is_said_to_be_one(name: str) -> None:
    """ "create it" cannot help there: the API server refuses such a name."""
    message = missing_group_message(pod("p", "team", annotations={c.ANNOTATION_GROUP_NAME: name}))
    assert message is not None
    assert message.startswith(f"annotation {c.ANNOTATION_GROUP_NAME}: ")
    assert "is not a valid PodGroup name, so no PodGroup can have it" in message
    assert "create it" not in message
    assert len(message) < 400


def _native(name: str, native: str, **kwargs: Any) -> dict[str, Any]:
    return pod(name, "team", schedulingGroup={"podGroupName": native}, **kwargs)


def test_the_native_pod_field_makes_a_member_and_outranks_every_key() -> None:
    """`spec.schedulingGroup.podGroupName` (the native PodGroup). The dev cluster's API server
    (v1.20) drops the field, so it is tested here, on pure code, only."""
    member = _native("p", "native", group="plugins", group_annotation="volcano")
    assert group_key_of(member) == ("team", "native")
    assert lightweight_gang_of(member) is None
    assert group_key_of(_native("p", "")) is None


def test_a_pod_claimed_by_the_native_field_and_a_volcano_annotation_is_a_conflict() -> None:
    conflict = membership_conflict(_native("p", "native", group_annotation="vc"))
    assert conflict is not None
    assert (conflict.key, conflict.group) == (c.FIELD_SCHEDULING_GROUP, "native")
    assert conflict.ignored == ((c.ANNOTATION_GROUP_NAME, "vc"),)
    assert "'native'" in conflict.message and "'vc'" in conflict.message


def test_a_missing_native_group_names_the_field() -> None:
    message = missing_group_message(_native("p", "gone"))
    assert message is not None
    assert f"fix the pod's field {c.FIELD_SCHEDULING_GROUP}" in message
