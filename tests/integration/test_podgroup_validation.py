"""Bad input on the real control plane: every malformed PodGroup is refused, naming its field.

Each case is refused either by the CRD schema (the apiserver's own message) or by the operator's
validating webhook (ours, with the fix); either way the message must name the field, nothing is
stored, and the status controller keeps working afterwards.
"""

from __future__ import annotations

from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import PODGROUPS, ApiError, KubeClient
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
    ("unknown field", {"minMember": 1, "minMembers": 2}, "spec.minMembers"),
    (
        "unknown nested field",
        {"minMember": 1, "policy": {"action": "RestartGang", "retries": 2}},
        "policy.retries",
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
        "colour": "red",
        "minResources": {"cpu": 4},
        "totalResources": {"cpu": 2},
    }
    with pytest.raises(ApiError) as refused:
        await kube.create(PODGROUPS, body, namespace)
    assert "spec.colour: unknown field" in refused.value.message
    assert "spec.totalResources: must cover minResources" in refused.value.message


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
