"""Prometheus metrics: what an operator of a big cluster watches on a dashboard.

A module of its own: the series are named once here (docs/reference/metrics.md lists them), the
controllers only count (`SCHEDULING_ATTEMPTS.labels(...).inc()`), and the gauges that describe
the whole cluster (PodGroups by phase, waiting gangs, quota, informer lag, leadership) are
computed at scrape time from the runtime's state by `RuntimeCollector`, so nothing has to keep
them current event by event. prometheus-client does the exposition format.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from podgroup_operator.adapters import heap
from podgroup_operator.constants import Phase

REGISTRY = CollectorRegistry(auto_describe=True)
"""The operator's own registry (not the process-global one: tests may build several runtimes)."""

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_STALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

SCHEDULING_ATTEMPTS = Counter(
    "podgroup_scheduling_attempts",
    "Gang scheduling decisions, by result (placed, refused, error).",
    ["result"],
    registry=REGISTRY,
)
SCHEDULING_LATENCY = Histogram(
    "podgroup_scheduling_attempt_duration_seconds",
    "Time to decide one gang (or gang group) on the snapshot, by result.",
    ["result"],
    buckets=(*_LATENCY_BUCKETS, 5.0, 10.0, 30.0),
    registry=REGISTRY,
)
SCHEDULING_IN_THREAD = Counter(
    "podgroup_scheduling_thread_decisions",
    "Gang decisions that used the scheduler's worker thread, for the placement or its "
    "preemption plan, while the event loop went on: gangs of 64 or more waiting members, gangs "
    "whose constraints may cost 100 ms or more, and plans on a snapshot of 10,000 pods or more.",
    registry=REGISTRY,
)
EVENT_LOOP_LAG = Histogram(
    "podgroup_event_loop_lag_seconds",
    "How late a half-second timer of the operator's event loop fired: the time everything on "
    "the loop (lease renewal, webhooks, probes, watches) waited for whatever held it.",
    buckets=_STALL_BUCKETS,
    registry=REGISTRY,
)
BINDS = Counter(
    "podgroup_binds", "Pod bindings sent, by result (bound, failed).", ["result"], registry=REGISTRY
)
PREEMPTIONS = Counter(
    "podgroup_preemptions",
    "Pods deleted to make room for higher-priority gangs.",
    registry=REGISTRY,
)
RESERVATIONS_HELD = Gauge(
    "podgroup_reservations_held",
    "Reservations held by the head gang of a priority level: nodes kept for it as they free "
    "(docs/concepts/reservation.md).",
    registry=REGISTRY,
)
BACKFILLS = Counter(
    "podgroup_backfills",
    "Gangs placed on nodes reserved for an older gang because their maxRunSeconds ends before "
    "its estimated start (counted once per reservation they backfill).",
    registry=REGISTRY,
)
RESTARTS = Counter(
    "podgroup_gang_restarts",
    "Whole-gang restarts started by the restart policy.",
    registry=REGISTRY,
)
POD_SIGNALS = Counter(
    "podgroup_pod_signals",
    "PodScheduled conditions and scheduling Events written on pods, by result (sent, failed).",
    ["result"],
    registry=REGISTRY,
)
PROVISIONING = Counter(
    "podgroup_provisioning_requests",
    "ProvisioningRequests of gangs refused for room, by what happened (created, adopted, "
    "provisioned, failed, expired, deleted, error; unavailable: provisioning is on but the "
    "ProvisioningRequest CRD is not served or may not be listed).",
    ["result"],
    registry=REGISTRY,
)
FENCED_WRITES = Counter(
    "podgroup_fenced_writes",
    "Writes of the leader's controllers not sent: the replica no longer held the Lease.",
    registry=REGISTRY,
)
STATUS_WRITES = Counter(
    "podgroup_status_writes", "PodGroup status PATCHes sent.", registry=REGISTRY
)
RECONCILE_ERRORS = Counter(
    "podgroup_reconcile_errors",
    "Failures of one object in a loop (scheduling, status, quota); the loop goes on.",
    ["loop"],
    registry=REGISTRY,
)
WEBHOOK_LATENCY = Histogram(
    "podgroup_webhook_duration_seconds",
    "Admission webhook answers, by webhook and result (allowed, denied, error).",
    ["webhook", "result"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)

ELASTIC_QUOTA_USED = Gauge(
    "podgroup_elastic_quota_used",
    "What each ElasticQuota's pods (its subtree's) request, per resource the quota tree governs.",
    ["quota", "resource"],
    registry=REGISTRY,
)
ELASTIC_QUOTA_MIN = Gauge(
    "podgroup_elastic_quota_min",
    "Each ElasticQuota's min, per resource the quota tree governs.",
    ["quota", "resource"],
    registry=REGISTRY,
)
ELASTIC_QUOTA_MAX = Gauge(
    "podgroup_elastic_quota_max",
    "Each ElasticQuota's max, per resource it limits (absent: unlimited).",
    ["quota", "resource"],
    registry=REGISTRY,
)
ELASTIC_QUOTA_BORROWED = Gauge(
    "podgroup_elastic_quota_borrowed",
    "What each ElasticQuota uses beyond its min (lent by other quotas), per resource.",
    ["quota", "resource"],
    registry=REGISTRY,
)
ELASTIC_QUOTA_WAITING = Gauge(
    "podgroup_elastic_quota_gangs_waiting",
    "Gangs charged to each ElasticQuota that wait for a placement.",
    ["quota"],
    registry=REGISTRY,
)
ELASTIC_QUOTA_GAUGES = (
    ELASTIC_QUOTA_USED,
    ELASTIC_QUOTA_MIN,
    ELASTIC_QUOTA_MAX,
    ELASTIC_QUOTA_BORROWED,
    ELASTIC_QUOTA_WAITING,
)
"""Set by the leader's ElasticQuota controller at each status round, cleared first."""


class RuntimeView(Protocol):
    """What the scrape-time collector reads (controllers.runtime.Runtime provides it)."""

    def metric_snapshot(self) -> dict[str, Any]: ...


def _tally(name: str, documentation: str, label: str, values: Iterable[str]) -> GaugeMetricFamily:
    """A gauge of how many of `values` carry each label value, in label order."""
    gauge = GaugeMetricFamily(name, documentation, labels=[label])
    for value, count in sorted(Tally(values).items()):
        gauge.add_metric([value], count)
    return gauge


NO_PHASE = "New"
"""The `phase` label of a PodGroup without a status phase yet."""
UNRECOGNIZED_PHASE = "Unrecognized"
"""The `phase` label of a phase this operator does not write (a scheduler-plugins phase, or
anything another writer left, until the leader rewrites it), never the value itself: a label
would take whatever a status holds, and each value would be a series."""
_PHASE_LABELS = frozenset(phase.value for phase in Phase)


def _phase_label(phase: str | None) -> str:
    if not phase:
        return NO_PHASE
    return phase if phase in _PHASE_LABELS else UNRECOGNIZED_PHASE


class RuntimeCollector(Collector):
    """Gauges computed at scrape time from the runtime (see the module docstring)."""

    def __init__(self, view: Callable[[], RuntimeView | None]) -> None:
        self.view = view

    def collect(self) -> Iterator[Metric]:
        runtime = self.view()
        if runtime is None:
            return
        state = runtime.metric_snapshot()
        phases = (_phase_label(phase) for phase in state["phases"])
        yield _tally("podgroup_podgroups", "PodGroups by phase.", "phase", phases)
        yield _tally(
            "podgroup_waiting_gangs",
            "Gangs the scheduler is waiting on, by reason.",
            "reason",
            state["waiting_reasons"],
        )
        reserved = GaugeMetricFamily(
            "podgroup_quota_reserved",
            "Quota reserved by PodGroups (totalResources), per namespace and resource.",
            labels=["namespace", "resource"],
        )
        used = GaugeMetricFamily(
            "podgroup_quota_used",
            "Requests of live members counted against reservations, per namespace and resource.",
            labels=["namespace", "resource"],
        )
        for (namespace, resource), (held, in_use) in sorted(state["quota"].items()):
            reserved.add_metric([namespace, resource], held)
            used.add_metric([namespace, resource], in_use)
        yield reserved
        yield used
        synced = GaugeMetricFamily(
            "podgroup_informer_synced", "1 once the kind's first list is in.", labels=["kind"]
        )
        lag = GaugeMetricFamily(
            "podgroup_informer_last_event_age_seconds",
            "Seconds since the kind's watch last delivered an event or bookmark.",
            labels=["kind"],
        )
        objects = GaugeMetricFamily(
            "podgroup_informer_objects", "Objects in the kind's store.", labels=["kind"]
        )
        lists = CounterMetricFamily(
            "podgroup_informer_lists",
            "Complete lists of the kind: the first, then one after each 410 Gone.",
            labels=["kind"],
        )
        failures = CounterMetricFamily(
            "podgroup_informer_failures",
            "Lists and watches of the kind that failed and were backed off (an optional kind "
            "the server does not serve is absent, not failing: not counted).",
            labels=["kind"],
        )
        stalls = CounterMetricFamily(
            "podgroup_informer_watch_stalls",
            "Watches of the kind ended by the operator because the server had not ended them "
            "(a dead or hung connection).",
            labels=["kind"],
        )
        now = time.monotonic()
        for kind, info in sorted(state["informers"].items()):
            synced.add_metric([kind], 1.0 if info["synced"] else 0.0)
            if info["last_event"]:
                lag.add_metric([kind], max(0.0, now - info["last_event"]))
            objects.add_metric([kind], info["objects"])
            lists.add_metric([kind], info["lists"])
            failures.add_metric([kind], info["failures"])
            stalls.add_metric([kind], info["stalls"])
        yield synced
        yield lag
        yield objects
        yield lists
        yield failures
        yield stalls
        yield GaugeMetricFamily(
            "podgroup_leader", "1 while this replica holds the Lease.", value=state["leader"]
        )
        yield GaugeMetricFamily(
            "podgroup_binds_allowed_in_flight",
            "Binds the leader allows in flight now (paced by their latency unless fixed).",
            value=state["binds_allowed"],
        )


_observed: list[RuntimeView] = []


def observe(runtime: RuntimeView | None) -> None:
    """Point the scrape-time gauges at this runtime (None: no runtime, no gauges)."""
    _observed[:] = [] if runtime is None else [runtime]


REGISTRY.register(RuntimeCollector(lambda: _observed[0] if _observed else None))


class CollectorPausesCollector(Collector):
    """`podgroup_gc_pause_seconds` from `heap.pauses` at scrape time (the record is kept with no
    lock, so it is read here, never observed into a Histogram from the collector's callback)."""

    def collect(self) -> Iterator[Metric]:
        record = heap.pauses
        family = HistogramMetricFamily(
            "podgroup_gc_pause_seconds",
            "Runs of CPython's cycle collector, by generation: how long each held the process, "
            "its event loop with it.",
            labels=["generation"],
        )
        for generation in range(3):
            buckets = [
                (str(bound), float(count))
                for bound, count in zip(heap.PAUSE_BUCKETS, record.buckets[generation], strict=True)
            ]
            buckets.append(("+Inf", float(record.count[generation])))
            family.add_metric([str(generation)], buckets, record.total[generation])
        yield family


REGISTRY.register(CollectorPausesCollector())
