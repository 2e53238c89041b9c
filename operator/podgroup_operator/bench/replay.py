"""Replay of gang arrivals and run times on the pure scheduling core, with a simulated clock.

A generic engine for scheduling scenarios whose outcome is a matter of time (who starts when,
how busy the cluster is): jobs arrive (`Job.created`), become candidates once all their members
exist (`Job.ready`), run for a fixed time and finish. At every instant something happens (an
arrival, a gang becoming whole, a completion) one scheduling cycle runs as the operator's does:
the waiting gangs in the production queue order (`scheduling.queue.order_gangs`), each decided
by `place_group` through the reservation book (`scheduling.reservation`), a refused head gang
reserving. Nothing sleeps: the clock jumps from event to event.

Optional, each off by default so a replay without them is what it always was:
- `quotas`: an ElasticQuota tree set on the snapshot (`snapshot.quotas.set_tree`), so every
  decision passes the gang's quota admission (`Reason.WAITING_FOR_QUOTA`) as in production;
- `charge_cpu`: the real time each decision takes (time.perf_counter) is added to the simulated
  clock, a gang starting when its decision ends and the next cycle starting no earlier than the
  last one ended, so times include the scheduler's own cost (the result is then not
  deterministic);
- `equivalence`: a key per job; once a job is refused in a cycle, the jobs of its key are not
  decided again in that cycle (Kueue's scheduling equivalence). Exact only when the key implies
  the same refusal (same quota, same members, same run time): within a cycle use only grows;
- `observe`: called with the snapshot and the time after every cycle (tests check invariants).

Used by `bench core --scenario burst` (bench/burst.py), `--scenario quota` (bench/quota.py) and
by property tests; any scenario that is a list of jobs on a list of nodes can use it (`replay`).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from podgroup_operator.api.keys import GroupKey
from podgroup_operator.constants import LABEL_POD_GROUP, Reason
from podgroup_operator.scheduling.elastic.tree import QuotaTree
from podgroup_operator.scheduling.gang import GangRequest, Placement
from podgroup_operator.scheduling.placement import place_group
from podgroup_operator.scheduling.queue import order_gangs
from podgroup_operator.scheduling.reservation import (
    ReservationBook,
    RunningGang,
    ends_at,
)
from podgroup_operator.scheduling.resources import pod_requests
from podgroup_operator.scheduling.snapshot import Snapshot

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""Time zero of a replay."""


@dataclass(frozen=True)
class Job:
    """One gang: `size` members each requesting `requests`, created at `created` seconds (its
    queue place), whole at `ready` (None: at once), running `run_seconds` once placed, and
    declaring `limit_seconds` (maxRunSeconds; None: none)."""

    name: str
    size: int
    requests: Mapping[str, str]
    run_seconds: float
    created: float = 0.0
    ready: float | None = None
    limit_seconds: int | None = None
    priority: int = 0
    namespace: str = "replay"
    labels: Mapping[str, str] = field(default_factory=dict)
    """Extra labels of every member (e.g. the quota it names)."""

    @property
    def key(self) -> GroupKey:
        return (self.namespace, self.name)

    def pods(self) -> list[dict[str, Any]]:
        return [
            {
                "kind": "Pod",
                "metadata": {
                    "name": f"{self.name}-{i}",
                    "namespace": self.namespace,
                    "uid": f"{self.namespace}-{self.name}-{i}",
                    "labels": {**self.labels, LABEL_POD_GROUP: self.name},
                },
                "spec": {
                    "schedulerName": "podgroup-scheduler",
                    "containers": [
                        {"name": "main", "image": "sim", "resources": {"requests": self.requests}}
                    ],
                },
                "status": {"phase": "Pending"},
            }
            for i in range(self.size)
        ]


@dataclass
class ReplayResult:
    """When each job started and ended (seconds), and what the reservations did."""

    starts: dict[str, float] = field(default_factory=dict)
    ends: dict[str, float] = field(default_factory=dict)
    reserved: dict[str, float | None] = field(default_factory=dict)
    """Each job that held a reservation: the start estimated when it first reserved (None:
    unknown then)."""
    backfills: int = 0
    cycles: int = 0
    unplaced: list[str] = field(default_factory=list)
    decisions: int = 0
    """Decisions made (`place_group` or the reservation book's `place`)."""
    skipped: int = 0
    """Decisions not made: an equivalent job was refused earlier in the cycle."""
    decision_seconds: float = 0.0
    """Real time spent in the decisions (time.perf_counter)."""
    placing_seconds: float = 0.0
    """The part of `decision_seconds` spent in the decisions that placed their gang."""
    refusals: dict[str, int] = field(default_factory=dict)
    """Refusals by reason."""

    def makespan(self, jobs: Sequence[Job]) -> float:
        first = min(job.created for job in jobs)
        return max(self.ends.values(), default=first) - first


def replay(  # noqa: PLR0915
    nodes: Sequence[Mapping[str, Any]],
    jobs: Sequence[Job],
    *,
    reserve: bool = True,
    quotas: QuotaTree | None = None,
    charge_cpu: bool = False,
    equivalence: Callable[[Job], Hashable] | None = None,
    observe: Callable[[Snapshot, float], None] | None = None,
) -> ReplayResult:
    """Run `jobs` on `nodes` to the end (see the module docstring); with `reserve` False, no
    reservation is held (every gang is placed as soon as it fits, in queue order)."""
    snapshot = Snapshot.build(list(nodes), [])
    if quotas is not None:
        snapshot.quotas.set_tree(quotas)
    book = ReservationBook()
    result = ReplayResult()
    by_key = {job.key: job for job in jobs}
    kinds = {job.key: equivalence(job) for job in jobs} if equivalence is not None else {}
    requests: dict[GroupKey, GangRequest] = {}
    running: dict[GroupKey, RunningGang] = {}
    waiting: set[GroupKey] = set()
    events: list[tuple[float, int, str, GroupKey]] = []
    sequence = 0

    def push(at: float, kind: str, key: GroupKey) -> None:
        nonlocal sequence
        heapq.heappush(events, (at, sequence, kind, key))
        sequence += 1

    for job in jobs:
        push(job.created, "arrive", job.key)
        if job.ready is not None and job.ready > job.created:
            push(job.ready, "ready", job.key)

    def request_of(job: Job, at: float) -> GangRequest:
        pods = job.pods()
        whole = job.ready is None or at >= job.ready
        return GangRequest(
            namespace=job.namespace,
            name=job.name,
            uid=f"uid-{job.name}",
            min_member=job.size,
            pending=pods if whole else pods[:1],
            priority=job.priority,
            created=EPOCH + timedelta(seconds=job.created),
        )

    busy_until = float("-inf")
    while events:
        now_s = max(events[0][0], busy_until)
        while events and events[0][0] <= now_s:
            at, _, kind, key = heapq.heappop(events)
            job = by_key[key]
            if kind == "finish":
                for pod in job.pods():
                    snapshot.remove_pod(pod["metadata"]["uid"])
                running.pop(key, None)
                result.ends[job.name] = at
            else:
                requests[key] = request_of(job, now_s)
                waiting.add(key)
        result.cycles += 1
        refused_kinds: set[Hashable] = set()
        spent = 0.0
        for request in order_gangs([requests[key] for key in waiting]):
            job = by_key[request.key]
            kind_key = kinds.get(request.key)
            if kind_key is not None and kind_key in refused_kinds:
                result.skipped += 1
                continue
            start_s = now_s + spent
            now = EPOCH + timedelta(seconds=start_s)
            ends = ends_at(now, job.limit_seconds)
            began = time.perf_counter()
            if reserve:
                outcome, backfills, fenced = book.place(request, snapshot, ends)
            else:
                outcome, backfills, fenced = place_group(request, snapshot), [], False
            took = time.perf_counter() - began
            result.decisions += 1
            result.decision_seconds += took
            if charge_cpu:
                spent += took
                start_s = now_s + spent
            if isinstance(outcome, Placement):
                result.placing_seconds += took
                waiting.discard(request.key)
                book.release(request.key)
                result.backfills += len(backfills)
                result.starts[job.name] = start_s
                running[request.key] = RunningGang(
                    request.key, tuple(b.pod_uid for b in outcome.bindings), ends
                )
                push(start_s + job.run_seconds, "finish", request.key)
                continue
            reason = str(outcome.reason)
            result.refusals[reason] = result.refusals.get(reason, 0) + 1
            if kind_key is not None:
                refused_kinds.add(kind_key)
            if reserve and outcome.reason is Reason.NOT_ENOUGH_RESOURCES and not fenced:
                began = time.perf_counter()
                held = book.refused(request, snapshot, list(running.values()), now)
                took = time.perf_counter() - began
                result.decision_seconds += took
                if charge_cpu:
                    spent += took
                if held is not None and job.name not in result.reserved:
                    start = held.start
                    result.reserved[job.name] = (
                        None if start is None else (start - EPOCH).total_seconds()
                    )
            elif outcome.reason is not Reason.NOT_ENOUGH_RESOURCES:
                book.release(request.key)
        busy_until = now_s + spent
        if observe is not None:
            observe(snapshot, busy_until)
    result.unplaced = sorted(by_key[key].name for key in waiting)
    return result


def occupancy(
    nodes: Sequence[Mapping[str, Any]], jobs: Sequence[Job], result: ReplayResult, resource: str
) -> float:
    """Mean share of `resource` in use over the makespan."""
    capacity = sum(
        int(str((n.get("status") or {}).get("allocatable", {}).get(resource, 0))) for n in nodes
    )
    used = 0.0
    for job in jobs:
        if job.name in result.starts:
            per_pod = pod_requests(job.pods()[0]).get(resource, 0) / 1000
            used += per_pod * job.size * (result.ends[job.name] - result.starts[job.name])
    span = result.makespan(jobs)
    return used / (capacity * span) if capacity and span else 0.0
