"""PodGroups for gangs declared on pods alone (coscheduling labels, Koordinator annotations)."""

from __future__ import annotations

import pytest

from podgroup_operator import constants as c
from podgroup_operator.api.models import PodGroupSpec
from podgroup_operator.domain.lightweight import (
    is_operator_created,
    parse_duration_seconds,
    podgroup_for,
)
from tests.builders import pod


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30", 30), ("30s", 30), ("5m", 300), ("1h30m", 5400), ("2h", 7200), ("1m30s", 90)],
)
def test_waiting_time_durations(text: str, seconds: int) -> None:
    assert parse_duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "-5s", "0", "0s", "5ms", "1.5h"])
def test_malformed_waiting_times_are_ignored(text: str) -> None:
    assert parse_duration_seconds(text) is None


def test_coscheduling_labels_make_a_podgroup_marked_as_ours() -> None:
    labels = {c.LABEL_LIGHTWEIGHT_NAME: "light", c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE: "3"}
    body = podgroup_for("team", [pod("a", "team", labels=labels)])
    assert body is not None
    assert body["metadata"] == {
        "name": "light",
        "namespace": "team",
        "labels": {c.LABEL_MANAGED_BY: c.OPERATOR_NAME},
    }
    assert body["spec"] == {"minMember": 3}
    assert is_operator_created(body)
    PodGroupSpec.model_validate(body["spec"])  # what we create passes our own validation


def test_koordinator_annotations_carry_timeout_mode_and_groups() -> None:
    annotations = {
        c.ANNOTATION_KOORD_NAME: "koord",
        c.ANNOTATION_KOORD_MIN_AVAILABLE: "2",
        c.ANNOTATION_KOORD_WAITING_TIME: "90s",
        c.ANNOTATION_KOORD_MODE: c.GangMode.NON_STRICT,
        c.ANNOTATION_KOORD_GROUPS: '["team/koord", "other/peer", "local"]',
    }
    body = podgroup_for("team", [pod("a", "team", annotations=annotations)])
    assert body is not None
    assert body["spec"] == {
        "minMember": 2,
        "scheduleTimeoutSeconds": 90,
        "mode": c.GangMode.NON_STRICT,
        "gangGroup": ["team/koord", "other/peer", "team/local"],
    }
    PodGroupSpec.model_validate(body["spec"])


@pytest.mark.parametrize(
    "annotations",
    [
        {c.ANNOTATION_KOORD_WAITING_TIME: "whenever"},
        {c.ANNOTATION_KOORD_MODE: "Loose"},
        {c.ANNOTATION_KOORD_GROUPS: "not json"},
        {c.ANNOTATION_KOORD_GROUPS: '{"a": 1}'},
    ],
)
def test_malformed_optional_annotations_are_left_out(annotations: dict[str, str]) -> None:
    base = {c.ANNOTATION_KOORD_NAME: "koord", c.ANNOTATION_KOORD_MIN_AVAILABLE: "2"}
    body = podgroup_for("team", [pod("a", "team", annotations={**base, **annotations})])
    assert body is not None and body["spec"] == {"minMember": 2}


def test_no_podgroup_without_a_usable_minimum_or_for_ordinary_members() -> None:
    no_minimum = pod("a", "team", labels={c.LABEL_LIGHTWEIGHT_NAME: "light"})
    bad_minimum = pod(
        "b", "team", labels={c.LABEL_LIGHTWEIGHT_NAME: "l", c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE: "x"}
    )
    member = pod("c", "team", group="real")  # belongs to a user-written PodGroup
    assert podgroup_for("team", [no_minimum, bad_minimum, member]) is None
    assert not is_operator_created({"metadata": {"labels": {}}})
