"""Simulated nodes and a simulated kubelet, so the dev cluster can run pods without containers.

The project's machines have no container engine, yet the operator is proven against a real
control plane, where pods are bound, start, finish, get rejected for lack of room and get
deleted. Without a kubelet none of that happens: new Nodes keep the `not-ready` taint forever,
bound pods stay Pending, and a graceful delete of a bound pod never completes. This module plays
the kubelet's part for a set of fake Nodes (the idea of KWOK): it registers them, keeps them
healthy the way a kubelet does (a Lease renewed in `kube-node-lease` plus a Ready heartbeat in
node status, so the real node lifecycle controller lifts the `not-ready` taint and, when a node
is "killed", really marks it Unknown and taints it unreachable), and drives every pod bound to
them: kubelet-style admission (`OutOfcpu`...), Running with container statuses, success or
failure on request (annotations), and the final delete of a terminating pod.

Like a kubelet's status manager, it keeps every pod's status as it knows it and writes it until
the API server has it: a write that fails (the API server down, a 409 on a pod still there) is
tried again every `STATUS_RETRY_SECONDS`, and a re-list that shows a pod behind what the
kubelet knows (after a lost watch or an API server restart) writes it again.

It is a library first (`SimCluster`, for tests and benchmarks) and a command second
(`podgroup-operator sim-nodes`, `main`). Throughput matters (benchmarks drive 1000 pods): one
watch feeds cheap synchronous bookkeeping, and every API write runs in its own task.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import enum
import hashlib
import ipaddress
import logging
import signal
import sys
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    JSON,
    LEASES,
    NODES,
    PODS,
    STRATEGIC_PATCH,
    ApiError,
    KubeClient,
)
from podgroup_operator.api.quantity import to_milli
from podgroup_operator.api.times import rfc3339, rfc3339_micro
from podgroup_operator.devcluster.fabric import Fabric, parse_fabric
from podgroup_operator.devcluster.keys import (
    SIM_ANNOTATION_EXIT_CODE,
    SIM_ANNOTATION_FAIL_AFTER,
    SIM_ANNOTATION_START_DELAY,
    SIM_ANNOTATION_SUCCEED_AFTER,
    SIM_NODE_LABEL,
)
from podgroup_operator.scheduling.resources import Resources, pod_requests

logger = logging.getLogger(__name__)

KUBELET_VERSION = "v1.20.2-sim"
NODE_LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
"""What a kubelet writes; the lifecycle controller uses its own grace period, not this."""
GPU = "nvidia.com/gpu"
TAINT_PREFIX_SYSTEM = "node.kubernetes.io/"
"""Taints under this prefix belong to the control plane (not-ready, unreachable, ...)."""
NODE_IP_NETWORK = ipaddress.IPv4Network("10.0.0.0/16")
POD_IP_NETWORK = ipaddress.IPv4Network("10.64.0.0/10")
POD_IPS_PER_NODE = 1024
RETRY_DELAYS = (0.1, 0.3, 1.0, 2.0)
"""Backoff for transient API errors (connection loss, 429, 5xx) before a write is given up."""
STATUS_RETRY_SECONDS = 1.0
"""How often pod statuses the API server does not have yet are written again."""
_PHASE_RANK: dict[str, int] = {
    c.PodPhase.PENDING: 0,
    c.PodPhase.RUNNING: 1,
    c.PodPhase.SUCCEEDED: 2,
    c.PodPhase.FAILED: 2,
}
"""How far a pod's life has gone by its phase: a stored phase of lower rank than the kubelet's
is behind it."""

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


# --- pools ---------------------------------------------------------------------------------------


def parse_key_value(text: str, what: str = "label") -> tuple[str, str]:
    """'k=v' (or a bare 'k', value empty) -> (k, v); the CLI's --label, --extended, --image."""
    key, sep, value = text.partition("=")
    if not key or (what != "label" and not sep):
        raise ValueError(f"{what} {text!r} must look like NAME=VALUE")
    return key, value


def parse_taint(text: str) -> JSON:
    """'k=v:Effect' or 'k:Effect' -> a Node taint, as `kubectl taint` spells them."""
    body, sep, effect = text.rpartition(":")
    if not sep or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise ValueError(
            f"taint {text!r} must look like KEY=VALUE:EFFECT with EFFECT one of "
            "NoSchedule, PreferNoSchedule, NoExecute"
        )
    key, _, value = body.partition("=")
    if not key:
        raise ValueError(f"taint {text!r} has no key")
    taint: JSON = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


@dataclass(frozen=True)
class NodePool:
    """`count` identical sim nodes named `<name_prefix>-<i>`; quantities in Kubernetes syntax."""

    count: int = 3
    cpu: str = "8"
    memory: str = "32Gi"
    pods: int = 110
    gpu: int = 0
    """nvidia.com/gpu per node; 0 leaves the resource off the node entirely."""
    extended: Mapping[str, str] = field(default_factory=dict)
    """Other extended resources, e.g. {"example.com/fpga": "2"}."""
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, str]] = ()
    """Node taints as the API spells them: {"key", "value" (optional), "effect"}."""
    name_prefix: str = "sim-node"
    images: Mapping[str, str] = field(default_factory=dict)
    """Images the nodes list as pulled (`status.images`), name -> size, e.g. {"trainer:v1":
    "2Gi"}: kube-scheduler's ImageLocality, and ours, prefer nodes holding a pod's images."""
    node_labels: Sequence[Mapping[str, str]] = ()
    """Labels of each node in turn (node i gets entry i) on top of `labels`: a fabric's
    (devcluster/fabric.py, `with_fabric`). Empty, or one entry per node."""

    def __post_init__(self) -> None:
        if self.node_labels and len(self.node_labels) != self.count:
            raise ValueError(
                f"node_labels has {len(self.node_labels)} entries for {self.count} nodes; give "
                "one per node"
            )

    def with_fabric(self, fabric: Fabric) -> NodePool:
        """This pool as the nodes of `fabric`: as many nodes, each with its domains' labels."""
        return dataclasses.replace(self, count=fabric.node_count, node_labels=fabric.node_labels())

    def labels_of(self, index: int) -> dict[str, str]:
        """The labels of the pool's node `index` (counted from 0)."""
        return {**self.labels, **(self.node_labels[index] if self.node_labels else {})}

    def node_names(self) -> list[str]:
        return [f"{self.name_prefix}-{i}" for i in range(self.count)]

    def allocatable(self) -> dict[str, str]:
        """Capacity and allocatable alike: a sim node reserves nothing for system daemons."""
        resources = {"cpu": str(self.cpu), "memory": str(self.memory), "pods": str(self.pods)}
        if self.gpu:
            resources[GPU] = str(self.gpu)
        resources.update({name: str(qty) for name, qty in self.extended.items()})
        for name, qty in resources.items():
            to_milli(qty)  # fail at construction, not in a 422 from the apiserver
            if not name:
                raise ValueError("empty resource name")
        self.image_list()
        return resources

    def image_list(self) -> list[JSON]:
        """`status.images` as a kubelet lists them: each image's names and size in bytes."""
        listed = []
        for name, size in self.images.items():
            if not name:
                raise ValueError("empty image name")
            listed.append({"names": [name], "sizeBytes": to_milli(size) // 1000})
        return listed

    @classmethod
    def from_spec(cls, spec: str, *, default_prefix: str = "sim-pool") -> NodePool:
        """The CLI's --pool: 'count=2,cpu=16,memory=64Gi,gpu=8,prefix=gpu,label=k=v,taint=...'.

        Keys: count, cpu, memory, pods, gpu, prefix (or name-prefix), label, taint, extended
        (NAME=QTY) and image (NAME=SIZE, an image the nodes list as pulled); label, taint,
        extended and image repeat. Unnamed keys take NodePool's defaults.
        """
        values: dict[str, Any] = {"name_prefix": default_prefix}
        labels: dict[str, str] = {}
        taints: list[JSON] = []
        extended: dict[str, str] = {}
        images: dict[str, str] = {}
        for item in filter(None, (part.strip() for part in spec.split(","))):
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"pool item {item!r} in {spec!r} must look like KEY=VALUE")
            if key == "count":
                values["count"] = int(value)
            elif key in ("cpu", "memory"):
                values[key] = value
            elif key in ("pods", "gpu"):
                values[key] = int(value)
            elif key in ("prefix", "name-prefix", "name_prefix"):
                values["name_prefix"] = value
            elif key == "label":
                name, val = parse_key_value(value)
                labels[name] = val
            elif key == "taint":
                taints.append(parse_taint(value))
            elif key == "extended":
                name, qty = parse_key_value(value, "extended resource")
                extended[name] = qty
            elif key == "image":
                name, size = parse_key_value(value, "image")
                images[name] = size
            else:
                raise ValueError(
                    f"unknown pool key {key!r} in {spec!r}; use count, cpu, memory, pods, gpu, "
                    "prefix, label, taint, extended or image"
                )
        pool = cls(**values, labels=labels, taints=tuple(taints), extended=extended, images=images)
        pool.allocatable()
        return pool


# --- pod requests, kubelet admission ------------------------------------------------------------


def _display(resource: str, milli: int) -> int:
    """Kubelet's message units: millicores for cpu, whole units (bytes, devices) otherwise."""
    return milli if resource == "cpu" else -(-milli // 1000)


def _resource_order(resource: str) -> tuple[int, str]:
    """kube-scheduler's fit checks pods, cpu, memory, ephemeral-storage, then the rest."""
    fixed = ("pods", "cpu", "memory", "ephemeral-storage")
    return (fixed.index(resource), "") if resource in fixed else (len(fixed), resource)


def admission_failure(
    request: Mapping[str, int], used: Mapping[str, int], allocatable: Mapping[str, int]
) -> tuple[str, str] | None:
    """Kubelet's verdict on a pod that does not fit: (reason, message) or None when it fits.

    Reason and message are the kubelet's own ('OutOfcpu', 'Pod Node didn't have enough
    resource: cpu, requested: 4000, used: 6000, capacity: 8000'), since users and tools match on
    them; the first insufficient resource in kube-scheduler's order wins, as in the kubelet.
    """
    for resource in sorted(request, key=_resource_order):
        need = request[resource]
        have = allocatable.get(resource, 0)
        already = used.get(resource, 0)
        if need and already + need > have:
            message = (
                f"Pod Node didn't have enough resource: {resource}, "
                f"requested: {_display(resource, need)}, used: {_display(resource, already)}, "
                f"capacity: {_display(resource, have)}"
            )
            return f"OutOf{resource}", message
    return None


def _seconds_annotation(pod: Mapping[str, Any], key: str) -> float | None:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(key)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        logger.warning("ignoring annotation %s=%r on %s: not a number", key, raw, _pod_key(pod))
        return None
    return max(value, 0.0)


def _pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _digest(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


# --- per-node and per-pod state -----------------------------------------------------------------


@dataclass
class _SimNode:
    """One node's kubelet-side state: what it admitted, and whether its kubelet is alive."""

    name: str
    pool: NodePool
    index: int
    allocatable: Resources
    ip: str
    pool_index: int = 0
    """The node's place in its pool (`NodePool.labels_of`)."""
    alive: bool = True
    heartbeat: asyncio.Task[None] | None = None
    admitted: dict[str, Resources] = field(default_factory=dict)
    """Pod uid -> request, for pods that run or will run here (released when they end)."""
    next_pod_ip: int = 0
    ready_since: datetime | None = None

    def used(self) -> Resources:
        total: Resources = {}
        for request in self.admitted.values():
            for name, amount in request.items():
                total[name] = total.get(name, 0) + amount
        return total

    def pod_ip(self) -> str:
        self.next_pod_ip += 1
        offset = self.index * POD_IPS_PER_NODE + 1 + (self.next_pod_ip % (POD_IPS_PER_NODE - 2))
        return str(POD_IP_NETWORK.network_address + offset % POD_IP_NETWORK.num_addresses)


class _Sent(enum.Enum):
    """What became of one status write."""

    WRITTEN = "written"
    GONE = "gone"
    """The pod is gone, or its name is another pod's: nothing more to write."""
    LATER = "later"
    """Not written now (the API server is away, or busy): written again later."""


@dataclass
class _SimPod:
    uid: str
    namespace: str
    name: str
    node: str
    task: asyncio.Task[None] | None = None
    deleting: bool = False
    statuses: list[JSON] = field(default_factory=list)
    """Every status patch the kubelet wrote for the pod, in order: what it knows."""
    sent: int = 0
    """How many of `statuses` the API server has."""
    syncing: bool = False
    """A write of `statuses[sent:]` is under way."""
    warned: bool = False
    """A failed write was logged; the next one is logged once it is written."""

    @property
    def phase(self) -> str | None:
        """The pod's phase as the kubelet knows it (None before its first status)."""
        phases = [status["phase"] for status in self.statuses if status.get("phase")]
        return phases[-1] if phases else None


# --- the simulator -------------------------------------------------------------------------------


class SimCluster:
    """Sim nodes of the given pools plus their kubelet; an async context manager.

    `async with SimCluster(kube, [NodePool(count=2)], start_delay=0.2) as sim:` returns once
    every Node exists with its capacity and the pod watch is synced; `await sim.wait_ready()`
    additionally waits for the lifecycle controller to lift the `not-ready` taints. Leaving the
    block stops the kubelet and deletes the Nodes and their Leases.
    """

    def __init__(
        self,
        kube: KubeClient,
        pools: Iterable[NodePool] = (NodePool(),),
        *,
        heartbeat_kube: KubeClient | None = None,
        start_delay: float = 0.5,
        lease_interval: float = 5.0,
        status_interval: float | None = None,
        delete_delay: float = 0.05,
        clock: Clock = _utcnow,
    ) -> None:
        """`status_interval` (default 4 x `lease_interval`) paces the Ready heartbeat in node
        status; the Lease carries liveness in between, as with a real kubelet. `delete_delay` is
        how long "stopping containers" of a terminating pod takes.

        `heartbeat_kube` (default: `kube`) sends the Leases and node status. A kubelet keeps a
        client of its own for them (kubelet's and kubemark's `HeartbeatClient`): sharing
        `kube`'s connections, a renewal waits behind every pod status write queued for them,
        and under a bind flood the lifecycle controller marks healthy nodes NotReady (then
        writes every pod on them), an artefact of the simulator, not of what is measured.
        """
        self.kube = kube
        self.heartbeat_kube = heartbeat_kube if heartbeat_kube is not None else kube
        self.pools = list(pools)
        self.start_delay = start_delay
        self.lease_interval = lease_interval
        self.status_interval = (
            status_interval if status_interval is not None else 4 * lease_interval
        )
        self.delete_delay = delete_delay
        self.clock = clock
        self._nodes: dict[str, _SimNode] = {}
        index = 0
        for pool in self.pools:
            allocatable = {name: to_milli(qty) for name, qty in pool.allocatable().items()}
            for pool_index, name in enumerate(pool.node_names()):
                if name in self._nodes:
                    raise ValueError(f"two pools would both register node {name!r}")
                ip = str(NODE_IP_NETWORK.network_address + 1 + index)
                self._nodes[name] = _SimNode(
                    name, pool, index, dict(allocatable), ip, pool_index=pool_index
                )
                index += 1
        self._pods: dict[str, _SimPod] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._watcher: asyncio.Task[None] | None = None
        self._unsynced: set[str] = set()
        """UIDs of pods whose status the API server does not have yet."""
        self._syncer: asyncio.Task[None] | None = None
        self._synced = asyncio.Event()
        self._started = False

    @property
    def node_names(self) -> list[str]:
        return list(self._nodes)

    def used(self, node: str) -> Resources:
        """Milli-units the kubelet of `node` has admitted and not yet released."""
        return self._nodes[node].used()

    # --- lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> SimCluster:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop(remove_nodes=True)

    async def start(self) -> None:
        """Register every node (Node, status, Lease), then start heartbeats and the pod watch."""
        if self._started:
            return
        self._started = True
        self._synced.clear()
        for node in self._nodes.values():
            node.alive, node.ready_since = True, None
        try:
            await asyncio.gather(*(self._register(node) for node in self._nodes.values()))
            for node in self._nodes.values():
                node.heartbeat = asyncio.create_task(
                    self._heartbeat(node), name=f"heartbeat {node.name}"
                )
            self._watcher = asyncio.create_task(self._watch_pods(), name="sim kubelet pod watch")
            self._syncer = asyncio.create_task(self._sync_statuses(), name="sim kubelet status")
            synced = asyncio.create_task(self._synced.wait())
            await asyncio.wait({synced, self._watcher}, return_when=asyncio.FIRST_COMPLETED)
            if not synced.done():
                synced.cancel()
                self._watcher.result()  # the watcher died before its first list: raise why
        except BaseException:
            await self.stop(remove_nodes=True)
            raise

    async def stop(self, remove_nodes: bool = True) -> None:
        """Stop every kubelet loop; with `remove_nodes`, delete the Nodes and their Leases."""
        tasks: list[asyncio.Task[Any]] = [*self._tasks]
        if self._watcher is not None:
            tasks.append(self._watcher)
        if self._syncer is not None:
            tasks.append(self._syncer)
        tasks += [node.heartbeat for node in self._nodes.values() if node.heartbeat is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._watcher = None
        self._syncer = None
        self._unsynced.clear()
        for node in self._nodes.values():
            node.heartbeat = None
            node.alive = False
        if remove_nodes:
            await asyncio.gather(*(self._unregister(name) for name in self._nodes))
        self._started = False

    async def add_pool(self, pool: NodePool) -> list[str]:
        """Register `pool`'s nodes on a running cluster and start their kubelets, as nodes a
        cluster autoscaler adds (devcluster/provisioner.py); returns their names. Their names
        must be new."""
        allocatable = {name: to_milli(qty) for name, qty in pool.allocatable().items()}
        names = pool.node_names()
        taken = [name for name in names if name in self._nodes]
        if taken:
            raise ValueError(f"nodes {', '.join(taken)} exist already")
        index = len(self._nodes)
        added = []
        for pool_index, name in enumerate(names):
            ip = str(NODE_IP_NETWORK.network_address + 1 + index + pool_index)
            node = _SimNode(
                name, pool, index + pool_index, dict(allocatable), ip, pool_index=pool_index
            )
            self._nodes[name] = node
            added.append(node)
        self.pools.append(pool)
        await asyncio.gather(*(self._register(node) for node in added))
        for node in added:
            node.heartbeat = asyncio.create_task(
                self._heartbeat(node), name=f"heartbeat {node.name}"
            )
        return names

    def free(self) -> dict[str, Resources]:
        """Each live node's allocatable less what its kubelet admitted (milli-units)."""
        return {
            name: {
                resource: amount - node.used().get(resource, 0)
                for resource, amount in node.allocatable.items()
            }
            for name, node in self._nodes.items()
            if node.alive
        }

    async def kill_node(self, name: str) -> None:
        """Simulate a node failure: its Lease and heartbeat stop and its kubelet does nothing
        more (pods stay as they are; terminating ones never finish), as when a machine dies."""
        node = self._nodes[name]
        node.alive = False
        doomed: list[asyncio.Task[Any]] = [node.heartbeat] if node.heartbeat else []
        doomed += [p.task for p in self._pods.values() if p.node == name and p.task is not None]
        node.heartbeat = None
        for task in doomed:
            task.cancel()
        await asyncio.gather(*doomed, return_exceptions=True)

    async def revive_node(self, name: str) -> None:
        """Bring a killed node's kubelet back, as a restarted kubelet: heartbeats resume, and a
        fresh list re-derives its pods (running ones are adopted, pods bound while it was dead
        are admitted, terminating ones are finished)."""
        node = self._nodes[name]
        if node.alive:
            return
        node.alive = True
        node.ready_since = None
        for uid in [uid for uid, pod in self._pods.items() if pod.node == name]:
            self._release(uid)
        await self._post_status(node, full=False)
        node.heartbeat = asyncio.create_task(self._heartbeat(node), name=f"heartbeat {name}")
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
            self._synced.clear()
            self._watcher = asyncio.create_task(self._watch_pods(), name="sim kubelet pod watch")
            await self._synced.wait()

    async def wait_ready(self, timeout: float = 30.0, interval: float = 0.25) -> None:
        """Until every live node is Ready and the lifecycle controller removed `not-ready`."""
        deadline = asyncio.get_running_loop().time() + timeout
        pending: list[str] = []
        while True:
            selector = (
                f"{SIM_NODE_LABEL} in ({','.join(sorted({p.name_prefix for p in self.pools}))})"
            )
            items = (await self.kube.list(NODES, label_selector=selector)).get("items") or []
            by_name = {item["metadata"]["name"]: item for item in items}
            pending = [
                name
                for name, node in self._nodes.items()
                if node.alive and not node_ready(by_name.get(name))
            ]
            if not pending:
                return
            if asyncio.get_running_loop().time() >= deadline:
                raise TimeoutError(f"sim nodes not Ready after {timeout}s: {', '.join(pending)}")
            await asyncio.sleep(interval)

    # --- nodes --------------------------------------------------------------------------------
    def _node_body(self, node: _SimNode) -> JSON:
        labels = {
            "kubernetes.io/hostname": node.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "sim",
            **node.pool.labels_of(node.pool_index),
            SIM_NODE_LABEL: node.pool.name_prefix,
        }
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": node.name,
                "labels": labels,
                "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            },
            "spec": {"taints": [dict(t) for t in node.pool.taints]},
        }

    async def _register(self, node: _SimNode) -> None:
        body = self._node_body(node)
        try:
            await self.kube.create(NODES, body)
        except ApiError as exc:
            if not exc.conflict:
                raise
            # A namesake from an earlier run: adopt it, keeping the control plane's own taints.
            current = await self.kube.get(NODES, node.name)
            system = [
                t
                for t in (current.get("spec") or {}).get("taints") or []
                if str(t.get("key", "")).startswith(TAINT_PREFIX_SYSTEM)
            ]
            await self.kube.patch(
                NODES,
                node.name,
                {
                    "metadata": {"labels": body["metadata"]["labels"]},
                    "spec": {"taints": system + body["spec"]["taints"]},
                },
            )
        # POST ignores status: capacity, addresses and conditions go through the subresource.
        await self._post_status(node, full=True)
        await self._renew_lease(node)

    async def _unregister(self, name: str) -> None:
        for kind, namespace in ((NODES, None), (LEASES, NODE_LEASE_NAMESPACE)):
            try:
                await self.kube.delete(kind, name, namespace)
            except ApiError as exc:
                if not exc.not_found:
                    logger.warning("could not delete %s %s: %s", kind.plural, name, exc)
            except (aiohttp.ClientError, OSError) as exc:
                logger.warning("could not delete %s %s: %s", kind.plural, name, exc)

    def _conditions(self, node: _SimNode, now: datetime) -> list[JSON]:
        if node.ready_since is None:
            node.ready_since = now
        heartbeat, since = rfc3339(now), rfc3339(node.ready_since)
        healthy = [
            (
                "MemoryPressure",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ]
        conditions = [
            {
                "type": kind,
                "status": "False",
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": heartbeat,
                "lastTransitionTime": since,
            }
            for kind, reason, message in healthy
        ]
        conditions.append(
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status (simulated)",
                "lastHeartbeatTime": heartbeat,
                "lastTransitionTime": since,
            }
        )
        return conditions

    async def _post_status(self, node: _SimNode, *, full: bool) -> None:
        now = self.clock()
        status: JSON = {"conditions": self._conditions(node, now)}
        if full:
            resources = node.pool.allocatable()
            status |= {
                "capacity": resources,
                "allocatable": dict(resources),
                "addresses": [
                    {"type": "InternalIP", "address": node.ip},
                    {"type": "Hostname", "address": node.name},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "images": node.pool.image_list(),
                "nodeInfo": {
                    "machineID": _digest("machine", node.name)[:32],
                    "systemUUID": _digest("system", node.name)[:32],
                    "bootID": _digest("boot", node.name, rfc3339_micro(now))[:32],
                    "kernelVersion": "5.10.0-sim",
                    "osImage": "podgroup-operator simulated node",
                    "containerRuntimeVersion": "sim://0.1.0",
                    "kubeletVersion": KUBELET_VERSION,
                    "kubeProxyVersion": KUBELET_VERSION,
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
            }
        # Merge patch replaces the conditions list; a sim kubelet owns all four, like a kubelet.
        await self.heartbeat_kube.patch(NODES, node.name, {"status": status}, subresource="status")

    async def _renew_lease(self, node: _SimNode) -> None:
        now = rfc3339_micro(self.clock())
        try:
            await self.heartbeat_kube.patch(
                LEASES, node.name, {"spec": {"renewTime": now}}, NODE_LEASE_NAMESPACE
            )
            return
        except ApiError as exc:
            if not exc.not_found:
                raise
        owner: JSON = {}
        with contextlib.suppress(ApiError):
            current = await self.heartbeat_kube.get(NODES, node.name)
            owner = {
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "name": node.name,
                        "uid": current["metadata"]["uid"],
                    }
                ]
            }
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": node.name, "namespace": NODE_LEASE_NAMESPACE, **owner},
            "spec": {
                "holderIdentity": node.name,
                "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                "acquireTime": now,
                "renewTime": now,
            },
        }
        try:
            await self.heartbeat_kube.create(LEASES, lease, NODE_LEASE_NAMESPACE)
        except ApiError as exc:
            if not exc.conflict:  # created by a racing renewal: that renewal counts
                raise

    async def _heartbeat(self, node: _SimNode) -> None:
        """Renew the Lease every `lease_interval`; re-post Ready every `status_interval`."""
        loop = asyncio.get_running_loop()
        last_status = loop.time()
        while True:
            await asyncio.sleep(self.lease_interval)
            try:
                await self._renew_lease(node)
                if loop.time() - last_status >= self.status_interval:
                    await self._post_status(node, full=False)
                    last_status = loop.time()
            except asyncio.CancelledError:
                raise
            except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
                logger.warning("heartbeat of %s failed (will retry): %s", node.name, exc)

    # --- pods: the watch ----------------------------------------------------------------------
    async def _watch_pods(self) -> None:
        """List, then watch from the list's resourceVersion (bookmarks keep it fresh); on 410
        Gone or a broken stream, list again and reconcile, as client-go's reflector does."""
        # Only bound pods matter; a field selector keeps the flood of pending pods away.
        selector = "spec.nodeName!="
        resource_version: str | None = None
        while True:
            try:
                if resource_version is None:
                    listing = await self.kube.list(PODS, field_selector=selector)
                    resource_version = str(listing.get("metadata", {}).get("resourceVersion", ""))
                    self._resync(listing.get("items") or [])
                    self._synced.set()
                async for event, obj in self.kube.watch(
                    PODS, field_selector=selector, resource_version=resource_version
                ):
                    if event == c.WatchEventType.ERROR:
                        if obj.get("code") == 410:
                            resource_version = None
                            break
                        raise ApiError(int(obj.get("code") or 500), obj, "WATCH", "pods")
                    new_version = (obj.get("metadata") or {}).get("resourceVersion")
                    if new_version:
                        resource_version = str(new_version)
                    if event == c.WatchEventType.BOOKMARK:
                        continue
                    if event == c.WatchEventType.DELETED:
                        self._forget(obj)
                    else:
                        self._observe(obj)
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                if exc.gone:
                    resource_version = None
                    continue
                logger.warning("pod watch failed, re-listing: %s", exc)
                resource_version = None
                await asyncio.sleep(0.5)
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
                logger.warning("pod watch broke, re-listing: %s", exc)
                resource_version = None
                await asyncio.sleep(0.5)

    def _resync(self, items: list[JSON]) -> None:
        present = {item["metadata"]["uid"] for item in items}
        for uid in [uid for uid in self._pods if uid not in present]:
            self._release(uid)
        # Kubelet admits pods in creation order; so does the sim after a (re)list.
        for item in sorted(items, key=lambda p: p["metadata"].get("creationTimestamp", "")):
            self._observe(item)

    def _forget(self, pod: JSON) -> None:
        self._release(pod["metadata"]["uid"])

    def _release(self, uid: str) -> None:
        sim_pod = self._pods.pop(uid, None)
        if sim_pod is None:
            return
        if sim_pod.task is not None and not sim_pod.task.done():
            sim_pod.task.cancel()
        node = self._nodes.get(sim_pod.node)
        if node is not None:
            node.admitted.pop(uid, None)

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _observe(self, pod: JSON) -> None:
        """Decide, synchronously and in event order, what the kubelet does about one pod."""
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        node = self._nodes.get(spec.get("nodeName", ""))
        if node is None or not node.alive:
            return
        uid = meta["uid"]
        sim_pod = self._pods.get(uid)
        if meta.get("deletionTimestamp"):
            if sim_pod is None:
                sim_pod = self._pods[uid] = _SimPod(uid, meta["namespace"], meta["name"], node.name)
            if not sim_pod.deleting:
                sim_pod.deleting = True
                if sim_pod.task is not None:
                    sim_pod.task.cancel()
                sim_pod.task = self._spawn(
                    self._finish_deletion(sim_pod), f"delete {_pod_key(pod)}"
                )
            return
        phase = status.get("phase")
        if sim_pod is not None:
            if phase in (c.PodPhase.SUCCEEDED, c.PodPhase.FAILED) and uid in node.admitted:
                # The pod ended by a hand other than ours (a test reporting a crash): its
                # containers are gone, so is what they held, as on a real node.
                del node.admitted[uid]
                if sim_pod.task is not None:
                    sim_pod.task.cancel()
            elif _behind(phase, sim_pod.phase) and sim_pod.sent == len(sim_pod.statuses):
                # The API server lacks what we wrote (a write lost with an API server that
                # went away): write it all again.
                sim_pod.sent = 0
                self._unsynced.add(uid)
            return  # already handled; this is usually the echo of our own status write
        if phase in (c.PodPhase.SUCCEEDED, c.PodPhase.FAILED):
            return
        sim_pod = self._pods[uid] = _SimPod(uid, meta["namespace"], meta["name"], node.name)
        request = pod_requests(pod)
        if phase == c.PodPhase.RUNNING:
            # Already running here (the simulator restarted): adopt it without re-admission.
            node.admitted[uid] = request
            sim_pod.task = self._spawn(
                self._run_pod(node, pod, started=True), f"run {_pod_key(pod)}"
            )
            return
        failure = admission_failure(request, node.used(), node.allocatable)
        if failure is not None:
            sim_pod.task = self._spawn(self._reject(pod, *failure), f"reject {_pod_key(pod)}")
            return
        node.admitted[uid] = request
        sim_pod.task = self._spawn(self._run_pod(node, pod, started=False), f"run {_pod_key(pod)}")

    # --- pods: what the kubelet writes --------------------------------------------------------
    async def _write_pod_status(self, pod: JSON, status: JSON) -> bool:
        """Keep `status` as the pod's and strategic-merge it into pods/status, now or, when the
        API server does not take it now, later (`_sync_statuses`); False when the pod is gone."""
        sim_pod = self._pods.get(pod["metadata"]["uid"])
        if sim_pod is None:
            return False
        sim_pod.statuses.append(status)
        return await self._sync(sim_pod)

    async def _sync(self, sim_pod: _SimPod) -> bool:
        """Write the statuses the API server does not have yet, in order; False when the pod
        is gone. One write at a time per pod: a status kept meanwhile is written by it."""
        if sim_pod.syncing:
            return True
        sim_pod.syncing = True
        try:
            while sim_pod.sent < len(sim_pod.statuses):
                outcome = await self._send_status(sim_pod, sim_pod.statuses[sim_pod.sent])
                if outcome is _Sent.GONE:
                    self._unsynced.discard(sim_pod.uid)
                    return False
                if outcome is _Sent.LATER:
                    self._unsynced.add(sim_pod.uid)
                    return True
                sim_pod.sent += 1
            self._unsynced.discard(sim_pod.uid)
            if sim_pod.warned:
                sim_pod.warned = False
                logger.info("status of %s/%s written", sim_pod.namespace, sim_pod.name)
            return True
        finally:
            sim_pod.syncing = False

    async def _send_status(self, sim_pod: _SimPod, status: JSON) -> _Sent:
        """One status patch, with a short backoff for transient errors."""
        body = {"metadata": {"uid": sim_pod.uid}, "status": status}
        for delay in (*RETRY_DELAYS, None):
            try:
                await self.kube.patch(
                    PODS,
                    sim_pod.name,
                    body,
                    sim_pod.namespace,
                    subresource="status",
                    content_type=STRATEGIC_PATCH,
                )
                return _Sent.WRITTEN
            except ApiError as exc:
                if exc.not_found:
                    return _Sent.GONE
                if exc.conflict:
                    # A namesake with another uid, or a write that lost a race: only the first
                    # means the pod is gone.
                    return await self._still_there(sim_pod, exc)
                if delay is None or not (exc.status == 429 or exc.status >= 500):
                    return self._not_written(sim_pod, exc, later=exc.status == 429)
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                if delay is None:
                    return self._not_written(sim_pod, exc, later=True)
            await asyncio.sleep(delay)
        return _Sent.LATER

    async def _still_there(self, sim_pod: _SimPod, conflict: ApiError) -> _Sent:
        """After a 409: LATER if the pod is still the one we know, else GONE."""
        try:
            current = await self.kube.get(PODS, sim_pod.name, sim_pod.namespace)
        except ApiError as exc:
            return _Sent.GONE if exc.not_found else self._not_written(sim_pod, exc, later=True)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return self._not_written(sim_pod, exc, later=True)
        if (current.get("metadata") or {}).get("uid") != sim_pod.uid:
            return _Sent.GONE
        return self._not_written(sim_pod, conflict, later=True)

    def _not_written(self, sim_pod: _SimPod, exc: BaseException, *, later: bool) -> _Sent:
        """Log a failed write once per pod until it is written; a refusal no retry can mend
        (a 4xx other than 409 and 429) drops the status instead."""
        key = f"{sim_pod.namespace}/{sim_pod.name}"
        if not later:
            logger.warning("status of %s refused, not written: %s", key, exc)
            return _Sent.WRITTEN  # nothing more to do with this one
        if not sim_pod.warned:
            sim_pod.warned = True
            logger.warning("status of %s not written yet, retrying: %s", key, exc)
        return _Sent.LATER

    async def _sync_statuses(self) -> None:
        """Every STATUS_RETRY_SECONDS, write the statuses the API server does not have yet,
        of pods on live nodes (a dead kubelet writes nothing)."""
        while True:
            await asyncio.sleep(STATUS_RETRY_SECONDS)
            writes = []
            for uid in list(self._unsynced):
                sim_pod = self._pods.get(uid)
                node = self._nodes.get(sim_pod.node) if sim_pod is not None else None
                if sim_pod is None or node is None:
                    self._unsynced.discard(uid)
                elif node.alive and not sim_pod.syncing:
                    writes.append(self._sync(sim_pod))
            if writes:
                await asyncio.gather(*writes, return_exceptions=True)

    async def _reject(self, pod: JSON, reason: str, message: str) -> None:
        await self._write_pod_status(
            pod, {"phase": c.PodPhase.FAILED, "reason": reason, "message": message}
        )

    def _container_id(self, pod: JSON, container: str) -> str:
        return "sim://" + _digest(pod["metadata"]["uid"], container)[:32]

    @staticmethod
    def _condition(kind: str, value: bool, when: str, reason: str | None = None) -> JSON:
        condition: JSON = {
            "type": kind,
            "status": "True" if value else "False",
            "lastProbeTime": None,
            "lastTransitionTime": when,
        }
        if reason:
            condition["reason"] = reason
        return condition

    def _running_status(self, node: _SimNode, pod: JSON, accepted: str, started: str) -> JSON:
        spec = pod.get("spec") or {}
        pod_ip = node.ip if spec.get("hostNetwork") else node.pod_ip()
        conditions = [
            self._condition("Initialized", True, started),
            self._condition("Ready", True, started),
            self._condition("ContainersReady", True, started),
        ]
        scheduled = [
            cond
            for cond in (pod.get("status") or {}).get("conditions") or []
            if cond.get("type") == "PodScheduled" and cond.get("status") == "True"
        ]
        if not scheduled:
            conditions.append(self._condition("PodScheduled", True, accepted))
        return {
            "phase": c.PodPhase.RUNNING,
            "conditions": conditions,
            "hostIP": node.ip,
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "startTime": accepted,
            "initContainerStatuses": [
                self._container_status(
                    pod,
                    ctr,
                    {"terminated": self._terminated(pod, ctr, 0, started, started)},
                    ready=True,
                )
                for ctr in spec.get("initContainers") or []
            ],
            "containerStatuses": [
                self._container_status(pod, ctr, {"running": {"startedAt": started}}, ready=True)
                for ctr in spec.get("containers") or []
            ],
        }

    def _terminated(
        self, pod: JSON, container: Mapping[str, Any], code: int, started: str, finished: str
    ) -> JSON:
        return {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": started,
            "finishedAt": finished,
            "containerID": self._container_id(pod, container["name"]),
        }

    def _container_status(
        self, pod: JSON, container: Mapping[str, Any], state: JSON, *, ready: bool
    ) -> JSON:
        image = str(container.get("image") or "")
        return {
            "name": container["name"],
            "state": state,
            "lastState": {},
            "ready": ready,
            "started": "running" in state,
            "restartCount": 0,
            "image": image,
            "imageID": f"sim://{image}@sha256:{_digest('image', image)}",
            "containerID": self._container_id(pod, container["name"]),
        }

    async def _run_pod(self, node: _SimNode, pod: JSON, *, started: bool) -> None:
        """Pending -> (start delay) -> Running -> (optional) Succeeded or Failed."""
        status = pod.get("status") or {}
        if started:
            statuses = status.get("containerStatuses") or []
            running = [
                s["state"]["running"] for s in statuses if "running" in (s.get("state") or {})
            ]
            started_at = running[0]["startedAt"] if running else rfc3339(self.clock())
            start_moment = datetime.fromisoformat(started_at.replace("Z", "+00:00"))
        else:
            accepted = rfc3339(self.clock())
            delay = _seconds_annotation(pod, SIM_ANNOTATION_START_DELAY)
            await asyncio.sleep(self.start_delay if delay is None else delay)
            start_moment = self.clock()
            started_at = rfc3339(start_moment)
            if not await self._write_pod_status(
                pod, self._running_status(node, pod, accepted, started_at)
            ):
                return
        succeed_after = _seconds_annotation(pod, SIM_ANNOTATION_SUCCEED_AFTER)
        fail_after = _seconds_annotation(pod, SIM_ANNOTATION_FAIL_AFTER)
        ends = [(after, False) for after in (succeed_after,) if after is not None]
        ends += [(after, True) for after in (fail_after,) if after is not None]
        if not ends:
            return
        after, fails = min(ends, key=lambda end: (end[0], not end[1]))  # a tie fails
        elapsed = (self.clock() - start_moment).total_seconds()
        await asyncio.sleep(max(after - elapsed, 0.0))
        code = 0
        if fails:
            raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(
                SIM_ANNOTATION_EXIT_CODE, "1"
            )
            try:
                code = int(raw)
            except ValueError:
                code = 1
            code = code or 1  # a failure with exit code 0 would read as success
        await self._terminate(node, pod, code, started_at)

    async def _terminate(self, node: _SimNode, pod: JSON, code: int, started_at: str) -> None:
        finished = rfc3339(self.clock())
        spec = pod.get("spec") or {}
        reason = "PodCompleted"
        status: JSON = {
            "phase": c.PodPhase.SUCCEEDED if code == 0 else c.PodPhase.FAILED,
            "conditions": [
                self._condition("Ready", False, finished, reason),
                self._condition("ContainersReady", False, finished, reason),
            ],
            "containerStatuses": [
                self._container_status(
                    pod,
                    ctr,
                    {"terminated": self._terminated(pod, ctr, code, started_at, finished)},
                    ready=False,
                )
                for ctr in spec.get("containers") or []
            ],
        }
        # Resources free up as the containers exit, before the status write lands.
        node.admitted.pop(pod["metadata"]["uid"], None)
        await self._write_pod_status(pod, status)

    async def _finish_deletion(self, sim_pod: _SimPod) -> None:
        """Stop the "containers", then delete with grace 0 and a uid precondition: the kubelet's
        half of a graceful delete, without which a bound pod stays Terminating forever."""
        await asyncio.sleep(self.delete_delay)
        for delay in (*RETRY_DELAYS, None):
            try:
                await self.kube.delete(
                    PODS, sim_pod.name, sim_pod.namespace, uid=sim_pod.uid, grace_period_seconds=0
                )
                break
            except ApiError as exc:
                if exc.not_found or exc.conflict:
                    break
                if delay is None or not (exc.status == 429 or exc.status >= 500):
                    logger.warning(
                        "could not finish deleting %s/%s: %s", sim_pod.namespace, sim_pod.name, exc
                    )
                    break
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                if delay is None:
                    logger.warning(
                        "could not finish deleting %s/%s: %s", sim_pod.namespace, sim_pod.name, exc
                    )
                    break
            await asyncio.sleep(delay)
        node = self._nodes.get(sim_pod.node)
        if node is not None:
            node.admitted.pop(sim_pod.uid, None)


def _behind(stored: str | None, known: str | None) -> bool:
    """The stored phase is short of the phase the kubelet knows (never so for a phase written
    by another hand past ours)."""
    if known is None:
        return False
    return _PHASE_RANK.get(str(stored or c.PodPhase.PENDING), 0) < _PHASE_RANK.get(known, 0)


def node_ready(node: JSON | None) -> bool:
    """Ready=True in status and no `not-ready`/`unreachable` taint left on the Node."""
    if node is None:
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(cond.get("type") == "Ready" and cond.get("status") == "True" for cond in conditions)
    taints = (node.get("spec") or {}).get("taints") or []
    blocked = any(
        t.get("key") in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
        for t in taints
    )
    return ready and not blocked


# --- command line --------------------------------------------------------------------------------


DEFAULT_COUNT = 3
"""`sim-nodes` nodes in the main pool when neither --count nor --topology says."""


def pools_from_args(args: argparse.Namespace) -> list[NodePool]:
    """The main pool from the flat flags (unless --count 0), then every --pool SPEC. With
    --topology, the main pool is that fabric's nodes: as many as the counts' product (a
    --count given must equal it), each labelled with its domains."""
    pools: list[NodePool] = []
    fabric = parse_fabric(args.topology) if args.topology else None
    count = args.count if args.count is not None else DEFAULT_COUNT
    if fabric is not None:
        if args.count is not None and args.count != fabric.node_count:
            raise ValueError(
                f"--count {args.count} but --topology {args.topology} makes "
                f"{fabric.node_count} nodes; leave out --count"
            )
        count = fabric.node_count
    if count > 0:
        labels = dict(parse_key_value(text) for text in args.label)
        extended = dict(parse_key_value(text, "extended resource") for text in args.extended)
        images = dict(parse_key_value(text, "image") for text in args.image)
        main = NodePool(
            count=count,
            cpu=str(args.cpu),
            memory=str(args.memory),
            pods=args.pods,
            gpu=args.gpu,
            extended=extended,
            labels=labels,
            taints=tuple(parse_taint(text) for text in args.taint),
            name_prefix=args.name_prefix,
            images=images,
        )
        pools.append(main if fabric is None else main.with_fabric(fabric))
    for number, spec in enumerate(args.pool, start=1):
        pools.append(NodePool.from_spec(spec, default_prefix=f"{args.name_prefix}-pool{number}"))
    for pool in pools:
        pool.allocatable()
    return pools


def _describe(pool: NodePool) -> str:
    resources = ", ".join(f"{name}={qty}" for name, qty in pool.allocatable().items())
    extra = ""
    if pool.labels:
        extra += " labels " + ",".join(f"{k}={v}" for k, v in pool.labels.items())
    if pool.taints:
        extra += " taints " + ",".join(
            f"{t['key']}{'=' + t['value'] if t.get('value') else ''}:{t['effect']}"
            for t in pool.taints
        )
    if pool.node_labels:
        keys = list(dict.fromkeys(key for labels in pool.node_labels for key in labels))
        extra += " fabric " + ",".join(
            f"{key}({len({labels.get(key) for labels in pool.node_labels})})" for key in keys
        )
    return f"{pool.count} x {pool.name_prefix}-N ({resources}){extra}"


def provision_template(args: argparse.Namespace, pools: Sequence[NodePool]) -> NodePool | None:
    """The node template of `sim-nodes --provisioner` (None without it): --provision-template,
    else the first pool's shape, labels and taints under `<name-prefix>-scaled`."""
    if not getattr(args, "provisioner", False):
        return None
    prefix = f"{args.name_prefix}-scaled"
    if args.provision_template:
        return NodePool.from_spec(args.provision_template, default_prefix=prefix)
    return dataclasses.replace(pools[0], count=1, name_prefix=prefix, node_labels=())


async def _serve(
    pools: list[NodePool],
    start_delay: float,
    lease_interval: float,
    args: argparse.Namespace | None = None,
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    # KUBECONFIG (a path, or a list of them) is read by the kubernetes package itself.
    kube = KubeClient.from_kubeconfig()
    # Up to a connection per node for heartbeats, as each kubelet has its own; aiohttp opens
    # them only when renewals overlap.
    heartbeat_kube = KubeClient.from_kubeconfig(limit=max(1, sum(pool.count for pool in pools)))
    async with (
        kube,
        heartbeat_kube,
        SimCluster(
            kube,
            pools,
            heartbeat_kube=heartbeat_kube,
            start_delay=start_delay,
            lease_interval=lease_interval,
        ) as sim,
    ):
        for pool in pools:
            print(f"registered {_describe(pool)}", flush=True)
        print(
            f"sim kubelet running for {len(sim.node_names)} nodes; Ctrl-C removes them",
            flush=True,
        )
        template = None if args is None else provision_template(args, pools)
        if template is None or args is None:
            await stop.wait()
        else:
            from podgroup_operator.devcluster.provisioner import SimProvisioner

            print(
                f"provisioner: up to {args.provision_max} x {_describe(template)}, "
                f"{args.provision_delay:g}s after a request is accepted",
                flush=True,
            )
            async with SimProvisioner(
                kube,
                sim,
                template,
                maximum=args.provision_max,
                delay=args.provision_delay,
                booking_seconds=args.booking_seconds,
            ):
                await stop.wait()
        print("stopping: removing sim nodes", flush=True)
    print("removed " + ", ".join(sim.node_names), flush=True)
    return 0


def main(args: argparse.Namespace) -> int:
    """`podgroup-operator sim-nodes`: register the pools, act as their kubelet until a signal."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        pools = pools_from_args(args)
        if pools:
            provision_template(args, pools)  # a bad --provision-template fails before any node
    except ValueError as exc:
        print(f"sim-nodes: {exc}", file=sys.stderr)
        return 2
    if not pools:
        print("sim-nodes: nothing to register (--count 0 and no --pool)", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(pools, args.start_delay, args.lease_interval, args))
    except (ApiError, aiohttp.ClientError, OSError) as exc:
        print(f"sim-nodes: {exc}", file=sys.stderr)
        return 1
