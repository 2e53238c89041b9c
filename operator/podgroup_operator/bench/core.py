"""Benchmark of the pure scheduling core: how long one gang decision takes, and how well it packs.

The operator's latency budget is dominated by this decision (everything else is I/O the
apiserver paces), so it is measured alone: a synthetic or trace-derived cluster is loaded into
one `Snapshot`, every gang is queued up front, and gangs are decided in queue order with each
placement committed. Only `place_group` itself is timed (time.perf_counter), so building the
raw dicts does not count; parsing the raw pods inside the decision does.

Scenarios:
- homogeneous: every node 8 cpu / 32Gi / 110 pods; every member 1 cpu / 2Gi.
- heterogeneous: pools with labels, taints and GPUs; gangs with nodeSelectors, required node
  affinity, tolerations and GPU requests; a few nodes cordoned or not Ready.
- trace: nodes and pod shapes from the Alibaba GPU trace v2023 (Weng et al., USENIX ATC '23).
  The trace has no gangs: consecutive tasks in creation order form gangs of --gang-size.
  Stock Kubernetes cannot share a GPU, so a task asking for a fraction of a GPU requests one
  whole `nvidia.com/gpu` here; GPU allocation rate is allocated devices / all devices.
- anti-affinity: homogeneous nodes in three zones; every member has required anti-affinity
  (hostname) against its own gang's label, so each gang takes one node per member.
- spread: the same nodes; every member has a DoNotSchedule zone topology spread constraint
  (maxSkew 1) over its own gang's label, so each gang spreads over the zones.
- affinity: the same nodes; every member has required pod affinity (zone) to its own gang's
  label, so each gang lands in one zone (its first member's).
- claims: anti-affinity's gangs, each member also mounting a claim of its own that a
  WaitForFirstConsumer provisioner serves in every zone, so every member's volumes are checked
  on every node it is tried on.
- preferred: the same nodes; every member prefers (weight 100) other hosts than its own gang's
  members and (weight 50) their zone: preferred pod anti-affinity and affinity, scored only.
- images: the same nodes, each listing up to 49 images (a kubelet lists at most 50 by default):
  40 small ones every node holds, and of ten training images of 1 to 10 GiB, image k on k
  tenths of the nodes.
  Gang g runs image g mod 10, so the image score (ImageLocality) ranks the nodes; odd gangs'
  members also shun each other's host (required anti-affinity), so they are placed one by one.
- preemption: `--nodes` nodes (8 cpu) full of as many low-priority gangs of 8 one-cpu pods, gang
  g running on nodes g..g+7; one high-priority gang of `--gang-size` members of 8 cpu each asks
  for room. The plan (`plan_preemption`, a what-if that leaves the snapshot as it was) is timed
  `--repeats` times; the answer is the same each time, the spread of times is the point.
- preemption-subgroups: the same, each low-priority gang in 4 sub-groups of 2 (members 2k and
  2k+1, on adjacent nodes), its policy repairing a sub-group alone with 2 of 4 enough: the plan
  takes whole sub-groups rather than whole gangs.

- hostile: `--nodes` nodes (8 cpu), each with two NoSchedule taints, a label of its own (so no
  two share a verdict) and a running pod that binds host port 9100 and mounts an EBS volume of
  its own; then, one at a time, pods that each list
  `--size` things kube-scheduler checks against every node, in a way no node accepts: host
  ports whose last is 9100, inline EBS volumes past every node's limit, tolerations of other
  taints, a node affinity whose `In` list names no node, node-affinity terms of keys no
  node has, topology spread constraints over keys no node has; and containers of twenty images,
  ten of which some nodes list (a score, not a filter: that pod is placed). Each pod's decision
  (a gang of one, refused, or placed and undone) is timed `--repeats` times: the question is
  what one such object costs the loop that decides everyone's gangs.

- topology-rack: `--nodes` nodes (8 cpu) in a fabric of 5 blocks x 10 racks
  (`devcluster.fabric`); `--gangs` gangs of `--gang-size` members of 1 cpu, each required in one
  rack (`spec.topologyConstraint.requiredTopologyLevel: example.com/rack`).
- topology-block: the same fabric; each gang required in one block.
- topology-kai: KAI-Scheduler's scale-test layout, fixed: 512 nodes of 8 GPUs in 4 zones x 8
  blocks x 8 racks x 2 nodes, and one job of 512 members of 2 GPUs, required in one zone,
  preferred in one rack (`--nodes`, `--gangs` and `--gang-size` are ignored).
- subgroups: 1,024 nodes (8 cpu) in 4 zones x 8 blocks x 8 racks x 4 hosts, and `--gangs`
  gangs (100) of 8 sub-groups x 4 members of 1 cpu, each sub-group required in one rack and
  each gang in one block (`spec.subGroups`; `--nodes` and `--gang-size` are ignored). Compare
  with topology-rack at `--gang-size 4`.

- burst: gangs of 1 to 32 whole-node pods on 32 nodes of 8 GPUs, in an order that fills the
  cluster exactly in waves, replayed with a simulated clock (bench/burst.py, bench/replay.py):
  makespan and mean GPU occupancy against the ideal, with and without reservations.
- quota: Kueue's scheduler performance baseline (15,000 workloads in 30 ClusterQueues under 5
  cohorts) as gangs and ElasticQuotas, replayed with a simulated clock that the decisions' own
  time advances (bench/quota.py): usage, time to admission, and the quota decision's cost; the
  JSON line on stdout, a summary beside Kueue's figures on stderr.
- reclaim: KAI-Scheduler PR #1565's shape: a team whose quota is below its min asks 48 GPUs on
  64 nodes of 8 GPUs that another team borrowed whole; the reclaim plan's evicted GPUs over the
  requested, on `--repeats` seeded clusters (20 unless given; bench/reclaim.py).

Usage: `python -m podgroup_operator.bench.core --nodes 5000 --gangs 1000 --gang-size 3`
       `python -m podgroup_operator.bench.core --scenario spread`
       `python -m podgroup_operator.bench.core --scenario preemption --nodes 1000 --repeats 50`
       `python -m podgroup_operator.bench.core --scenario hostile --nodes 1000 --size 5000`
       `python -m podgroup_operator.bench.core --scenario subgroups --gangs 100`
       `python -m podgroup_operator.bench.core --scenario quota`
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import platform
import random
import resource
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from podgroup_operator.api.models import PodGroupSpec
from podgroup_operator.bench.burst import run_burst
from podgroup_operator.bench.quota import print_summary, run_quota
from podgroup_operator.bench.reclaim import print_summary as print_reclaim
from podgroup_operator.bench.reclaim import run_reclaim
from podgroup_operator.bench.stats import percentile
from podgroup_operator.constants import LABEL_POD_GROUP, LABEL_SUB_GROUP, PodPhase
from podgroup_operator.devcluster.fabric import FABRIC_LABEL_PREFIX, parse_fabric
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.scheduling.gang import GangRequest, Placement
from podgroup_operator.scheduling.placement import place_group
from podgroup_operator.scheduling.preemption import PreemptionPlan, plan_preemption
from podgroup_operator.scheduling.queue import order_gangs
from podgroup_operator.scheduling.resources import GPU
from podgroup_operator.scheduling.snapshot import Snapshot
from podgroup_operator.scheduling.subgroups import sub_group_tree
from podgroup_operator.scheduling.topology import topology_of, topology_request
from podgroup_operator.scheduling.volumes import VolumeClaim, volume_claim

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
TRACE_NODES = "openb_node_list_all_node.csv"
TRACE_PODS = "openb_pod_list_default.csv"


def _node(
    name: str,
    allocatable: dict[str, str],
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    *,
    ready: bool = True,
    unschedulable: bool = False,
) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or [], **({"unschedulable": True} if unschedulable else {})},
        "status": {
            "allocatable": allocatable,
            "capacity": dict(allocatable),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def _pod(
    name: str, namespace: str, group: str, requests: dict[str, str], **spec: Any
) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"{namespace}-{name}",
            "labels": {LABEL_POD_GROUP: group},
        },
        "spec": {
            "schedulerName": "podgroup-scheduler",
            "containers": [{"name": "main", "image": "sim", "resources": {"requests": requests}}],
            **spec,
        },
        "status": {"phase": "Pending"},
    }


def _gang(
    index: int,
    size: int,
    requests: dict[str, str],
    *,
    priority: int = 0,
    prefix: str = "gang",
    **spec: Any,
) -> GangRequest:
    namespace = f"team-{index % 10}"
    name = f"{prefix}-{index:05d}"
    pods = [_pod(f"{name}-{i}", namespace, name, requests, **spec) for i in range(size)]
    return GangRequest(
        namespace=namespace,
        name=name,
        uid=f"uid-{name}",
        min_member=size,
        pending=pods,
        priority=priority,
        created=_EPOCH + timedelta(seconds=index),
    )


# --- scenarios -----------------------------------------------------------------------------------
def homogeneous_scenario(
    nodes: int, gangs: int, gang_size: int
) -> tuple[list[dict[str, Any]], list[GangRequest]]:
    node_list = [
        _node(f"node-{i:05d}", {"cpu": "8", "memory": "32Gi", "pods": "110"}) for i in range(nodes)
    ]
    gang_list = [_gang(i, gang_size, {"cpu": "1", "memory": "2Gi"}) for i in range(gangs)]
    return node_list, gang_list


ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
TOPOLOGY_SCENARIOS = ("topology-rack", "topology-block", "topology-kai")
"""The scenarios of `topology_scenario`."""
SCENARIOS = (
    "homogeneous",
    "heterogeneous",
    "trace",
    "anti-affinity",
    "spread",
    "affinity",
    "claims",
    "preferred",
    "images",
    "preemption",
    "preemption-subgroups",
    "hostile",
    "burst",
    *TOPOLOGY_SCENARIOS,
    "subgroups",
    "quota",
    "reclaim",
)
CONSTRAINED = ("anti-affinity", "spread", "affinity", "claims", "preferred", "images")
"""The scenarios of `constrained_scenario`."""
_PROVISIONED = {
    "metadata": {"name": "provisioned"},
    "provisioner": "csi.example.com",
    "volumeBindingMode": "WaitForFirstConsumer",
}
"""The StorageClass of the claims scenario's claims."""


def _claim(namespace: str, name: str) -> VolumeClaim:
    return volume_claim(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "storageClassName": "provisioned",
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
        _PROVISIONED,
    )


def _zoned_nodes(nodes: int) -> list[dict[str, Any]]:
    return [
        _node(
            f"node-{i:05d}",
            {"cpu": "8", "memory": "32Gi", "pods": "110"},
            {ZONE: f"zone-{'abc'[i % 3]}"},
        )
        for i in range(nodes)
    ]


def constrained_scenario(
    kind: str, nodes: int, gangs: int, gang_size: int
) -> tuple[list[dict[str, Any]], list[GangRequest]]:
    """Members of 1 cpu / 2Gi, each gang constrained against its own label (see docstring)."""
    gang_list = []
    for i in range(gangs):
        mine = {"matchLabels": {LABEL_POD_GROUP: f"gang-{i:05d}"}}
        spec: dict[str, Any]
        if kind in ("anti-affinity", "claims") or (kind == "images" and i % 2):
            spec = {
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": mine, "topologyKey": HOSTNAME}
                        ]
                    }
                }
            }
        elif kind == "preferred":
            spec = {
                "affinity": {
                    "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 100,
                                "podAffinityTerm": {"labelSelector": mine, "topologyKey": HOSTNAME},
                            }
                        ]
                    },
                    "podAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 50,
                                "podAffinityTerm": {"labelSelector": mine, "topologyKey": ZONE},
                            }
                        ]
                    },
                }
            }
        elif kind == "affinity":
            spec = {
                "affinity": {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": mine, "topologyKey": ZONE}
                        ]
                    }
                }
            }
        elif kind == "images":
            spec = {}
        else:
            spec = {
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": ZONE,
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": mine,
                    }
                ]
            }
        gang = _gang(i, gang_size, {"cpu": "1", "memory": "2Gi"}, **spec)
        if kind == "claims":
            claims = {}
            for pod in gang.pending:
                meta = pod["metadata"]
                claim = _claim(meta["namespace"], f"{meta['name']}-data")
                pod["spec"]["volumes"] = [
                    {"name": "data", "persistentVolumeClaim": {"claimName": claim.name}}
                ]
                claims[claim.key] = claim
            gang = dataclasses.replace(gang, claims=claims)
        if kind == "images":
            for pod in gang.pending:
                pod["spec"]["containers"][0]["image"] = f"train-{i % 10}:v1"
        gang_list.append(gang)
    node_list = _zoned_nodes(nodes)
    if kind == "images":
        for j, node in enumerate(node_list):
            node["status"]["images"] = [
                {"names": [f"base-{k}:v1"], "sizeBytes": 100 * 2**20} for k in range(40)
            ] + [
                {"names": [f"train-{k}:v1"], "sizeBytes": (k + 1) * 2**30}
                for k in range(10)
                if j % 10 < k
            ]
    return node_list, gang_list


_GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
_HIGHMEM_TAINT = {"key": "dedicated", "value": "highmem", "effect": "NoSchedule"}


def heterogeneous_scenario(
    nodes: int, gangs: int, gang_size: int, rng: random.Random
) -> tuple[list[dict[str, Any]], list[GangRequest]]:
    """60% general (3 zones), 15% tainted high-memory, 20% tainted 8-GPU, 5% cordoned/NotReady."""
    node_list: list[dict[str, Any]] = []
    for i in range(nodes):
        zone = f"zone-{'abc'[i % 3]}"
        slot = i % 20
        if slot < 12:
            node_list.append(
                _node(
                    f"cpu-{i:05d}",
                    {"cpu": "16", "memory": "64Gi", "pods": "110"},
                    {"pool": "general", "topology.kubernetes.io/zone": zone},
                )
            )
        elif slot < 15:
            node_list.append(
                _node(
                    f"mem-{i:05d}",
                    {"cpu": "32", "memory": "256Gi", "pods": "110"},
                    {"pool": "highmem", "topology.kubernetes.io/zone": zone},
                    [_HIGHMEM_TAINT],
                )
            )
        elif slot < 19:
            node_list.append(
                _node(
                    f"gpu-{i:05d}",
                    {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: "8"},
                    {
                        "pool": "gpu",
                        "accelerator": rng.choice(["a100", "h100"]),
                        "topology.kubernetes.io/zone": zone,
                    },
                    [_GPU_TAINT],
                )
            )
        else:
            node_list.append(
                _node(
                    f"bad-{i:05d}",
                    {"cpu": "16", "memory": "64Gi", "pods": "110"},
                    {"pool": "general", "topology.kubernetes.io/zone": zone},
                    ready=i % 40 != 19,
                    unschedulable=i % 40 == 19,
                )
            )
    gang_list: list[GangRequest] = []
    for i in range(gangs):
        kind = rng.random()
        priority = rng.choice([0, 0, 0, 100])
        if kind < 0.5:
            cpu = rng.choice(["500m", "1", "2", "4"])
            gang_list.append(_gang(i, gang_size, {"cpu": cpu, "memory": "2Gi"}, priority=priority))
        elif kind < 0.65:
            zone = f"zone-{rng.choice('abc')}"
            affinity = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "topology.kubernetes.io/zone",
                                        "operator": "In",
                                        "values": [zone],
                                    },
                                    {"key": "pool", "operator": "NotIn", "values": ["gpu"]},
                                ]
                            }
                        ]
                    }
                }
            }
            gang_list.append(
                _gang(
                    i,
                    gang_size,
                    {"cpu": "2", "memory": "8Gi"},
                    priority=priority,
                    affinity=affinity,
                )
            )
        elif kind < 0.8:
            gang_list.append(
                _gang(
                    i,
                    gang_size,
                    {"cpu": "8", "memory": "64Gi"},
                    priority=priority,
                    nodeSelector={"pool": "highmem"},
                    tolerations=[
                        {
                            "key": "dedicated",
                            "operator": "Equal",
                            "value": "highmem",
                            "effect": "NoSchedule",
                        }
                    ],
                )
            )
        else:
            gpus = rng.choice([1, 2, 4, 8])
            accelerator = rng.choice(["a100", "h100"])
            affinity = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "accelerator",
                                        "operator": "In",
                                        "values": [accelerator],
                                    }
                                ]
                            }
                        ]
                    }
                }
            }
            gang_list.append(
                _gang(
                    i,
                    gang_size,
                    {"cpu": str(4 * gpus), "memory": f"{32 * gpus}Gi", GPU: str(gpus)},
                    priority=priority,
                    affinity=affinity,
                    tolerations=[{"key": GPU, "operator": "Exists"}],
                )
            )
    return node_list, gang_list


def trace_scenario(
    trace_dir: str, nodes: int, gangs: int, gang_size: int
) -> tuple[list[dict[str, Any]], list[GangRequest], dict[str, Any]]:
    """Nodes and tasks from the Alibaba GPU trace; consecutive tasks become one gang."""
    root = Path(trace_dir)
    node_list: list[dict[str, Any]] = []
    with (root / TRACE_NODES).open(newline="") as handle:
        for row in csv.DictReader(handle):
            if len(node_list) >= nodes:
                break
            allocatable = {
                "cpu": f"{row['cpu_milli']}m",
                "memory": f"{row['memory_mib']}Mi",
                "pods": "110",
            }
            labels: dict[str, str] = {}
            if int(row["gpu"]):
                allocatable[GPU] = row["gpu"]
                labels["accelerator"] = row["model"]
            node_list.append(_node(row["sn"], allocatable, labels))
    tasks: list[dict[str, str]] = []
    with (root / TRACE_PODS).open(newline="") as handle:
        tasks = sorted(csv.DictReader(handle), key=lambda r: (int(r["creation_time"]), r["name"]))
    tasks = tasks[: gangs * gang_size]
    gang_list: list[GangRequest] = []
    fractional = 0
    for index, start in enumerate(range(0, len(tasks), gang_size)):
        chunk = tasks[start : start + gang_size]
        namespace = "trace"
        name = f"trace-gang-{index:05d}"
        pods = []
        for task in chunk:
            requests = {"cpu": f"{task['cpu_milli']}m", "memory": f"{task['memory_mib']}Mi"}
            gpus = int(task["num_gpu"])
            if gpus:
                requests[GPU] = str(gpus)
                fractional += int(task["gpu_milli"]) < 1000
            pods.append(_pod(task["name"], namespace, name, requests))
        gang_list.append(
            GangRequest(
                namespace=namespace,
                name=name,
                uid=f"uid-{name}",
                min_member=len(pods),
                pending=pods,
                created=_EPOCH + timedelta(seconds=int(chunk[0]["creation_time"])),
            )
        )
    notes = {
        "trace_dir": str(root),
        "trace_files": [TRACE_NODES, TRACE_PODS],
        "gang_grouping": (
            f"tasks sorted by creation_time (then name); consecutive runs of {gang_size} tasks "
            "form one gang with minMember = its size; all gangs queued up front, none depart"
        ),
        "tasks_used": len(tasks),
        "fractional_gpu_tasks_rounded_up_to_one_gpu": fractional,
    }
    return node_list, gang_list, notes


# --- the run -------------------------------------------------------------------------------------
def preemption_scenario(
    nodes: int, sub_groups: bool = False
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes of 8 cpu, each running one pod of each of 8 low-priority gangs (see docstring);
    with `sub_groups`, member j of each in sub-group s<j // 2>."""
    node_list = [
        _node(f"node-{i:05d}", {"cpu": "8", "memory": "32Gi", "pods": "110"}) for i in range(nodes)
    ]
    pods = []
    for g in range(nodes):
        name = f"low-{g:05d}"
        for j in range(8):
            raw = _pod(f"{name}-{j}", "batch", name, {"cpu": "1", "memory": "1Gi"})
            raw["spec"]["nodeName"] = f"node-{(g + j) % nodes:05d}"
            raw["spec"]["priority"] = 0
            raw["status"]["phase"] = PodPhase.RUNNING.value
            if sub_groups:
                raw["metadata"]["labels"][LABEL_SUB_GROUP] = f"s{j // 2}"
            pods.append(raw)
    return node_list, pods


REPAIRED_BY_SUB_GROUP = PodGroupSpec.model_validate(
    {
        "minMember": 4,
        "minSubGroup": 2,
        "subGroups": [{"name": f"s{k}", "minMember": 2} for k in range(4)],
        "policy": {"action": "RestartGang", "scope": "SubGroup"},
    }
)
"""preemption-subgroups: every low-priority gang's spec."""


def run_preemption(
    nodes: int, gang_size: int, repeats: int, sub_groups: bool = False
) -> dict[str, Any]:
    """Time `plan_preemption` for one high-priority gang on a full cluster, `repeats` times."""
    node_list, pods = preemption_scenario(nodes, sub_groups)
    snapshot = Snapshot.build(node_list, pods, gang_of=group_key_of)
    repairs = (
        {("batch", f"low-{g:05d}"): REPAIRED_BY_SUB_GROUP for g in range(nodes)}
        if sub_groups
        else None
    )
    times_ms: list[float] = []
    plan: PreemptionPlan | None = None
    for attempt in range(repeats):
        gang = _gang(
            attempt, gang_size, {"cpu": "8", "memory": "8Gi"}, priority=1000, prefix="high"
        )
        start = time.perf_counter()
        outcome = plan_preemption(gang, snapshot, (), repairs)
        times_ms.append((time.perf_counter() - start) * 1000)
        if not isinstance(outcome, PreemptionPlan):
            raise RuntimeError(f"the preemption scenario found no plan: {outcome.message}")
        plan = outcome
    if plan is None:
        raise ValueError("--repeats must be at least 1")
    ordered = sorted(times_ms)
    return {
        "scenario": "preemption-subgroups" if sub_groups else "preemption",
        "nodes": nodes,
        "low_priority_gangs": nodes,
        "low_priority_pods": len(pods),
        "gang_size": gang_size,
        "repeats": repeats,
        "victim_gangs": sum(1 for v in plan.victims if v.sub_group is None),
        "victim_sub_groups": sum(1 for v in plan.victims if v.sub_group is not None),
        "victim_pods": len(plan.victim_pods),
        "nominated_nodes": len({b.node for b in plan.nominations}),
        "mean_ms": round(statistics.fmean(times_ms), 4),
        "p50_ms": round(percentile(ordered, 0.50), 4),
        "p99_ms": round(percentile(ordered, 0.99), 4),
        "max_ms": round(ordered[-1], 4),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "python": platform.python_version(),
        "example_message": plan.message,
    }


HOSTILE_PORT = 9100


def hostile_scenario(nodes: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes of two taints and a label of their own, each running a pod that holds
    HOSTILE_PORT and an EBS volume, and listing two images: one all nodes list, and one of ten
    that a tenth of the nodes each list."""
    taints = [{"key": f"dedicated-{i}", "value": "x", "effect": "NoSchedule"} for i in range(2)]
    node_list = []
    pods = []
    for i in range(nodes):
        name = f"node-{i:05d}"
        labels = {"node-index": str(i)}  # each node a class of its own, as with an id label
        node_list.append(_node(name, {"cpu": "8", "memory": "32Gi", "pods": "110"}, labels, taints))
        node_list[-1]["status"]["images"] = [
            {"names": ["sim:latest"], "sizeBytes": 2**30},
            {"names": [f"img-{i % 10}:v1"], "sizeBytes": 5 * 2**30},
        ]
        raw = _pod(
            f"exporter-{i:05d}",
            "monitoring",
            f"exporter-{i:05d}",
            {"cpu": "100m"},
            tolerations=[{"operator": "Exists"}],
            volumes=[{"name": "disk", "awsElasticBlockStore": {"volumeID": f"vol-node-{i}"}}],
        )
        raw["spec"]["containers"][0]["ports"] = [
            {"containerPort": HOSTILE_PORT, "hostPort": HOSTILE_PORT}
        ]
        raw["spec"]["nodeName"] = name
        raw["status"]["phase"] = PodPhase.RUNNING.value
        pods.append(raw)
    return node_list, pods


def hostile_pods(size: int) -> dict[str, dict[str, Any]]:
    """Pod specs that each list `size` things no node accepts (see the module docstring)."""
    tolerate = [
        {"key": "dedicated-0", "operator": "Exists"},
        {"key": "dedicated-1", "operator": "Exists"},
    ]
    ports = [{"containerPort": 20000 + i, "hostPort": 20000 + i} for i in range(size - 1)]
    ports.append({"containerPort": HOSTILE_PORT, "hostPort": HOSTILE_PORT})
    main = {"name": "main", "image": "sim", "resources": {"requests": {"cpu": "1"}}}
    listed = {
        "key": "kubernetes.io/hostname",
        "operator": "In",
        "values": [f"x-{i}" for i in range(size)],
    }
    return {
        "host ports": {"containers": [{**main, "ports": ports}], "tolerations": tolerate},
        "inline EBS volumes": {
            "tolerations": tolerate,
            "volumes": [
                {"name": f"d{i}", "awsElasticBlockStore": {"volumeID": f"vol-{i}"}}
                for i in range(size)
            ],
        },
        "tolerations": {
            "tolerations": [
                {"key": f"other-{i}", "operator": "Exists", "effect": "NoSchedule"}
                for i in range(size)
            ]
        },
        "node affinity values": {
            "tolerations": tolerate,
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [listed]}]
                    }
                }
            },
        },
        "node affinity terms": {
            "tolerations": tolerate,
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": f"x-{i}", "operator": "Exists"}]}
                            for i in range(size)
                        ]
                    }
                }
            },
        },
        "container images": {
            "tolerations": tolerate,
            "containers": [main]
            + [{"name": f"c{i}", "image": f"img-{i % 20}:v1"} for i in range(size - 1)],
        },
        "spread constraints": {
            "tolerations": tolerate,
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": f"x-{i}",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "hostile"}},
                }
                for i in range(size)
            ],
        },
    }


def run_hostile(nodes: int, size: int, repeats: int) -> dict[str, Any]:
    """Time one decision per hostile pod, `repeats` times each (see the module docstring)."""
    node_list, pods = hostile_scenario(nodes)
    snapshot = Snapshot.build(node_list, pods, gang_of=group_key_of)
    kinds: dict[str, Any] = {}
    for index, (kind, spec) in enumerate(hostile_pods(size).items()):
        times_ms: list[float] = []
        reason = ""
        for _ in range(repeats):
            gang = _gang(index, 1, {"cpu": "1"}, prefix="hostile", **spec)
            start = time.perf_counter()
            outcome = place_group(gang, snapshot)
            times_ms.append((time.perf_counter() - start) * 1000)
            if isinstance(outcome, Placement):  # a scheduler that ignores what it lists
                outcome.undo()
                reason = f"placed on {outcome.bindings[0].node}"
            else:
                reason = outcome.message.split(" can take another: ", 1)[-1]
        kinds[kind] = {
            "mean_ms": round(statistics.fmean(times_ms), 3),
            "max_ms": round(max(times_ms), 3),
            "outcome": reason,
        }
    return {
        "scenario": "hostile",
        "nodes": nodes,
        "size": size,
        "repeats": repeats,
        "pods": kinds,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "python": platform.python_version(),
    }


def topology_scenario(
    kind: str, nodes: int, gangs: int, gang_size: int
) -> tuple[list[dict[str, Any]], list[GangRequest]]:
    """A labelled fabric and gangs with a topology constraint (see the module docstring)."""
    if kind == "topology-kai":
        spec = "zone=4,block=8,rack=8,host=2"
        allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: "8"}
        requests = {"cpu": "1", "memory": "2Gi", GPU: "2"}
        gangs, gang_size = 1, 512
        required, preferred = FABRIC_LABEL_PREFIX + "zone", FABRIC_LABEL_PREFIX + "rack"
    else:
        spec = f"block=5,rack=10,host={max(nodes // 50, 1)}"
        allocatable = {"cpu": "8", "memory": "32Gi", "pods": "110"}
        requests = {"cpu": "1", "memory": "2Gi"}
        level = "rack" if kind == "topology-rack" else "block"
        required, preferred = FABRIC_LABEL_PREFIX + level, None
    fabric = parse_fabric(spec)
    node_list = [
        _node(f"node-{i:05d}", allocatable, labels) for i, labels in enumerate(fabric.node_labels())
    ]
    request = topology_request(
        required=required,
        preferred=preferred,
        topology="bench",
        topology_levels=fabric.topology_levels(),
    )
    gang_list = [
        dataclasses.replace(_gang(i, gang_size, requests), topology=request) for i in range(gangs)
    ]
    return node_list, gang_list


SUB_GROUPS_PER_GANG = 8
SUB_GROUP_SIZE = 4


def sub_group_scenario(gangs: int) -> tuple[list[dict[str, Any]], list[GangRequest]]:
    """A 4 x 8 x 8 x 4 fabric and gangs of 8 sub-groups of 4, each sub-group in one rack and
    each gang in one block (see the module docstring)."""
    fabric = parse_fabric("zone=4,block=8,rack=8,host=4")
    allocatable = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    node_list = [
        _node(f"node-{i:05d}", allocatable, labels) for i, labels in enumerate(fabric.node_labels())
    ]
    levels = fabric.topology_levels()

    def levels_of(name: str) -> tuple[str, ...] | None:
        return levels if name == "bench" else None

    def within(level: str) -> dict[str, str]:
        return {"topology": "bench", "requiredTopologyLevel": FABRIC_LABEL_PREFIX + level}

    spec = PodGroupSpec.model_validate(
        {
            "minMember": SUB_GROUPS_PER_GANG * SUB_GROUP_SIZE,
            "topologyConstraint": within("block"),
            "subGroups": [
                {"name": f"s{j}", "minMember": SUB_GROUP_SIZE, "topologyConstraint": within("rack")}
                for j in range(SUB_GROUPS_PER_GANG)
            ],
        }
    )
    gang_list = []
    for i in range(gangs):
        gang = _gang(i, SUB_GROUPS_PER_GANG * SUB_GROUP_SIZE, {"cpu": "1", "memory": "2Gi"})
        for k, pod in enumerate(gang.pending):
            pod["metadata"]["labels"][LABEL_SUB_GROUP] = f"s{k // SUB_GROUP_SIZE}"
        gang_list.append(
            dataclasses.replace(
                gang,
                topology=topology_of(spec.topology_constraint, levels_of),
                sub_groups=sub_group_tree(spec, gang.pending, [], levels_of),
            )
        )
    return node_list, gang_list


def run_core(
    nodes: int,
    gangs: int,
    gang_size: int,
    heterogeneous: bool,
    seed: int,
    trace_dir: str | None,
    scenario: str | None = None,
) -> dict[str, Any]:
    """Run one placement scenario and return the measurements (see the module docstring)."""
    rng = random.Random(seed)
    notes: dict[str, Any] = {}
    if scenario is None:
        scenario = "trace" if trace_dir else "heterogeneous" if heterogeneous else "homogeneous"
    if scenario == "trace":
        if not trace_dir:
            raise ValueError("the trace scenario needs --trace DIR")
        node_list, gang_list, notes = trace_scenario(trace_dir, nodes, gangs, gang_size)
    elif scenario == "heterogeneous":
        node_list, gang_list = heterogeneous_scenario(nodes, gangs, gang_size, rng)
    elif scenario in CONSTRAINED:
        node_list, gang_list = constrained_scenario(scenario, nodes, gangs, gang_size)
    elif scenario == "homogeneous":
        node_list, gang_list = homogeneous_scenario(nodes, gangs, gang_size)
    elif scenario in TOPOLOGY_SCENARIOS:
        node_list, gang_list = topology_scenario(scenario, nodes, gangs, gang_size)
        gang_size = len(gang_list[0].pending)
    elif scenario == "subgroups":
        node_list, gang_list = sub_group_scenario(gangs)
        gang_size = len(gang_list[0].pending)
    else:
        raise ValueError(f"unknown placement scenario {scenario!r}; one of {', '.join(SCENARIOS)}")

    snapshot = Snapshot.build(node_list, [])
    total_gpus = sum(n.allocatable.get(GPU, 0) for n in snapshot.nodes.values()) // 1000
    queue = order_gangs(gang_list)
    times_ms: list[float] = []
    placed_pods = refused = 0
    reasons: dict[str, int] = {}
    example_refusal = ""
    for gang in queue:
        start = time.perf_counter()
        outcome = place_group(gang, snapshot)
        times_ms.append((time.perf_counter() - start) * 1000)
        if isinstance(outcome, Placement):
            placed_pods += len(outcome.bindings)
        else:
            refused += 1
            reasons[outcome.reason.value] = reasons.get(outcome.reason.value, 0) + 1
            example_refusal = example_refusal or outcome.message

    used_gpus = (
        total_gpus
        - sum(n.free.get(GPU, 0) for n in snapshot.nodes.values() if GPU in n.allocatable) // 1000
    )
    ordered = sorted(times_ms)
    total_s = sum(times_ms) / 1000
    result: dict[str, Any] = {
        "scenario": scenario,
        "nodes": len(node_list),
        "gangs": len(gang_list),
        "gang_size": gang_size,
        "heterogeneous": scenario == "heterogeneous",
        "seed": seed,
        **notes,
        "decisions": len(times_ms),
        "placed_pods": placed_pods,
        "refused": refused,
        "refusal_reasons": reasons,
        "mean_ms": round(statistics.fmean(times_ms), 4) if times_ms else 0.0,
        "p50_ms": round(percentile(ordered, 0.50), 4) if ordered else 0.0,
        "p99_ms": round(percentile(ordered, 0.99), 4) if ordered else 0.0,
        "max_ms": round(ordered[-1], 4) if ordered else 0.0,
        "pods_per_second": round(placed_pods / total_s, 1) if total_s else 0.0,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "python": platform.python_version(),
    }
    if total_gpus:
        result["gpus_total"] = total_gpus
        result["gpus_allocated"] = used_gpus
        result["gpu_allocation_rate"] = round(used_gpus / total_gpus, 4)
    if example_refusal:
        result["example_refusal"] = example_refusal
    return result


def build_parser() -> argparse.ArgumentParser:
    """The options of `podgroup-operator bench core`."""
    parser = argparse.ArgumentParser(prog="podgroup-operator bench core", description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gangs", type=int, default=1000)
    parser.add_argument("--gang-size", type=int, default=3)
    parser.add_argument("--heterogeneous", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--trace", metavar="DIR", default=None)
    parser.add_argument(
        "--scenario",
        choices=SCENARIOS,
        default=None,
        help="default: trace with --trace, heterogeneous with --heterogeneous, else homogeneous",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="preemption: plans timed (50); hostile: 3; reclaim: seeded clusters (20)",
    )
    parser.add_argument("--size", type=int, default=5000, help="hostile: things each pod lists")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.scenario in ("preemption", "preemption-subgroups"):
        sub_groups = args.scenario == "preemption-subgroups"
        result = run_preemption(args.nodes, args.gang_size, args.repeats or 50, sub_groups)
    elif args.scenario == "hostile":
        result = run_hostile(args.nodes, args.size, args.repeats or 3)
    elif args.scenario == "burst":
        result = run_burst()
    elif args.scenario == "quota":
        result = run_quota()
        print_summary(result)
    elif args.scenario == "reclaim":
        result = run_reclaim(args.repeats or 20)
        print_reclaim(result)
    else:
        result = run_core(
            args.nodes,
            args.gangs,
            args.gang_size,
            args.heterogeneous,
            args.seed,
            args.trace,
            args.scenario,
        )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
