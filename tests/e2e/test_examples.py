"""Every example in examples/ works as its comments say, applied with kubectl.

The README and the demo point users at these files; a broken example is a broken promise.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import NAMESPACES, PODGROUPS, KubeClient
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
