"""The API server crashes (SIGKILL) right after a gang's binds, and comes back: every member
ends Running and the gang Running, through the sim kubelets, which keep each pod's status and
write it until the API server has it.

Its own control plane (one for the module): killing the session's would disturb every other
test of the session.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import NAMESPACES, PODS, KubeClient
from podgroup_operator.devcluster import cluster as devcluster
from podgroup_operator.devcluster.process import OperatorProcess
from podgroup_operator.devcluster.simnodes import NodePool, SimCluster
from tests.kube_helpers import create_group, gang_pods, unique_prefix, wait_group
from tests.waiting import wait_for

START_DELAY = 3.0
"""Seconds the sim kubelet waits before it reports a bound pod Running: the crash lands
between the binds and these writes."""


async def test_a_gang_bound_just_before_the_api_server_crashed_runs_once_it_is_back(
    own_cluster: devcluster.ClusterState, own_kube: KubeClient, tmp_path: Path
) -> None:
    namespace = "crash"
    await own_kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    name = unique_prefix()
    nodes = [NodePool(count=2, cpu="4", memory="16Gi", name_prefix=name, labels={"pool": name})]
    process = OperatorProcess(own_cluster.kubeconfig, tmp_path / "op.log", ["--webhooks", "off"])
    async with SimCluster(own_kube, nodes, start_delay=START_DELAY, lease_interval=2.0) as sim:
        await sim.wait_ready(30)
        process.start()
        try:
            process.wait_ready()
            await create_group(own_kube, namespace, "g", min_member=4)
            await gang_pods(own_kube, namespace, "g", 4, name, group="g")

            async def bound() -> list[dict[str, Any]] | None:
                pods = (await own_kube.list(PODS, namespace))["items"]
                placed = [p for p in pods if p["spec"].get("nodeName")]
                return pods if len(placed) == 4 else None

            pods = await wait_for(bound, 60, "the gang's 4 binds", interval=0.02)
            # None Running yet: the kubelets' status writes all come after the crash.
            assert {p["status"].get("phase") for p in pods} == {c.PodPhase.PENDING}

            await asyncio.to_thread(
                devcluster.restart_apiserver,
                Path(own_cluster.state_dir),
                down_seconds=START_DELAY + 5,
                kill=True,
            )

            async def running() -> bool:
                pods = (await own_kube.list(PODS, namespace))["items"]
                return [p["status"].get("phase") for p in pods] == [c.PodPhase.RUNNING] * 4

            await wait_for(running, 60, "every member Running")
            await wait_group(own_kube, namespace, "g", timeout=60, phase=c.Phase.RUNNING)
        finally:
            process.stop()
