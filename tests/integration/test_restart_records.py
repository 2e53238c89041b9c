"""Restart records on the real control plane: a tenant that may write its PodGroup's status
cannot make the operator create pods, in its namespace or any other.

The tenant (tests/tenants.py: `edit` in its namespace plus `podgroups/status`) forges records
with its own client: pods in other namespaces, a privileged pod with no or a wrong signature,
and the operator's own record of a real restart with a body changed. Each time the operator
says it refused (a Warning Event), and then no such pod exists anywhere. An honest restart of
bare members, held half-way by a finalizer so that its record can be read, still recreates them.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import EVENTS, NAMESPACES, PODGROUPS, PODS, KubeClient
from tests.builders import privileged_pod
from tests.kube_helpers import (
    crash,
    create_group,
    gang_pods,
    group_status,
    pool,
    running_members,
    wait_group,
)
from tests.tenants import STATUS_WRITER, tenant
from tests.waiting import wait_for

HOLD = "example.com/hold"
"""A finalizer that keeps a deleted member, so the restart's record stays in the status."""
FORGED = "forged"
"""The name of every pod the tenant asks for."""


@pytest.fixture
async def other_namespace(kube: KubeClient) -> AsyncIterator[str]:
    """A second tenant's namespace."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    await kube.delete(NAMESPACES, name)


async def refused(kube: KubeClient, namespace: str, group: str, says: str) -> dict[str, Any]:
    """The operator's RestartRecordRefused Event on `group` whose message contains `says`."""

    async def probe() -> dict[str, Any] | None:
        events = (await kube.list(EVENTS, namespace))["items"]
        return next(
            (
                e
                for e in events
                if e.get("reason") == c.Reason.RESTART_RECORD_REFUSED
                and e["involvedObject"]["name"] == group
                and says in e.get("message", "")
            ),
            None,
        )

    event = await wait_for(probe, 30, f"a RestartRecordRefused Event saying {says!r}")
    assert event["type"] == c.EventType.WARNING
    return event


async def pods_named(kube: KubeClient, name: str) -> list[str]:
    """Every pod called `name`, in any namespace, as namespace/name."""
    items = (await kube.list(PODS, field_selector=f"metadata.name={name}"))["items"]
    return [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in items]


async def forge(tenant_kube: KubeClient, namespace: str, group: str, record: Any) -> None:
    """Write `record` into the group's status with the tenant's own client."""
    await tenant_kube.patch(PODGROUPS, group, {"status": record}, namespace, subresource="status")


async def test_forged_restart_records_are_refused_and_an_honest_restart_still_recreates(
    kube: KubeClient,
    kubeconfig: Path,
    operator: Any,
    namespace: str,
    other_namespace: str,
    tmp_path: Path,
) -> None:
    async with (
        pool(kube, count=2, cpu="4", memory="16Gi") as (_, pool_name),
        tenant(kube, kubeconfig, namespace, tmp_path, rules=STATUS_WRITER) as team,
    ):
        await create_group(
            kube,
            namespace,
            "g",
            min_member=2,
            policy={"action": "RestartGang", "backoffSeconds": 0, "maxRestarts": 5},
        )
        await gang_pods(kube, namespace, "g", 2, pool_name, group="g")
        await wait_group(kube, namespace, "g", phase=c.Phase.RUNNING, running=2)

        # An honest restart, held while g-1 (with a finalizer) is being deleted.
        members = sorted(
            await running_members(kube, namespace, "g"), key=lambda p: p["metadata"]["name"]
        )
        await kube.patch(PODS, "g-1", {"metadata": {"finalizers": [HOLD]}}, namespace)
        await crash(kube, namespace, members[0])

        async def record_written() -> dict[str, Any] | None:
            status = await group_status(kube, namespace, "g")
            return status if status.get("restartPodsDigest") else None

        record = await wait_for(record_written, 30, "the restart's signed record")
        assert sorted(b["metadata"]["name"] for b in record["restartPods"]) == ["g-0", "g-1"]
        await kube.patch(PODS, "g-1", {"metadata": {"finalizers": None}}, namespace)

        async def recreated() -> bool:
            fresh = await running_members(kube, namespace, "g")
            old = {p["metadata"]["uid"] for p in members}
            return len(fresh) == 2 and not {p["metadata"]["uid"] for p in fresh} & old

        await wait_for(recreated, 60, "both bare members recreated and running")
        await wait_group(kube, namespace, "g", phase=c.Phase.RUNNING, running=2, restarts=1)

        # (a) Pods in other namespaces, no signature.
        await forge(
            team,
            namespace,
            "g",
            {
                "restartPods": [
                    privileged_pod("kube-system", FORGED),
                    privileged_pod(other_namespace, FORGED),
                ]
            },
        )
        await refused(kube, namespace, "g", "is in namespace 'kube-system'")

        # (b) A privileged pod in its own namespace: no signature, then a wrong one.
        await forge(team, namespace, "g", {"restartPods": [privileged_pod(namespace, FORGED)]})
        await refused(kube, namespace, "g", "restartPodsDigest is missing")
        wrong = {
            "restartPods": [privileged_pod(namespace, FORGED)],
            "restartPodsDigest": "hmac-sha256:0",
        }
        await forge(team, namespace, "g", wrong)
        await refused(kube, namespace, "g", "restartPodsDigest does not match")

        # (c) The operator's own record of the restart above, one body changed: a new name (the
        # old ones are taken, so it would be created at once) and another image.
        changed = copy.deepcopy(record)
        body = changed["restartPods"][0]
        body["metadata"]["name"] = FORGED
        body["spec"]["containers"][0]["image"] = "evil"
        copied = {
            key: changed[key] for key in ("restartingUIDs", "restartPods", "restartPodsDigest")
        }
        await forge(team, namespace, "g", copied)
        event = await refused(kube, namespace, "g", f"{namespace}/g-1")
        assert f"pods to create: {namespace}/{FORGED}, {namespace}/g-1;" in event["message"]
        assert "does not match" in event["message"]

        # Every refusal was processed (its Event is out): no forged pod exists anywhere, the
        # record is cleared, and the gang runs on untouched.
        assert await pods_named(kube, FORGED) == []
        status = await group_status(kube, namespace, "g")
        assert not status.get("restartPods") and not status.get("restartingUIDs"), status
        assert status["restarts"] == 1 and status["phase"] == c.Phase.RUNNING, status
        images = {
            p["spec"]["containers"][0]["image"] for p in (await kube.list(PODS, namespace))["items"]
        }
        assert "evil" not in images
