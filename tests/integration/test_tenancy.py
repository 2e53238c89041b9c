"""One tenant can never hold another's gang through the operator: each tenant a namespace with a
ServiceAccount bound to `edit` (plus, for some, PodGroup rules), every object made with the
tenant's own token (tests/tenants.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    EVENTS,
    NAMESPACES,
    PODGROUPS,
    PODS,
    ApiError,
    Kind,
    KubeClient,
)
from tests.builders import podgroup
from tests.conftest import ClusterUnderTest
from tests.deploy_helpers import DEPLOY, render
from tests.kube_helpers import (
    create_group,
    create_pod,
    gang_pods,
    group_status,
    kubectl,
    kubectl_ok,
    pool,
)
from tests.tenants import PODGROUP_WRITER, tenant, tenant_kubeconfig
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("operator")

TENANT_ROLES = "podgroup-operator-tenant-"
"""The ClusterRoles deploy/ gives tenants (deploy/base/tenant-roles.yaml)."""


@contextlib.asynccontextmanager
async def namespaces(kube: KubeClient, count: int) -> AsyncIterator[list[str]]:
    """`count` fresh namespaces, one per tenant, deleted afterwards."""
    names = [f"t-{uuid.uuid4().hex[:10]}" for _ in range(count)]
    for name in names:
        await kube.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
    try:
        yield names
    finally:
        for name in names:
            with contextlib.suppress(ApiError):
                await kube.delete(NAMESPACES, name)


def bound(pods: list[dict[str, Any]]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods if (p.get("spec") or {}).get("nodeName"))


async def pods_of(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    return list((await kube.list(PODS, namespace))["items"])


@contextlib.asynccontextmanager
async def churn(
    make: Callable[[int], Awaitable[dict[str, Any]]], kube: KubeClient
) -> AsyncIterator[None]:
    """Create a pod with `make(i)` and delete it, once a second, until the block ends: every
    deletion makes the waiting gangs due."""

    async def loop() -> None:
        i = 0
        while True:
            created = await make(i)
            await asyncio.sleep(0.5)
            meta = created["metadata"]
            with contextlib.suppress(ApiError):
                await kube.delete(PODS, meta["name"], meta["namespace"], uid=meta["uid"])
            await asyncio.sleep(0.5)
            i += 1

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def unschedulable_message(
    kube: KubeClient, namespace: str, group: str, reason: str | None = None, saying: str = ""
) -> str:
    """The group's Unschedulable=True message once it has `reason` (any, if None) and says
    `saying`."""

    async def probe() -> str | None:
        conditions = (await group_status(kube, namespace, group)).get("conditions") or []
        cond = next((x for x in conditions if x["type"] == c.ConditionType.UNSCHEDULABLE), None)
        if not cond or cond["status"] != c.ConditionStatus.TRUE or saying not in cond["message"]:
            return None
        return str(cond["message"]) if reason in (None, cond["reason"]) else None

    return await wait_for(probe, 30, f"{namespace}/{group} to be refused with {reason} {saying!r}")


async def says_nothing_of(kube: KubeClient, namespace: str, group: str, other: str) -> None:
    """Neither the group's status nor any Event in its namespace names namespace `other`."""
    status = await group_status(kube, namespace, group)
    assert f"{other}/" not in json.dumps(status), status
    events = (await kube.list(EVENTS, namespace))["items"]
    assert not [e["message"] for e in events if f"{other}/" in (e.get("message") or "")]


async def placed_whole(kube: KubeClient, namespace: str, group: str, count: int) -> None:
    async def probe() -> bool:
        return (
            len(bound(await pods_of(kube, namespace))) >= count
            and (await group_status(kube, namespace, group)).get("phase") == c.Phase.RUNNING
        )

    await wait_for(probe, 30, f"{namespace}/{group}'s {count} members to be bound and Running")


async def test_a_cross_namespace_gang_group_does_not_hold_the_other_tenants_gang(
    kube: KubeClient, cluster: ClusterUnderTest, tmp_path: Path
) -> None:
    """Tenant a's group, older and short of pods, lists tenant b's in gangGroup while a creates
    and deletes one of its members every second: b's gang fits on its own and runs, and
    nothing of a's shows in b's status or Events; a's waiting member says which entry b has not
    consented to."""
    async with (
        namespaces(kube, 2) as (a, b),
        pool(kube, count=1, cpu="4", memory="16Gi") as (_, node_pool),
        tenant(kube, cluster.kubeconfig, a, tmp_path, rules=PODGROUP_WRITER) as tenant_a,
        tenant(kube, cluster.kubeconfig, b, tmp_path, rules=PODGROUP_WRITER) as tenant_b,
    ):
        hold = podgroup("hold", a, min_member=3, gangGroup=[f"{a}/hold", f"{b}/fits"])
        created = kubectl(
            tenant_kubeconfig(tmp_path, a), "create", "-f", "-", stdin=json.dumps(hold)
        )
        assert created.returncode == 0, created.stderr
        assert (
            f"Warning: spec.gangGroup[1]: {b}/fits is a PodGroup of another namespace; it counts "
            f"only once its own gangGroup lists {a}/hold" in created.stderr
        )
        (held,) = await gang_pods(tenant_a, a, "h", 1, node_pool, group="hold")

        async def churned(i: int) -> dict[str, Any]:
            return await create_pod(
                tenant_a,
                a,
                f"churn-{i}",
                group="hold",
                scheduler=c.SCHEDULER_NAME,
                requests={"cpu": "1"},
                nodeSelector={"pool": node_pool},
            )

        async with churn(churned, tenant_a):
            await create_group(tenant_b, b, "fits", min_member=2)
            await gang_pods(tenant_b, b, "f", 2, node_pool, group="fits")
            await placed_whole(kube, b, "fits", 2)
            message = await pod_unscheduled_message(
                kube, a, held["metadata"]["name"], saying="a PodGroup of another namespace"
            )
        assert (
            f"names {b}/fits, a PodGroup of another namespace that does not list {a}/hold back"
            in message
        )
        await says_nothing_of(kube, b, "fits", a)


async def pod_unscheduled_message(kube: KubeClient, namespace: str, name: str, saying: str) -> str:
    """The pod's PodScheduled=False message once it says `saying`."""

    async def probe() -> str | None:
        conditions = ((await kube.get(PODS, name, namespace)).get("status") or {}).get(
            "conditions"
        ) or []
        cond = next((x for x in conditions if x["type"] == c.PodConditionType.POD_SCHEDULED), None)
        return str(cond["message"]) if cond and saying in (cond.get("message") or "") else None

    return await wait_for(probe, 30, f"{namespace}/{name} to say {saying!r}")


async def test_a_koordinator_groups_annotation_of_a_tenant_without_podgroup_rights_holds_nobody(
    kube: KubeClient, cluster: ClusterUnderTest, tmp_path: Path
) -> None:
    """A tenant with plain `edit` (no PodGroup rights) names tenant b's group in Koordinator's
    `groups` annotation: the operator makes its PodGroup with that gangGroup, and b's gang still
    runs alone; the made group waits, naming the entry b has not consented to."""
    async with (
        namespaces(kube, 2) as (a, b),
        pool(kube, count=1, cpu="4", memory="16Gi") as (_, node_pool),
        tenant(kube, cluster.kubeconfig, a, tmp_path) as tenant_a,
        tenant(kube, cluster.kubeconfig, b, tmp_path, rules=PODGROUP_WRITER) as tenant_b,
    ):
        with pytest.raises(ApiError) as refused:
            await create_group(tenant_a, a, "direct", min_member=1)
        assert refused.value.forbidden
        annotations = {
            c.ANNOTATION_KOORD_NAME: "kh",
            c.ANNOTATION_KOORD_MIN_AVAILABLE: "3",
            c.ANNOTATION_KOORD_GROUPS: json.dumps([f"{a}/kh", f"{b}/fits"]),
        }

        async def churned(i: int) -> dict[str, Any]:
            return await create_pod(
                tenant_a,
                a,
                f"churn-{i}",
                annotations=annotations,
                scheduler=c.SCHEDULER_NAME,
                requests={"cpu": "1"},
                nodeSelector={"pool": node_pool},
            )

        for i in range(3):
            await churned(1000 + i)
        made = await wait_for(
            lambda: _group_or_none(kube, a, "kh"), 20, "the operator to make PodGroup kh"
        )
        assert made["spec"]["gangGroup"] == [f"{a}/kh", f"{b}/fits"]
        async with churn(churned, tenant_a):
            await create_group(tenant_b, b, "fits", min_member=2)
            await gang_pods(tenant_b, b, "f", 2, node_pool, group="fits")
            await placed_whole(kube, b, "fits", 2)
            message = await unschedulable_message(kube, a, "kh", c.Reason.INVALID_GANG_GROUP)
        assert (
            f"names {b}/fits, a PodGroup of another namespace that does not list {a}/kh back"
            in message
        )
        await says_nothing_of(kube, b, "fits", a)


async def _group_or_none(kube: KubeClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return await kube.get(PODGROUPS, name, namespace)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


async def test_gang_groups_of_two_tenants_that_list_each_other_start_together(
    kube: KubeClient, cluster: ClusterUnderTest, tmp_path: Path
) -> None:
    """Consent on both sides: each tenant lists the other's group, and the two start together
    once both have their members, not before."""
    async with (
        namespaces(kube, 2) as (a, b),
        pool(kube, count=1, cpu="4", memory="16Gi") as (_, node_pool),
        tenant(kube, cluster.kubeconfig, a, tmp_path, rules=PODGROUP_WRITER) as tenant_a,
        tenant(kube, cluster.kubeconfig, b, tmp_path, rules=PODGROUP_WRITER) as tenant_b,
    ):
        both = [f"{a}/left", f"{b}/right"]
        await create_group(tenant_a, a, "left", min_member=2, gangGroup=both)
        await create_group(tenant_b, b, "right", min_member=1, gangGroup=both)
        await gang_pods(tenant_a, a, "l", 2, node_pool, group="left")
        await unschedulable_message(kube, a, "left", saying=f"{b}/right has 0 member pod(s)")
        assert not bound(await pods_of(kube, a))
        await gang_pods(tenant_b, b, "r", 1, node_pool, group="right")
        await placed_whole(kube, a, "left", 2)
        await placed_whole(kube, b, "right", 1)


CLUSTER_ROLES = Kind("rbac.authorization.k8s.io", "v1", "clusterroles")


async def test_the_tenant_roles_allow_podgroups_and_never_their_status(
    kube: KubeClient, cluster: ClusterUnderTest, tmp_path: Path
) -> None:
    """deploy/'s tenant-edit role, bound alone in a namespace: PodGroups may be written there,
    never their status and never in another namespace; tenant-view reads only. ElasticQuotas
    both read and neither writes."""
    for role in render(DEPLOY / "base"):
        if role["kind"] == "ClusterRole" and role["metadata"]["name"].startswith(TENANT_ROLES):
            await kube.apply_json(CLUSTER_ROLES, role)
    async with (
        namespaces(kube, 2) as (a, b),
        tenant(kube, cluster.kubeconfig, a, tmp_path, cluster_roles=()) as editor,
        tenant(
            kube, cluster.kubeconfig, b, tmp_path, cluster_roles=(f"{TENANT_ROLES}view",)
        ) as viewer,
    ):
        # As docs/guides/security.md binds it (there for a group of users).
        kubectl_ok(
            cluster.kubeconfig,
            *("create", "rolebinding", "team-a-podgroups", "-n", a),
            "--clusterrole=podgroup-operator-tenant-edit",
            f"--serviceaccount={a}:tenant",
        )
        created = await wait_for(
            lambda: _created_or_none(editor, a, "mine"), 10, "the binding to take effect"
        )
        await editor.patch(PODGROUPS, "mine", {"spec": {"minMember": 2}}, namespace=a)
        with pytest.raises(ApiError) as status:
            await editor.patch_status(PODGROUPS, "mine", a, {"phase": "Running"})
        assert status.value.forbidden
        with pytest.raises(ApiError) as elsewhere:
            await create_group(editor, b, "theirs", min_member=1)
        assert elsewhere.value.forbidden
        assert [g["metadata"]["name"] for g in (await viewer.list(PODGROUPS, b))["items"]] == []
        with pytest.raises(ApiError) as read_only:
            await create_group(viewer, b, "theirs", min_member=1)
        assert read_only.value.forbidden
        # ElasticQuotas: read in their namespace, never written (an administrator's to set).
        quotas = Kind(c.GROUP, c.VERSION, c.ELASTIC_QUOTA_PLURAL)
        quota = {
            "apiVersion": c.API_VERSION,
            "kind": c.ELASTIC_QUOTA_KIND,
            "metadata": {"name": "team"},
            "spec": {"min": {"cpu": "1"}},
        }
        await kube.create(quotas, quota, a)
        assert [q["metadata"]["name"] for q in (await editor.list(quotas, a))["items"]] == ["team"]
        assert (await viewer.list(quotas, b))["items"] == []
        for who, where in ((editor, a), (viewer, b)):
            with pytest.raises(ApiError) as not_theirs:
                await who.create(quotas, {**quota, "metadata": {"name": "more"}}, where)
            assert not_theirs.value.forbidden
        assert created["metadata"]["namespace"] == a


async def _created_or_none(kube: KubeClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The PodGroup created as `kube`, or None while it is forbidden (RBAC not yet in force)."""
    try:
        return await create_group(kube, namespace, name, min_member=1)
    except ApiError as exc:
        if exc.forbidden:
            return None
        raise
