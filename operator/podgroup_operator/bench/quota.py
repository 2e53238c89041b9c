"""`bench core --scenario quota`: Kueue's scheduler performance baseline as gangs and quotas.

Kueue's baseline (kubernetes-sigs/kueue `test/performance/scheduler/configs/baseline/`
`generator.yaml`): 5 cohorts of 6 ClusterQueues, each with a nominal quota of 20 cpu and a
borrowing limit of 100 cpu, and per ClusterQueue three sets of workloads created one after the
other, each set on its own interval from the start: 350 small (1 cpu, running 200 ms, priority
50, every 100 ms), 100 medium (5 cpu, 500 ms, priority 100, every 500 ms) and 50 large (20 cpu,
1,000 ms, priority 200, every 1,200 ms); 15,000 workloads. Its checker (`rangespec.yaml`) bounds
the command's wall time, each ClusterQueue class's average cpu usage as a share of its nominal
quota, and each workload class's mean time from creation to admission.

The same shape here, replayed on the pure core (bench/replay.py) with its quota admission:
- a cohort is a parent ElasticQuota (its own namespace, min = max = the sum of its queues'
  nominal quotas, so cohorts lend nothing to each other);
- a ClusterQueue is a child ElasticQuota in a namespace of its own (min 20 cpu, max 120 cpu:
  nominal plus borrowing limit), its parent the cohort;
- a workload is a gang in its queue's namespace: large as 4 pods of 5 cpu (a gang that must be
  placed whole), medium as 1 pod of 5 cpu, small as 1 pod of 1 cpu;
- the nodes hold exactly the quotas' total: 10 cpu per node (60 nodes for the full shape), so
  placement, not only quota, must find room (a large gang needs four 5-cpu holes).

Time is simulated, but not free: each decision's real time (time.perf_counter around
`place_group` and the reservation book) is added to the simulated clock (`replay(charge_cpu=
True)`), so the figures include the scheduler's own cost as Kueue's wall time does. A gang
refused in a cycle stops the others of its queue and class being decided again in that cycle
(`replay(equivalence=...)`), as Kueue's scheduling equivalence does. Nothing preempts or
reclaims: Kueue's baseline allows both; here every gang waits for room.

The figures are computed as Kueue's recorder (`runner/recorder/recorder.go`) does: a queue's cpu
usage is the integral of its admitted workloads' requests over time, over its monitored time (its
creation, time 0, to its last change, its last workload's end), as a share of its nominal
quota; the class figure sums the integrals and the nominal quotas over the class's window; time
to admission is admission less creation, averaged per class. The same gangs are also replayed
with no quota tree (`set_tree(None)`), to give what the quota decision costs.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from podgroup_operator.api.elastic_quota import normalize
from podgroup_operator.bench.replay import Job, ReplayResult, replay
from podgroup_operator.constants import API_VERSION
from podgroup_operator.scheduling.elastic.tree import QuotaTree, build_tree

CPU = "cpu"
NODE_CPU = 10
NOMINAL_CPU = 20
BORROWING_LIMIT_CPU = 100
COHORTS = 5
QUEUES_PER_COHORT = 6


@dataclass(frozen=True)
class WorkloadClass:
    """One of the generator's workload sets, and the gang it becomes."""

    name: str
    count: int
    interval_s: float
    run_s: float
    priority: int
    cpu: int
    """The workload's whole request; the gang's members share it equally."""
    members: int

    @property
    def member_cpu(self) -> int:
        return self.cpu // self.members


CLASSES = (
    WorkloadClass("small", 350, 0.1, 0.2, 50, 1, 1),
    WorkloadClass("medium", 100, 0.5, 0.5, 100, 5, 1),
    WorkloadClass("large", 50, 1.2, 1.0, 200, 20, 4),
)

KUEUE_BASELINE: Mapping[str, Any] = {
    "source": "kubernetes-sigs/kueue test/performance/scheduler/configs/baseline/rangespec.yaml",
    "wall_s": 351.1,
    "cq_class_usage_pct": 55.9,
    "cq_class_usage_pct_without_hashing": 58.7,
    "mean_time_to_admission_s": {"large": 16.5, "medium": 76.8, "small": 215.5},
    "large_without_hashing_s": 6.7,
}
"""Kueue's published averages (5 runs each) the figures are set beside."""


def cohort_name(c: int) -> str:
    return f"cohort-{c}"


def queue_name(c: int, q: int) -> str:
    """Kueue's ClusterQueue name (`<class>-<set>-<index>-<cohort>`), its namespace here."""
    return f"cq-0-{q}-{cohort_name(c)}"


def _quota(namespace: str, name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ElasticQuota",
        "metadata": {"namespace": namespace, "name": name},
        "spec": dict(spec),
    }


def quota_manifests(cohorts: int, queues: int) -> list[dict[str, Any]]:
    """The ElasticQuotas: per cohort a parent (min = max = its queues' nominal total) and per
    queue a child (min nominal, max nominal plus borrowing limit)."""
    out = []
    for c in range(cohorts):
        total = str(NOMINAL_CPU * queues)
        out.append(
            _quota(cohort_name(c), cohort_name(c), {"min": {CPU: total}, "max": {CPU: total}})
        )
        for q in range(queues):
            out.append(
                _quota(
                    queue_name(c, q),
                    "cq",
                    {
                        "min": {CPU: str(NOMINAL_CPU)},
                        "max": {CPU: str(NOMINAL_CPU + BORROWING_LIMIT_CPU)},
                        "parent": f"{cohort_name(c)}/{cohort_name(c)}",
                    },
                )
            )
    return out


def quota_tree(cohorts: int, queues: int) -> QuotaTree:
    """The tree of `quota_manifests`, read through the API's `normalize`; its pool is the
    nodes' cpu."""
    specs = [normalize(obj) for obj in quota_manifests(cohorts, queues)]
    tree = build_tree(specs, {CPU: NOMINAL_CPU * cohorts * queues * 1000})
    if tree.problems:
        raise ValueError("; ".join(tree.problems))
    return tree


def quota_nodes(cohorts: int, queues: int) -> list[dict[str, Any]]:
    """Nodes of NODE_CPU cpu holding exactly the quotas' total."""
    count = NOMINAL_CPU * cohorts * queues // NODE_CPU
    return [
        {
            "kind": "Node",
            "metadata": {
                "name": f"node-{i:03d}",
                "labels": {"kubernetes.io/hostname": f"node-{i:03d}"},
            },
            "spec": {},
            "status": {
                "allocatable": {CPU: str(NODE_CPU), "memory": "64Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for i in range(count)
    ]


def quota_jobs(cohorts: int, queues: int, counts: Mapping[str, int] | None = None) -> list[Job]:
    """Every workload as a gang in its queue's namespace, created as Kueue's generator creates
    it (workload i of a set at (i + 1) intervals from the start); `counts` overrides the
    classes' counts (a smaller run)."""
    jobs = []
    for c in range(cohorts):
        for q in range(queues):
            namespace = queue_name(c, q)
            for wc in CLASSES:
                count = wc.count if counts is None else counts[wc.name]
                for i in range(count):
                    jobs.append(
                        Job(
                            name=f"{namespace}.{wc.name}-{i}",
                            size=wc.members,
                            requests={CPU: str(wc.member_cpu)},
                            run_seconds=wc.run_s,
                            created=round((i + 1) * wc.interval_s, 6),
                            priority=wc.priority,
                            namespace=namespace,
                        )
                    )
    return jobs


def class_of(job: Job) -> str:
    return job.name.rpartition(".")[2].rpartition("-")[0]


def equivalence(job: Job) -> tuple[str, str]:
    """Jobs refused alike within a cycle: same queue (quota), same class (members, run)."""
    return (job.namespace, class_of(job))


def usage_figures(jobs: Sequence[Job], result: ReplayResult) -> dict[str, Any]:
    """Kueue's recorder's usage: per queue, the integral of admitted cpu over its monitored
    time [0, its last end], as a percentage of its nominal quota; and the class figure."""
    integral: dict[str, float] = {}
    last: dict[str, float] = {}
    for job in jobs:
        if job.name not in result.starts:
            continue
        cpu = int(job.requests[CPU]) * job.size
        end = result.ends[job.name]
        integral[job.namespace] = integral.get(job.namespace, 0.0) + cpu * (
            end - result.starts[job.name]
        )
        last[job.namespace] = max(last.get(job.namespace, 0.0), end)
    per_queue = {
        ns: 100 * integral[ns] / (NOMINAL_CPU * last[ns]) for ns in integral if last[ns] > 0
    }
    window = max(last.values(), default=0.0)
    class_pct = (
        100 * sum(integral.values()) / (NOMINAL_CPU * len(integral) * window) if window else 0.0
    )
    return {
        "cq_class_usage_pct": round(class_pct, 1),
        "cq_usage_pct_min": round(min(per_queue.values(), default=0.0), 1),
        "cq_usage_pct_mean": round(statistics.fmean(per_queue.values()), 1) if per_queue else 0.0,
    }


def admission_figures(jobs: Sequence[Job], result: ReplayResult) -> dict[str, float]:
    """Mean seconds from creation to admission, per class."""
    waits: dict[str, list[float]] = {}
    for job in jobs:
        if job.name in result.starts:
            waits.setdefault(class_of(job), []).append(result.starts[job.name] - job.created)
    return {name: round(statistics.fmean(w), 3) for name, w in sorted(waits.items())}


def _figures(jobs: Sequence[Job], result: ReplayResult) -> dict[str, Any]:
    return {
        "makespan_s": round(max(result.ends.values(), default=0.0), 3),
        **usage_figures(jobs, result),
        "mean_time_to_admission_s": admission_figures(jobs, result),
        "decision_cpu_s": round(result.decision_seconds, 3),
        "decisions": result.decisions,
        "decision_mean_us": round(1e6 * result.decision_seconds / result.decisions, 1)
        if result.decisions
        else 0.0,
        "placing_mean_us": round(1e6 * result.placing_seconds / len(result.starts), 1)
        if result.starts
        else 0.0,
        "skipped_as_equivalent": result.skipped,
        "refusals": dict(sorted(result.refusals.items())),
        "cycles": result.cycles,
        "admitted": len(result.starts),
        "unplaced": len(result.unplaced),
    }


def run_quota(
    cohorts: int = COHORTS,
    queues: int = QUEUES_PER_COHORT,
    counts: Mapping[str, int] | None = None,
    *,
    charge_cpu: bool = True,
    reserve: bool = True,
) -> dict[str, Any]:
    """Replay the baseline with the quota tree, then the same gangs without it; the figures
    beside Kueue's (see the module docstring)."""
    nodes, jobs = quota_nodes(cohorts, queues), quota_jobs(cohorts, queues, counts)
    tree = quota_tree(cohorts, queues)
    out: dict[str, Any] = {
        "scenario": "quota",
        "cohorts": cohorts,
        "queues": cohorts * queues,
        "workloads": len(jobs),
        "nodes": len(nodes),
        "node_cpu": NODE_CPU,
        "gangs": "large 4 x 5 cpu, medium 1 x 5 cpu, small 1 x 1 cpu",
        "cpu_time_on_clock": charge_cpu,
        "reservations": reserve,
    }
    for label, with_tree in (("quotas", tree), ("no_quotas", None)):
        result = replay(
            nodes,
            jobs,
            reserve=reserve,
            quotas=with_tree,
            charge_cpu=charge_cpu,
            equivalence=equivalence,
        )
        out[label] = _figures(jobs, result)
    with_q, without = out["quotas"], out["no_quotas"]
    out["decision_cpu_ratio"] = (
        round(with_q["decision_cpu_s"] / without["decision_cpu_s"], 2)
        if without["decision_cpu_s"]
        else None
    )
    out["decision_mean_ratio"] = (
        round(with_q["decision_mean_us"] / without["decision_mean_us"], 2)
        if without["decision_mean_us"]
        else None
    )
    out["placing_mean_ratio"] = (
        round(with_q["placing_mean_us"] / without["placing_mean_us"], 2)
        if without["placing_mean_us"]
        else None
    )
    out["kueue"] = dict(KUEUE_BASELINE)
    return out


def print_summary(out: Mapping[str, Any], stream: TextIO = sys.stderr) -> None:
    """The figures beside Kueue's, readable (the JSON line carries them all)."""
    q, k = out["quotas"], out["kueue"]
    wait, kwait = q["mean_time_to_admission_s"], k["mean_time_to_admission_s"]
    lines = [
        f"quota: {out['workloads']} workloads in {out['queues']} quotas under "
        f"{out['cohorts']} cohorts, {out['nodes']} nodes x {out['node_cpu']} cpu",
        f"  {'':28}{'here (simulated)':>18}{'Kueue':>12}",
        f"  {'makespan / wall (s)':28}{q['makespan_s']:>18}{k['wall_s']:>12}",
        f"  {'cq class usage (%)':28}{q['cq_class_usage_pct']:>18}"
        f"{k['cq_class_usage_pct']:>7} / {k['cq_class_usage_pct_without_hashing']}",
        f"  {'cq usage min / mean (%)':28}"
        f"{q['cq_usage_pct_min']:>10} / {q['cq_usage_pct_mean']:<5}{'':>12}",
    ]
    for name in ("large", "medium", "small"):
        lines.append(
            f"  {'time to admission ' + name + ' (s)':28}{wait.get(name, '-'):>18}"
            f"{kwait[name]:>12}"
            + (f" ({k['large_without_hashing_s']} without hashing)" if name == "large" else "")
        )
    lines.append(
        f"  decision cpu: {q['decision_cpu_s']} s over {q['decisions']} decisions "
        f"({q['decision_mean_us']} us each); without quotas "
        f"{out['no_quotas']['decision_cpu_s']} s over {out['no_quotas']['decisions']} "
        f"({out['no_quotas']['decision_mean_us']} us); ratio total {out['decision_cpu_ratio']}, "
        f"per decision {out['decision_mean_ratio']} (target <= 2); a decision that places: "
        f"{q['placing_mean_us']} us with quotas, {out['no_quotas']['placing_mean_us']} us "
        f"without, ratio {out['placing_mean_ratio']}"
    )
    print("\n".join(lines), file=stream)
