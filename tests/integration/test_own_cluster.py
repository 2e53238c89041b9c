"""Operators that must not share the control plane with the session's operator.

A namespaced operator (`run -n`) and several replicas each need to be the only schedulers of
their pods, so these tests start a control plane of their own (one per module, a few seconds)
and their own operator processes.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import CRDS, NAMESPACES, PODS, KubeClient
from podgroup_operator.devcluster import cluster as devcluster
from podgroup_operator.devcluster.process import OperatorProcess
from tests.kube_helpers import create_bound, create_group, create_pod, pool, wait_group
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[devcluster.ClusterState]:
    state_dir = Path(tempfile.mkdtemp(prefix="podgroup-own-cluster-"))
    state = devcluster.up(state_dir)
    try:
        yield state
    finally:
        devcluster.down(state_dir)


@pytest.fixture(scope="module")
async def own_kube(own_cluster: devcluster.ClusterState) -> AsyncIterator[KubeClient]:
    kube = KubeClient.from_kubeconfig(str(own_cluster.kubeconfig))
    body = yaml.safe_load((REPO / "crds" / "podgroups.scheduling.x-k8s.io.yaml").read_text())
    await kube.apply_json(CRDS, body)

    async def established() -> bool:
        crd = await kube.get(CRDS, body["metadata"]["name"])
        conditions = crd.get("status", {}).get("conditions") or []
        return any(x["type"] == "Established" and x["status"] == "True" for x in conditions)

    await wait_for(established, 30, "the CRD to be Established")
    yield kube
    await kube.close()


async def make_namespace(kube: KubeClient, name: str) -> str:
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


async def test_a_namespaced_operator_places_around_pods_of_namespaces_it_does_not_handle(
    own_cluster: devcluster.ClusterState, own_kube: KubeClient, tmp_path: Path
) -> None:
    """`run -n team-a` still sees every bound pod: a node that other namespaces fill is full."""
    team = await make_namespace(own_kube, "team-a")
    other = await make_namespace(own_kube, "other")
    process = OperatorProcess(own_cluster.kubeconfig, tmp_path / "operator.log", ["-n", team])
    async with pool(own_kube, count=2, cpu="4", memory="16Gi") as (sim, name):
        first, second = sorted(sim.node_names)
        # Another team's pod (bound by hand, as another scheduler would) fills most of `first`.
        await create_bound(own_kube, other, "big", first, requests={"cpu": "3"})
        process.start()
        try:
            process.wait_ready()
            await create_group(own_kube, team, "gang", minMember=1)
            await create_pod(
                own_kube,
                team,
                "member",
                group="gang",
                requests={"cpu": "2"},
                scheduler=c.SCHEDULER_NAME,
                nodeSelector={"pool": name},
            )
            await wait_group(own_kube, team, "gang", timeout=30, phase=c.Phase.RUNNING)
            placed = await own_kube.get(PODS, "member", team)
            assert placed["spec"]["nodeName"] == second, process.log_tail()
        finally:
            process.stop()
