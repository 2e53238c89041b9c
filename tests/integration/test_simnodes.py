"""Sim nodes on the real control plane behave like nodes with a kubelet.

The operator's integration and end-to-end tests rely on these nodes: the real node lifecycle
controller must accept them (Ready, `not-ready` lifted) and declare them dead when they stop, and
pods bound to them must run, finish, be rejected and be deleted as a kubelet would make them.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from podgroup_operator.adapters.kube import LEASES, NODES, PODS, ApiError, KubeClient
from podgroup_operator.devcluster import keys as sim_keys
from podgroup_operator.devcluster.simnodes import NodePool, SimCluster
from tests.kube_helpers import (
    condition,
    create_bound,
    create_pod,
    gone,
    pod_in_phase,
    unique_prefix,
    wait_lease_renewed,
)
from tests.waiting import wait_for

T = TypeVar("T")

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"


@pytest.fixture
async def sim(kube: KubeClient) -> AsyncIterator[SimCluster]:
    """Two small nodes (8 cpu, 1 GPU, 4 pods each) with a fast kubelet."""
    pools = [NodePool(count=2, cpu="8", memory="16Gi", pods=4, gpu=1, name_prefix=unique_prefix())]
    async with SimCluster(kube, pools, start_delay=0.1, lease_interval=1.0) as cluster:
        yield cluster


async def test_nodes_register_with_capacity_and_become_ready(kube: KubeClient) -> None:
    prefix = unique_prefix()
    pool = NodePool(
        count=2,
        cpu="16",
        memory="64Gi",
        pods=50,
        gpu=8,
        extended={"example.com/fpga": "2"},
        labels={"accelerator": "a100"},
        taints=({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},),
        name_prefix=prefix,
    )
    async with SimCluster(kube, [pool], lease_interval=1.0) as sim:
        assert sim.node_names == [f"{prefix}-0", f"{prefix}-1"]
        expected = {
            "cpu": "16",
            "memory": "64Gi",
            "pods": "50",
            "nvidia.com/gpu": "8",
            "example.com/fpga": "2",
        }
        for name in sim.node_names:
            node = await kube.get(NODES, name)
            assert node["status"]["capacity"] == expected
            assert node["status"]["allocatable"] == expected
            labels = node["metadata"]["labels"]
            assert labels["kubernetes.io/hostname"] == name
            assert labels[sim_keys.SIM_NODE_LABEL] == prefix
            assert labels["accelerator"] == "a100"
            taints = {(t["key"], t.get("value"), t["effect"]) for t in node["spec"]["taints"]}
            assert ("dedicated", "gpu", "NoSchedule") in taints
            assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.20.2-sim"
            assert {a["type"] for a in node["status"]["addresses"]} >= {"InternalIP", "Hostname"}
            lease = await kube.get(LEASES, name, "kube-node-lease")
            assert lease["spec"]["holderIdentity"] == name
            assert lease["spec"]["leaseDurationSeconds"] == 40

        await sim.wait_ready(timeout=30)
        for name in sim.node_names:
            node = await kube.get(NODES, name)
            assert condition(node, "Ready")["status"] == "True"
            keys = {t["key"] for t in node["spec"]["taints"]}
            assert NOT_READY not in keys
            assert "dedicated" in keys  # ours survive the controller's edits
        await wait_lease_renewed(kube, sim.node_names[0], "kube-node-lease", 10)

    for name in sim.node_names:  # leaving the block removes the nodes
        with pytest.raises(ApiError) as gone:
            await kube.get(NODES, name)
        assert gone.value.not_found


async def test_bound_pod_runs_with_kubelet_status(
    kube: KubeClient, namespace: str, sim: SimCluster
) -> None:
    node = sim.node_names[0]
    await create_bound(
        kube,
        namespace,
        "web",
        node,
        requests={"cpu": "500m", "memory": "1Gi"},
        initContainers=[{"name": "setup", "image": "registry.local/setup:1"}],
    )
    running = await pod_in_phase(kube, namespace, "web", "Running")
    status = running["status"]
    for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
        assert condition(running, kind)["status"] == "True", kind
    assert status["hostIP"] and status["podIP"] and status["startTime"]
    assert status["podIPs"] == [{"ip": status["podIP"]}]
    (main,) = status["containerStatuses"]
    assert main["name"] == "main"
    assert main["ready"] is True and main["restartCount"] == 0
    assert "startedAt" in main["state"]["running"]
    assert main["image"] == "registry.local/sim:latest"
    assert main["imageID"] and main["containerID"].startswith("sim://")
    (setup,) = status["initContainerStatuses"]
    assert setup["state"]["terminated"]["exitCode"] == 0
    assert setup["state"]["terminated"]["reason"] == "Completed"
    assert sim.used(node)["cpu"] == 500


async def test_annotated_pods_succeed_and_fail(
    kube: KubeClient, namespace: str, sim: SimCluster
) -> None:
    node = sim.node_names[0]
    cases = {
        "ok": ({sim_keys.SIM_ANNOTATION_SUCCEED_AFTER: "0.3"}, "Succeeded", 0, "Completed"),
        "crash": ({sim_keys.SIM_ANNOTATION_FAIL_AFTER: "0.3"}, "Failed", 1, "Error"),
        "oom": (
            {sim_keys.SIM_ANNOTATION_FAIL_AFTER: "0.2", sim_keys.SIM_ANNOTATION_EXIT_CODE: "137"},
            "Failed",
            137,
            "Error",
        ),
    }
    await asyncio.gather(
        *(
            create_bound(kube, namespace, name, node, annotations=annotations)
            for name, (annotations, *_) in cases.items()
        )
    )
    for name, (_, phase, code, reason) in cases.items():
        done = await pod_in_phase(kube, namespace, name, phase)
        (main,) = done["status"]["containerStatuses"]
        terminated = main["state"]["terminated"]
        assert terminated["exitCode"] == code, name
        assert terminated["reason"] == reason, name
        assert terminated["startedAt"] <= terminated["finishedAt"]
        assert main["ready"] is False
        assert condition(done, "Ready")["status"] == "False"
    # Finished pods no longer hold resources on the node.
    assert sim.used(node).get("pods", 0) == 0


async def test_start_delay_annotation_holds_pod_pending(
    kube: KubeClient, namespace: str, sim: SimCluster
) -> None:
    await create_bound(
        kube,
        namespace,
        "slow",
        sim.node_names[0],
        annotations={sim_keys.SIM_ANNOTATION_START_DELAY: "2"},
    )
    await create_bound(kube, namespace, "fast", sim.node_names[0])
    await pod_in_phase(kube, namespace, "fast", "Running")
    slow = await kube.get(PODS, "slow", namespace)
    assert slow["status"]["phase"] == "Pending"
    await pod_in_phase(kube, namespace, "slow", "Running")


async def test_oversized_pods_are_rejected_like_kubelet(
    kube: KubeClient, namespace: str, sim: SimCluster
) -> None:
    node = sim.node_names[0]
    await create_bound(kube, namespace, "big", node, requests={"cpu": "6"})
    await pod_in_phase(kube, namespace, "big", "Running")

    await create_bound(kube, namespace, "too-much-cpu", node, requests={"cpu": "4"})
    rejected = await pod_in_phase(kube, namespace, "too-much-cpu", "Failed")
    assert rejected["status"]["reason"] == "OutOfcpu"
    assert rejected["status"]["message"] == (
        "Pod Node didn't have enough resource: cpu, requested: 4000, used: 6000, capacity: 8000"
    )

    await create_bound(kube, namespace, "two-gpus", node, requests={"nvidia.com/gpu": "2"})
    rejected = await pod_in_phase(kube, namespace, "two-gpus", "Failed")
    assert rejected["status"]["reason"] == "OutOfnvidia.com/gpu"
    assert "requested: 2, used: 0, capacity: 1" in rejected["status"]["message"]

    # Room returns when the big pod is deleted: the same request now runs.
    await kube.delete(PODS, "big", namespace)
    await wait_for(lambda: gone(kube, PODS, "big", namespace), 10, "big to be deleted")
    await create_bound(kube, namespace, "fits-now", node, requests={"cpu": "4"})
    await pod_in_phase(kube, namespace, "fits-now", "Running")


async def test_pod_count_is_enforced(kube: KubeClient, namespace: str, sim: SimCluster) -> None:
    node = sim.node_names[1]  # pods=4
    await asyncio.gather(*(create_bound(kube, namespace, f"p{i}", node) for i in range(4)))
    for i in range(4):
        await pod_in_phase(kube, namespace, f"p{i}", "Running")
    await create_bound(kube, namespace, "fifth", node)
    rejected = await pod_in_phase(kube, namespace, "fifth", "Failed")
    assert rejected["status"]["reason"] == "OutOfpods"
    assert rejected["status"]["message"].endswith("requested: 1, used: 4, capacity: 4")


async def test_bound_pod_delete_completes(
    kube: KubeClient, namespace: str, sim: SimCluster
) -> None:
    await create_bound(kube, namespace, "doomed", sim.node_names[0])
    await pod_in_phase(kube, namespace, "doomed", "Running")
    started = time.monotonic()
    await kube.delete(PODS, "doomed", namespace)  # default 30s grace: the kubelet finishes it
    await wait_for(lambda: gone(kube, PODS, "doomed", namespace), 10, "the pod to disappear")
    assert time.monotonic() - started < 10
    assert sim.used(sim.node_names[0]).get("pods", 0) == 0


async def test_many_pods_run_concurrently(kube: KubeClient, namespace: str) -> None:
    """Throughput: 120 pods on 4 nodes all reach Running in a few seconds, not 120 x delay."""
    pools = [NodePool(count=4, pods=40, name_prefix=unique_prefix())]
    async with SimCluster(kube, pools, start_delay=0.5, lease_interval=1.0) as sim:
        names = [f"w{i}" for i in range(120)]
        await asyncio.gather(*(create_pod(kube, namespace, name) for name in names))
        started = time.monotonic()
        await asyncio.gather(
            *(kube.bind(namespace, name, sim.node_names[i % 4]) for i, name in enumerate(names))
        )

        async def all_running() -> bool:
            items = (await kube.list(PODS, namespace))["items"]
            return sum(p["status"].get("phase") == "Running" for p in items) == len(names)

        await wait_for(all_running, 30, "120 pods Running")
        assert time.monotonic() - started < 15


async def test_killed_node_goes_not_ready_and_revives(kube: KubeClient, namespace: str) -> None:
    pools = [NodePool(count=2, name_prefix=unique_prefix())]
    async with SimCluster(kube, pools, start_delay=0.1, lease_interval=1.0) as sim:
        await sim.wait_ready(timeout=30)
        victim, survivor = sim.node_names
        await sim.kill_node(victim)

        async def unreachable() -> dict[str, Any] | None:
            node = await kube.get(NODES, victim)
            ready = condition(node, "Ready")
            keys = {t["key"] for t in node["spec"].get("taints", [])}
            return node if ready["status"] == "Unknown" and UNREACHABLE in keys else None

        node = await wait_for(unreachable, 40, f"{victim} to go NotReady/Unknown")
        assert condition(node, "Ready")["reason"] == "NodeStatusUnknown"
        other = await kube.get(NODES, survivor)
        assert condition(other, "Ready")["status"] == "True"

        # A pod bound to the dead node waits; the revived kubelet picks it up.
        await create_bound(kube, namespace, "patient", victim)
        await sim.revive_node(victim)
        await sim.wait_ready(timeout=30)
        await pod_in_phase(kube, namespace, "patient", "Running")


async def test_heartbeats_have_their_own_connections(kube: KubeClient, kubeconfig: Path) -> None:
    """A kubelet renews its Lease on a client of its own, so queued pod writes never delay it.

    The pod client here has one connection, which the pod watch holds: a renewal sent through
    it would wait forever, as renewals waited behind thousands of pod status writes under a
    bind flood (and healthy nodes went NotReady).
    """
    pools = [NodePool(count=1, name_prefix=unique_prefix())]
    pod_kube = KubeClient.from_kubeconfig(str(kubeconfig), limit=1)
    async with (
        pod_kube,
        SimCluster(pod_kube, pools, heartbeat_kube=kube, lease_interval=0.5) as sim,
    ):
        await wait_lease_renewed(kube, sim.node_names[0], "kube-node-lease", 10)


async def test_sim_nodes_command_registers_and_removes(kube: KubeClient, kubeconfig: Path) -> None:
    """`podgroup-operator sim-nodes` registers a main and an extra pool, removes them on SIGTERM."""
    prefix = unique_prefix()
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("podgroup-operator")),
        "sim-nodes",
        "--count=1",
        "--cpu=4",
        "--gpu=2",
        "--label=zone=a",
        "--taint=team=ml:NoSchedule",
        f"--name-prefix={prefix}",
        f"--pool=count=2,cpu=16,memory=64Gi,prefix={prefix}-big,label=size=big",
        "--lease-interval=1",
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        names = [f"{prefix}-0", f"{prefix}-big-0", f"{prefix}-big-1"]

        async def registered() -> list[dict[str, Any]]:
            items = (await kube.list(NODES, label_selector=f"{sim_keys.SIM_NODE_LABEL}"))["items"]
            nodes = [n for n in items if n["metadata"]["name"] in names]
            ready = [n for n in nodes if n["status"].get("capacity")]
            return ready if len(ready) == 3 else []

        nodes = {n["metadata"]["name"]: n for n in await wait_for(registered, 20, "3 nodes")}
        main = nodes[f"{prefix}-0"]
        assert main["status"]["capacity"]["nvidia.com/gpu"] == "2"
        assert main["metadata"]["labels"]["zone"] == "a"
        assert {"key": "team", "value": "ml", "effect": "NoSchedule"} in main["spec"]["taints"]
        big = nodes[f"{prefix}-big-1"]
        assert big["status"]["capacity"]["cpu"] == "16"
        assert big["metadata"]["labels"]["size"] == "big"
        assert big["metadata"]["labels"][sim_keys.SIM_NODE_LABEL] == f"{prefix}-big"
    finally:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, stderr.decode()
    assert f"registered 1 x {prefix}-N" in stdout.decode()
    for name in names:
        assert await _node_gone(kube, name), f"{name} left behind"


async def _node_gone(kube: KubeClient, name: str) -> bool:
    try:
        await kube.get(NODES, name)
    except ApiError as exc:
        return exc.not_found
    return False


class ExpiringWatchClient(KubeClient):
    """The real client, except that the first pod watch answers 410 Gone, as after compaction."""

    def __init__(self, real: KubeClient) -> None:
        super().__init__(real.transport, real.field_manager)
        self.pod_lists = 0
        self.expired = False

    async def list(self, kind: Any, namespace: str | None = None, **kwargs: Any) -> dict[str, Any]:
        if kind == PODS:
            self.pod_lists += 1
        return await super().list(kind, namespace, **kwargs)

    async def watch(
        self, kind: Any, namespace: str | None = None, **kwargs: Any
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        if kind == PODS and not self.expired:
            self.expired = True
            yield "ERROR", {"kind": "Status", "code": 410, "reason": "Expired"}
            return
        async for event in super().watch(kind, namespace, **kwargs):
            yield event


async def test_watch_expiry_relists_and_keeps_working(kube: KubeClient, namespace: str) -> None:
    client = ExpiringWatchClient(kube)
    pools = [NodePool(count=1, name_prefix=unique_prefix())]
    async with SimCluster(client, pools, start_delay=0.1, lease_interval=1.0) as sim:
        await wait_for(lambda: _true(client.pod_lists >= 2), 10, "a re-list after 410 Gone")
        await create_bound(kube, namespace, "after-expiry", sim.node_names[0])
        await pod_in_phase(kube, namespace, "after-expiry", "Running")
        assert client.expired


async def _true(value: bool) -> bool:
    return value
