"""ElasticQuotas: their tree for the scheduler, and their status and metrics kept true.

Runs on the leader. The informers of our ElasticQuota (`scheduling.x-k8s.io/v1alpha1`) and of
Koordinator's (`scheduling.sigs.k8s.io/v1alpha1`, where that CRD is served; optional) feed
`on_quota`; node events that change the cluster's capacity feed `on_node`. Either marks the
tree dirty, and `COALESCE_SECONDS` later the tree is built again from every object
(`api.elastic_quota.normalize`, `elastic.tree.build_tree`, the capacity being the allocatable
of the snapshot's usable nodes) and handed to the scheduler (`GangScheduler.set_quota_tree`),
which rebuilds the quota use from its snapshot's pods and decides the waiting gangs again.
An object that does not normalize (stored before the webhook ran, or with it off) is left out
of the tree and logged once per resourceVersion; the tree's own problems are logged when they
change. Where an object of the same namespace and name exists in both groups, ours is read.

Every `STATUS_SECONDS`, each quota's status (`elastic.status.quota_statuses`, from the tree,
the snapshot's use and the scheduler's waiting gangs) is merge-patched on its object when it
differs from both the stored one and the one last written (the apiserver may prune fields a
foreign CRD does not declare: without the second test those would be written every round),
and the per-quota gauges are set. A round is skipped while the scheduler's worker thread holds
the snapshot, so a status never counts a decision half made.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from podgroup_operator import metrics
from podgroup_operator.adapters.informers import Store
from podgroup_operator.adapters.kube import JSON, ApiError, Kind, KubeClient
from podgroup_operator.api.elastic_quota import ElasticQuotaError, Milli, QuotaKey, normalize
from podgroup_operator.constants import WatchEventType
from podgroup_operator.controllers.background import Background
from podgroup_operator.controllers.clock import LOOP_CLOCK, MonotonicClock, sleep
from podgroup_operator.scheduling.elastic.status import QuotaStatus, quota_statuses
from podgroup_operator.scheduling.elastic.tree import QuotaTree, build_tree, label
from podgroup_operator.scheduling.snapshot import Snapshot

logger = logging.getLogger(__name__)

COALESCE_SECONDS = 0.2
"""How long after the first change the tree is built again (a burst of edits costs one build)."""
STATUS_SECONDS = 2.0
"""How often the quotas' statuses are computed and the changed ones written."""

Waiting = Callable[[], tuple[Mapping[QuotaKey, int], Mapping[QuotaKey, Milli]]]
"""Gangs waiting per quota, and what their waiting members request (`QuotaQueues.waiting`)."""


@dataclass(frozen=True)
class QuotaSource:
    """One ElasticQuota informer's store and the kind its objects are written back to."""

    store: Store
    kind: Kind


def _read(body: Mapping[str, Any]) -> tuple[Any, ...]:
    """What `normalize` reads of a quota: its spec, labels, annotations and group."""
    meta = body.get("metadata") or {}
    return body.get("spec"), meta.get("labels"), meta.get("annotations"), body.get("apiVersion")


def _allocatable(node: Mapping[str, Any]) -> Any:
    return (node.get("status") or {}).get("allocatable")


class ElasticQuotaController(Background):
    """Builds the quota tree for the scheduler and writes the quotas' status (module docstring)."""

    task_name = "elastic-quotas"

    def __init__(
        self,
        kube: KubeClient,
        sources: Sequence[QuotaSource],
        snapshot: Snapshot,
        *,
        set_tree: Callable[[QuotaTree | None], None],
        waiting: Waiting,
        busy: Callable[[], bool] = lambda: False,
        delay: float = COALESCE_SECONDS,
        status_period: float = STATUS_SECONDS,
        monotonic: MonotonicClock = LOOP_CLOCK,
    ) -> None:
        self.kube = kube
        self.sources = tuple(sources)
        """Ours first: on a namespace/name in both groups, ours is read."""
        self.snapshot = snapshot
        self.set_tree = set_tree
        self.waiting = waiting
        self.busy = busy
        self.delay = delay
        self.status_period = status_period
        self.monotonic = monotonic
        self.tree: QuotaTree | None = None
        self.builds = 0
        self.writes = 0
        self._where: dict[QuotaKey, QuotaSource] = {}
        self._written: dict[QuotaKey, dict[str, Any]] = {}
        self._refused: dict[tuple[QuotaKey, str], str] = {}
        """(quota, resourceVersion) -> the errors logged for it (logged once)."""
        self._problems: list[str] = []
        self._dirty = True
        self._wake = asyncio.Event()

    # --- events ------------------------------------------------------------------------------
    def on_quota(self, kind: WatchEventType, body: JSON, old: JSON | None) -> None:
        """A quota created, changed or deleted; a change of its status alone (a write of ours)
        changes nothing the tree reads."""
        if kind is WatchEventType.MODIFIED and old is not None and _read(body) == _read(old):
            return
        self.touch()

    def on_node(self, kind: WatchEventType, node: JSON, old: JSON | None) -> None:
        """A node added or deleted, or its allocatable changed: the tree's capacity did."""
        if (
            kind is WatchEventType.MODIFIED
            and old is not None
            and _allocatable(node) == _allocatable(old)
        ):
            return
        if self.tree is not None or self._where:
            self.touch()

    def touch(self) -> None:
        self._dirty = True
        self._wake.set()

    # --- the loop ----------------------------------------------------------------------------
    async def stop(self) -> None:
        await super().stop()
        for gauge in metrics.ELASTIC_QUOTA_GAUGES:
            gauge.clear()

    async def _run(self) -> None:
        last_status = -self.status_period
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.status_period):
                    await self._wake.wait()
            if self._dirty:
                await sleep(self.monotonic, self.delay)
                try:
                    self.rebuild()
                except Exception:
                    logger.exception("building the ElasticQuota tree failed; retried")
                    self._dirty = True
            if self.monotonic.now() - last_status >= self.status_period:
                last_status = self.monotonic.now()
                try:
                    await self.write_statuses()
                except Exception:
                    logger.exception("writing the ElasticQuotas' status failed; retried")

    def rebuild(self) -> None:
        """Build the tree from every object now, and hand it to the scheduler (None: there
        are no quotas, and the scheduler charges nothing)."""
        self._wake.clear()
        self._dirty = False
        specs = []
        where: dict[QuotaKey, QuotaSource] = {}
        for source in self.sources:
            for body in source.store.values():
                meta = body.get("metadata") or {}
                key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
                if key in where:
                    continue
                try:
                    spec = normalize(body)
                except ElasticQuotaError as exc:
                    self._log_refused(key, str(meta.get("resourceVersion") or ""), exc)
                    continue
                where[key] = source
                specs.append(spec)
        self._where = where
        self.builds += 1
        if not specs:
            self.tree = None
            self.set_tree(None)
            return
        capacity: Milli = {}
        for node in self.snapshot.nodes.values():
            if node.usable:
                for name, amount in node.allocatable.items():
                    capacity[name] = capacity.get(name, 0) + amount
        tree = build_tree(specs, capacity)
        if tree.problems != self._problems:
            for problem in tree.problems:
                logger.warning("ElasticQuota tree: %s", problem)
            self._problems = list(tree.problems)
        self.tree = tree
        self.set_tree(tree)

    def _log_refused(self, key: QuotaKey, version: str, exc: ElasticQuotaError) -> None:
        if (key, version) in self._refused:
            return
        self._refused[key, version] = str(exc)
        logger.warning(
            "ElasticQuota %s is left out of the quota tree until it is fixed: %s", label(key), exc
        )

    # --- status ------------------------------------------------------------------------------
    def statuses(self) -> dict[QuotaKey, QuotaStatus]:
        """Every quota's status now (empty without a tree)."""
        tree, usage = self.snapshot.quotas.tree, self.snapshot.quotas.usage
        if tree is None or usage is None:
            return {}
        counts, demand = self.waiting()
        return quota_statuses(tree, usage, counts, demand)

    async def write_statuses(self) -> None:
        """Compute every status, set the gauges, write those that changed."""
        if self.busy():
            return  # the worker thread holds the snapshot: the next round counts
        computed = self.statuses()
        _set_gauges(computed)
        for key, status in computed.items():
            source = self._where.get(key)
            if source is None:
                continue
            body = source.store.get(f"{key[0]}/{key[1]}")
            if body is None:
                continue
            new = status.to_api()
            stored = body.get("status") or {}
            if all(stored.get(k) == v for k, v in new.items()) or self._written.get(key) == new:
                continue
            try:
                await self.kube.patch(
                    source.kind, key[1], {"status": new}, key[0], subresource="status"
                )
            except ApiError as exc:
                if exc.not_found:
                    continue
                raise
            self._written[key] = new
            self.writes += 1
        for key in list(self._written):
            if key not in computed:
                del self._written[key]


def _set_gauges(computed: Mapping[QuotaKey, QuotaStatus]) -> None:
    for gauge in metrics.ELASTIC_QUOTA_GAUGES:
        gauge.clear()
    for key, status in computed.items():
        quota = label(key)
        for gauge, amounts in (
            (metrics.ELASTIC_QUOTA_USED, status.used),
            (metrics.ELASTIC_QUOTA_MIN, status.min),
            (metrics.ELASTIC_QUOTA_MAX, status.max),
            (metrics.ELASTIC_QUOTA_BORROWED, status.borrowed),
        ):
            for resource, amount in amounts.items():
                gauge.labels(quota, resource).set(amount / 1000)
        metrics.ELASTIC_QUOTA_WAITING.labels(quota).set(status.gangs_waiting)
