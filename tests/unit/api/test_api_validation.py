"""Validation reports every problem at once, each prefixed with its field path (kueue's style)."""

from __future__ import annotations

from typing import Any

import pytest

from podgroup_operator.api.validation import podgroup_errors, spec_errors, update_errors

VALID_SPECS: list[dict[str, Any]] = [
    {"minMember": 1},
    {"minMember": 3, "scheduleTimeoutSeconds": 60},
    {"minMember": 2, "minResources": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": 1}},
    {"minMember": 2, "minResources": {"cpu": 0}, "totalResources": {"cpu": "500m"}},
    {"minMember": 2, "minResources": {"cpu": "1"}, "totalResources": {"cpu": "1000m"}},
    {"minMember": 1, "totalResources": {"pods": 4, "requests.cpu": "1e3"}},
    {"minMember": 1, "policy": {}},
    {"minMember": 1, "policy": {"action": "FailGang", "maxRestarts": 0, "backoffSeconds": 0}},
    {"minMember": 1, "policy": {"action": "None", "maxBackoffSeconds": 60}},
    {"minMember": 1, "mode": "NonStrict"},
    {"minMember": 1, "gangGroup": ["default/a", "other-ns/b.c"]},
]


@pytest.mark.parametrize("spec", VALID_SPECS, ids=[str(s) for s in VALID_SPECS])
def test_valid_specs_have_no_errors(spec: dict[str, Any]) -> None:
    assert spec_errors(spec) == []
    assert podgroup_errors({"apiVersion": "x", "kind": "PodGroup", "spec": spec}) == []


BAD_SPECS: list[tuple[str, Any, str, str]] = [
    # (id, spec, field path, a fragment of the message)
    ("missing minMember", {}, "spec.minMember", "is required"),
    ("zero minMember", {"minMember": 0}, "spec.minMember", "must be >= 1"),
    ("string minMember", {"minMember": "3"}, "spec.minMember", "must be an integer"),
    ("float minMember", {"minMember": 2.5}, "spec.minMember", "must be an integer"),
    ("bool minMember", {"minMember": True}, "spec.minMember", "must be an integer"),
    (
        "typo",
        {"minMember": 1, "minMembers": 2},
        "spec.minMembers",
        "unknown field; remove it (known fields: gangGroup, maxRunSeconds, minMember,",
    ),
    (
        "negative quantity",
        {"minMember": 1, "minResources": {"cpu": "-1"}},
        "spec.minResources.cpu",
        "is negative",
    ),
    (
        "not a quantity",
        {"minMember": 1, "totalResources": {"memory": "lots"}},
        "spec.totalResources.memory",
        "is not a Kubernetes quantity",
    ),
    (
        "bad resource name",
        {"minMember": 1, "minResources": {"bad name!": "1"}},
        "spec.minResources",
        "invalid resource name(s) 'bad name!'",
    ),
    (
        "resources not a map",
        {"minMember": 1, "minResources": "cpu"},
        "spec.minResources",
        "must be an object",
    ),
    (
        "zero timeout",
        {"minMember": 1, "scheduleTimeoutSeconds": 0},
        "spec.scheduleTimeoutSeconds",
        "must be >= 1",
    ),
    (
        "zero run time",
        {"minMember": 1, "maxRunSeconds": 0},
        "spec.maxRunSeconds",
        "must be >= 1",
    ),
    (
        "total below minimum",
        {"minMember": 1, "minResources": {"cpu": "2"}, "totalResources": {"cpu": "1"}},
        "spec.totalResources.cpu",
        "1 is below spec.minResources.cpu 2; raise totalResources or lower minResources",
    ),
    (
        "total lacks a resource",
        {"minMember": 1, "minResources": {"nvidia.com/gpu": 1}, "totalResources": {"cpu": "1"}},
        "spec.totalResources.nvidia.com/gpu",
        "0 is below spec.minResources.nvidia.com/gpu 1",
    ),
    (
        "unknown action",
        {"minMember": 1, "policy": {"action": "Explode"}},
        "spec.policy.action",
        "must be one of 'RestartGang', 'FailGang' or 'None'",
    ),
    (
        "negative restarts",
        {"minMember": 1, "policy": {"maxRestarts": -1}},
        "spec.policy.maxRestarts",
        "must be >= 0",
    ),
    (
        "policy typo",
        {"minMember": 1, "policy": {"maxRestart": 1}},
        "spec.policy.maxRestart",
        "known fields: action, backoffSeconds, maxBackoffSeconds, maxRestarts",
    ),
    ("policy not a map", {"minMember": 1, "policy": "x"}, "spec.policy", "must be an object"),
    ("unknown mode", {"minMember": 1, "mode": "Lenient"}, "spec.mode", "'Strict' or 'NonStrict'"),
    (
        "gang member without namespace",
        {"minMember": 1, "gangGroup": ["ok/a", "noslash"]},
        "spec.gangGroup[1]",
        "'noslash' does not match",
    ),
    ("gangGroup not a list", {"minMember": 1, "gangGroup": "ns/a"}, "spec.gangGroup", "a list"),
    ("spec not an object", "x", "spec", "must be an object with at least minMember"),
    ("spec null", None, "spec", "must be an object with at least minMember"),
]


@pytest.mark.parametrize(
    ("spec", "path", "fragment"),
    [case[1:] for case in BAD_SPECS],
    ids=[case[0] for case in BAD_SPECS],
)
def test_each_error_names_its_field_path(spec: Any, path: str, fragment: str) -> None:
    errors = spec_errors(spec)
    assert len(errors) == 1, errors
    field, _, message = errors[0].partition(": ")
    assert field == path
    assert fragment in message
    assert podgroup_errors({"spec": spec}) == errors


def test_every_problem_is_reported_at_once() -> None:
    errors = spec_errors(
        {
            "minMember": 0,
            "minResources": {"cpu": "2"},
            "totalResources": {"cpu": "1"},
            "policy": {"action": "Explode", "maxRestarts": -1},
            "extra": True,
        }
    )
    paths = [error.partition(": ")[0] for error in errors]
    assert sorted(paths) == sorted(
        [
            "spec.minMember",
            "spec.totalResources.cpu",
            "spec.policy.action",
            "spec.policy.maxRestarts",
            "spec.extra",
        ]
    )
    assert len(errors) == len(set(errors))


def test_the_cross_field_rule_is_reported_once_when_it_alone_fails() -> None:
    errors = spec_errors({"minMember": 1, "minResources": {"cpu": 2}, "totalResources": {"cpu": 1}})
    assert [e for e in errors if "is below spec.minResources.cpu 2" in e] == errors
    assert len(errors) == 1


def test_a_podgroup_without_spec_is_told_what_to_add() -> None:
    assert podgroup_errors({"metadata": {"name": "g"}}) == [
        "spec: is required; a PodGroup needs at least spec.minMember"
    ]


# --- bounds: each poison value from issues 9 and 11 is refused naming field, limit and fix ------
POISON: list[tuple[str, dict[str, Any], str, str, str]] = [
    # (id, spec, field path, the limit, a fragment of the fix)
    (
        "timeout that overflowed every scheduling cycle",
        {"minMember": 1, "scheduleTimeoutSeconds": 300_000_000_000},
        "spec.scheduleTimeoutSeconds",
        "at most 31536000",
        "use a shorter duration",
    ),
    (
        "run-time limit past a year",
        {"minMember": 1, "maxRunSeconds": 300_000_000_000},
        "spec.maxRunSeconds",
        "at most 31536000",
        "use a shorter duration",
    ),
    (
        "backoff cap that froze the status",
        {"minMember": 1, "policy": {"maxBackoffSeconds": 1_000_000_000_000}},
        "spec.policy.maxBackoffSeconds",
        "at most 31536000",
        "use a shorter duration",
    ),
    (
        "backoff",
        {"minMember": 1, "policy": {"backoffSeconds": 31_536_001}},
        "spec.policy.backoffSeconds",
        "at most 31536000",
        "use a shorter duration",
    ),
    (
        "gang group of 1,000 PodGroups",
        {"minMember": 1, "gangGroup": [f"ns/g{i}" for i in range(1000)]},
        "spec.gangGroup",
        "at most 64",
        "merge them into fewer, larger PodGroups",
    ),
    (
        "minMember beyond any cluster",
        {"minMember": 99_999_999_999_999_999_999},
        "spec.minMember",
        "at most 1000000",
        "use the gang's real size",
    ),
    (
        "maxRestarts",
        {"minMember": 1, "policy": {"maxRestarts": 1001}},
        "spec.policy.maxRestarts",
        "at most 1000",
        "allow fewer restarts",
    ),
    (
        "quantity 1e30",
        {"minMember": 1, "minResources": {"cpu": "1e30"}},
        "spec.minResources.cpu",
        "at most 9223372036854775.807",
        "use a realistic amount",
    ),
    (
        "integer quantity beyond int64 milli-units",
        {"minMember": 1, "totalResources": {"memory": 10**40}},
        "spec.totalResources.memory",
        "at most 9223372036854775.807",
        "use a realistic amount",
    ),
    (
        "quantity whose exponent overflows decimal arithmetic",
        {"minMember": 1, "totalResources": {"cpu": "1e99999999999"}},
        "spec.totalResources.cpu",
        "at most 9223372036854775.807",
        "use a realistic amount",
    ),
    (
        "65 resource names",
        {"minMember": 1, "minResources": {f"example.com/r{i}": 1 for i in range(65)}},
        "spec.minResources",
        "65 resource names; at most 64",
        "list only the resources the group needs",
    ),
    (
        "gang group entry longer than a namespace/name can be",
        {"minMember": 1, "gangGroup": ["ns/" + "a" * 400]},
        "spec.gangGroup[0]",
        "at most 317",
        "characters long",
    ),
]


@pytest.mark.parametrize(
    ("case", "spec", "field", "limit", "fix"), POISON, ids=[p[0] for p in POISON]
)
def test_poison_values_are_refused_naming_field_limit_and_fix(
    case: str, spec: dict[str, Any], field: str, limit: str, fix: str
) -> None:
    (error,) = [e for e in spec_errors(spec) if e.startswith(f"{field}:")]
    assert limit in error and fix in error, error


def test_values_at_the_limits_are_accepted() -> None:
    spec = {
        "minMember": 1_000_000,
        "scheduleTimeoutSeconds": 31_536_000,
        "policy": {"maxRestarts": 1000, "backoffSeconds": 31_536_000, "maxBackoffSeconds": 0},
        "gangGroup": [f"ns/g{i}" for i in range(64)],
        "minResources": {"cpu": "9223372036854775.807"},
        "totalResources": {"cpu": 9223372036854775, "memory": "8Pi"},
    }
    sixty_four = {f"example.com/r{i}": 1 for i in range(64)}
    at_most = {"minMember": 1, "minResources": sixty_four, "totalResources": sixty_four}
    assert spec_errors(at_most) == []
    assert spec_errors({**spec, "totalResources": {"cpu": "9223372036854775807m"}}) == []
    assert spec_errors({**spec, "minResources": {"cpu": 1}}) == []


def test_bad_resource_names_are_named_a_few_at_a_time() -> None:
    names = {f"Bad Name {i}": 1 for i in range(40)} | {"cpu\n": 1}
    (error,) = spec_errors({"minMember": 1, "totalResources": names})
    assert error.startswith("spec.totalResources: ")
    assert "'Bad Name 0', 'Bad Name 1'" in error and "and 36 more;" in error
    assert len(error) < 400


def test_a_resource_name_ending_in_a_newline_is_refused() -> None:
    (error,) = spec_errors({"minMember": 1, "minResources": {"cpu\n": 1}})
    assert "invalid resource name(s) 'cpu\\n'" in error


def test_many_bad_entries_make_a_bounded_answer() -> None:
    errors = spec_errors({"minMember": 1, "gangGroup": [f"NOT-VALID-{i}" for i in range(60)]})
    assert len(errors) == 21
    assert errors[0].startswith("spec.gangGroup[0]: 'NOT-VALID-0' does not match")
    assert errors[-1] == "... and 40 more errors"


def test_an_update_that_leaves_the_spec_as_stored_passes_whatever_it_holds() -> None:
    """Ratcheting: a label or a finalizer's removal on a PodGroup stored before these rules."""
    invalid = {"minMember": 1, "minResources": {"cpu": 4}, "totalResources": {"cpu": 2}}
    stored = {"metadata": {"name": "g"}, "spec": invalid}
    labelled = {"metadata": {"name": "g", "labels": {"team": "a"}}, "spec": dict(invalid)}
    assert update_errors(stored, labelled) == []
    changed = {"metadata": {"name": "g"}, "spec": {**invalid, "minMember": 2}}
    assert update_errors(stored, changed) == podgroup_errors(changed) != []
    assert update_errors(None, stored) == podgroup_errors(stored) != []


def test_a_provisioning_class_annotation_is_checked_when_set_or_changed_only() -> None:
    from podgroup_operator import constants as c
    from podgroup_operator.api.validation import podgroup_findings

    key = c.ANNOTATION_PROVISIONING_CLASS

    def group(value: str | None) -> dict[str, object]:
        annotations = {} if value is None else {key: value}
        return {"metadata": {"name": "g", "annotations": annotations}, "spec": {"minMember": 2}}

    def errors(old: str | bool | None, new: str | None) -> list[str]:
        before = None if old is False else group(old if isinstance(old, str) else None)
        return podgroup_findings(before, group(new), lambda name: None)[0]

    assert errors(False, "best-effort-atomic-scale-up.autoscaling.x-k8s.io") == []
    assert errors(False, "none") == []
    (error,) = errors(False, "two words")
    assert error.startswith(f"metadata.annotations[{key}]: 'two words' is not a provisioning class")
    assert "e.g. best-effort-atomic-scale-up.autoscaling.x-k8s.io, or none" in error
    assert len(errors(None, "")) == 1  # set on an update
    assert errors("two words", "two words") == []  # stored before: other updates go through
