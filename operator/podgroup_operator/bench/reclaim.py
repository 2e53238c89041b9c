"""`bench core --scenario reclaim`: what a quota reclaim evicts for what it needs (KAI's shape).

KAI-Scheduler PR #1565 reports a reclaim where a job asking 48 GPUs evicted 376 GPUs of running
work. The shape here: 64 nodes of 8 GPUs (512 GPUs); two teams' ElasticQuotas of min 256 GPUs
each; team B borrowed the whole cluster with gangs of 8-GPU pods (one node per pod) of random
sizes, plus gangs of small pods (1 or 2 GPUs each) that share nodes with one another; team A,
idle until now, asks for one gang of 6 pods of 8 GPUs (48 GPUs, six whole nodes). Its quota is
below its min while B borrows, so the gang reclaims: `scheduling.reclaim.plan_reclaim` chooses
the victims (whole gangs) by simulating the gang's placement on what they free.

Printed over `--repeats` seeded clusters (20 by default): the evicted GPUs over the 48 requested
(the target: at most 1.25 wherever whole gangs allow it), beside the best a choice among the
whole-node gangs alone could do (the smallest sum of their sizes that reaches 6 nodes: where
their sizes cannot make 6, freeing the rest means evicting gangs of small pods that straddle
nodes), the number of victim gangs, and the plan's time. Nothing is timed but the plan.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from typing import Any, TextIO

from podgroup_operator.api.elastic_quota import QuotaSpec
from podgroup_operator.constants import LABEL_POD_GROUP, PodPhase
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.scheduling.elastic.tree import build_tree
from podgroup_operator.scheduling.gang import GangRequest
from podgroup_operator.scheduling.reclaim import OVER_EVICTION, plan_reclaim
from podgroup_operator.scheduling.resources import GPU
from podgroup_operator.scheduling.snapshot import Snapshot
from podgroup_operator.scheduling.victims import PreemptionPlan

NODES = 64
NODE_GPUS = 8
QUOTA_MIN_GPUS = 256
ASK_PODS = 6
"""The reclaimer: 6 pods of 8 GPUs, 48 GPUs (KAI PR #1565's request)."""
WHOLE_NODE_GANG_SIZES = (1, 2, 3, 4, 6, 8, 12, 16)
SMALL_POD_GPUS = (1, 2)


def _node(name: str) -> dict[str, Any]:
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(NODE_GPUS)}
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "allocatable": allocatable,
            "capacity": dict(allocatable),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _pod(
    namespace: str, group: str, index: int, gpus: int, node: str | None = None
) -> dict[str, Any]:
    name = f"{group}-{index}"
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
            **({"nodeName": node} if node else {}),
            "containers": [
                {"name": "main", "image": "sim", "resources": {"requests": {GPU: str(gpus)}}}
            ],
        },
        "status": {"phase": PodPhase.RUNNING if node else PodPhase.PENDING},
    }


def borrowed_cluster(seed: int) -> list[dict[str, Any]]:
    """Team B's running pods filling every GPU of the cluster: whole-node gangs of random sizes
    on about three quarters of the nodes, gangs of small pods packed on the rest."""
    rng = random.Random(seed)
    names = [f"node-{i:03d}" for i in range(NODES)]
    rng.shuffle(names)
    pods: list[dict[str, Any]] = []
    free = list(names)
    whole = NODES * 3 // 4
    gang = 0
    while whole > 0:
        size = min(rng.choice(WHOLE_NODE_GANG_SIZES), whole)
        for i in range(size):
            pods.append(_pod("team-b", f"big-{gang}", i, NODE_GPUS, free.pop()))
        whole -= size
        gang += 1
    # The rest: gangs of 1- and 2-GPU pods, each gang spread over two nodes or more.
    slots = [(node, NODE_GPUS) for node in free]
    while slots:
        per_pod = rng.choice(SMALL_POD_GPUS)
        size = rng.randint(2, 8)
        placed = 0
        index = 0
        while placed < size and slots:
            node, left = slots[index % len(slots)]
            take = min(per_pod, left)
            pods.append(_pod("team-b", f"small-{gang}", placed, take, node))
            placed += 1
            if left - take == 0:
                slots.pop(index % len(slots))
            else:
                slots[index % len(slots)] = (node, left - take)
                index += 1
        gang += 1
    return pods


def whole_node_best(pods: list[dict[str, Any]]) -> float:
    """The smallest evicted/requested a choice among whole-node gangs alone can reach: the
    least sum of their sizes (in nodes) that is at least ASK_PODS, over ASK_PODS."""
    sizes: dict[str, int] = {}
    for pod in pods:
        group = pod["metadata"]["labels"][LABEL_POD_GROUP]
        if group.startswith("big-"):
            sizes[group] = sizes.get(group, 0) + 1
    reachable = {0}
    for size in sizes.values():
        reachable |= {total + size for total in reachable}
    return min(total for total in reachable if total >= ASK_PODS) / ASK_PODS


def run_reclaim(repeats: int = 20) -> dict[str, Any]:
    """Plan the reclaim on `repeats` seeded clusters; the measurements (see the docstring)."""
    nodes = [_node(f"node-{i:03d}") for i in range(NODES)]
    specs = [
        QuotaSpec(key=(team, team), min={GPU: QUOTA_MIN_GPUS * 1000}, max={})
        for team in ("team-a", "team-b")
    ]
    tree = build_tree(specs, {GPU: NODES * NODE_GPUS * 1000})
    ask = [_pod("team-a", "train", i, NODE_GPUS) for i in range(ASK_PODS)]
    requested = ASK_PODS * NODE_GPUS
    ratios: list[float] = []
    whole: list[float] = []
    victims: list[int] = []
    seconds: list[float] = []
    for seed in range(repeats):
        running = borrowed_cluster(seed)
        whole.append(whole_node_best(running))
        snapshot = Snapshot.build(nodes, running, gang_of=group_key_of)
        snapshot.quotas.set_tree(tree)
        gang = GangRequest(
            namespace="team-a", name="train", uid="uid-train", min_member=ASK_PODS, pending=ask
        )
        started = time.perf_counter()
        plan = plan_reclaim(gang, snapshot, lambda key: 3600.0)
        seconds.append(time.perf_counter() - started)
        if not isinstance(plan, PreemptionPlan):
            raise RuntimeError(f"seed {seed}: no reclaim plan: {plan.message}")
        evicted = 0
        for victim in plan.victims:
            for pod in victim.pods:
                entry = snapshot.pod(pod.uid)
                assert entry is not None
                evicted += entry.info.request.get(GPU, 0) // 1000
        ratios.append(evicted / requested)
        victims.append(len(plan.victims))
    return {
        "scenario": "reclaim",
        "nodes": NODES,
        "requested_gpus": requested,
        "repeats": repeats,
        "evicted_over_requested": {
            "max": round(max(ratios), 3),
            "median": round(statistics.median(ratios), 3),
            "each": [round(r, 3) for r in ratios],
            "whole_node_gangs_alone_each": [round(r, 3) for r in whole],
        },
        "bound": float(OVER_EVICTION),
        "within_bound": sum(1 for r in ratios if r <= OVER_EVICTION),
        "never_worse_than_whole_node_gangs": all(
            r <= w + 1e-9 for r, w in zip(ratios, whole, strict=True)
        ),
        "victim_gangs": {"max": max(victims), "median": statistics.median(victims)},
        "plan_ms": {
            "median": round(statistics.median(seconds) * 1000, 2),
            "max": round(max(seconds) * 1000, 2),
        },
    }


def print_summary(result: dict[str, Any], out: TextIO = sys.stderr) -> None:
    """A readable line beside KAI PR #1565's figure."""
    ratio = result["evicted_over_requested"]
    print(
        f"reclaim of {result['requested_gpus']} GPUs on {result['nodes']} nodes, "
        f"{result['repeats']} clusters: evicted/requested max {ratio['max']}, median "
        f"{ratio['median']} (bound {result['bound']}; {result['within_bound']} of "
        f"{result['repeats']} within it; never above what whole-node gangs alone allow: "
        f"{result['never_worse_than_whole_node_gangs']}; "
        f"KAI PR #1565: 376/48 = 7.83); victim gangs max {result['victim_gangs']['max']}; plan "
        f"{result['plan_ms']['median']} ms median, {result['plan_ms']['max']} ms max",
        file=out,
    )
