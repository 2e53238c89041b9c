"""Quota reservation: per-namespace ledgers, admission decisions, release, status.

The pure ledger (`domain.quota`) decides; this service feeds it from memory, so an admission
webhook answers without an API call on the pod path; keeps admitted reservations across
replicas and crashes in the durable record (`adapters.quota_record`); releases each exactly
once; and hands each group's view to the status reconciler. The Kopf handlers
(`handlers/quota.py`) only forward admission requests; watch events arrive from the informers.

Where the ledger's inputs come from
-----------------------------------
One `NamespaceQuota` per namespace, created on first use and loaded from a `NamespaceObjects`
source (in the operator: the informers' stores, so loading costs no API call; one GET of the
record), then kept current by the informers' events (`observe_pod`, `observe_group`,
`observe_quota`). Every object's last applied resourceVersion is remembered, so a load and
events may arrive in either order and the newer state always wins. Webhook decisions then read
memory only: no API call on the pod path, one record write on the PodGroup path.

Concurrency, durability, multiple replicas
------------------------------------------
* Within a replica, admissions of one namespace are serialised by an asyncio.Lock, and an admitted
  object is put in the ledger at once (a PodGroup as a record entry, a pod as a *pending* pod that
  expires after `PENDING_POD_TTL` unless the watch shows it), so concurrent creates see each
  other although none is stored yet.
* The record: ConfigMap `podgroup-quota-ledger` in the namespace, key `reservations`, JSON of
  group name -> {uid, total, deadline} (`domain.quota.RecordEntry`). A PodGroup is admitted only
  after its entry is written with a resourceVersion precondition (create, or merge patch carrying
  metadata.resourceVersion). Two replicas racing in one namespace: one write wins, the other gets
  409, re-reads the record, re-decides against the fresh entries and retries. So reservations
  never over-commit however many replicas serve, and the record survives kill -9: after a
  restart the namespace is reloaded from the API and the record.
* The record is reconciled with reality: an entry is dropped (`release_reason`) when its group is
  Finished/Failed, being deleted or deleted, lost totalResources, or (after the entry's deadline)
  does not exist with the admitted uid — admitted but never stored. Dropping is a conditional
  write too, so a release happens once however many replicas see it.
* Pod admissions write nothing durable (a write per pod would cost more than the whole webhook
  budget). With several replicas, two pods admitted at the same instant by different replicas
  can together overshoot a group's reservation; Kubernetes' own quota admission still holds the
  hard limits.

Status
------
This service writes no status. A small coalescing queue (leader only) releases what must be
released and hands each group's `QuotaView` (`status.reservation` and the QuotaReserved
condition) to `publish`, which the runtime points at the status reconciler: one writer of
PodGroup status, so no two writers race over `conditions`.

Time
----
Record deadlines are wall-clock (`clock`); a pending pod's expiry, the sweep every
SWEEP_INTERVAL seconds and the record re-read every RECORD_RESYNC seconds are timed on the
injected `MonotonicClock` (`monotonic`), which unit tests advance by hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    JSON,
    PODGROUPS,
    PODS,
    RESOURCE_QUOTAS,
    ApiError,
    KubeClient,
)
from podgroup_operator.adapters.quota_record import Record, RecordConflictError, RecordStore
from podgroup_operator.api.keys import GroupKey, pod_uid
from podgroup_operator.api.models import Condition
from podgroup_operator.api.quantity import QuantityError
from podgroup_operator.controllers.clock import LOOP_CLOCK, MonotonicClock, sleep
from podgroup_operator.controllers.isolation import Failures
from podgroup_operator.domain.conditions import find_condition
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.domain.quota import (
    RECORD_GRACE,
    Decision,
    Ledger,
    ObservedGroup,
    PodUsage,
    QuotaLimit,
    QuotaView,
    RecordEntry,
    admit_group,
    admit_group_update,
    admit_pod,
    effective_reservation,
    quota_view,
    release_reason,
    total_milli,
    validate_total_resources,
)
from podgroup_operator.scheduling.resources import pod_requests

logger = logging.getLogger(__name__)

PENDING_POD_TTL = 10.0
"""Seconds an admitted pod counts before the watch shows it; a pod refused later by another
admission step (Kubernetes' quota, another webhook) stops counting after this."""
WRITE_ATTEMPTS = 8
"""Record writes an admission or a release tries before giving up (each conflict re-reads the
record and decides again)."""
SWEEP_INTERVAL = 2.0
"""Seconds between sweeps for entries whose group never appeared (`QuotaService.sweep`)."""
RECORD_RESYNC = 6.0
"""Seconds between re-reads of each namespace's record (entries of other replicas)."""

Clock = Callable[[], dt.datetime]


class NamespaceObjects(Protocol):
    """Where a namespace's quotas, PodGroups and pods come from when its ledger is first built:
    the informers' stores in the operator (no API call), or LISTs (`ListedObjects`)."""

    async def objects(self, namespace: str) -> tuple[list[JSON], list[JSON], list[JSON]]:
        """(ResourceQuotas, PodGroups, pods) of the namespace."""
        ...


def _rv(body: Mapping[str, Any]) -> int:
    try:
        return int((body.get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


class NamespaceQuota:
    """Everything the webhook knows about one namespace, kept in memory (see module docstring)."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.lock = asyncio.Lock()
        """Serialises admissions and record writes of this namespace within the replica."""
        self.load_lock = asyncio.Lock()
        self.loaded = False
        self.ledger = Ledger()
        self.record = Record()
        self.record_stale = True
        self.quotas: dict[str, QuotaLimit | None] = {}
        self.groups: dict[str, ObservedGroup] = {}
        self.group_status: dict[str, dict[str, Any]] = {}
        """The last observed status of each group, to skip status writes that change nothing."""
        self.pending: dict[str, float] = {}
        """uid -> monotonic expiry of pods admitted but not yet seen by the watch."""
        self.released: dict[str, str] = {}
        """Group name -> why its reservation was released (for the QuotaReserved condition)."""
        self._versions: dict[str, int] = {}

    # --- applying what the API shows --------------------------------------------------------------

    def _newer(self, uid: str, rv: int, deleted: bool) -> bool:
        """Whether this version of an object is newer than what was applied (then remember it)."""
        if rv and rv < self._versions.get(uid, 0):
            return False
        if deleted and self.loaded:
            self._versions.pop(uid, None)  # tombstones only matter while a LIST may be in flight
        else:
            self._versions[uid] = rv
        return True

    def apply_pod(self, body: Mapping[str, Any], deleted: bool) -> GroupKey | None:
        """Record a pod's usage; returns its group's key (for status), if any."""
        uid = pod_uid(body)
        if not self._newer(uid, _rv(body), deleted):
            return None
        self.pending.pop(uid, None)
        key = group_key_of(body)
        if deleted:
            self.ledger.remove_pod(uid)
            return key
        try:
            requests = pod_requests(body)
        except QuantityError:
            requests = {}  # the apiserver refuses such pods; nothing to count
        self.ledger.add_pod(PodUsage.from_pod(body, key, requests))
        return key

    def apply_group(self, body: Mapping[str, Any], deleted: bool) -> str | None:
        """Record a PodGroup; returns its name when it was newer than what we had."""
        name = str((body.get("metadata") or {}).get("name", ""))
        if not self._newer(pod_uid(body), _rv(body), deleted):
            return None
        observed = ObservedGroup.from_podgroup(body, deleted=deleted)
        entry = self.record.entries.get(name)
        if entry is None and observed.total is not None and observed.active:
            self.record_stale = True  # another replica may have admitted it
        self.groups[name] = observed
        self.group_status[name] = dict(body.get("status") or {})
        self.sync_group(name)
        return name

    def apply_quota(self, body: Mapping[str, Any], deleted: bool) -> None:
        uid = pod_uid(body)
        if not self._newer(uid, _rv(body), deleted):
            return
        if deleted:
            self.quotas.pop(uid, None)
        else:
            self.quotas[uid] = QuotaLimit.from_object(body)
        self.ledger.set_quotas(q for q in self.quotas.values() if q is not None)

    def set_record(self, record: Record) -> None:
        before = set(self.record.entries)
        self.record = record
        self.record_stale = False
        for name in before | set(record.entries):
            self.sync_group(name)

    def sync_group(self, name: str) -> None:
        key = (self.namespace, name)
        group = effective_reservation(key, self.record.entries.get(name), self.groups.get(name))
        if group is None:
            self.ledger.remove_group(key)
        else:
            self.ledger.add_reservation(group)

    def expire_pending(self, now: float) -> None:
        for uid, expiry in list(self.pending.items()):
            if expiry <= now:
                del self.pending[uid]
                self.ledger.remove_pod(uid)


class QuotaService:
    """The quota webhooks' state (every replica) and the release and status work (the leader)."""

    def __init__(
        self,
        kube: KubeClient,
        source: NamespaceObjects,
        *,
        clock: Clock = lambda: dt.datetime.now(dt.UTC),
        monotonic: MonotonicClock = LOOP_CLOCK,
        status_workers: int = 4,
    ) -> None:
        self.kube = kube
        self.source = source
        self.publish: Callable[[GroupKey, QuotaView], None] = lambda key, view: None
        """Where each group's reservation view goes: the status reconciler, while leading."""
        self.store = RecordStore(kube)
        self.clock = clock
        """Wall-clock time: the record entries' deadlines."""
        self.monotonic = monotonic
        """Times pending pods' expiry, the sweeps and the record re-reads."""
        self.namespaces: dict[str, NamespaceQuota] = {}
        self.status_workers = status_workers
        self.failures = Failures("quota of PodGroup", logger, metric="quota", monotonic=monotonic)
        self._last_resync: float | None = None
        """When the last sweep re-read every namespace's record (None: no sweep yet)."""
        self._dirty: asyncio.Queue[GroupKey] = asyncio.Queue()
        self._queued: set[GroupKey] = set()
        self._key_locks: dict[GroupKey, tuple[asyncio.Lock, int]] = {}
        """A lock per group being worked on, with how many workers hold or wait for it: the
        last one out drops it, so the map holds the groups in work, not every group seen."""
        self._tasks: list[asyncio.Task[None]] = []

    # --- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start releasing and publishing (the leader's work), beginning with every known group."""
        self._tasks = [
            asyncio.create_task(self._status_worker()) for _ in range(self.status_workers)
        ]
        self._tasks.append(asyncio.create_task(self._sweeper()))
        for state in self.namespaces.values():
            if state.loaded:
                for name in set(state.groups) | set(state.record.entries):
                    self.touch((state.namespace, name))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # --- namespace state --------------------------------------------------------------------------

    async def namespace(self, namespace: str) -> NamespaceQuota:
        """The namespace's state, loaded from the API on first use."""
        state = self.namespaces.get(namespace)
        if state is None:
            state = self.namespaces.setdefault(namespace, NamespaceQuota(namespace))
        if not state.loaded:
            async with state.load_lock:
                if not state.loaded:
                    await self._load(state)
        return state

    async def _load(self, state: NamespaceQuota) -> None:
        ns = state.namespace
        (quotas, groups, pods), record = await asyncio.gather(
            self.source.objects(ns), self.store.read(ns)
        )
        for quota in quotas:
            state.apply_quota(quota, deleted=False)
        state.set_record(record)
        for group in groups:
            state.apply_group(group, deleted=False)
        for pod in pods:
            state.apply_pod(pod, deleted=False)
        state.record_stale = False
        state.loaded = True
        state._versions.clear()  # from now on events arrive in order per object
        logger.info(
            "quota ledger of namespace %s loaded: %d quota(s), %d group(s), %d reservation(s)",
            ns,
            len(state.quotas),
            len(state.groups),
            len(state.record.entries),
        )
        for name in set(state.groups) | set(state.record.entries):
            self.touch((ns, name))

    async def _refresh_record(self, state: NamespaceQuota) -> None:
        state.set_record(await self.store.read(state.namespace))

    def usage_by_resource(self) -> dict[tuple[str, str], tuple[float, float]]:
        """(namespace, resource) -> (reserved, used by live members), in units (cpu in cores),
        summed over the groups that hold a reservation: the quota gauges of /metrics."""
        totals: dict[tuple[str, str], tuple[float, float]] = {}
        for state in self.namespaces.values():
            for name in state.groups:
                key = (state.namespace, name)
                group = state.ledger.group(key)
                if group is None or not group.reserves or group.total is None:
                    continue
                used = state.ledger.members_used(key)
                for resource, milli in group.total.items():
                    held, in_use = totals.get((state.namespace, resource), (0.0, 0.0))
                    totals[(state.namespace, resource)] = (
                        held + milli / 1000,
                        in_use + used.get(resource, 0) / 1000,
                    )
        return totals

    # --- watch events (from the informers) -------------------------------------------------------

    def observe_pod(self, body: Mapping[str, Any], event_type: str | None) -> None:
        state = self.namespaces.get(str((body.get("metadata") or {}).get("namespace", "")))
        if state is None:
            return  # a namespace the webhook never touched: its first load will see this pod
        key = state.apply_pod(body, deleted=event_type == c.WatchEventType.DELETED)
        if key is not None and key[1] in state.record.entries:
            self.touch(key)

    def observe_group(self, body: Mapping[str, Any], event_type: str | None) -> None:
        metadata = body.get("metadata") or {}
        ns = str(metadata.get("namespace", ""))
        state = self.namespaces.get(ns)
        if state is None:
            if not _may_hold_reservation(body):
                return
            # After a restart, or a group admitted by another replica: load the namespace so
            # that its reservation is released and its status written (loading also touches it).
            state = self.namespaces.setdefault(ns, NamespaceQuota(ns))
            asyncio.get_running_loop().create_task(self._load_in_background(ns))
        name = state.apply_group(body, deleted=event_type == c.WatchEventType.DELETED)
        if name is not None and state.loaded:
            self.touch((ns, name))

    def observe_quota(self, body: Mapping[str, Any], event_type: str | None) -> None:
        state = self.namespaces.get(str((body.get("metadata") or {}).get("namespace", "")))
        if state is not None:
            state.apply_quota(body, deleted=event_type == c.WatchEventType.DELETED)

    async def _load_in_background(self, namespace: str) -> None:
        try:
            await self.namespace(namespace)
        except Exception:
            logger.exception(
                "quota ledger of namespace %s not loaded; retried on next use", namespace
            )

    # --- admission --------------------------------------------------------------------------------

    async def admit_podgroup(
        self,
        body: Mapping[str, Any],
        old: Mapping[str, Any] | None,
        *,
        dry_run: bool,
    ) -> Decision:
        """Create or update of a PodGroup: validate totalResources, decide, record, then answer."""
        metadata = body.get("metadata") or {}
        ns, name = str(metadata.get("namespace", "")), str(metadata.get("name", ""))
        spec = body.get("spec") or {}
        raw_total = spec.get("totalResources")
        old_total = ((old or {}).get("spec") or {}).get("totalResources")
        if old is not None and raw_total == old_total:
            return Decision()  # an edit that leaves the reservation alone never needs quota
        if raw_total is None and old is None:
            return Decision()
        state = await self.namespace(ns)
        if raw_total is not None:
            if not isinstance(raw_total, Mapping):
                return Decision(
                    errors=(
                        "spec.totalResources: must be a map of resource name to "
                        "quantity, e.g. {cpu: 4, memory: 8Gi}",
                    )
                )
            min_resources = spec.get("minResources")
            errors = validate_total_resources(
                raw_total,
                min_resources if isinstance(min_resources, Mapping) else None,
                state.ledger.tracked,
            )
            if errors:
                return Decision(errors=tuple(errors))
        total = None if raw_total is None else total_milli(raw_total) or None
        key = (ns, name)
        uid = metadata.get("uid") or None
        async with state.lock:
            for _ in range(WRITE_ATTEMPTS):
                if state.record_stale:
                    await self._refresh_record(state)
                if old is None:
                    observed = state.groups.get(name)
                    if observed is not None and not observed.deleted and observed.uid != uid:
                        # A namesake exists: the apiserver will answer AlreadyExists after us.
                        return Decision()
                    decision = admit_group(state.ledger, key, total)
                else:
                    decision = admit_group_update(state.ledger, key, total)
                if not decision.allowed or dry_run:
                    return decision
                entries = self._entries_after(state, name, uid, total, creating=old is None)
                if entries is None:
                    return decision
                if not await self._write_record(ns, state, entries):
                    continue  # another replica wrote first: reload and decide again
                if total is None:
                    state.released[name] = f"PodGroup {name} no longer sets totalResources"
                    self.touch(key)
                else:
                    state.released.pop(name, None)
                logger.info("quota of PodGroup %s/%s recorded: %s", ns, name, raw_total)
                return decision
        return Decision(
            errors=(
                f"spec.totalResources: the quota record of namespace {ns} changed "
                f"{WRITE_ATTEMPTS} times while deciding (other replicas are admitting); retry",
            )
        )

    async def _write_record(
        self, ns: str, state: NamespaceQuota, entries: Mapping[str, RecordEntry]
    ) -> bool:
        """Write the namespace's record over the version we read; False when another writer
        changed it first (the record is then reloaded before the next decision)."""
        try:
            record = await self.store.write(ns, state.record, entries)
        except RecordConflictError:
            state.record_stale = True
            return False
        state.set_record(record)
        return True

    def _entries_after(
        self,
        state: NamespaceQuota,
        name: str,
        uid: str | None,
        total: Mapping[str, int] | None,
        *,
        creating: bool,
    ) -> dict[str, RecordEntry] | None:
        """The record's entries after an admitted change, or None when the record stays as is."""
        entries = dict(state.record.entries)
        current = entries.get(name)
        group = state.ledger.group((state.namespace, name))
        if not creating and group is not None and not group.active:
            return None  # finished: reserves nothing, never re-takes
        if total is None:
            if current is None:
                return None
            del entries[name]
            return entries
        deadline = self.clock() + RECORD_GRACE
        if current is not None and not creating:
            deadline = current.deadline
            uid = uid or current.uid
        entries[name] = RecordEntry(uid=uid, total=dict(total), deadline=deadline)
        return entries

    async def admit_pod(self, body: Mapping[str, Any], *, dry_run: bool) -> Decision:
        """A pod create: members must fit their group's reservation, others the unreserved rest."""
        ns = str((body.get("metadata") or {}).get("namespace", ""))
        try:
            requests = pod_requests(body)
        except QuantityError:
            return Decision()  # malformed requests: the apiserver's validation answers that
        state = await self.namespace(ns)
        async with state.lock:
            if state.record_stale:
                await self._refresh_record(state)
            state.expire_pending(self.monotonic.now())
            usage = PodUsage.from_pod(body, group_key_of(body), requests)
            decision = admit_pod(state.ledger, usage)
            if decision.allowed and not dry_run and usage.live:
                state.ledger.add_pod(usage)
                state.pending[usage.uid] = self.monotonic.now() + PENDING_POD_TTL
        return decision

    # --- release and status -----------------------------------------------------------------------

    def touch(self, key: GroupKey) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._dirty.put_nowait(key)

    async def _status_worker(self) -> None:
        while True:
            key = await self._dirty.get()
            self._queued.discard(key)
            lock, users = self._key_locks.get(key) or (asyncio.Lock(), 0)
            self._key_locks[key] = (lock, users + 1)
            try:
                async with lock:
                    # Isolated: a group that raises backs off (logged once per cause).
                    await self.failures.attempt(key, self.reconcile(key), self.touch)
            finally:
                lock, users = self._key_locks[key]
                if users > 1:
                    self._key_locks[key] = (lock, users - 1)
                else:
                    del self._key_locks[key]

    async def _sweeper(self) -> None:
        """`sweep` every SWEEP_INTERVAL seconds."""
        self._last_resync = self.monotonic.now()
        while True:
            await sleep(self.monotonic, SWEEP_INTERVAL)
            await self.sweep()

    async def sweep(self) -> None:
        """Touch the groups whose record entry is past its deadline and whose group was never
        seen, so they are released although no event will come; re-read every namespace's
        record first when RECORD_RESYNC seconds have passed since the last re-read (entries
        written by another replica that died before its group was stored are seen so)."""
        now = self.clock()
        resync = (
            self._last_resync is None or self.monotonic.now() - self._last_resync >= RECORD_RESYNC
        )
        if resync:
            self._last_resync = self.monotonic.now()
        for state in list(self.namespaces.values()):
            if not state.loaded:
                continue
            if resync:
                try:
                    async with state.lock:
                        await self._refresh_record(state)
                except ApiError:
                    logger.warning("quota record of %s not re-read", state.namespace)
            for name, entry in list(state.record.entries.items()):
                if name not in state.groups and now >= entry.deadline:
                    self.touch((state.namespace, name))

    async def reconcile(self, key: GroupKey) -> None:
        """Release the group's entry if it must go, then bring its status in line."""
        ns, name = key
        state = self.namespaces.get(ns)
        if state is None or not state.loaded:
            return
        entry = state.record.entries.get(name)
        if entry is not None:
            reason = release_reason(name, entry, state.groups.get(name), self.clock())
            if reason is not None:
                await self._release(state, name, entry)
        await self._write_status(state, name)
        observed = state.groups.get(name)
        if observed is not None and observed.deleted and name not in state.record.entries:
            state.groups.pop(name, None)
            state.group_status.pop(name, None)
            state.released.pop(name, None)
            state.sync_group(name)

    async def _release(self, state: NamespaceQuota, name: str, entry: RecordEntry) -> None:
        ns = state.namespace
        async with state.lock:
            for _ in range(WRITE_ATTEMPTS):
                if state.record_stale:
                    await self._refresh_record(state)
                current = state.record.entries.get(name)
                if current != entry:
                    return  # released by another replica, or replaced by a newer admission
                observed = state.groups.get(name)
                reason = release_reason(name, entry, observed, self.clock())
                if reason is None:
                    return
                if observed is None or (not observed.deleted and observed.uid != entry.uid):
                    # Not visible (or a namesake): make sure with a read, the watch may lag.
                    try:
                        live = await self.kube.get(PODGROUPS, name, ns)
                    except ApiError as exc:
                        if not exc.not_found:
                            raise
                    else:
                        if entry.uid is None or live["metadata"].get("uid") == entry.uid:
                            state.apply_group(live, deleted=False)
                            reason = release_reason(name, entry, state.groups[name], self.clock())
                            if reason is None:
                                return
                entries = {k: v for k, v in state.record.entries.items() if k != name}
                if not await self._write_record(ns, state, entries):
                    continue  # another replica wrote first: reload and decide again
                state.released[name] = reason
                logger.info("quota of PodGroup %s/%s released: %s", ns, name, reason)
                return

    async def _write_status(self, state: NamespaceQuota, name: str) -> None:
        """Hand the group's reservation view to the status reconciler (the one status writer)."""
        observed = state.groups.get(name)
        if observed is None or observed.deleted:
            return
        key = (state.namespace, name)
        shown = state.group_status.get(name) or {}
        had = find_condition(_conditions(shown), c.ConditionType.QUOTA_RESERVED)
        released = state.released.get(name)
        if released is None and had is not None and had.status == c.ConditionStatus.TRUE:
            released = "the group no longer holds a reservation"
        self.publish(key, quota_view(state.ledger, key, released))


def _may_hold_reservation(body: Mapping[str, Any]) -> bool:
    """A PodGroup worth loading its namespace for: it sets totalResources or shows the condition."""
    if (body.get("spec") or {}).get("totalResources") is not None:
        return True
    conditions = (body.get("status") or {}).get("conditions") or []
    return any(
        isinstance(cond, Mapping) and cond.get("type") == c.ConditionType.QUOTA_RESERVED
        for cond in conditions
    )


def _conditions(status: Mapping[str, Any]) -> list[Condition]:
    result = []
    for raw in status.get("conditions") or ():
        with contextlib.suppress(ValueError):
            result.append(Condition.model_validate(raw))
    return result


class ListedObjects:
    """`NamespaceObjects` read with three LISTs, for a QuotaService without informers."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube

    async def objects(self, namespace: str) -> tuple[list[JSON], list[JSON], list[JSON]]:
        quotas, groups, pods = await asyncio.gather(
            self.kube.list(RESOURCE_QUOTAS, namespace),
            self.kube.list(PODGROUPS, namespace),
            self.kube.list(PODS, namespace),
        )
        return (
            list(quotas.get("items") or ()),
            list(groups.get("items") or ()),
            list(pods.get("items") or ()),
        )
