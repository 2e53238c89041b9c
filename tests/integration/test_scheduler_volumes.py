"""Volume binding by the bundled scheduler on the real control plane (issue 10, item 2).

kube-controller-manager's PV controller runs here, so a claim the scheduler pointed a PV at is
really bound by it, as in a cluster with kube-scheduler. PVs and StorageClasses are cluster-
scoped: each test names its own and deletes them.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    CSI_NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODGROUPS,
    PODS,
    STORAGE_CLASSES,
    ApiError,
    Kind,
    KubeClient,
)
from podgroup_operator.devcluster.process import OperatorProcess
from tests.kube_helpers import (
    create_group,
    create_pod,
    gang_pods,
    pool,
    refusal,
    scheduling_attempts,
    wait_scheduling_attempts,
)
from tests.waiting import wait_for

HOSTNAME = "kubernetes.io/hostname"
NO_PROVISIONER = "kubernetes.io/no-provisioner"


@asynccontextmanager
async def cluster_scoped(kube: KubeClient, kind: Kind, body: dict[str, Any]) -> AsyncIterator[Any]:
    """Create a cluster-scoped object; delete it on the way out."""
    created = await kube.create(kind, body)
    try:
        yield created
    finally:
        try:
            await kube.delete(kind, body["metadata"]["name"])
        except ApiError as exc:
            if not exc.not_found:
                raise


def storage_class(name: str, mode: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": NO_PROVISIONER,
        "volumeBindingMode": mode,
    }


def volume(
    name: str, klass: str, labels: dict[str, str] | None = None, **source: Any
) -> dict[str, Any]:
    """A 1Gi ReadWriteOnce PV, retained; `source` is the volume's type and placement fields."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "storageClassName": klass,
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            **source,
        },
    }


def local_pv(name: str, klass: str, host: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [host]}]}
    return volume(
        name,
        klass,
        local={"path": f"/mnt/disks/{name}"},
        nodeAffinity={"required": {"nodeSelectorTerms": [term]}},
    )


def claim(name: str, klass: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": klass,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def mounting(claim_name: str) -> list[dict[str, Any]]:
    return [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]


async def gang_mounting(
    kube: KubeClient,
    namespace: str,
    name: str,
    selector: dict[str, str],
    *volumes: list[dict[str, Any]],
) -> None:
    """A PodGroup for our scheduler whose member `<name>-<i>` mounts `volumes[i]`, on nodes
    with these labels."""
    await create_group(kube, namespace, name, min_member=len(volumes))
    for i, mounts in enumerate(volumes):
        await create_pod(
            kube,
            namespace,
            f"{name}-{i}",
            group=name,
            requests={"cpu": "1"},
            scheduler=c.SCHEDULER_NAME,
            nodeSelector=selector,
            volumes=mounts,
        )


async def gang_of_one(
    kube: KubeClient, namespace: str, name: str, claim_name: str, selector: dict[str, str]
) -> None:
    """A PodGroup of one and its member `<name>-0`, mounting the claim."""
    await gang_mounting(kube, namespace, name, selector, mounting(claim_name))


async def node_of(kube: KubeClient, namespace: str, pod_name: str) -> str | None:
    pod = await kube.get(PODS, pod_name, namespace)
    return pod["spec"].get("nodeName")


async def test_wait_for_first_consumer_claim_binds_the_static_local_pv_and_its_pod_lands_there(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    suffix = uuid.uuid4().hex[:6]
    klass, pv_name = f"local-{suffix}", f"pv-{suffix}"
    async with (
        pool(kube, count=3, cpu="8", memory="16Gi") as (_, name),
        cluster_scoped(kube, STORAGE_CLASSES, storage_class(klass, "WaitForFirstConsumer")),
    ):
        host = f"{name}-2"  # not the first node best-fit would pick: the PV decides
        async with cluster_scoped(kube, PERSISTENT_VOLUMES, local_pv(pv_name, klass, host)):
            await kube.create(PERSISTENT_VOLUME_CLAIMS, claim("data", klass), namespace)
            await create_group(kube, namespace, "db", min_member=1)
            await gang_pods(kube, namespace, "db", 1, name, group="db", volumes=mounting("data"))

            async def pod_bound() -> str | None:
                pod = await kube.get(PODS, "db-0", namespace)
                return pod["spec"].get("nodeName")

            assert await wait_for(pod_bound, 30, "the pod to be bound") == host

            async def claim_bound() -> dict[str, Any] | None:
                pvc = await kube.get(PERSISTENT_VOLUME_CLAIMS, "data", namespace)
                return pvc if pvc.get("status", {}).get("phase") == "Bound" else None

            pvc = await wait_for(claim_bound, 30, "the claim to be Bound")
            assert pvc["spec"]["volumeName"] == pv_name
            pv = await kube.get(PERSISTENT_VOLUMES, pv_name)
            ref = pv["spec"]["claimRef"]
            assert (ref["namespace"], ref["name"], ref["uid"]) == (
                namespace,
                "data",
                pvc["metadata"]["uid"],
            )


async def test_an_unbound_immediate_claim_keeps_its_gang_waiting_naming_the_claim(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    klass = f"manual-{uuid.uuid4().hex[:6]}"
    async with (
        pool(kube, count=1, cpu="8", memory="16Gi") as (_, name),
        cluster_scoped(kube, STORAGE_CLASSES, storage_class(klass, "Immediate")),
    ):
        await kube.create(PERSISTENT_VOLUME_CLAIMS, claim("scratch", klass), namespace)
        await create_group(kube, namespace, "job", min_member=1)
        await gang_pods(kube, namespace, "job", 1, name, group="job", volumes=mounting("scratch"))

        message = (await refusal(kube, namespace, "job"))["message"]
        assert "waiting for PVC 'scratch' to be bound" in message, message
        refused = await scheduling_attempts(operator, "refused")
        await wait_scheduling_attempts(operator, "refused", since=refused, more=2)
        pod = await kube.get(PODS, "job-0", namespace)
        assert not pod["spec"].get("nodeName")


async def test_members_that_shun_each_other_each_get_a_local_pv_on_a_node_of_their_own(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    """Claims and hostname anti-affinity in one gang: the path where each member's volumes are
    checked live while the shape's closed domains grow member by member (interpod.MemberChecks).
    Node 1 holds two PVs and room for every member, so best fit alone would stack two members
    there; node 0 holds none."""
    suffix = uuid.uuid4().hex[:6]
    klass = f"local-{suffix}"
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "shard"}}, "topologyKey": HOSTNAME}
            ]
        }
    }
    async with (
        pool(kube, count=4, cpu="8", memory="16Gi") as (_, name),
        cluster_scoped(kube, STORAGE_CLASSES, storage_class(klass, "WaitForFirstConsumer")),
        contextlib.AsyncExitStack() as volumes,
    ):
        hosts = {f"pv-{suffix}-{i}": f"{name}-{n}" for i, n in enumerate((1, 1, 2, 3))}
        for pv_name, host in hosts.items():
            await volumes.enter_async_context(
                cluster_scoped(kube, PERSISTENT_VOLUMES, local_pv(pv_name, klass, host))
            )
        await create_group(kube, namespace, "shards", min_member=3)
        for i in range(3):
            await kube.create(PERSISTENT_VOLUME_CLAIMS, claim(f"data-{i}", klass), namespace)
            await create_pod(
                kube,
                namespace,
                f"shards-{i}",
                group="shards",
                labels={"app": "shard"},
                requests={"cpu": "1"},
                scheduler=c.SCHEDULER_NAME,
                nodeSelector={"pool": name},
                affinity=anti,
                volumes=mounting(f"data-{i}"),
            )

        async def placed() -> tuple[list[str], dict[str, str]] | None:
            pods = [await kube.get(PODS, f"shards-{i}", namespace) for i in range(3)]
            pvcs = [
                await kube.get(PERSISTENT_VOLUME_CLAIMS, f"data-{i}", namespace) for i in range(3)
            ]
            if not all(p["spec"].get("nodeName") for p in pods) or any(
                p.get("status", {}).get("phase") != "Bound" for p in pvcs
            ):
                return None
            volumes = {p["metadata"]["name"]: p["spec"]["volumeName"] for p in pvcs}
            return [p["spec"]["nodeName"] for p in pods], volumes

        nodes, volume_of = await wait_for(placed, 60, "every member bound, and its claim")
        assert sorted(nodes) == [f"{name}-1", f"{name}-2", f"{name}-3"], nodes
        for i, node in enumerate(nodes):
            assert hosts[volume_of[f"data-{i}"]] == node, (volume_of, nodes)


async def test_a_bound_claims_pv_zone_label_keeps_its_pod_in_that_zone(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    """A PV with a zone label and no node affinity (as older cloud-disk PVs are), bound to the
    pod's claim: the pod goes to a node of that zone, as kube-scheduler's VolumeZone sends it,
    although packing alone would pick the fuller node of the other zone."""
    suffix = uuid.uuid4().hex[:6]
    klass, pv_name, zone = f"disk-{suffix}", f"pv-{suffix}", "topology.kubernetes.io/zone"
    shared = {"shared": namespace}
    pv = volume(pv_name, klass, {zone: "b"}, hostPath={"path": f"/mnt/disks/{pv_name}"})
    async with (
        pool(kube, count=1, cpu="8", memory="16Gi", labels={**shared, zone: "a"}) as (a, _),
        pool(kube, count=1, cpu="8", memory="16Gi", labels={**shared, zone: "b"}) as (b, _),
        cluster_scoped(kube, STORAGE_CLASSES, storage_class(klass, "Immediate")),
        cluster_scoped(kube, PERSISTENT_VOLUMES, pv),
    ):
        node_a, node_b = a.node_names[0], b.node_names[0]
        await create_pod(kube, namespace, "filler", node=node_a, requests={"cpu": "6"})
        body = claim("data", klass)
        body["spec"]["volumeName"] = pv_name
        await kube.create(PERSISTENT_VOLUME_CLAIMS, body, namespace)

        async def claim_bound() -> bool:
            pvc = await kube.get(PERSISTENT_VOLUME_CLAIMS, "data", namespace)
            return pvc.get("status", {}).get("phase") == "Bound"

        await wait_for(claim_bound, 30, "the claim to be Bound")
        await gang_of_one(kube, namespace, "db", "data", shared)
        bound = await wait_for(lambda: node_of(kube, namespace, "db-0"), 30, "the pod to be bound")
        assert bound == node_b


def csi_pv(name: str, klass: str, driver: str) -> dict[str, Any]:
    return volume(name, klass, csi={"driver": driver, "volumeHandle": f"handle-{name}"})


def csi_node(name: str, driver: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": [{"name": driver, "nodeID": name, "allocatable": {"count": count}}]},
    }


@asynccontextmanager
async def csi_pair(
    kube: KubeClient, namespace: str, volumes: int, klass: str, driver: str
) -> AsyncIterator[tuple[str, str]]:
    """Two nodes labelled `shared: <namespace>` whose CSINodes let each attach one volume of
    `driver`, and `volumes` PVs of it, each bound to claim `data-<i>`: yields the two nodes'
    names once the claims are Bound, and deletes what it made on the way out."""
    shared = {"shared": namespace}
    suffix = uuid.uuid4().hex[:6]
    async with contextlib.AsyncExitStack() as stack:
        a, _ = await stack.enter_async_context(
            pool(kube, count=1, cpu="8", memory="16Gi", labels=shared)
        )
        b, _ = await stack.enter_async_context(
            pool(kube, count=1, cpu="8", memory="16Gi", labels=shared)
        )
        made = [
            (STORAGE_CLASSES, storage_class(klass, "Immediate")),
            (CSI_NODES, csi_node(a.node_names[0], driver, 1)),
            (CSI_NODES, csi_node(b.node_names[0], driver, 1)),
            *(
                (PERSISTENT_VOLUMES, csi_pv(f"pv-{suffix}-{i}", klass, driver))
                for i in range(volumes)
            ),
        ]
        for kind, body in made:
            await stack.enter_async_context(cluster_scoped(kube, kind, body))
        for i in range(volumes):
            body = claim(f"data-{i}", klass)
            body["spec"]["volumeName"] = f"pv-{suffix}-{i}"
            await kube.create(PERSISTENT_VOLUME_CLAIMS, body, namespace)

        async def claims_bound() -> bool:
            items = (await kube.list(PERSISTENT_VOLUME_CLAIMS, namespace))["items"]
            bound = [x for x in items if x["status"].get("phase") == "Bound"]
            return len(bound) == volumes

        await wait_for(claims_bound, 30, "the claims to be Bound")
        yield a.node_names[0], b.node_names[0]


async def filler(kube: KubeClient, namespace: str, node: str, claim_name: str) -> None:
    """A pod of 6 cpu put on `node` directly (no scheduler), mounting the claim: the node is
    then fuller than its pair, so packing alone would send the next gang there."""
    await create_pod(
        kube, namespace, "filler", node=node, requests={"cpu": "6"}, volumes=mounting(claim_name)
    )


async def test_a_node_at_its_csi_attach_limit_takes_no_more_of_that_drivers_volumes(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    """Each node's CSINode lets it attach one volume of the driver. A pod on node a already
    mounts one, so the first gang goes to node b, though packing alone would pick the fuller
    node a (as kube-scheduler's NodeVolumeLimits sends it); the second gang waits, saying the
    nodes exceed their volume count."""
    suffix = uuid.uuid4().hex[:6]
    klass, driver = f"csi-{suffix}", f"disk-{suffix}.csi.example.com"
    shared = {"shared": namespace}
    async with csi_pair(kube, namespace, 3, klass, driver) as (node_a, node_b):
        await filler(kube, namespace, node_a, "data-0")
        await gang_of_one(kube, namespace, "first", "data-1", shared)
        bound = await wait_for(lambda: node_of(kube, namespace, "first-0"), 30, "first-0 bound")
        assert bound == node_b
        await gang_of_one(kube, namespace, "second", "data-2", shared)
        message = (await refusal(kube, namespace, "second"))["message"]
        assert "2 node(s) exceed max volume count" in message, message
        assert not await node_of(kube, namespace, "second-0")


async def test_a_class_made_after_a_running_pods_claim_counts_it_and_its_deletion_frees_it(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    """A running pod on node a mounts a claim still waiting for a class that does not exist
    yet: it counts against no driver's limit. Once the class comes, naming the driver as its
    provisioner, the claim counts against node a's limit of one, so the next gang's volume of
    that driver goes to node b, though packing would pick the fuller node a. Once the class
    is deleted, the claim counts nothing again, and the gang after goes to node a."""
    suffix = uuid.uuid4().hex[:6]
    klass, late, sync = f"csi-{suffix}", f"late-{suffix}", f"sync-{suffix}"
    driver = f"disk-{suffix}.csi.example.com"
    shared = {"shared": namespace}
    provisioned = storage_class(late, "WaitForFirstConsumer")
    provisioned["provisioner"] = driver
    async with csi_pair(kube, namespace, 2, klass, driver) as (node_a, node_b):
        await kube.create(PERSISTENT_VOLUME_CLAIMS, claim("pending", late), namespace)
        await filler(kube, namespace, node_a, "pending")
        # The operator has seen the filler once a gang packs beside it.
        await gang_mounting(kube, namespace, "early", shared, [])
        bound = await wait_for(lambda: node_of(kube, namespace, "early-0"), 30, "early-0 bound")
        assert bound == node_a
        async with cluster_scoped(kube, STORAGE_CLASSES, provisioned):
            # Classes come in order on one watch: once the operator knows the class made after
            # `late`, it knows `late`. A claim of an unknown class waits as Immediate ones do.
            follower = storage_class(sync, "WaitForFirstConsumer")
            async with cluster_scoped(kube, STORAGE_CLASSES, follower):
                await kube.create(PERSISTENT_VOLUME_CLAIMS, claim("sync", sync), namespace)
                await gang_of_one(kube, namespace, "sync", "sync", shared)

                async def class_seen() -> bool:
                    message = (await refusal(kube, namespace, "sync"))["message"]
                    return "2 node(s) didn't find available persistent volumes" in message

                await wait_for(class_seen, 30, f"the operator to know class {sync}")
            await gang_of_one(kube, namespace, "first", "data-0", shared)
            bound = await wait_for(lambda: node_of(kube, namespace, "first-0"), 30, "first bound")
            assert bound == node_b
        await gang_of_one(kube, namespace, "second", "data-1", shared)
        bound = await wait_for(lambda: node_of(kube, namespace, "second-0"), 30, "second bound")
        assert bound == node_a


EBS_LIMIT_KEY = "attachable-volumes-aws-ebs"


def ebs(volume_id: str) -> list[dict[str, Any]]:
    return [{"name": "disk", "awsElasticBlockStore": {"volumeID": volume_id}}]


async def gang_of_ebs(
    kube: KubeClient, namespace: str, name: str, volume_ids: list[str], selector: dict[str, str]
) -> None:
    """A PodGroup whose member `<name>-<i>` mounts EBS volume `volume_ids[i]` inline."""
    await gang_mounting(kube, namespace, name, selector, *(ebs(v) for v in volume_ids))


async def test_inline_ebs_volumes_keep_their_mounts_apart_and_their_nodes_under_the_limit(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    """Two nodes that attach two EBS volumes each (their allocatable says so); a pod on the
    fuller node a already mounts vol-a. As kube-scheduler's VolumeRestrictions and EBSLimits
    would: a gang whose two members mount one volume is split over both nodes; the next gang's
    new volume goes to b, as a is at its limit; then a gang mounting a volume in use on both
    nodes waits on the conflict, and one with yet another volume on the limit. Once the pair's
    pods are deleted, the gang that waited on the conflict is placed."""
    limited = {"shared": namespace}
    async with (
        pool(kube, count=1, cpu="8", labels=limited, extended={EBS_LIMIT_KEY: "2"}) as (a, _),
        pool(kube, count=1, cpu="8", labels=limited, extended={EBS_LIMIT_KEY: "2"}) as (b, _),
    ):
        node_a, node_b = a.node_names[0], b.node_names[0]
        await create_pod(
            kube, namespace, "filler", node=node_a, requests={"cpu": "5"}, volumes=ebs("vol-a")
        )
        await gang_of_ebs(kube, namespace, "pair", ["vol-shared", "vol-shared"], limited)

        async def both_bound() -> set[str | None] | None:
            nodes = {await node_of(kube, namespace, f"pair-{i}") for i in range(2)}
            return None if None in nodes else nodes

        assert await wait_for(both_bound, 30, "the pair bound") == {node_a, node_b}
        await gang_of_ebs(kube, namespace, "third", ["vol-c"], limited)
        bound = await wait_for(lambda: node_of(kube, namespace, "third-0"), 30, "third-0 bound")
        assert bound == node_b
        await gang_of_ebs(kube, namespace, "conflict", ["vol-shared"], limited)
        message = (await refusal(kube, namespace, "conflict"))["message"]
        assert "2 node(s) had no available disk" in message, message
        await gang_of_ebs(kube, namespace, "fourth", ["vol-d"], limited)
        message = (await refusal(kube, namespace, "fourth"))["message"]
        assert "2 node(s) exceed max volume count" in message, message
        assert not await node_of(kube, namespace, "conflict-0")
        assert not await node_of(kube, namespace, "fourth-0")
        # The pair goes: vol-shared is free on both nodes, and node a has room under its limit.
        await kube.delete(PODGROUPS, "pair", namespace)
        for i in range(2):
            await kube.delete(PODS, f"pair-{i}", namespace, grace_period_seconds=0)
        await wait_for(lambda: node_of(kube, namespace, "conflict-0"), 30, "conflict-0 bound")
