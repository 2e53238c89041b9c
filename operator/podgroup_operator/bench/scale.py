"""`podgroup-operator bench scale`: the operator under a backlog or an arrival of gangs.

What a user with a big, busy cluster sees: a fresh dev cluster, sim nodes in a child process
(their kubelet work does not share the measuring process), then either

* `--mode backlog`: every PodGroup and pod exists before `podgroup-operator run` starts (as
  after an upgrade or a crash); the clock starts when the operator process starts;
* `--mode arrival`: the operator runs first; gangs are then created at `--rate` gangs a second.

A watch on pods and PodGroups (opened before anything is created) timestamps what it sees:
the first and last bind, each pod turning Running, each group turning Running. It prints one
JSON object: first bind and last bind (seconds from the start), pods bound per second between
them, status convergence (per group: from its last member Running to the group's phase Running)
p50/p99/max, status changes per group (the watch's MODIFIED events that changed `status`: the
status PATCHes the operator sent, since nothing else writes PodGroup status), the operator's
peak RSS (VmHWM from /proc; its writer process's apart, `writer_peak_rss_mb`), the slowest
groups' timelines (`slowest_groups`: the last member bound and Running, and each status write
with its phase, in seconds from the start), the groups written most often with what each
write changed (`most_written_groups`; `status_patches_per_group` also counts the groups by
writes), what the operator's own metrics say of the run (`operator_metrics`: event loop lags
and garbage collector runs over 0.25, 1 and 5 s, informers that listed more than once or
failed, gang decisions by result with their mean and the count over a second, status writes),
when its event loop was held and whether its garbage collector held it (`loop_held`, its own
log lines, in seconds from the start), the time until every pod is Running (`all_running_s`,
from the start), the CPU seconds each process of the side (etcd, kube-apiserver,
kube-controller-manager, sim-nodes, the scheduler, the operator's writer process) spent from the
scheduler's start to the end (on a small machine they share the same cores, so they show where
the time of a run went), the
requests the API server served in that time by verb and resource, with the mean time its handler
took for each (`apiserver_requests`, from its own metrics: which writes and reads a side cost it),
and the Events in the bench namespace by reason at the end (`Scheduled` posted so far, the groups'
`PhaseChanged`, and whatever else the run caused, such as `NodeNotReady` if a node's heartbeats
fall behind). A side whose scheduler process exits stops there (`scheduler_exit_code`). A side that
reaches `--timeout`, or whose scheduler exited, also prints what it was still waiting for
(`stuck`: pods never bound, bound but never Running, groups never Running with their last phase
and condition reasons) and the last lines of its scheduler's and sim nodes' logs on stderr.

A side ends when every pod is Running (and, for the operator, every group), not at the last
bind: on two cores a scheduler that floods the apiserver with binds starves the sim kubelets'
status patches, so a run cut at the last bind would charge one side's CPU and time for the kubelets'
work and not the other's. Bind rate and time to all Running are both printed, each with its ratio.

`--versus kube-scheduler` runs the same backlog on a second fresh cluster with kube-scheduler
built from the same Debian source (`dev-cluster build --with-scheduler`; client QPS and burst
2000, no leader election) placing the same pods one by one, and prints both side by side with
the ratios (`pods_per_s_ratio`: ours over theirs; `all_running_ratio`: their time to all Running
over ours; above 1 is better for us). Convergence does not apply there: nothing writes PodGroup
status.

`--failover` runs a second operator replica beside the first; once half the pods are bound, the
one holding the leader Lease is killed with -9 (its writer process goes with it; `--failover
term` sends SIGTERM instead, on which it hands the Lease over), and the side goes on until the
other has drained the rest. It prints `failover`: the signal, when it was sent and how many
pods were bound then, how long the other took to hold the Lease (read every tenth of a second
meanwhile) and to bind its first pod, how many binds landed in between (in flight at the
signal), the nodes whose pods' cpu requests exceed their allocatable at the end, and the pods
that failed. Give the nodes just the room the gangs need (`--node-cpu`) for the capacity check
to mean something. `cpu_seconds` has both replicas (`scheduler`, started first, and `standby`),
the signalled one's up to the signal; the writer's and the memory figures are the survivor's.

`--repeat N` does all of it N times, each on fresh clusters, and prints every run and the spread
of each figure (min, median, max): on a small machine one run's figures swing with the machine.

Figures are printed, never asserted: tests only check that the command works.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from podgroup_operator import constants as c
from podgroup_operator.adapters import heap
from podgroup_operator.adapters.informers import Informer
from podgroup_operator.adapters.kube import (
    EVENTS,
    NODES,
    PODGROUPS,
    PODS,
    Kind,
    KubeClient,
    gather_limited,
)
from podgroup_operator.api.quantity import to_milli
from podgroup_operator.bench.prepare import create_namespace, install_crd, until
from podgroup_operator.bench.stats import percentile
from podgroup_operator.devcluster import cluster as devcluster
from podgroup_operator.devcluster.process import OperatorProcess, leading
from podgroup_operator.devcluster.simnodes import node_ready

NAMESPACE = "bench"
IN_FLIGHT = 64
KUBE_SCHEDULER = devcluster.SCHEDULER


@dataclass
class Observed:
    """What the watches saw, in seconds since `start` (set when the scheduler under test starts)."""

    start: float = 0.0
    wall_start: float = 0.0
    """`time.time()` when `start` was set: to place the operator's log lines (`_loop_held`)."""
    bound: dict[str, float] = field(default_factory=dict)
    pod_running: dict[str, float] = field(default_factory=dict)
    pod_group: dict[str, str] = field(default_factory=dict)
    group_running: dict[str, float] = field(default_factory=dict)
    status_writes: dict[str, list[tuple[float, str | None]]] = field(default_factory=dict)
    """Per group, when the watch saw its status change, and the phase it then had."""
    status_changes: dict[str, list[list[str]]] = field(default_factory=dict)
    """Per group, beside each of `status_writes`, what the write changed (`_changed`)."""
    last_status: dict[str, Any] = field(default_factory=dict)

    def now(self) -> float:
        return time.monotonic() - self.start


def _slim_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """What `_pod_event` reads of a pod, and the store needs.

    Slim, so that CPython's collector (set as the operator's, `heap.configure` in `main`) does
    not walk whole pods: an event read during a pause gets a late timestamp, which would show as
    convergence the scheduler under test did not cause.
    """
    return {
        "metadata": _slim_metadata(pod),
        "spec": {"nodeName": (pod.get("spec") or {}).get("nodeName")},
        "status": {"phase": (pod.get("status") or {}).get("phase")},
    }


def _slim_group(group: dict[str, Any]) -> dict[str, Any]:
    """What `_group_event` reads of a PodGroup (its whole status), and the store needs."""
    return {"metadata": _slim_metadata(group), "status": group.get("status")}


def _slim_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata") or {}
    return {key: metadata.get(key) for key in ("name", "namespace", "resourceVersion")}


def _observe(
    kube: KubeClient, kind: Kind, slim: Callable[[dict[str, Any]], dict[str, Any]], on_event: Any
) -> Informer:
    """An informer on the bench namespace: it survives 410 Gone and closed watches, which a
    bare watch did not at 50,000 pods (the run then waited for its timeout)."""
    informer = Informer(kube, kind, slim, namespace=NAMESPACE, name=f"bench-{kind.plural}")
    informer.add_handler(lambda event_type, obj, old: on_event(obj))
    return informer


SYNC_TIMEOUT = 120.0
"""Seconds the bench's own watches get for their first complete list of a fresh, empty namespace
(well under a second here); past it the side stops rather than wait for ever."""


async def _wait_synced(informers: list[Informer], timeout: float) -> None:
    """Wait for every informer's first complete list; TimeoutError naming the ones without it.

    An informer retries a failing list for ever (right for the operator, whose probes say it is
    not ready); a bench must say which list it never got instead of waiting in silence.
    """
    try:
        async with asyncio.timeout(timeout):
            await asyncio.gather(*(informer.synced.wait() for informer in informers))
    except TimeoutError:
        late = [
            f"{informer.name} ({informer.stats.failures} failed tries)"
            for informer in informers
            if not informer.synced.is_set()
        ]
        raise TimeoutError(
            f"no complete list within {timeout:.0f}s for {', '.join(late)}: see the warnings above"
        ) from None


def _pod_event(seen: Observed, pod: dict[str, Any]) -> None:
    name = pod["metadata"]["name"]
    if pod.get("spec", {}).get("nodeName") and name not in seen.bound:
        seen.bound[name] = seen.now()
    if (pod.get("status") or {}).get(
        "phase"
    ) == c.PodPhase.RUNNING and name not in seen.pod_running:
        seen.pod_running[name] = seen.now()


def _group_event(seen: Observed, group: dict[str, Any]) -> None:
    name = group["metadata"]["name"]
    status = group.get("status")
    if status != seen.last_status.get(name):
        phase = (status or {}).get("phase")
        seen.status_writes.setdefault(name, []).append((seen.now(), phase))
        seen.status_changes.setdefault(name, []).append(
            _changed(seen.last_status.get(name), status)
        )
    seen.last_status[name] = status
    if (status or {}).get("phase") == c.Phase.RUNNING and name not in seen.group_running:
        seen.group_running[name] = seen.now()


def _changed(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[str]:
    """The status fields a write changed, conditions by type (`conditions.Scheduled`): what a
    group written more often than the rest was written for."""
    before, after = before or {}, after or {}
    changed = sorted(
        key
        for key in before.keys() | after.keys()
        if key != "conditions" and before.get(key) != after.get(key)
    )

    def by_type(status: dict[str, Any]) -> dict[str, Any]:
        return {
            str(cond.get("type")): cond
            for cond in status.get("conditions") or []
            if isinstance(cond, dict)
        }

    old, new = by_type(before), by_type(after)
    changed += sorted(
        f"conditions.{kind}" for kind in old.keys() | new.keys() if old.get(kind) != new.get(kind)
    )
    return changed


def _podgroup(index: int) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": f"g{index}", "namespace": NAMESPACE},
        "spec": {"minMember": 0},  # set by the caller
    }


def _pod(group: int, member: int, scheduler: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"g{group}-{member}",
            "namespace": NAMESPACE,
            "labels": {c.LABEL_POD_GROUP: f"g{group}"},
        },
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "w",
                    "image": "sim",
                    "resources": {"requests": {"cpu": cpu, "memory": "16Mi"}},
                }
            ],
        },
    }


async def _create_gangs(kube: KubeClient, gangs: range, size: int, scheduler: str, cpu: str) -> int:
    bodies: list[tuple[Kind, dict[str, Any]]] = []
    for index in gangs:
        group = _podgroup(index)
        group["spec"]["minMember"] = size
        bodies.append((PODGROUPS, group))
        bodies.extend((PODS, _pod(index, member, scheduler, cpu)) for member in range(size))
    results = await gather_limited(
        IN_FLIGHT, *(kube.create(kind, body, NAMESPACE) for kind, body in bodies)
    )
    return sum(isinstance(result, Exception) for result in results)


async def _prepare(kube: KubeClient, nodes: int, timeout: float) -> None:
    await install_crd(kube)
    await create_namespace(kube, NAMESPACE, timeout, interval=0.5)

    async def enough_ready() -> bool:
        return sum(map(node_ready, (await kube.list(NODES))["items"])) >= nodes

    await until(enough_ready, f"{nodes} sim nodes not Ready within {timeout:.0f}s", timeout, 0.5)


def _peak_rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time the process has used so far (/proc/PID/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_usage(pids: dict[str, int]) -> dict[str, float | None]:
    return {name: _cpu_seconds(pid) for name, pid in pids.items()}


def _cpu_spent(before: dict[str, float | None], after: dict[str, float | None]) -> dict[str, float]:
    """CPU seconds each process spent between two readings (both needed), to the clock tick
    (/proc counts ticks, hundredths here), so that a tiny backlog's time is not rounded to 0.0."""
    spent = {}
    for name, end in after.items():
        start = before.get(name, 0.0)
        if end is not None and start is not None:
            spent[name] = round(end - start, 2)
    return spent


RequestTotals = dict[str, tuple[float, float]]
"""Per `VERB resource[/subresource]`: (requests served, seconds spent in their handlers)."""


def _apiserver_requests(state: devcluster.ClusterState) -> RequestTotals:
    """The API server's own request counters so far (`apiserver_request_total` and the sum of
    `apiserver_request_duration_seconds`), by verb and resource: both sides saturate the
    same two cores, so the rate a side reaches is set by what each pod costs the API server, and
    its CPU seconds alone do not say which requests cost it."""
    status, _, body = devcluster.api_get(state, "/metrics", timeout=30)
    if status != 200:
        raise RuntimeError(f"GET /metrics of the API server answered {status}")
    totals: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == "apiserver_request_total":
                slot = 0
            elif sample.name == "apiserver_request_duration_seconds_sum":
                slot = 1
            else:
                continue
            labels = sample.labels
            resource = labels.get("resource", "")
            if labels.get("subresource"):
                resource += "/" + labels["subresource"]
            key = f"{labels.get('verb', '')} {resource}".rstrip()
            totals.setdefault(key, [0.0, 0.0])[slot] += sample.value
    return {key: (count, seconds) for key, (count, seconds) in totals.items()}


LAG_THRESHOLDS = (0.25, 1.0, 5.0)
"""Event loop lags `_operator_figures` counts samples over, in seconds (buckets of the metric)."""


def _operator_figures(metrics_text: str) -> dict[str, Any]:
    """What the operator's own /metrics say of its run: how often its event loop was held past
    each of LAG_THRESHOLDS (from its half-second lag samples), its collector's runs (how many,
    their total time, how many lasted past each threshold), its informers' lists, failures and
    watch stalls for any kind that had more than its first list, its gang decisions by result
    with their mean and the count over a second, and its status writes.

    The watches time what the cluster shows, not why a group waited; a tail of slow groups
    clustered in one second is told apart by these (the loop held, a relist of every pod, a slow
    decision) from an API server that was slow to answer.
    """
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            key = tuple(sorted(sample.labels.items()))
            samples.setdefault(sample.name, {})[key] = sample.value

    def value(name: str, **labels: str) -> float:
        return samples.get(name, {}).get(tuple(sorted(labels.items())), 0.0)

    def series(histogram: str, label: str) -> list[dict[str, str]]:
        """The label sets of a histogram's series, by its one label."""
        return [{label: dict(key)[label]} for key in samples.get(f"{histogram}_count", {})]

    def total(histogram: str, part: str, of: list[dict[str, str]]) -> float:
        return sum(value(f"{histogram}_{part}", **labels) for labels in of)

    def over(histogram: str, of: list[dict[str, str]]) -> dict[str, int]:
        """Observations past each of LAG_THRESHOLDS, summed over the series `of`."""
        count = total(histogram, "count", of)
        return {
            f"{limit:g}": round(
                count - sum(value(f"{histogram}_bucket", le=str(limit), **x) for x in of)
            )
            for limit in LAG_THRESHOLDS
        }

    lag, gc = "podgroup_event_loop_lag_seconds", "podgroup_gc_pause_seconds"
    generations = series(gc, "generation")
    figures: dict[str, Any] = {
        "loop_lag_samples": round(total(lag, "count", [{}])),
        "loop_lag_over_s": over(lag, [{}]),
        "gc_pauses": {
            "collections": round(total(gc, "count", generations)),
            "seconds": round(total(gc, "sum", generations), 2),
            "over_s": over(gc, generations),
        },
        "status_writes": round(value("podgroup_status_writes_total")),
    }
    informers = {}
    for labels, lists in samples.get("podgroup_informer_lists_total", {}).items():
        kind = dict(labels)["kind"]
        failures = value("podgroup_informer_failures_total", kind=kind)
        stalls = value("podgroup_informer_watch_stalls_total", kind=kind)
        synced = value("podgroup_informer_synced", kind=kind)
        if not lists and synced and not failures and not stalls:
            continue  # an optional kind this cluster does not serve: absent, no trouble
        if lists != 1 or failures or stalls:
            informers[kind] = {
                "lists": round(lists),
                "failures": round(failures),
                "stalls": round(stalls),
            }
    figures["informer_trouble"] = informers
    decisions: dict[str, Any] = {}
    decision = "podgroup_scheduling_attempt_duration_seconds"
    for result in series(decision, "result"):
        count = total(decision, "count", [result])
        if count:
            decisions[result["result"]] = {
                "count": round(count),
                "mean_ms": round(total(decision, "sum", [result]) / count * 1000, 2),
                "over_1_s": over(decision, [result])["1"],
            }
    figures["decisions"] = decisions
    return figures


LOOP_HELD = "the event loop was held "
LOOP_HELD_KEPT = 20


def _loop_held(log_path: Path, wall_start: float) -> list[dict[str, Any]]:
    """The operator's lines saying its event loop was held (`controllers.runtime.HeldLoop`),
    at most LOOP_HELD_KEPT, each at its time in seconds from the start.

    The metrics count how often the loop was held; these say when, and whether the
    garbage collector held it, to set beside the slowest groups' timelines."""
    found: list[dict[str, Any]] = []
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return found
    for line in lines:
        where = line.find(LOOP_HELD)
        if where < 0:
            continue
        try:
            at = dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        except ValueError:
            continue
        found.append({"at_s": round(at - wall_start, 2), "said": line[where:]})
        if len(found) >= LOOP_HELD_KEPT:
            break
    return found


def _scrape_operator(process: OperatorProcess) -> dict[str, Any] | None:
    """`_operator_figures` of the running operator; None (and a line on stderr) if it does not
    answer: a side's figures never depend on it."""
    url = f"http://127.0.0.1:{process.metrics_port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return _operator_figures(response.read().decode())
    except (OSError, ValueError) as exc:
        print(f"bench scale: the operator's metrics not read: {exc}", file=sys.stderr)
        return None


def _requests_spent(before: RequestTotals, after: RequestTotals) -> dict[str, Any]:
    """The requests served between two readings, most first, each with the mean time its handler
    took (a WATCH's is how long it stayed open)."""
    spent = []
    for key, (count, seconds) in after.items():
        start_count, start_seconds = before.get(key, (0.0, 0.0))
        served = round(count - start_count)
        if served > 0:
            mean_ms = (seconds - start_seconds) / served * 1000
            spent.append((served, key, {"count": served, "mean_ms": round(mean_ms, 1)}))
    return {key: figures for _, key, figures in sorted(spent, key=lambda item: -item[0])}


async def _events_by_reason(kube: KubeClient) -> dict[str, int]:
    """Events in the bench namespace by reason, at the end of a side: the narration each
    scheduler sent through the apiserver while it placed the backlog (each one a write that
    competes with binds and kubelet updates on a small machine)."""
    counts: dict[str, int] = {}
    token: str | None = None
    while True:
        page = await kube.list_page(EVENTS, NAMESPACE, limit=1000, continue_token=token)
        for event in page.get("items") or ():
            reason = str(event.get("reason") or "")
            counts[reason] = counts.get(reason, 0) + 1
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return dict(sorted(counts.items()))


def _summary(seen: Observed, pods: int, groups: int) -> dict[str, Any]:
    times = sorted(seen.bound.values())
    result: dict[str, Any] = {
        "pods": pods,
        "groups": groups,
        "bound": len(times),
        "groups_running": len(seen.group_running),
    }
    if times:
        span = times[-1] - times[0]
        result.update(
            first_bind_s=round(times[0], 2),
            last_bind_s=round(times[-1], 2),
            pods_per_s=round(len(times) / span, 1) if span > 0 else None,
        )
    if len(seen.pod_running) >= pods:
        result["all_running_s"] = round(max(seen.pod_running.values()), 2)
    last_member = _last_member(seen.pod_running, seen.pod_group)
    lags = {
        group: max(0.0, running_at - last_member[group])
        for group, running_at in seen.group_running.items()
        if group in last_member
    }
    if lags:
        values = list(lags.values())
        result["convergence_ms"] = {
            "p50": round(percentile(values, 0.5) * 1000),
            "p99": round(percentile(values, 0.99) * 1000),
            "max": round(max(values) * 1000),
        }
        result["slowest_groups"] = _slowest(seen, lags, last_member)
    if seen.status_writes:
        changes = [len(writes) for writes in seen.status_writes.values()]
        result["status_patches_per_group"] = {
            "mean": round(statistics.mean(changes), 2),
            "max": max(changes),
            "groups_by_count": {
                str(count): number for count, number in sorted(Counter(changes).items())
            },
        }
        result["most_written_groups"] = _most_written(seen)
    return result


def _last_member(at: dict[str, float], pod_group: dict[str, str]) -> dict[str, float]:
    """Per group, the latest of its members' times in `at`, in one pass over the pods (a scan
    of every pod per group took minutes at 100,000 pods)."""
    last: dict[str, float] = {}
    for pod, when in at.items():
        group = pod_group.get(pod)
        if group is not None:
            last[group] = max(when, last.get(group, when))
    return last


SLOWEST_GROUPS = 5


def _slowest(
    seen: Observed, lags: dict[str, float], last_running: dict[str, float]
) -> list[dict[str, Any]]:
    """The SLOWEST_GROUPS groups with the longest convergence, each with its timeline: when its
    last member was bound and Running, and every status write the watch saw, with its phase.

    A percentile says how long the tail is, not what it waited for; a timeline tells a
    write that came late from one that came early with a phase the members had already left
    (`Pending` written, then `Running` queued behind it)."""
    slowest = sorted(lags, key=lambda group: -lags[group])[:SLOWEST_GROUPS]
    members = set(slowest)
    last_bound = _last_member(
        {pod: at for pod, at in seen.bound.items() if seen.pod_group.get(pod) in members},
        seen.pod_group,
    )
    return [
        {
            "group": group,
            "convergence_ms": round(lags[group] * 1000),
            "last_bound_s": round(last_bound[group], 2) if group in last_bound else None,
            "last_running_s": round(last_running[group], 2),
            "status_writes": [
                [round(at, 2), phase] for at, phase in seen.status_writes.get(group, [])
            ],
        }
        for group in slowest
    ]


MOST_WRITTEN_GROUPS = 3


def _most_written(seen: Observed) -> list[dict[str, Any]]:
    """The MOST_WRITTEN_GROUPS groups with the most status writes, each write with its time,
    phase and the fields it changed.

    The mean and max of writes per group say that some group was written five times, not
    whether for its counts, a condition or a phase it then left again."""
    most = sorted(seen.status_writes, key=lambda group: (-len(seen.status_writes[group]), group))
    result = []
    for group in most[:MOST_WRITTEN_GROUPS]:
        changes = seen.status_changes.get(group, [])
        writes = [
            [round(at, 2), phase, changes[index] if index < len(changes) else []]
            for index, (at, phase) in enumerate(seen.status_writes[group])
        ]
        result.append({"group": group, "status_writes": writes})
    return result


@dataclass
class Plan:
    mode: str
    nodes: int
    gangs: int
    size: int
    cpu: str
    node_cpu: str
    rate: float
    timeout: float
    operator_args: list[str] = field(default_factory=list)
    failover: str | None = None
    """`--failover`: KILL or TERM, the signal the leader gets; None without a failover."""


KILL, TERM = "kill", "term"
"""`--failover`'s signals to the leader: SIGKILL, or SIGTERM (a rollout's)."""
FAILOVER_AT = 0.5
"""`--failover`: the share of the pods bound when the leader is signalled."""


@dataclass
class _Failover:
    """`--failover`: the replicas by name, and what happened when the leader was signalled."""

    replicas: dict[str, OperatorProcess]
    signal: str
    signalled: str | None = None
    """The name of the replica signalled."""
    signalled_at: float | None = None
    bound_at_signal: int = 0
    signalled_cpu: float | None = None
    """The signalled replica's CPU seconds up to the signal."""
    led_at: float | None = None
    stopping: OperatorProcess | None = None
    """The replica signalled, until the side ends (SIGTERM: it may still be handing over)."""

    async def step(self, kube: KubeClient, seen: Observed, total: int) -> OperatorProcess | None:
        """Signal the leader once FAILOVER_AT of the pods are bound; then note when the other
        holds the Lease. Returns the replica that schedules now, None while it is unknown."""
        leader = await leading(kube, self.replicas.values())
        name = next((n for n, r in self.replicas.items() if r is leader), None)
        if self.signalled is None:
            if leader is None or name is None or len(seen.bound) < total * FAILOVER_AT:
                return leader
            pid = _pid_of(leader)
            self.signalled_cpu = _cpu_seconds(pid) if pid is not None else None
            self.bound_at_signal = len(seen.bound)
            del self.replicas[name]
            if self.signal == KILL:
                leader.stop(kill=True)  # at once
            elif leader.process is not None:
                leader.process.terminate()  # its hand-over is watched, not waited for here
            self.stopping = leader
            self.signalled, self.signalled_at = name, seen.now()
        elif self.led_at is None and leader is not None:
            self.led_at = seen.now()
        return next(iter(self.replicas.values()))

    @property
    def watching(self) -> bool:
        """Until the other replica holds the Lease after the signal, the side looks every 0.1 s
        (not every 0.5 s): for a signal close to FAILOVER_AT, and a hand-over timed closely
        (SIGTERM's target is 2 s)."""
        return self.led_at is None

    def report(self, seen: Observed, over_capacity: list[str], failed: int) -> dict[str, Any]:
        report: dict[str, Any] = {
            "signal": self.signal,
            "signalled": self.signalled,
            "bound_at_signal": self.bound_at_signal,
        }
        if self.signalled_at is None:
            return report
        report["signalled_at_s"] = round(self.signalled_at, 2)
        if self.led_at is not None:
            report["led_after_s"] = round(self.led_at - self.signalled_at, 2)
            binds = sorted(seen.bound.values())
            report["binds_between"] = sum(self.signalled_at < t <= self.led_at for t in binds)
            after = [t for t in binds if t > self.led_at]
            if after:
                report["first_bind_after_signal_s"] = round(after[0] - self.signalled_at, 2)
        report["over_capacity_nodes"] = over_capacity[:STUCK_NAMES]
        report["over_capacity_count"] = len(over_capacity)
        report["failed_pods"] = failed
        return report


async def _capacity_check(kube: KubeClient) -> tuple[list[str], int]:
    """(nodes whose live pods request more cpu than they allocate, pods that Failed)."""
    nodes = (await kube.list(NODES))["items"]
    allocatable = {
        n["metadata"]["name"]: to_milli(
            ((n.get("status") or {}).get("allocatable") or {}).get("cpu", 0)
        )
        for n in nodes
    }
    used: dict[str, int] = {}
    failed = 0
    for pod in (await kube.list(PODS, NAMESPACE))["items"]:
        phase = (pod.get("status") or {}).get("phase")
        failed += phase == c.PodPhase.FAILED
        node = (pod.get("spec") or {}).get("nodeName")
        if node and phase not in (c.PodPhase.SUCCEEDED, c.PodPhase.FAILED):
            for container in pod["spec"].get("containers") or ():
                cpu = ((container.get("resources") or {}).get("requests") or {}).get("cpu")
                used[node] = used.get(node, 0) + (to_milli(cpu) if cpu else 0)
    over = sorted(n for n, milli in used.items() if milli > allocatable.get(n, 0))
    return over, failed


async def _run_side(plan: Plan, state_dir: Path, scheduler: str) -> dict[str, Any]:  # noqa: PLR0915
    """One fresh cluster, sim nodes, the gangs, the scheduler under test; its figures."""
    state = devcluster.up(state_dir)
    sim = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("podgroup-operator")),
            "sim-nodes",
            "--count",
            str(plan.nodes),
            "--cpu",
            plan.node_cpu,
            "--memory",
            "512Gi",
            "--pods",
            str(max(110, plan.gangs * plan.size // plan.nodes * 2)),
        ],
        env={"KUBECONFIG": str(state.kubeconfig), "PATH": "/usr/bin:/bin"},
        stdout=(state_dir / "sim.log").open("ab"),
        stderr=subprocess.STDOUT,
    )
    process: subprocess.Popen[bytes] | OperatorProcess | None = None
    kube = KubeClient.from_kubeconfig(str(state.kubeconfig), limit=IN_FLIGHT + 8)
    watches: list[asyncio.Task[None]] = []
    # Bound before `try`: a side stopped while it creates the gangs (SIGTERM, Ctrl-C) reaches
    # the `finally` before the failover exists, and a name unbound there skipped the rest of
    # the clean-up, leaving the cluster and the sim nodes running.
    failover: _Failover | None = None
    try:
        await _prepare(kube, plan.nodes, timeout=120)
        seen = Observed(start=time.monotonic())
        observers = [
            _observe(kube, PODS, _slim_pod, lambda p: _pod_event(seen, p)),
            _observe(kube, PODGROUPS, _slim_group, lambda g: _group_event(seen, g)),
        ]
        watches = [asyncio.create_task(observer.run()) for observer in observers]
        await _wait_synced(observers, SYNC_TIMEOUT)
        for group in range(plan.gangs):
            for member in range(plan.size):
                seen.pod_group[f"g{group}-{member}"] = f"g{group}"
        pod_scheduler = (
            c.SCHEDULER_NAME if scheduler == c.OPERATOR_NAME else c.DEFAULT_SCHEDULER_NAME
        )
        errors = 0
        if plan.mode == "backlog":
            errors += await _create_gangs(
                kube, range(plan.gangs), plan.size, pod_scheduler, plan.cpu
            )
        # Read and parsed (about a megabyte of text) before the clock starts, outside the timing.
        requests_before = await asyncio.to_thread(_apiserver_requests, state)
        seen.start = time.monotonic()
        seen.wall_start = time.time()
        process = _start_scheduler(scheduler, state, state_dir, plan.operator_args)
        watched = {**state.pids, "sim-nodes": sim.pid}
        scheduler_pid = _pid_of(process)
        if scheduler_pid is not None:
            watched["scheduler"] = scheduler_pid
        if plan.failover and isinstance(process, OperatorProcess):
            standby = OperatorProcess(
                state.kubeconfig, state_dir / "operator-standby.log", plan.operator_args
            )
            standby.start()
            failover = _Failover({"scheduler": process, "standby": standby}, plan.failover)
            if (standby_pid := _pid_of(standby)) is not None:
                watched["standby"] = standby_pid
        cpu_before = _cpu_usage(watched)
        cpu_before["scheduler"] = 0.0  # it just started: all its time counts
        if plan.mode == "arrival":
            if isinstance(process, OperatorProcess):
                await asyncio.to_thread(process.wait_ready)
                # Gangs arriving meet the webhooks, as in a real install (the cluster, and the
                # configurations with it, go away after the run).
                await asyncio.to_thread(process.install_webhooks)
            await asyncio.sleep(3)  # the informers' first list
            seen.start = time.monotonic()
            seen.wall_start = time.time()
            for index in range(plan.gangs):
                errors += await _create_gangs(
                    kube, range(index, index + 1), plan.size, pod_scheduler, plan.cpu
                )
                await asyncio.sleep(max(0.0, (index + 1) / plan.rate - seen.now()))
        total = plan.gangs * plan.size
        deadline = time.monotonic() + plan.timeout
        exit_code: int | None = None
        while time.monotonic() < deadline:
            done = len(seen.pod_running) >= total and (
                scheduler != c.OPERATOR_NAME or len(seen.group_running) >= plan.gangs
            )
            if failover is not None:
                process = await failover.step(kube, seen, total) or process
            exit_code = _exit_code(process)
            if done or exit_code is not None:
                break
            await asyncio.sleep(0.1 if failover is not None and failover.watching else 0.5)
        writers = process.children() if isinstance(process, OperatorProcess) else []
        for number, child in enumerate(writers):
            # The operator's writer process (adapters/writer.py), started after the scheduler:
            # all its time counts, and its memory is the operator's too.
            watched[f"scheduler-writer{number or ''}"] = child
        cpu_after = _cpu_usage(watched)  # at the end of the side, before any summing up
        if failover is not None and failover.signalled is not None:
            cpu_after[failover.signalled] = failover.signalled_cpu  # up to the signal
        operator_figures = (
            await asyncio.to_thread(_scrape_operator, process)
            if isinstance(process, OperatorProcess) and exit_code is None
            else None
        )
        requests_after = await asyncio.to_thread(_apiserver_requests, state)
        result = _summary(seen, total, plan.gangs)
        result["cpu_seconds"] = _cpu_spent(cpu_before, cpu_after)
        result["apiserver_requests"] = _requests_spent(requests_before, requests_after)
        result["create_errors"] = errors
        result["events"] = await _events_by_reason(kube)
        if operator_figures is not None:
            result["operator_metrics"] = operator_figures
        if isinstance(process, OperatorProcess):
            result["loop_held"] = _loop_held(process.log_path, seen.wall_start)
        result["timed_out"] = time.monotonic() >= deadline
        if exit_code is not None:
            result["scheduler_exit_code"] = exit_code
        if failover is not None:
            result["failover"] = failover.report(seen, *await _capacity_check(kube))
        if result["timed_out"] or exit_code is not None:
            result["stuck"] = _stuck(seen, plan, scheduler)
            _print_log_tails(state_dir)
        pid = _pid_of(process)
        if pid is not None:
            result["peak_rss_mb"] = _peak_rss_mb(pid)
            if writers:
                result["writer_peak_rss_mb"] = sum(_peak_rss_mb(child) or 0.0 for child in writers)
        if scheduler != c.OPERATOR_NAME:
            for key in ("convergence_ms", "status_patches_per_group", "groups_running"):
                result.pop(key, None)
        return result
    finally:
        for task in watches:
            task.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
        await kube.close()
        if failover is not None:
            for replica in [*failover.replicas.values(), failover.stopping]:
                if replica is not None:
                    replica.stop()
        if isinstance(process, OperatorProcess):
            process.stop()
        elif process is not None:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        sim.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            sim.wait(timeout=10)
        devcluster.down(state_dir)


STUCK_NAMES = 20
"""How many names of each kind `_stuck` lists: enough to see a pattern, bounded at any size."""

LOG_TAIL_LINES = 60


def _stuck(seen: Observed, plan: Plan, scheduler: str) -> dict[str, Any]:
    """What a side that timed out was still waiting for, as the watches last saw it.

    A run that ends at its timeout says only that; which pods were never bound, which were
    bound but never Running, and which groups never turned Running (with the phase and reasons
    their status last showed) tell the scheduler's fault from the sim kubelets' or the watch's.
    """
    names = [f"g{group}-{member}" for group in range(plan.gangs) for member in range(plan.size)]
    unbound = [name for name in names if name not in seen.bound]
    not_running = [name for name in names if name in seen.bound and name not in seen.pod_running]
    stuck: dict[str, Any] = {
        "unbound": {"count": len(unbound), "first": unbound[:STUCK_NAMES]},
        "bound_not_running": {"count": len(not_running), "first": not_running[:STUCK_NAMES]},
    }
    if scheduler == c.OPERATOR_NAME:
        groups = [
            f"g{group}" for group in range(plan.gangs) if f"g{group}" not in seen.group_running
        ]
        stuck["groups_not_running"] = {
            "count": len(groups),
            "first": {
                name: _status_gist(seen.last_status.get(name)) for name in groups[:STUCK_NAMES]
            },
        }
    return stuck


def _status_gist(status: Any) -> dict[str, Any]:
    """A group's last status in brief: its phase and the reason of each condition."""
    if not isinstance(status, dict):
        return {"phase": None}
    conditions = status.get("conditions") or []
    return {
        "phase": status.get("phase"),
        "conditions": {
            str(cond.get("type")): f"{cond.get('status')} {cond.get('reason')}"
            for cond in conditions
            if isinstance(cond, dict)
        },
    }


def _print_log_tails(state_dir: Path) -> None:
    """The last lines of each log the side wrote (scheduler, sim nodes), on stderr: the state
    directory is removed when the run ends, and a timed-out run is the one whose logs matter."""
    for log in sorted(state_dir.glob("*.log")):
        with contextlib.suppress(OSError):
            lines = log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
            print(f"--- last {len(lines)} lines of {log.name} ---", file=sys.stderr)
            for line in lines:
                print(line[:500], file=sys.stderr)


def _exit_code(process: OperatorProcess | subprocess.Popen[bytes]) -> int | None:
    """The scheduler's exit code if it has ended, else None.

    A scheduler that dies (a port taken, a crash at start) binds nothing more, and the run ends
    then, saying why, rather than at its timeout."""
    popen = process.process if isinstance(process, OperatorProcess) else process
    return None if popen is None else popen.poll()


def _pid_of(process: OperatorProcess | subprocess.Popen[bytes]) -> int | None:
    if isinstance(process, OperatorProcess):
        return process.process.pid if process.process else None
    return process.pid


def _start_scheduler(
    scheduler: str, state: devcluster.ClusterState, state_dir: Path, operator_args: list[str]
) -> OperatorProcess | subprocess.Popen[bytes]:
    if scheduler == c.OPERATOR_NAME:
        process = OperatorProcess(state.kubeconfig, state_dir / "operator.log", operator_args)
        process.start()
        return process
    return devcluster.start_kube_scheduler(state.kubeconfig, state_dir)


def _positive(text: str) -> int:
    """A `--repeat`: a whole number of runs, at least 1."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of runs: use a whole number of 1 or more (e.g. 5)"
        )
    return number


def build_parser() -> argparse.ArgumentParser:
    """The options of `podgroup-operator bench scale`."""
    parser = argparse.ArgumentParser(prog="podgroup-operator bench scale", description=__doc__)
    parser.add_argument("--mode", choices=["backlog", "arrival"], default="backlog")
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--gangs", type=int, default=1000)
    parser.add_argument("--gang-size", type=int, default=10)
    parser.add_argument("--pod-cpu", default="10m", help="each pod's cpu request")
    parser.add_argument("--node-cpu", default="64", help="each sim node's cpu")
    parser.add_argument("--rate", type=float, default=20.0, help="arrival: gangs per second")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to drain")
    parser.add_argument("--versus", choices=[KUBE_SCHEDULER], default=None)
    parser.add_argument(
        "--operator-args",
        default="",
        help="more arguments for `podgroup-operator run`, as one shell-quoted string "
        '(e.g. --operator-args="--write-process --bind-concurrency 256")',
    )
    parser.add_argument(
        "--repeat",
        type=_positive,
        default=1,
        help="runs in a row (each on fresh clusters); above 1 prints every run and the "
        "min, median and max of each figure (`spread`)",
    )
    parser.add_argument(
        "--failover",
        nargs="?",
        const=KILL,
        choices=[KILL, TERM],
        default=None,
        help="a second operator replica; the leader gets SIGKILL (kill, the default) or "
        "SIGTERM (term) once half the pods are bound; prints `failover`, the signal and how long "
        "the other replica took to take over",
    )
    return parser


def main(argv: Sequence[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    if args.failover and args.versus:
        print("--failover is the operator's alone: leave out --versus", file=sys.stderr)
        return 2
    if args.versus and not (devcluster.BINARIES / "bin" / KUBE_SCHEDULER).exists():
        print(
            "kube-scheduler is not built: run `podgroup-operator dev-cluster build "
            "--with-scheduler` first",
            file=sys.stderr,
        )
        return 2
    if args.versus and args.mode != "backlog":
        print("--versus compares backlogs only: use --mode backlog", file=sys.stderr)
        return 2
    plan = Plan(
        mode=args.mode,
        nodes=args.nodes,
        gangs=args.gangs,
        size=args.gang_size,
        cpu=args.pod_cpu,
        node_cpu=args.node_cpu,
        rate=args.rate,
        timeout=args.timeout,
        operator_args=shlex.split(args.operator_args),
        failover=args.failover,
    )
    # The bench's watches time what the scheduler under test does: the collector must not pause
    # them (see `_slim_pod`).
    heap.configure()
    if args.repeat == 1:
        report = _report(plan, versus=bool(args.versus))
        print(json.dumps(report, indent=2))
        return 0 if not _failed(report) else 1
    reports: list[dict[str, Any]] = []
    printed: dict[str, Any] = {"runs": reports}
    for _ in range(args.repeat):
        try:
            reports.append(_report(plan, versus=bool(args.versus)))
        except Exception as exc:
            # An hour of runs is not thrown away because the last cluster failed to start: the
            # runs so far are printed, with the error, and the command fails.
            traceback.print_exc()
            printed["error"] = f"run {len(reports) + 1} of {args.repeat}: {exc!r}"[:1000]
            break
    printed["spread"] = spread(reports)
    print(json.dumps(printed, indent=2))
    failed = "error" in printed or any(map(_failed, reports))
    return 1 if failed else 0


def _failed(report: dict[str, Any]) -> bool:
    """The operator's side timed out or its process ended before the run did."""
    ours = report["operator"]
    return bool(ours.get("timed_out")) or "scheduler_exit_code" in ours


def _report(plan: Plan, *, versus: bool) -> dict[str, Any]:
    """One run: the operator's side on a fresh cluster, then kube-scheduler's (`--versus`)."""
    report: dict[str, Any] = {
        "mode": plan.mode,
        "nodes": plan.nodes,
        "gangs": plan.gangs,
        "gang_size": plan.size,
    }
    with tempfile.TemporaryDirectory(prefix="podgroup-bench-scale-") as root:
        report["operator"] = asyncio.run(_run_side(plan, Path(root) / "operator", c.OPERATOR_NAME))
        if versus:
            theirs = asyncio.run(_run_side(plan, Path(root) / "versus", KUBE_SCHEDULER))
            report[KUBE_SCHEDULER] = theirs
            ours_rate = report["operator"].get("pods_per_s")
            their_rate = theirs.get("pods_per_s")
            if ours_rate and their_rate:
                report["pods_per_s_ratio"] = round(ours_rate / their_rate, 2)
            ours_all = report["operator"].get("all_running_s")
            their_all = theirs.get("all_running_s")
            if ours_all and their_all:
                report["all_running_ratio"] = round(their_all / ours_all, 2)
    return report


SPREAD_FIGURES: tuple[tuple[str, ...], ...] = (
    ("pods_per_s_ratio",),
    ("all_running_ratio",),
    ("operator", "pods_per_s"),
    (KUBE_SCHEDULER, "pods_per_s"),
    ("operator", "first_bind_s"),
    ("operator", "all_running_s"),
    (KUBE_SCHEDULER, "all_running_s"),
    ("operator", "convergence_ms", "p50"),
    ("operator", "convergence_ms", "p99"),
    ("operator", "status_patches_per_group", "mean"),
    ("operator", "peak_rss_mb"),
)
"""The figures `--repeat` summarizes, as paths into one run's report."""


def spread(reports: Sequence[dict[str, Any]]) -> dict[str, dict[str, float | int]]:
    """Min, median and max of each figure over the runs that have it, keyed by its dotted path.

    On a small shared machine one run's figures swing with whatever else the cores did, so a
    target read off one run says little; the median and the range over several say how often it
    holds.
    """
    result: dict[str, dict[str, float | int]] = {}
    for path in SPREAD_FIGURES:
        values = []
        for report in reports:
            value: Any = report
            for step in path:
                value = value.get(step) if isinstance(value, dict) else None
            if isinstance(value, int | float) and not isinstance(value, bool):
                values.append(value)
        if values:
            result[".".join(path)] = {
                "min": min(values),
                "median": round(statistics.median(values), 2),
                "max": max(values),
                "runs": len(values),
            }
    return result
