"""Bad input on the real control plane: every malformed PodGroup is refused, naming its field.

Each case is refused either by the CRD schema (the apiserver's own message) or by the operator's
validating webhook (ours, with the fix); either way the message must name the field, nothing is
stored, and the status controller keeps working afterwards.
"""

from __future__ import annotations

from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import NAMESPACES, PODGROUPS, ApiError, KubeClient, Request
from tests.builders import podgroup
from tests.waiting import wait_for

BAD_SPECS: list[tuple[str, dict[str, Any], str]] = [
    ("minMember missing", {}, "minMember"),
    ("minMember zero", {"minMember": 0}, "minMember"),
    ("minMember negative", {"minMember": -3}, "minMember"),
    ("minMember a string", {"minMember": "three"}, "minMember"),
    ("minMember a numeric string", {"minMember": "3"}, "minMember"),
    ("minMember a float", {"minMember": 2.5}, "minMember"),
    ("minMember a bool", {"minMember": True}, "minMember"),
    ("minMember a list", {"minMember": [3]}, "minMember"),
    ("minResources a string", {"minMember": 1, "minResources": "cpu=2"}, "minResources"),
    ("minResources a list", {"minMember": 1, "minResources": ["cpu"]}, "minResources"),
    ("malformed quantity", {"minMember": 1, "minResources": {"cpu": "two"}}, "minResources.cpu"),
    (
        "negative quantity",
        {"minMember": 1, "minResources": {"memory": "-1Gi"}},
        "minResources.memory",
    ),
    (
        "negative integer quantity",
        {"minMember": 1, "minResources": {"cpu": -2}},
        "minResources.cpu",
    ),
    ("bad suffix", {"minMember": 1, "totalResources": {"memory": "4GB"}}, "totalResources.memory"),
    (
        "quantity an object",
        {"minMember": 1, "totalResources": {"cpu": {"v": 1}}},
        "totalResources.cpu",
    ),
    (
        "total below minimum",
        {"minMember": 1, "minResources": {"cpu": 4}, "totalResources": {"cpu": 2}},
        "totalResources",
    ),
    ("timeout zero", {"minMember": 1, "scheduleTimeoutSeconds": 0}, "scheduleTimeoutSeconds"),
    (
        "timeout a string",
        {"minMember": 1, "scheduleTimeoutSeconds": "60s"},
        "scheduleTimeoutSeconds",
    ),
    ("policy a string", {"minMember": 1, "policy": "RestartGang"}, "policy"),
    ("unknown policy action", {"minMember": 1, "policy": {"action": "Reboot"}}, "policy.action"),
    ("negative maxRestarts", {"minMember": 1, "policy": {"maxRestarts": -1}}, "policy.maxRestarts"),
    ("unknown mode", {"minMember": 1, "mode": "Loose"}, "mode"),
    ("gangGroup not a list", {"minMember": 1, "gangGroup": "ns/name"}, "gangGroup"),
    (
        "gangGroup entry without namespace",
        {"minMember": 1, "gangGroup": ["name-only"]},
        "gangGroup",
    ),
]

POISON_NUMBERS: list[tuple[str, dict[str, Any], str]] = [
    # The poison values of issues 9 and 11: each once broke the operator for everyone.
    (
        "timeout beyond datetime arithmetic",
        {"minMember": 1, "scheduleTimeoutSeconds": 300_000_000_000},
        "spec.scheduleTimeoutSeconds",
    ),
    (
        "backoff cap beyond datetime arithmetic",
        {"minMember": 1, "policy": {"maxBackoffSeconds": 1_000_000_000_000}},
        "spec.policy.maxBackoffSeconds",
    ),
    (
        "backoff beyond a year",
        {"minMember": 1, "policy": {"backoffSeconds": 31_536_001}},
        "spec.policy.backoffSeconds",
    ),
    (
        "gang group of 1,000 PodGroups",
        {"minMember": 1, "gangGroup": [f"ns/g{i}" for i in range(1000)]},
        "spec.gangGroup",
    ),
    ("minMember beyond any cluster", {"minMember": 10_000_000}, "spec.minMember"),
    ("maxRestarts", {"minMember": 1, "policy": {"maxRestarts": 1001}}, "spec.policy.maxRestarts"),
    (
        "integer quantity beyond int64 milli-units",
        {"minMember": 1, "minResources": {"cpu": 10**17}},
        "spec.minResources.cpu",
    ),
    (
        "65 resource names",
        {"minMember": 1, "totalResources": {f"example.com/r{i}": 1 for i in range(65)}},
        "spec.totalResources",
    ),
]
"""Refused by the CRD schema itself (`maximum`, `maxItems`), before any webhook."""

BAD_SPECS += POISON_NUMBERS
BAD_SPECS.append(
    # A pattern cannot compare magnitudes: the string form is the webhook's to refuse.
    (
        "string quantity 1e30",
        {"minMember": 1, "totalResources": {"cpu": "1e30"}},
        "spec.totalResources.cpu",
    )
)

SCHEMA_REFUSALS = (
    "less than or equal to",
    "should have at most 64 items",
    "should have at most 64 properties",
)
"""The apiserver's own words for a broken `maximum`, `maxItems` or `maxProperties`."""


@pytest.mark.parametrize(
    ("case", "spec", "field"), BAD_SPECS, ids=[case for case, _, _ in BAD_SPECS]
)
async def test_malformed_podgroup_is_refused_naming_the_field(
    kube: KubeClient, operator: Any, namespace: str, case: str, spec: dict[str, Any], field: str
) -> None:
    body = podgroup("bad", namespace)
    body["spec"] = spec
    del body["metadata"]["uid"]
    with pytest.raises(ApiError) as refused:
        await kube.create(PODGROUPS, body, namespace)
    assert refused.value.status in (400, 422), refused.value
    assert field in refused.value.message, (
        f"{case}: message does not name {field}: {refused.value.message}"
    )
    with pytest.raises(ApiError) as missing:
        await kube.get(PODGROUPS, "bad", namespace)
    assert missing.value.not_found


async def test_webhook_reports_every_problem_at_once(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    body = podgroup("many", namespace)
    body["spec"] = {
        "minMember": 1,
        "minResources": {"cpu": "1e30"},
        "totalResources": {"memory": "1e30"},
    }
    with pytest.raises(ApiError) as refused:
        await kube.create(PODGROUPS, body, namespace)
    assert "spec.minResources.cpu: '1e30' is too large" in refused.value.message
    assert "spec.totalResources.memory: '1e30' is too large" in refused.value.message
    assert "at most 9223372036854775.807" in refused.value.message


async def test_a_provisioning_class_annotation_that_names_no_class_is_refused(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    body = podgroup("asks", namespace)
    body["metadata"]["annotations"] = {c.ANNOTATION_PROVISIONING_CLASS: "best effort"}
    del body["metadata"]["uid"]
    with pytest.raises(ApiError) as refused:
        await kube.create(PODGROUPS, body, namespace)
    assert refused.value.status == 422, refused.value
    assert (
        f"metadata.annotations[{c.ANNOTATION_PROVISIONING_CLASS}]: 'best effort' is not a "
        "provisioning class" in refused.value.message
    )


@pytest.mark.parametrize(
    ("case", "spec", "field"), POISON_NUMBERS, ids=[case for case, _, _ in POISON_NUMBERS]
)
async def test_poison_numbers_are_refused_by_the_schema_itself(
    kube: KubeClient, crds: None, namespace: str, case: str, spec: dict[str, Any], field: str
) -> None:
    """The CRD's `maximum`/`maxItems` refuse them before any webhook runs, so a cluster where the
    operator is down (or runs without webhooks) is protected too."""
    body = podgroup("poison", namespace)
    body["spec"] = spec
    del body["metadata"]["uid"]
    with pytest.raises(ApiError) as refused:
        await kube.create(PODGROUPS, body, namespace)
    assert refused.value.status == 422, refused.value
    assert field in refused.value.message, refused.value.message
    assert any(words in refused.value.message for words in SCHEMA_REFUSALS), refused.value


async def test_unknown_fields_are_pruned_by_the_apiserver_not_stored(
    kube: KubeClient, crds: None, namespace: str
) -> None:
    """What a client other than kubectl gets on 1.20 (no server-side field validation): the
    schema closes every object, so a typo is dropped, never stored (docs/concepts/admission.md)."""
    body = podgroup("typo", namespace)
    body["spec"] = {"minMember": 2, "minMembers": 3, "policy": {"retries": 2}}
    del body["metadata"]["uid"]
    await kube.create(PODGROUPS, body, namespace)
    stored = await kube.get(PODGROUPS, "typo", namespace)
    assert stored["spec"] == {"minMember": 2, "policy": {}}


async def test_status_controller_survives_bad_input(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    # Only what this test causes counts: other tests' namespaces may be torn down meanwhile.
    start = operator.log_path.stat().st_size
    for _, spec, _ in BAD_SPECS:
        body = podgroup("bad", namespace)
        body["spec"] = spec
        with pytest.raises(ApiError):
            await kube.create(PODGROUPS, body, namespace)
    await kube.create(PODGROUPS, podgroup("good", namespace, min_member=2), namespace)

    async def pending() -> bool:
        group = await kube.get(PODGROUPS, "good", namespace)
        return group.get("status", {}).get("phase") == c.Phase.PENDING

    await wait_for(pending, timeout=10, message="the valid PodGroup to get a status")
    assert operator.process.poll() is None, operator.log_tail()
    with operator.log_path.open(errors="replace") as log:
        log.seek(start)
        during = log.read()
    assert "Traceback" not in during, during[-4000:]


PROTECTED = "kube-system"
"""The webhooks never intercept it (manifests.PROTECTED_NAMESPACES). Kubernetes 1.20 does not set
the `kubernetes.io/metadata.name` label they select on, so a test namespace given it is skipped
too, and intercepted again once it is relabelled: how these tests store what the webhook refuses
(as a cluster does whose PodGroups predate the operator's rules, or were made with it down)."""


async def test_an_update_that_leaves_a_stored_invalid_spec_alone_is_admitted(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    """A label, an owner reference or a finalizer's removal on a PodGroup whose spec the webhook
    would refuse was refused too, so such an object could not even be deleted by a controller
    that holds a finalizer on it. Updates that leave the spec as stored are admitted (as
    Kubernetes ratchets CRD validation); a change to the spec is checked whole."""
    name_label = "kubernetes.io/metadata.name"
    body = podgroup("stored", namespace)
    body["spec"] = {"minMember": 1, "minResources": {"cpu": 4}, "totalResources": {"cpu": 2}}
    del body["metadata"]["uid"]

    async def relabel(value: str, *, intercepted: bool) -> None:
        """Label the namespace, then wait until the API server's webhook matching (from its
        own namespace cache) agrees: a dry-run create of `body` refused or not."""
        await kube.patch(NAMESPACES, namespace, {"metadata": {"labels": {name_label: value}}})
        path = PODGROUPS.path(namespace)

        async def agrees() -> bool:
            request = Request("POST", path, params={"dryRun": "All"}, body=body)
            status, _ = await kube.transport.send(request)
            return (status >= 300) == intercepted

        await wait_for(agrees, 30, f"the webhook to {'' if intercepted else 'not '}intercept")

    await relabel(PROTECTED, intercepted=False)
    await kube.create(PODGROUPS, body, namespace)
    await relabel(namespace, intercepted=True)
    finalizer = {"metadata": {"finalizers": ["example.com/keep"], "labels": {"team": "a"}}}
    with pytest.raises(ApiError) as refused:
        await kube.patch(PODGROUPS, "stored", {"spec": {"minMember": 2}}, namespace)
    assert "spec.totalResources" in refused.value.message, refused.value.message
    await kube.patch(PODGROUPS, "stored", finalizer, namespace)
    await kube.patch(PODGROUPS, "stored", {"metadata": {"finalizers": None}}, namespace)
    stored = await kube.get(PODGROUPS, "stored", namespace)
    assert stored["metadata"]["labels"] == {"team": "a"}
    assert "finalizers" not in stored["metadata"]
    fixed = {"spec": {"totalResources": {"cpu": 4}}}
    await kube.patch(PODGROUPS, "stored", fixed, namespace)
