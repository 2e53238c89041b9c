"""`podgroup-operator bench e2e`: pods per second from creation to binding, on a real cluster.

Two runs on the same control plane and the same sim nodes, one after the other:

* operator: PodGroups and their pods are created at once (32 requests in flight); the running
  operator (a child process, as users run it) places and binds them. The clock stops when the
  last pod is bound, as seen by a watch.
* baseline: the same number of pods, created the same way, each bound by a bare async client as
  soon as it exists (no decisions at all): what this control plane can do at best.

Both include pod creation, so the ratio shows what gang scheduling costs on top of the API
server's own limits. Prints one JSON object.

With `--topology SPEC` (`zone=4,block=8,rack=8,host=2`, see `devcluster/fabric.py`) the sim
nodes are that labelled fabric, a Topology object describes it, and every PodGroup carries
`spec.topologyConstraint` with `--required` / `--preferred` (level names of the spec); members
ask for `--pod-gpu` GPUs on nodes of `--node-gpu`. `bound_after_last_created_seconds` is how
long the last pod waited to be bound after the last pod was created (KAI-Scheduler's measure).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    NAMESPACES,
    PODGROUPS,
    PODS,
    TOPOLOGIES,
    ApiError,
    KubeClient,
    gather_limited,
)
from podgroup_operator.bench.prepare import create_namespace, install_crd
from podgroup_operator.devcluster import cluster as devcluster
from podgroup_operator.devcluster.fabric import FABRIC_LABEL_PREFIX, Fabric, parse_fabric
from podgroup_operator.devcluster.process import OperatorProcess
from podgroup_operator.devcluster.simnodes import NodePool, SimCluster
from podgroup_operator.scheduling.resources import GPU

IN_FLIGHT = 32


@dataclass(frozen=True)
class Shape:
    """What the run's nodes and pods look like: plain, or a labelled fabric of GPU nodes."""

    fabric: Fabric | None = None
    required: str | None = None
    preferred: str | None = None
    pod_gpu: int = 0
    node_gpu: int = 0

    def constraint(self) -> dict[str, str] | None:
        """The PodGroups' `spec.topologyConstraint`, naming the bench's Topology."""
        if self.fabric is None:
            return None
        out = {"topology": TOPOLOGY_NAME}
        if self.required:
            out["requiredTopologyLevel"] = _level(self.required)
        if self.preferred:
            out["preferredTopologyLevel"] = _level(self.preferred)
        return out


TOPOLOGY_NAME = "bench-e2e"


def _level(name: str) -> str:
    return name if "/" in name else FABRIC_LABEL_PREFIX + name


def _pod(
    name: str, namespace: str, group: str | None, scheduler: str, gpu: int = 0
) -> dict[str, Any]:
    labels = {"bench": "e2e"}
    if group:
        labels[c.LABEL_POD_GROUP] = group
    resources: dict[str, Any] = {"requests": {"cpu": "100m", "memory": "128Mi"}}
    if gpu:
        resources["requests"][GPU] = str(gpu)
        resources["limits"] = {GPU: str(gpu)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "schedulerName": scheduler,
            "nodeSelector": {"pool": "bench"},
            "containers": [{"name": "w", "image": "x", "resources": resources}],
        },
    }


async def _wait_all_bound(kube: KubeClient, namespace: str, total: int, timeout: float) -> float:
    """Monotonic time at which `total` pods of the namespace are bound, seen through a watch."""
    bound: set[str] = set()
    deadline = time.monotonic() + timeout
    listing = await kube.list(PODS, namespace)
    for pod in listing["items"]:
        if pod["spec"].get("nodeName"):
            bound.add(pod["metadata"]["name"])
    version = listing["metadata"]["resourceVersion"]
    while len(bound) < total:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(bound)}/{total} pods bound after {timeout}s")
        async for kind, pod in kube.watch(
            PODS, namespace, resource_version=version, timeout_seconds=30
        ):
            if kind == c.WatchEventType.BOOKMARK:
                version = pod["metadata"]["resourceVersion"]
                continue
            version = pod["metadata"].get("resourceVersion", version)
            if pod.get("spec", {}).get("nodeName"):
                bound.add(pod["metadata"]["name"])
            if len(bound) >= total:
                break
    return time.monotonic()


async def _operator_run(
    kube: KubeClient, namespace: str, gangs: int, size: int, shape: Shape
) -> dict[str, Any]:
    await create_namespace(kube, namespace)
    total = gangs * size
    waiter = asyncio.create_task(_wait_all_bound(kube, namespace, total, 600))
    await asyncio.sleep(0.2)
    start = time.monotonic()
    constraint = shape.constraint()
    spec: dict[str, Any] = {"minMember": size}
    if constraint is not None:
        spec["topologyConstraint"] = constraint
    groups = [
        kube.create(
            PODGROUPS,
            {
                "apiVersion": c.API_VERSION,
                "kind": c.KIND,
                "metadata": {"name": f"g{g}"},
                "spec": spec,
            },
            namespace,
        )
        for g in range(gangs)
    ]
    pods = [
        kube.create(
            PODS,
            _pod(f"g{g}-{i}", namespace, f"g{g}", c.SCHEDULER_NAME, shape.pod_gpu),
            namespace,
        )
        for g in range(gangs)
        for i in range(size)
    ]
    results = await gather_limited(IN_FLIGHT, *groups, *pods)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise RuntimeError(f"{len(errors)} creates failed, first: {errors[0]}")
    created = time.monotonic()
    done = await waiter
    placements = await _placements(kube, namespace) if constraint is not None else {}
    return {
        **({"placements": placements} if placements else {}),
        "pods": total,
        "seconds": round(done - start, 3),
        "create_seconds": round(created - start, 3),
        "bound_after_last_created_seconds": round(max(done - created, 0.0), 3),
        "pods_per_second": round(total / (done - start), 1),
    }


async def _placements(kube: KubeClient, namespace: str, timeout: float = 30) -> dict[str, int]:
    """How many PodGroups of the namespace report each `status.placement` (level=domain), once
    every one reports where it went (or `timeout` passed)."""
    deadline = time.monotonic() + timeout
    while True:
        items = (await kube.list(PODGROUPS, namespace))["items"]
        found = [(item.get("status") or {}).get("placement") for item in items]
        if all(found) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    counts: dict[str, int] = {}
    for where in found:
        key = f"{where['level']}={where['domain']}" if where else "none"
        counts[key] = counts.get(key, 0) + 1
    return counts


async def _baseline_run(
    kube: KubeClient, namespace: str, total: int, nodes: list[str], shape: Shape
) -> dict[str, Any]:
    await create_namespace(kube, namespace)
    start = time.monotonic()

    async def create_and_bind(i: int) -> None:
        body = _pod(f"p{i}", namespace, None, "bench-nobody", shape.pod_gpu)
        pod = await kube.create(PODS, body, namespace)
        await kube.bind(
            namespace, pod["metadata"]["name"], nodes[i % len(nodes)], pod["metadata"]["uid"]
        )

    results = await gather_limited(IN_FLIGHT, *(create_and_bind(i) for i in range(total)))
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise RuntimeError(f"{len(errors)} baseline binds failed, first: {errors[0]}")
    done = time.monotonic()
    return {
        "pods": total,
        "seconds": round(done - start, 3),
        "pods_per_second": round(total / (done - start), 1),
    }


async def _install_topology(kube: KubeClient, fabric: Fabric) -> None:
    """The bench's Topology, describing `fabric` (created, or replaced when it is there)."""
    with contextlib.suppress(ApiError):
        await kube.delete(TOPOLOGIES, TOPOLOGY_NAME)
        await _until_gone(kube)
    await kube.create(TOPOLOGIES, fabric.topology(TOPOLOGY_NAME))


async def _until_gone(kube: KubeClient) -> None:
    for _ in range(100):
        try:
            await kube.get(TOPOLOGIES, TOPOLOGY_NAME)
        except ApiError as exc:
            if exc.not_found:
                return
            raise
        await asyncio.sleep(0.1)


async def run_e2e(
    kubeconfig: Path,
    nodes: int,
    gangs: int,
    size: int,
    workdir: Path,
    shape: Shape | None = None,
) -> dict[str, Any]:
    shape = shape or Shape()
    async with KubeClient.from_kubeconfig(str(kubeconfig), limit=IN_FLIGHT * 2) as kube:
        await install_crd(kube)
        pool = NodePool(
            count=nodes,
            cpu="32",
            memory="128Gi",
            pods=250,
            gpu=shape.node_gpu,
            labels={"pool": "bench"},
            name_prefix="bench",
        )
        if shape.fabric is not None:
            pool = pool.with_fabric(shape.fabric)
            await _install_topology(kube, shape.fabric)
        async with SimCluster(kube, [pool], start_delay=0.5, lease_interval=5.0) as sim:
            await sim.wait_ready(60)
            operator = OperatorProcess(kubeconfig, workdir / "operator.log")
            operator.start()
            await asyncio.to_thread(operator.wait_ready)
            await asyncio.to_thread(operator.install_webhooks)
            try:
                suffix = str(int(time.time()))
                ours = await _operator_run(kube, f"bench-op-{suffix}", gangs, size, shape)
                base = await _baseline_run(
                    kube, f"bench-base-{suffix}", gangs * size, sim.node_names, shape
                )
            finally:
                await asyncio.to_thread(operator.uninstall_webhooks)
                operator.stop()
            for namespace in (f"bench-op-{suffix}", f"bench-base-{suffix}"):
                with contextlib.suppress(ApiError):
                    await kube.delete(NAMESPACES, namespace)
    return {
        "scenario": "e2e",
        **(
            {"topology": shape.constraint(), "fabric_nodes": pool.count}
            if shape.fabric is not None
            else {}
        ),
        "nodes": nodes,
        "gangs": gangs,
        "gang_size": size,
        "operator": ours,
        "baseline_bare_client": base,
        "ratio": round(ours["pods_per_second"] / base["pods_per_second"], 3),
        "bench_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "operator_log": str(workdir / "operator.log"),
    }


def build_parser() -> argparse.ArgumentParser:
    """The options of `podgroup-operator bench e2e`."""
    parser = argparse.ArgumentParser(prog="podgroup-operator bench e2e", description=__doc__)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--gangs", type=int, default=200)
    parser.add_argument("--gang-size", type=int, default=5)
    parser.add_argument("--kubeconfig", help="an existing cluster; default: a fresh dev cluster")
    parser.add_argument(
        "--topology", help="a labelled fabric, e.g. zone=4,block=8,rack=8,host=2 (replaces --nodes)"
    )
    parser.add_argument("--required", help="with --topology: the required level, e.g. zone")
    parser.add_argument("--preferred", help="with --topology: the preferred level, e.g. rack")
    parser.add_argument("--pod-gpu", type=int, default=0, help="nvidia.com/gpu per pod")
    parser.add_argument("--node-gpu", type=int, default=0, help="nvidia.com/gpu per node")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    shape = Shape(
        parse_fabric(args.topology) if args.topology else None,
        args.required,
        args.preferred,
        args.pod_gpu,
        args.node_gpu,
    )
    workdir = Path(tempfile.mkdtemp(prefix="podgroup-bench-e2e-"))
    state = None
    if args.kubeconfig:
        kubeconfig = Path(args.kubeconfig)
    else:
        state = devcluster.up(workdir / "cluster")
        kubeconfig = state.kubeconfig
    try:
        report = asyncio.run(
            run_e2e(kubeconfig, args.nodes, args.gangs, args.gang_size, workdir, shape)
        )
    finally:
        if state is not None:
            devcluster.down(workdir / "cluster")
    print(json.dumps(report))
    return 0
