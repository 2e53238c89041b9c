"""PodGroups for gangs declared on pods alone (coscheduling labels, Koordinator annotations,
Kueue plain-pod groups)."""

from __future__ import annotations

import pytest

from podgroup_operator import constants as c
from podgroup_operator.api.models import PodGroupSpec
from podgroup_operator.domain.lightweight import (
    is_operator_created,
    lightweight_errors,
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


def test_a_kueue_pod_group_makes_a_podgroup_of_its_total_count() -> None:
    member = pod(
        "a",
        "team",
        labels={c.LABEL_KUEUE_POD_GROUP_NAME: "kq", "kueue.x-k8s.io/queue-name": "user-queue"},
        annotations={c.ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT: "3"},
    )
    body = podgroup_for("team", [member])
    assert body is not None
    assert body["metadata"]["name"] == "kq"
    assert body["spec"] == {"minMember": 3}
    assert is_operator_created(body)


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        (None, "is required; set it to the number of pods in the group"),
        ("three", "must be an integer, not 'three'"),
        ("0", "must be >= 1"),
    ],
    ids=["missing", "word", "zero"],
)
def test_a_kueue_pod_group_without_a_usable_total_count_is_refused_naming_the_annotation(
    count: str | None, expected: str
) -> None:
    annotations = {} if count is None else {c.ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT: count}
    member = pod("a", "team", labels={c.LABEL_KUEUE_POD_GROUP_NAME: "kq"}, annotations=annotations)
    (error,) = lightweight_errors(member)
    assert error.startswith(f"{c.ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT}: {expected}"), error
    assert podgroup_for("team", [member]) is None


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
    ("annotations", "key", "fragment"),
    [
        ({c.ANNOTATION_KOORD_WAITING_TIME: "whenever"}, "waiting-time", "is not a duration; use"),
        ({c.ANNOTATION_KOORD_MODE: "Loose"}, "mode", "must be one of 'Strict' or 'NonStrict'"),
        ({c.ANNOTATION_KOORD_GROUPS: "not json"}, "groups", "must be a JSON list"),
        ({c.ANNOTATION_KOORD_GROUPS: '{"a": 1}'}, "groups", "must be a JSON list"),
    ],
)
def test_malformed_optional_annotations_are_refused_naming_the_annotation(
    annotations: dict[str, str], key: str, fragment: str
) -> None:
    base = {c.ANNOTATION_KOORD_NAME: "koord", c.ANNOTATION_KOORD_MIN_AVAILABLE: "2"}
    member = pod("a", "team", annotations={**base, **annotations})
    assert podgroup_for("team", [member]) is None
    (error,) = lightweight_errors(member)
    assert error.startswith(f"gang.scheduling.koordinator.sh/{key}: ") and fragment in error


# --- the CRD's bounds and messages, with the label or annotation as the field ------------------
LIGHT = c.LABEL_LIGHTWEIGHT_NAME
MIN = c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (
            {LIGHT: "light", MIN: "99999999999999999999"},
            f"{MIN}: 99999999999999999999 is too large: must be at most 1000000 "
            "(no cluster holds more pods at once; use the gang's real size)",
        ),
        ({LIGHT: "light", MIN: "0"}, f"{MIN}: must be >= 1"),
        ({LIGHT: "light", MIN: "x"}, f"{MIN}: must be an integer, not 'x'"),
        ({LIGHT: "light", MIN: "-2"}, f"{MIN}: must be an integer, not '-2'"),
        ({LIGHT: "light"}, f"{MIN}: is required; set it to the number of members"),
        ({LIGHT: "Light_1", MIN: "2"}, f"{LIGHT}: 'Light_1' is not a valid PodGroup name"),
    ],
    ids=["huge", "zero", "word", "negative", "missing", "bad-name"],
)
def test_coscheduling_labels_are_checked_with_the_crd_rules(
    labels: dict[str, str], expected: str
) -> None:
    member = pod("a", "team", labels=labels)
    (error,) = lightweight_errors(member)
    assert error.startswith(expected), error
    assert podgroup_for("team", [member]) is None


def test_every_koordinator_error_is_collected_with_its_annotation() -> None:
    member = pod(
        "a",
        "team",
        annotations={
            c.ANNOTATION_KOORD_NAME: "koord",
            c.ANNOTATION_KOORD_MIN_AVAILABLE: "2000000",
            c.ANNOTATION_KOORD_WAITING_TIME: "9000h",
            c.ANNOTATION_KOORD_MODE: "Loose",
            c.ANNOTATION_KOORD_GROUPS: "[" + ", ".join(f'"g{i}"' for i in range(65)) + "]",
        },
    )
    errors = lightweight_errors(member)
    assert [e.split(": ", 1)[0] for e in errors] == [
        c.ANNOTATION_KOORD_MIN_AVAILABLE,
        c.ANNOTATION_KOORD_WAITING_TIME,
        c.ANNOTATION_KOORD_MODE,
        c.ANNOTATION_KOORD_GROUPS,
    ]
    assert "32400000 is too large: must be at most 31536000 (one year" in errors[1]
    assert "has 65 entries: at most 64 allowed" in errors[3]


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        ('["ok", "Not_OK"]', f"{c.ANNOTATION_KOORD_GROUPS}[1]: 'team/Not_OK' does not match"),
        # 100,000 '[' made `json` raise RecursionError at every reconcile of the gang.
        ("[" * 100_000 + "]" * 100_000, f"{c.ANNOTATION_KOORD_GROUPS}: must be a JSON list"),
    ],
    ids=["an entry named by its index", "nested too deep"],
)
def test_a_bad_groups_annotation_is_one_short_error(groups: str, expected: str) -> None:
    member = pod(
        "a",
        "team",
        annotations={
            c.ANNOTATION_KOORD_NAME: "koord",
            c.ANNOTATION_KOORD_MIN_AVAILABLE: "2",
            c.ANNOTATION_KOORD_GROUPS: groups,
        },
    )
    (error,) = lightweight_errors(member)
    assert error.startswith(expected), error
    assert len(error) < 400


def test_a_huge_annotation_value_is_quoted_short() -> None:
    member = pod(
        "a",
        "team",
        annotations={
            c.ANNOTATION_KOORD_NAME: "koord",
            c.ANNOTATION_KOORD_MIN_AVAILABLE: "9" * 5000,
        },
    )
    (error,) = lightweight_errors(member)
    assert "is too large: must be at most 1000000" in error and len(error) < 200


def test_valid_declarations_and_ordinary_members_have_no_errors() -> None:
    assert lightweight_errors(pod("a", "team", labels={LIGHT: "light", MIN: "3"})) == []
    assert lightweight_errors(pod("c", "team", group="real")) == []
    assert lightweight_errors(pod("d", "team")) == []


def test_the_first_valid_pod_makes_the_podgroup() -> None:
    bad = pod("a", "team", labels={LIGHT: "light", MIN: "99999999999999999999"})
    good = pod("b", "team", labels={LIGHT: "light", MIN: "2"})
    body = podgroup_for("team", [bad, good])
    assert body is not None and body["spec"] == {"minMember": 2}


def test_no_podgroup_without_a_usable_minimum_or_for_ordinary_members() -> None:
    no_minimum = pod("a", "team", labels={c.LABEL_LIGHTWEIGHT_NAME: "light"})
    bad_minimum = pod(
        "b", "team", labels={c.LABEL_LIGHTWEIGHT_NAME: "l", c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE: "x"}
    )
    member = pod("c", "team", group="real")  # belongs to a user-written PodGroup
    assert podgroup_for("team", [no_minimum, bad_minimum, member]) is None
    assert not is_operator_created({"metadata": {"labels": {}}})
