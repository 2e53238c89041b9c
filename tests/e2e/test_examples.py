"""Every example in examples/ works as its comments say, applied with kubectl.

The README and the demo point users at these files; a broken example is a broken promise.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import NAMESPACES, NODES, PODGROUPS, PODS, KubeClient
from podgroup_operator.devcluster.fabric import FABRIC_LABEL_PREFIX, parse_fabric
from podgroup_operator.devcluster.simnodes import NodePool, SimCluster
from tests.conftest import REPO
from tests.kube_helpers import group_status, kubectl_ok, unique_prefix, wait_group
from tests.waiting import wait_for

EXAMPLES = REPO / "examples"


@pytest.fixture(scope="module")
async def demo_nodes(kube: KubeClient) -> AsyncIterator[SimCluster]:
    """Nodes shaped like the demo's: 8 cpu, 32Gi, 2 GPUs."""
    pool = NodePool(count=2, cpu="8", memory="32Gi", gpu=2, name_prefix=unique_prefix())
    async with SimCluster(kube, [pool], start_delay=0.2, lease_interval=2.0) as sim:
        await sim.wait_ready(30)
        yield sim


async def apply(kubeconfig: Path, namespace: str, example: str) -> None:
    await asyncio.to_thread(
        kubectl_ok, kubeconfig, "apply", "-n", namespace, "-f", str(EXAMPLES / example)
    )


@pytest.mark.parametrize(
    ("example", "group", "members"),
    [
        ("gang-basic.yaml", "train-basic", 3),
        ("gang-gpu-job.yaml", "gpu-train", 2),
        ("lightweight-gang.yaml", "lightweight", 3),
        ("quickstart-gang.yaml", "hello", 2),
    ],
)
async def test_example_gang_runs(
    kube: KubeClient,
    kubeconfig: Path,
    operator: Any,
    demo_nodes: SimCluster,
    namespace: str,
    example: str,
    group: str,
    members: int,
) -> None:
    await apply(kubeconfig, namespace, example)
    status = await wait_group(kube, namespace, group, timeout=40, phase=c.Phase.RUNNING)
    assert status["running"] == members


async def test_quota_reservation_example(
    kube: KubeClient, kubeconfig: Path, operator: Any, demo_nodes: SimCluster, namespace: str
) -> None:
    await kube.patch(
        NAMESPACES,
        namespace,
        {"metadata": {"labels": {c.NAMESPACE_LABEL_QUOTA_RESERVATION: c.OPT_IN_VALUE}}},
    )
    await apply(kubeconfig, namespace, "quota-reservation.yaml")
    await wait_group(kube, namespace, "reserved", timeout=40, phase=c.Phase.RUNNING)

    async def reserved() -> dict[str, Any] | None:
        reservation = (await group_status(kube, namespace, "reserved")).get("reservation") or {}
        return reservation if reservation.get("reserved") else None

    reservation = await wait_for(reserved, 20, "the reservation in status")
    assert reservation["reserved"]["cpu"] == "4"
    assert reservation["used"]["cpu"] == "4"
    wide = await asyncio.to_thread(
        kubectl_ok, kubeconfig, "get", "pg", "reserved", "-n", namespace, "-o", "wide"
    )
    assert '"cpu":"4"' in wide.replace(" ", ""), wide


async def test_lightweight_example_podgroup_goes_with_its_pods(
    kube: KubeClient, kubeconfig: Path, operator: Any, demo_nodes: SimCluster, namespace: str
) -> None:
    await apply(kubeconfig, namespace, "lightweight-gang.yaml")
    await wait_group(kube, namespace, "lightweight", timeout=40, phase=c.Phase.RUNNING)
    await asyncio.to_thread(
        kubectl_ok,
        kubeconfig,
        "delete",
        "-n",
        namespace,
        "-f",
        str(EXAMPLES / "lightweight-gang.yaml"),
    )

    async def gone() -> bool:
        names = [g["metadata"]["name"] for g in (await kube.list(PODGROUPS, namespace))["items"]]
        return "lightweight" not in names

    await wait_for(gone, 30, "the operator-made PodGroup to be removed")


@asynccontextmanager
async def on_demo_fabric(
    kube: KubeClient, kubeconfig: Path, namespace: str, example: str
) -> AsyncIterator[dict[str, dict[str, str]]]:
    """The example applied on the demo's fabric (`sim-nodes --topology block=2,rack=2`), and
    deleted after; yields node name -> its labels."""
    fabric = parse_fabric("block=2,rack=2")
    pool = NodePool(cpu="8", memory="32Gi", name_prefix=unique_prefix()).with_fabric(fabric)
    async with SimCluster(kube, [pool], start_delay=0.2, lease_interval=2.0) as sim:
        await sim.wait_ready(30)
        try:
            await apply(kubeconfig, namespace, example)
            yield {
                n["metadata"]["name"]: n["metadata"].get("labels") or {}
                for n in (await kube.list(NODES))["items"]
            }
        finally:
            await asyncio.to_thread(
                kubectl_ok,
                kubeconfig,
                "delete",
                "-n",
                namespace,
                "--ignore-not-found",
                "-f",
                str(EXAMPLES / example),
            )


async def test_topology_example_keeps_the_gang_in_one_block(
    kube: KubeClient, kubeconfig: Path, operator: Any, namespace: str
) -> None:
    """The demo's fabric: no rack holds the gang, one block does, and its status says which."""
    async with on_demo_fabric(kube, kubeconfig, namespace, "gang-topology.yaml") as labels:
        await wait_group(kube, namespace, "train-block", timeout=40, phase=c.Phase.RUNNING)

        async def placed() -> dict[str, Any] | None:
            status = await group_status(kube, namespace, "train-block")
            return status.get("placement")

        placement = await wait_for(placed, 20, "the gang's placement in status")
        assert placement["level"] == f"{FABRIC_LABEL_PREFIX}block", placement
        pods = (await kube.list(PODS, namespace, label_selector="app=train-block"))["items"]
        blocks = {labels[p["spec"]["nodeName"]][f"{FABRIC_LABEL_PREFIX}block"] for p in pods}
        assert blocks == {placement["domain"]}, (blocks, placement)


async def test_sub_groups_example_puts_each_replica_in_a_rack_of_one_block(
    kube: KubeClient, kubeconfig: Path, operator: Any, namespace: str
) -> None:
    """The demo's fabric: each replica whole in one rack (more than half its node, so one each),
    both in one block, and the status says where each went."""
    async with on_demo_fabric(kube, kubeconfig, namespace, "gang-subgroups.yaml") as labels:
        status = await wait_group(
            kube,
            namespace,
            "serving",
            timeout=40,
            phase=c.Phase.RUNNING,
            subGroupsSatisfied="2/2",
        )

        async def placed() -> dict[str, Any] | None:
            found = (await group_status(kube, namespace, "serving")).get("placement")
            return found if found and len(found.get("subGroups") or []) == 2 else None

        placement = await wait_for(placed, 20, "each replica's placement in status")
        assert placement["level"] == f"{FABRIC_LABEL_PREFIX}block", placement
        pods = (await kube.list(PODS, namespace, label_selector="app=serving"))["items"]
        racks: dict[str, set[str]] = {}
        for pod in pods:
            node = labels[pod["spec"]["nodeName"]]
            replica = pod["metadata"]["labels"]["example.com/replica"]
            racks.setdefault(f"replica-{replica}", set()).add(node[f"{FABRIC_LABEL_PREFIX}rack"])
            assert node[f"{FABRIC_LABEL_PREFIX}block"] == placement["domain"], placement
        assert all(len(r) == 1 for r in racks.values()), racks
        assert len(set.union(*racks.values())) == 2, racks
        assert {s["name"]: {s["domain"]} for s in placement["subGroups"]} == racks
        assert status["running"] == 4, status
