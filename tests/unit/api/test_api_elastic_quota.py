"""An ElasticQuota written in any dialect (ours, scheduler-plugins', Koordinator's) normalizes to
one meaning, and every invalid one is refused with every problem at once, each naming its field
and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.api.elastic_quota import (
    ElasticQuotaError,
    ElasticQuotaSpec,
    ElasticQuotaStatus,
    QuotaRef,
    elastic_quota_errors,
    elastic_quota_update_errors,
    koordinator_internal,
    member_quota_ref,
    normalize,
    pod_quota_ref,
)

GPU = "nvidia.com/gpu"
KOORD = f"{c.KOORD_QUOTA_GROUP}/{c.VERSION}"


def quota(
    spec: Any = None,
    *,
    name: str = "team-a",
    namespace: str = "ml",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    api_version: str = c.API_VERSION,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    body: dict[str, Any] = {"apiVersion": api_version, "kind": "ElasticQuota", "metadata": meta}
    if spec is not None:
        body["spec"] = spec
    return body


def test_a_scheduler_plugins_quota_means_what_it_meant_there() -> None:
    spec = normalize(quota({"min": {"cpu": "4", GPU: 4}, "max": {"cpu": 8, GPU: "5"}}))
    assert spec.key == ("ml", "team-a")
    assert spec.min == {"cpu": 4000, GPU: 4000}
    assert spec.max == {"cpu": 8000, GPU: 5000}
    assert spec.guarantee == {}
    assert spec.weight == 1
    assert spec.parent is None
    assert spec.is_parent is None
    assert spec.min_run_seconds == 0
    assert spec.queueing is c.QueueingStrategy.PRIORITY


def test_an_empty_quota_has_no_min_and_no_max() -> None:
    spec = normalize(quota())
    assert (spec.min, spec.max) == ({}, {})


def test_our_additions_are_read() -> None:
    spec = normalize(
        quota(
            {
                "min": {GPU: 8},
                "max": {GPU: 16},
                "guarantee": {GPU: 2},
                "weight": 3,
                "parent": "org/org-ml",
                "minRunSeconds": 600,
                "queueingStrategy": "StrictFIFO",
            }
        )
    )
    assert spec.guarantee == {GPU: 2000}
    assert spec.weight == 3
    assert spec.parent == QuotaRef("org", "org-ml")
    assert spec.min_run_seconds == 600
    assert spec.queueing is c.QueueingStrategy.STRICT_FIFO


def test_a_bare_parent_keeps_no_namespace_to_be_resolved_by_the_tree() -> None:
    assert normalize(quota({"parent": "org-ml"})).parent == QuotaRef(None, "org-ml")


def test_a_koordinator_quota_migrates_unchanged() -> None:
    spec = normalize(
        quota(
            {"min": {"cpu": 4, GPU: 2}, "max": {"cpu": 8, GPU: 4}},
            api_version=f"{c.KOORD_QUOTA_GROUP}/v1alpha1",
            labels={
                c.LABEL_KOORD_QUOTA_PARENT: "org-ml",
                c.LABEL_KOORD_QUOTA_IS_PARENT: "false",
                c.LABEL_KOORD_ALLOW_LENT: "false",
            },
            annotations={c.ANNOTATION_KOORD_SHARED_WEIGHT: '{"cpu": "4", "nvidia.com/gpu": 2}'},
        )
    )
    assert spec.parent == QuotaRef(None, "org-ml")
    assert spec.is_parent is False
    assert spec.guarantee == spec.min == {"cpu": 4000, GPU: 2000}
    assert spec.shared_weight == {"cpu": 4000, GPU: 2000}


def test_a_koordinator_quota_without_shared_weight_weighs_by_its_max() -> None:
    body = quota({"min": {GPU: 2}, "max": {GPU: 8, "cpu": 0}})
    assert normalize(body).shared_weight == {}  # scheduler-plugins' object: weight 1
    body["apiVersion"] = f"{c.KOORD_QUOTA_GROUP}/v1alpha1"
    assert normalize(body).shared_weight == {GPU: 8000}


def test_koordinator_defaults_lend_and_its_root_means_no_parent() -> None:
    spec = normalize(
        quota(
            {"min": {GPU: 2}},
            labels={
                c.LABEL_KOORD_QUOTA_PARENT: c.KOORD_ROOT_QUOTA,
                c.LABEL_KOORD_ALLOW_LENT: "true",
            },
        )
    )
    assert spec.parent is None
    assert spec.guarantee == {}
    assert normalize(quota(labels={c.LABEL_KOORD_QUOTA_IS_PARENT: "true"})).is_parent is True


def test_a_pod_names_its_quota_by_our_label_or_koordinators() -> None:
    assert pod_quota_ref({c.LABEL_ELASTIC_QUOTA: "team-a"}) == QuotaRef(None, "team-a")
    assert pod_quota_ref({c.LABEL_KOORD_QUOTA_NAME: "team-b"}) == QuotaRef(None, "team-b")
    assert pod_quota_ref({c.LABEL_ELASTIC_QUOTA: "a", c.LABEL_KOORD_QUOTA_NAME: "b"}) == QuotaRef(
        None, "a"
    )
    assert pod_quota_ref({"app": "x"}) is None
    assert pod_quota_ref(None) is None


def test_a_member_is_charged_by_its_own_label_else_its_podgroups() -> None:
    group = QuotaRef(None, "team-g")
    assert member_quota_ref({c.LABEL_ELASTIC_QUOTA: "team-a"}, group) == QuotaRef(None, "team-a")
    assert member_quota_ref({c.LABEL_KOORD_QUOTA_NAME: "team-k"}, group) == QuotaRef(None, "team-k")
    assert member_quota_ref({"app": "x"}, group) == group
    assert member_quota_ref(None, group) == group
    assert member_quota_ref({"app": "x"}, None) is None


def test_the_models_round_trip_in_camel_case() -> None:
    spec = ElasticQuotaSpec.model_validate({"min": {GPU: 1}, "minRunSeconds": 5})
    assert spec.to_api() == {"min": {GPU: 1}, "minRunSeconds": 5}
    status = ElasticQuotaStatus(used={GPU: "3"}, fair_share={GPU: "4"}, gangs_waiting=2)
    assert status.to_api() == {"used": {GPU: "3"}, "fairShare": {GPU: "4"}, "gangsWaiting": 2}


INVALID: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "min above max",
        quota({"min": {GPU: 6}, "max": {GPU: 5}}),
        "spec.min.nvidia.com/gpu",
        "lower min or raise max",
    ),
    (
        "guarantee above min",
        quota({"min": {GPU: 2}, "guarantee": {GPU: 3}}),
        "spec.guarantee.nvidia.com/gpu",
        "lower guarantee or raise min",
    ),
    (
        "guarantee outside min",
        quota({"guarantee": {"cpu": 1}}),
        "spec.guarantee.cpu",
        "lower guarantee or raise min",
    ),
    ("weight zero", quota({"weight": 0}), "spec.weight", "use an integer from 1"),
    ("weight huge", quota({"weight": 10**9}), "spec.weight", "use an integer from 1"),
    ("negative run time", quota({"minRunSeconds": -1}), "spec.minRunSeconds", "use seconds from 0"),
    (
        "bad strategy",
        quota({"queueingStrategy": "Random"}),
        "spec.queueingStrategy",
        "'Priority' or 'StrictFIFO'",
    ),
    ("bad parent", quota({"parent": "a/b/c"}), "spec.parent", "write `name`"),
    (
        "parent is itself",
        quota({"parent": "ml/team-a"}),
        "spec.parent",
        "name another quota or none",
    ),
    ("unknown field", quota({"mins": {GPU: 1}}), "spec.mins", "remove it"),
    ("negative quantity", quota({"min": {GPU: "-1"}}), "spec.min.nvidia.com/gpu", "must be >= 0"),
    ("bad quantity", quota({"max": {"cpu": "lots"}}), "spec.max.cpu", "like '500m'"),
    ("spec not an object", quota([1]), "spec", "must be an object"),
    ("no namespace", quota(namespace=""), "metadata.namespace", "ElasticQuota is namespaced"),
    ("no name", quota(name=""), "metadata.name", "name the quota"),
    (
        "bad is-parent",
        quota(labels={c.LABEL_KOORD_QUOTA_IS_PARENT: "yes"}),
        c.LABEL_KOORD_QUOTA_IS_PARENT,
        'use "true" or "false"',
    ),
    (
        "bad allow-lent",
        quota(labels={c.LABEL_KOORD_ALLOW_LENT: "no"}),
        c.LABEL_KOORD_ALLOW_LENT,
        'use "true" or "false"',
    ),
    (
        "bad shared-weight",
        quota(annotations={c.ANNOTATION_KOORD_SHARED_WEIGHT: "{cpu: 4}"}),
        c.ANNOTATION_KOORD_SHARED_WEIGHT,
        "JSON resource list",
    ),
    (
        "zero shared-weight",
        quota(annotations={c.ANNOTATION_KOORD_SHARED_WEIGHT: '{"cpu": 0}'}),
        c.ANNOTATION_KOORD_SHARED_WEIGHT,
        "give a positive weight",
    ),
    (
        "weight and shared-weight",
        quota({"weight": 2}, annotations={c.ANNOTATION_KOORD_SHARED_WEIGHT: '{"cpu": 1}'}),
        "spec.weight",
        "keep one of the two",
    ),
    (
        "parents disagree",
        quota({"parent": "org-a"}, labels={c.LABEL_KOORD_QUOTA_PARENT: "org-b"}),
        "spec.parent",
        "keep one of the two",
    ),
    (
        "guarantee against allow-lent",
        quota({"min": {GPU: 2}, "guarantee": {GPU: 1}}, labels={c.LABEL_KOORD_ALLOW_LENT: "false"}),
        "spec.guarantee",
        "drop one of the two",
    ),
]


@pytest.mark.parametrize(
    ("body", "field", "fix"), [case[1:] for case in INVALID], ids=[case[0] for case in INVALID]
)
def test_each_invalid_quota_is_refused_naming_the_field_and_the_fix(
    body: dict[str, Any], field: str, fix: str
) -> None:
    with pytest.raises(ElasticQuotaError) as refused:
        normalize(body)
    matching = [error for error in refused.value.errors if field in error.split(":")[0]]
    assert matching, refused.value.errors
    assert any(fix in error for error in matching), matching


def test_every_problem_is_reported_at_once() -> None:
    body = quota(
        {"min": {GPU: 6}, "max": {GPU: 5}, "weight": 0, "parent": "x/y/z", "extra": 1},
        labels={c.LABEL_KOORD_ALLOW_LENT: "maybe"},
    )
    errors = elastic_quota_errors(body)
    fields = sorted(error.split(":")[0] for error in errors)
    assert fields == sorted(
        [
            "spec.min.nvidia.com/gpu",
            "spec.weight",
            "spec.parent",
            "spec.extra",
            f'metadata.labels["{c.LABEL_KOORD_ALLOW_LENT}"]',
        ]
    )


def test_a_valid_quota_has_no_errors() -> None:
    assert elastic_quota_errors(quota({"min": {GPU: 1}, "max": {GPU: 2}, "weight": 2})) == []


def test_an_update_is_checked_only_when_what_normalize_reads_changes() -> None:
    """An object stored before the webhook (say under scheduler-plugins' CRD) can still get a
    label or a finalizer; a change to its spec or its Koordinator keys is checked whole."""
    stored = quota({"min": {GPU: 6}, "max": {GPU: 5}})
    relabelled = quota({"min": {GPU: 6}, "max": {GPU: 5}}, labels={"team": "a"})
    assert elastic_quota_update_errors(stored, relabelled) == []
    assert elastic_quota_update_errors(None, relabelled) == elastic_quota_errors(relabelled) != []
    respecced = quota({"min": {GPU: 6}, "max": {GPU: 4}})
    assert [e.split(":")[0] for e in elastic_quota_update_errors(stored, respecced)] == [
        "spec.min.nvidia.com/gpu"
    ]
    koordinator = quota(
        {"min": {GPU: 6}, "max": {GPU: 5}}, labels={c.LABEL_KOORD_QUOTA_PARENT: "bad/name/x"}
    )
    assert len(elastic_quota_update_errors(stored, koordinator)) == 2


def test_koordinators_runtime_annotations_and_internal_quotas_are_never_refused() -> None:
    """Koordinator rewrites its runtime annotations on every quota and keeps its system and
    default quotas with a max near 2^63: a webhook that refused either would block it."""
    stored = quota({"min": {GPU: 6}, "max": {GPU: 5}}, api_version=KOORD)
    rewritten = quota(
        {"min": {GPU: 6}, "max": {GPU: 5}},
        annotations={f"{c.KOORD_QUOTA_PREFIX}/runtime": '{"nvidia.com/gpu": "5"}'},
        api_version=KOORD,
    )
    assert elastic_quota_update_errors(stored, rewritten) == []
    huge = "9223372036854775807"
    for name in c.KOORD_INTERNAL_QUOTAS:
        system = quota({"max": {"cpu": huge, "memory": huge}}, name=name, api_version=KOORD)
        assert koordinator_internal(system)
        assert elastic_quota_errors(system) != []  # not in the tree: too large to reckon with
        assert elastic_quota_update_errors(None, system) == []
    ours = quota({"max": {"cpu": huge}}, name="koordinator-system-quota")
    assert not koordinator_internal(ours)
    assert elastic_quota_update_errors(None, ours) != []
