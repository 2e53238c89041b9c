"""The status reconciler: recompute dirty PodGroups with the pure domain, write one PATCH.

Every pod or group event marks its group dirty (`touch`); a small pool of workers recomputes
dirty groups with `domain.lifecycle.compute_status`, folds in the gang scheduler's verdict and
the restart policy's plan, and writes one status PATCH when, and only when, something changed.
A burst of pod events therefore becomes one write, and a group that did not change costs no
write at all. It does I/O through the adapters and knows nothing of Kopf: the informers feed it
(see controllers/runtime.py), and tests drive it over the in-memory fake API server. A group
whose reconcile raises is backed off and reported once (controllers/isolation.py); the others
go on.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import statistics
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import orjson
from pydantic import ValidationError

from podgroup_operator import constants as c
from podgroup_operator import metrics
from podgroup_operator.adapters.kube import PODGROUPS, PODS, ApiError, KubeClient
from podgroup_operator.adapters.slim import without_managed_fields
from podgroup_operator.api.backoff import Backoff
from podgroup_operator.api.keys import GroupKey
from podgroup_operator.api.models import (
    PodGroup,
    PodGroupStatus,
    salvage_status,
    unreadable_fields,
)
from podgroup_operator.api.validation import status_errors, stored_podgroup_errors
from podgroup_operator.controllers.isolation import Failures, describe
from podgroup_operator.domain.conditions import find_condition
from podgroup_operator.domain.lifecycle import (
    compute_status,
    invalid_spec_message,
    invalid_spec_status,
    outlook,
    status_patch,
)
from podgroup_operator.domain.lightweight import (
    is_operator_created,
    lightweight_errors,
    podgroup_for,
)
from podgroup_operator.domain.membership import membership_conflict, missing_group_message
from podgroup_operator.domain.quota import QuotaView, apply_quota_view
from podgroup_operator.domain.restart import (
    Fail,
    Nothing,
    Restart,
    Resume,
    Wait,
    current_incarnation,
    plan_restart,
)
from podgroup_operator.domain.scheduling_status import (
    Preempted,
    Verdict,
    apply_preempted,
    apply_verdict,
    preempted_since,
    timed_out_since,
)
from podgroup_operator.domain.subgroups import unknown_sub_group_message
from podgroup_operator.logs import truncate

logger = logging.getLogger(__name__)

URGENT, ROUTINE = 0, 1
"""Lanes of dirty groups, each with its own queue and workers; see `StatusReconciler.touch`."""
COUNTERS = frozenset({"scheduled", "running", "succeeded", "failed", "terminating"})
"""Status fields that only count members; a change of these alone may wait (`count_delay`)."""
COUNT_DELAY_SECONDS = 2.0
"""A change of nothing but COUNTERS (and the `Scheduled` condition turning True) waits this
long from when it was first seen: a gang's members bind and start within moments of each other,
and each of their events would otherwise be a PATCH of its own (measured under a 1,000 x 10
backlog: 3.9 status changes per group with no delay; 2.83 with counts alone delayed, because
the bind that completed the gang wrote `Scheduled` and the members' start wrote `Running` a
moment later). Phase changes and every other condition change are never delayed, and carry the
counts and `Scheduled` with them."""
BINDING_DELAY_SECONDS = 60.0
"""How long the first status of a group the gang scheduler placed waits for its members to be
bound, from the placement: under a backlog a placed gang's binds queue behind other gangs'.
Waiting only `count_delay` from when the group was first seen, every group of a backlog had its
delay run out while it was binding and wrote `Pending` first; that PATCH was often in flight when
the members started, and held the `Running` write behind it (one worker per group). Measured
under a 1,000 x 10 backlog with `run --write-process --bind-concurrency 256` (operator alone):
2.83 status PATCHes per group, convergence p99 1.9 s and max 5.4 s, the worst groups all among
the first placed; with this wait and `STARTING_DELAY_SECONDS`, 1.8 PATCHes per group (the
flood's kubelets started some gangs more than 10 s after their binds), p99 0.70 s, max 0.79 s,
and at the defaults 1.0 PATCH per group instead of 1.94. The limit keeps a gang whose binds never
come from going without a status."""
ROUTINE_WORKERS = 16
"""Routine reconciles that may run at once by default, however many urgent ones may: see
`StatusReconciler.touch`."""
STARTING_DELAY_SECONDS = 10.0
"""How long the first status of a placed group whose members are all bound waits for them to
start, from when they were: its first write is then `Running`, one PATCH instead of two. A gang
whose members take longer (an image pull, a slow kubelet) gets its `Pending` status, with
`Scheduled` True, after this, or after longer while every gang starts slowly
(`StatusReconciler.starting_wait`)."""
STARTING_LAG_FACTOR = 2.0
"""When gangs have lately taken longer than `STARTING_DELAY_SECONDS` to start once bound, a
bound gang's first status waits this many times their median instead (see
`StatusReconciler.starting_wait`)."""
STARTING_LAGS_KEPT = 32
"""How many of the latest gangs' times from bound to Running that median is taken over."""
STARTING_DELAY_LONGEST_SECONDS = 30.0
"""The longest a bound gang's first status waits for its members to start, however slowly
gangs start lately: until then `kubectl get podgroups` shows it with no phase (its pods say
`ContainerCreating`), after up to `BINDING_DELAY_SECONDS` for its binds."""
CONTESTED_AFTER = 3
"""Times in a row another writer changed a group's status since our last write before the
reconciler calls it a contest (see `StatusReconciler._contest_waits`)."""
CONTESTED_FIRST_SECONDS = 2.0
"""The wait before the first write of a contest; it doubles with each contested write."""
CONTESTED_LONGEST_SECONDS = 300.0
"""The longest wait between two writes of a contested group's status."""
_CONTESTED = Backoff(initial_seconds=CONTESTED_FIRST_SECONDS, max_seconds=CONTESTED_LONGEST_SECONDS)
EVENT_CONCURRENCY = 8
"""Events posted at once, in the background: narrating a transition must not hold a worker."""
EVENT_MESSAGE_LIMIT = 1024
"""Characters of an Event message we post (events.k8s.io/v1 caps `note` at 1 kB)."""


_LIVE_PHASES = frozenset({c.PodPhase.RUNNING, c.PodPhase.SUCCEEDED})
"""Pod phases that count toward minMember (`starts_short`)."""
_STARTING_PHASES = frozenset({None, c.Phase.PENDING})
"""Group phases from which a start that leaves the gang short stays Pending (`starts_short`)."""


class Index(Protocol):
    """What the reconciler reads of an index (an informer's `IndexView`, or a fake in tests)."""

    def get(self, key: GroupKey, default: Any = None) -> Any: ...


def _fingerprints(status: dict[str, Any] | None) -> dict[str, int]:
    """A hash of each top-level field of a status, as JSON with sorted keys."""
    return {
        field: hash(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
        for field, value in (status or {}).items()
    }


def _resource_version(body: dict[str, Any] | None) -> int:
    try:
        return int((body or {}).get("metadata", {}).get("resourceVersion", 0))
    except (TypeError, ValueError):
        return 0


class InvalidPodGroupError(ValueError):
    """The stored PodGroup does not parse, and the API server refused the InvalidSpec status
    that says so (`StatusReconciler._write_invalid`): the worker reports it and backs off."""


class StatusReconciler:
    """Recompute and patch the status of dirty PodGroups: urgent ones at most `workers` at a
    time, routine ones at most `routine_workers` (by default as many, up to ROUTINE_WORKERS)."""

    def __init__(
        self,
        kube: KubeClient,
        groups: Index,
        members: Index,
        *,
        workers: int = 16,
        routine_workers: int | None = None,
        settle: float = 0.02,
        count_delay: float = COUNT_DELAY_SECONDS,
        binding_delay: float = BINDING_DELAY_SECONDS,
        starting_delay: float = STARTING_DELAY_SECONDS,
        starting_longest: float = STARTING_DELAY_LONGEST_SECONDS,
        namespaces: frozenset[str] = frozenset(),
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.kube = kube
        self.namespaces = namespaces
        """Namespaces whose groups this reconciler writes; empty means all."""
        self.failures = Failures("status of PodGroup", logger, metric="status")
        self.groups = groups
        self.members = members
        self.clock = clock
        self.workers = workers
        self.routine_workers = (
            min(workers, ROUTINE_WORKERS) if routine_workers is None else routine_workers
        )
        self.settle = settle
        self.count_delay = count_delay
        self.binding_delay = binding_delay
        self.starting_delay = starting_delay
        self.starting_longest = starting_longest
        self._counts_since: dict[GroupKey, tuple[float, float]] = {}
        """Loop time since which a group's change waits (see `_counts_wait`), and until when a
        timer is set to touch it (see `_delayed`)."""
        self._bound_since: dict[GroupKey, tuple[float, float]] = {}
        """Loop time since which a placed group's first status, or its progress while it is
        `Pending`, waits with its members all bound (see `_pending_wait`), and its timer."""
        self._missing_since: dict[GroupKey, tuple[float, float]] = {}
        """Loop time since which pods wait for their missing group (see `_missing_waits`), and
        its timer."""
        self._all_bound_at: dict[GroupKey, float] = {}
        """Loop time a placed `Pending` group was first seen with its members all bound, until
        it leaves `Pending` (unlike `_bound_since`, no write restarts it)."""
        self._start_lags: deque[float] = deque(maxlen=STARTING_LAGS_KEPT)
        """The latest groups' times from `_all_bound_at` to their `Running` write."""
        self._event_slots = asyncio.Semaphore(EVENT_CONCURRENCY)
        self._posting: set[asyncio.Task[None]] = set()
        self.writes = 0
        """Status PATCHes sent since start (exposed for tests and metrics)."""
        self._lanes: tuple[asyncio.Queue[GroupKey], asyncio.Queue[GroupKey]] = (
            asyncio.Queue(),
            asyncio.Queue(),
        )
        """The dirty keys of each lane (URGENT, ROUTINE), each served by its own workers."""
        self._queued: dict[GroupKey, int] = {}
        """Keys waiting in a lane, with the lane (a key promoted to URGENT is in both; the entry
        found after the key was taken is skipped)."""
        self._running: set[GroupKey] = set()
        self._again: dict[GroupKey, bool] = {}
        """Keys touched while being reconciled, and whether any of those touches was urgent."""
        self._written: dict[GroupKey, dict[str, Any]] = {}
        """Our last status write per group (without managedFields), until the watch echoes it:
        the newest body while the informer lags behind, and what tells the echo apart."""
        self._ours: dict[GroupKey, dict[str, int]] = {}
        """Fingerprints of each top-level status field of our last write per group: a field
        that differs when we come to write it again was written by someone else meanwhile."""
        self._contested: dict[GroupKey, tuple[int, dt.datetime]] = {}
        """Groups whose status another writer changed since each of our last writes: how many
        times in a row, and when we last wrote it."""
        self._warned_pods: set[str] = set()
        self._warned_conflicts: set[str] = set()
        self._warned_labels: set[str] = set()
        self._warned_sub_groups: set[str] = set()
        self.verdicts: dict[GroupKey, Verdict] = {}
        """The gang scheduler's latest verdict per group, folded into the status we write."""
        self.quota_views: dict[GroupKey, QuotaView] = {}
        """The quota controller's latest view per group (reservation, QuotaReserved)."""
        self.preempted: dict[GroupKey, Preempted] = {}
        """Gangs a higher-priority gang preempted (the scheduler's fact): their `Preempted`
        condition, and no restart charged for the break (domain/restart.py)."""
        self._per_group: tuple[dict[GroupKey, Any], ...] = (
            self._counts_since,
            self._bound_since,
            self._all_bound_at,
            self._ours,
            self._contested,
            self.verdicts,
            self.quota_views,
            self.preempted,
        )
        """What is kept per group beyond its reconcile, dropped once the group is gone."""
        self._tasks: list[asyncio.Task[None]] = []
        self.last_done: float | None = None
        """Loop time the last reconcile ended (liveness: workers with a queue finish some)."""

    @property
    def backlog(self) -> int:
        """Groups waiting for a worker."""
        return len(self._queued)

    @property
    def held(self) -> int:
        """Bodies of our own writes the watch has not brought back yet (see `_written`)."""
        return len(self._written)

    def touch(self, key: GroupKey, *, urgent: bool = False) -> None:
        """Mark a group dirty; a group already waiting is not queued twice, and a group being
        reconciled is queued again when that reconcile ends (never two workers on one group).

        `urgent` touches (a member changed phase or went away: the group's own phase may flip)
        have workers of their own, `workers` of them; the other touches get `routine_workers`.
        So a gang turning Running is not written after, nor alongside, a thousand groups' first
        Pending status when an operator starts under a backlog. Why alongside matters: one queue
        that put urgent keys first still let the idle workers write, at once, every first status
        whose `binding_delay` ran out together (the gangs placed in the first seconds of a
        1,000 x 10 backlog and still unbound 60 s later, on a slow machine). In one probed run
        98 of them went out within 0.2 s; the Running writes sent beside them took 580 ms
        instead of the run's median 220, and the operator's own pod watch fell a second behind
        the bench's: the five slowest groups of the run, p99 1.6 s, were all in that second.
        """
        if self.namespaces and key[0] not in self.namespaces:
            return
        if key in self._running:
            self._again[key] = self._again.get(key, False) or urgent
            return
        lane = URGENT if urgent else ROUTINE
        queued = self._queued.get(key)
        if queued is not None and queued <= lane:
            return
        self._queued[key] = lane
        queue = self._lanes[lane]
        if self.settle and not urgent:
            # Let the rest of a burst (a ReplicaSet's pods binding, starting) land first: events
            # for this key meanwhile find it queued and add nothing. One write, not five; and no
            # worker sits idle while a key settles. An urgent touch does not wait: the member
            # whose start completes a gang is the one its users wait on, and what it writes
            # (a phase) is never delayed anyway (measured under a 1,000 x 10 backlog with
            # 128 binds in flight: the settle was 20 of the 199 ms convergence median).
            asyncio.get_running_loop().call_later(self.settle, queue.put_nowait, key)
        else:
            queue.put_nowait(key)

    def group_changed(self, key: GroupKey, body: dict[str, Any]) -> None:
        """A PodGroup event: reconcile it, unless it is the echo of our own last status write.

        Why: every PATCH comes back through the watch, and reconciling the echo recomputed a
        status that was just written from the same members (measured under a 1,000 x 10
        backlog: about one reconcile in four). A member that changed since touched the group
        itself; anything else that changes the group (its spec, another writer) changes the
        resourceVersion, so it is never mistaken for the echo.
        """
        written = self._written.get(key)
        version = _resource_version(body)
        if (
            written is not None
            and version
            and version == _resource_version(written)
            and (body.get("metadata") or {}).get("uid") == written["metadata"].get("uid")
        ):
            # The store holds it now; keeping our copy too would hold a body per group.
            del self._written[key]
            return
        self.touch(key)

    def set_quota_view(self, key: GroupKey, view: QuotaView) -> None:
        """The quota controller's view of the group's reservation, folded into its status."""
        if self.quota_views.get(key) != view:
            self.quota_views[key] = view
            self.touch(key)

    def set_verdict(self, key: GroupKey, verdict: Verdict) -> None:
        if self.verdicts.get(key) != verdict:
            self.verdicts[key] = verdict
            if verdict.placed:
                # A first status still waiting waits `binding_delay` from the placement: the
                # next reconcile starts that clock, and its touch, afresh.
                self._counts_since.pop(key, None)
            self.touch(key)

    def set_preempted(self, key: GroupKey, fact: Preempted) -> None:
        """A higher-priority gang evicts this one; known before its pods go, so the restart
        policy sees the fact when their deletion shows."""
        self.preempted[key] = fact
        self.touch(key, urgent=True)

    def start(self) -> None:
        urgent, routine = self._lanes
        self._tasks = [
            *(asyncio.create_task(self._worker(urgent)) for _ in range(self.workers)),
            *(asyncio.create_task(self._worker(routine)) for _ in range(self.routine_workers)),
        ]

    async def stop(self) -> None:
        tasks = [*self._tasks, *self._posting]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _worker(self, lane: asyncio.Queue[GroupKey]) -> None:
        while True:
            key = await lane.get()
            if self._queued.pop(key, None) is None:
                continue  # a second entry of a key that was promoted and already taken
            self._running.add(key)
            try:
                # Isolated: a group that raises backs off and is reported once (an Event).
                news = await self.failures.attempt(key, self.reconcile(key), self.touch)
                if news is not None:
                    await self._report_failure(key, *news)
            finally:
                self._running.discard(key)
                self.last_done = asyncio.get_running_loop().time()
                if key in self._again:
                    self.touch(key, urgent=self._again.pop(key))

    async def _report_failure(self, key: GroupKey, exc: Exception, delay: float) -> None:
        """One Warning Event on the PodGroup naming the cause (best effort, never raises)."""
        body = self._current(key)
        if body is None:
            return
        try:
            await self._emit(
                body,
                c.EventType.WARNING,
                c.Reason.RECONCILE_FAILED,
                f"status not updated: {describe(exc)}; retrying in {delay:.0f}s with backoff",
            )
        except Exception as failure:
            logger.warning("Event about PodGroup %s/%s not posted: %s", *key, describe(failure))

    def starts_short(self, key: GroupKey, pod: dict[str, Any], old: dict[str, Any] | None) -> bool:
        """The member only started (its phase turned Running, nothing else of its phase or
        deletion changed), and its group still has fewer than minMember members running or
        succeeded, and the group is new or Pending: the group's phase cannot flip on it (the
        phase table, domain/lifecycle.py), so its touch need not be urgent.

        Why: every member's start was an urgent touch, reconciled at once and never coalesced.
        When a kubelet started a burst of members, the reconciles of those that completed no
        gang ran between the watch's reads, and the operator read the completing members late:
        in a probe of three 1,000 x 10 backlogs, the slowest groups of one run were read 0.5 s
        after the bench's watch saw them, with 20 to 36 status PATCHes in flight
        (docs/scale.md). Counting members here costs a pass over the group's members, less than
        the reconcile it spares. Every member Running or Succeeded counts, whatever incarnation
        it belongs to: an over-count keeps the touch urgent, never the reverse.
        """
        if old is None or (old.get("status") or {}).get("phase") == c.PodPhase.RUNNING:
            return False
        if (pod.get("status") or {}).get("phase") != c.PodPhase.RUNNING:
            return False
        if bool((pod.get("metadata") or {}).get("deletionTimestamp")) != bool(
            (old.get("metadata") or {}).get("deletionTimestamp")
        ):
            return False
        body = self._current(key)  # our own last write's phase if the watch lags behind it
        if ((body or {}).get("status") or {}).get("phase") not in _STARTING_PHASES:
            return False  # a Running or Unknown gang's phase reads its last one too
        min_member = ((body or {}).get("spec") or {}).get("minMember")
        if not isinstance(min_member, int) or isinstance(min_member, bool):
            return False
        live = 0
        for member in self.members.get(key, []):
            if (member.get("status") or {}).get("phase") in _LIVE_PHASES:
                live += 1
                if live >= min_member:
                    return False
        return True

    def _current(self, key: GroupKey) -> dict[str, Any] | None:
        """The newest body we know: the index, or our own last write if the watch lags behind."""
        indexed = next(iter(self.groups.get(key, [])), None)
        written = self._written.get(key)
        if indexed is None:
            self._written.pop(key, None)
            return None
        if (
            written is not None
            and written["metadata"].get("uid") == indexed["metadata"].get("uid")
            and _resource_version(written) > _resource_version(indexed)
        ):
            return written
        self._written.pop(key, None)
        return indexed

    async def reconcile(self, key: GroupKey) -> None:
        pods = list(self.members.get(key, []))
        body = self._current(key)
        if body is None:
            # No group (deleted, or a gang of one that never has one): nothing of it is kept,
            # or a busy cluster's churn of groups would grow this process without end.
            for kept in self._per_group:
                kept.pop(key, None)
            pods = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            if not pods:
                self._missing_since.pop(key, None)
                return  # members on their way out (often a namespace being deleted): no group
            invalid = await self._warn_invalid_gang_labels(pods)
            lightweight = podgroup_for(key[0], pods)
            if lightweight is not None:
                await self._create_lightweight(lightweight, pods)
            elif not invalid and not self._missing_waits(key):
                await self._warn_missing_group(key, pods)
            return
        self._missing_since.pop(key, None)
        if not pods and is_operator_created(body):
            # A lightweight gang whose pods are all gone: its PodGroup goes with them.
            await self._delete(key, body)
            return
        try:
            group = PodGroup.model_validate(body)
        except ValidationError as exc:
            # Its spec was admitted before our webhook ran (or with it off); the CRD schema kept
            # the worst out. Said in its status until it is fixed (the fix is a watch event).
            await self._write_invalid(key, body, stored_podgroup_errors(body, exc))
            return
        if group.spec.sub_groups:
            self._warn_unknown_sub_groups(group, pods)
        now = self.clock()
        if await self._restart_step(key, group, body, pods, now):
            # The restart wrote status; the rest is computed over what it wrote, in the next
            # reconcile (the watch echo of our own write no longer brings it: group_changed).
            self.touch(key)
            return
        members = current_incarnation(group.status, pods)
        # Stored fields we cannot read (models.salvage_status) are rewritten at once: what
        # they show is not what the operator acts on.
        rewrite = unreadable_fields(group.unreadable_status)
        if not rewrite and self._first_status_holds(key, group, members):
            return
        result = compute_status(group, members, group.status, now)
        id_seed = group.metadata.uid or "/".join(key)
        status = apply_verdict(
            result.status, self.verdicts.get(key), group.spec.min_member, now, id_seed=id_seed
        )
        status = apply_quota_view(status, self.quota_views.get(key), now, id_seed=id_seed)
        status = apply_preempted(status, self.preempted.get(key), now, id_seed=id_seed)
        patch = status_patch(group.status, status, rewrite)
        if patch is None or (not rewrite and self._counts_wait(key, patch, group, status)):
            return
        if await self._contest_waits(key, body, patch["status"]):
            return
        # A merge patch replaces `conditions` whole: write only over the version we read (the
        # restart step and a lagging watch are the other ways this status changes).
        updated = await self._write_status(key, body, patch)
        if updated is None:
            return
        if rewrite:
            self._narrate(
                updated,
                c.EventType.WARNING,
                c.Reason.STATUS_REWRITTEN,
                "status fields this operator cannot read were rewritten from the members: "
                + "; ".join(status_errors(group.unreadable_status)),
            )
        for event in result.events:
            self._narrate(updated, event.type, event.reason, event.message)

    async def _write_invalid(
        self, key: GroupKey, body: dict[str, Any], problems: list[str]
    ) -> None:
        """Write the InvalidSpec condition (`invalid_spec_status`) on a group whose spec does
        not validate, with one Warning Event each time its message changes; the scheduler
        tells its waiting members (`GangScheduler._queued`).

        An API server that refuses the write (422: it checks the whole object against the CRD's
        schema, and a schema tightened since refuses the stored spec) leaves only the Event:
        InvalidPodGroupError, which the worker reports once and backs off from.
        """
        previous, unreadable = salvage_status(body.get("status"))
        metadata = body.get("metadata") or {}
        status = invalid_spec_status(
            previous,
            problems,
            self.clock(),
            generation=metadata.get("generation"),
            id_seed=metadata.get("uid") or "/".join(key),
        )
        patch = status_patch(previous, status, unreadable_fields(unreadable))
        if patch is None:
            return
        message = invalid_spec_message(problems)
        try:
            updated = await self._write_status(key, body, patch)
        except ApiError as exc:
            if not exc.invalid:
                raise
            raise InvalidPodGroupError(
                f"status not written (the CRD's schema refuses the stored object): {message}"
            ) from exc
        if updated is None:
            return
        before = find_condition(previous.conditions, c.ConditionType.UNSCHEDULABLE)
        if before is None or (before.reason, before.message) != (c.Reason.INVALID_SPEC, message):
            self._narrate(updated, c.EventType.WARNING, c.Reason.INVALID_SPEC, message)

    async def _contest_waits(
        self, key: GroupKey, body: dict[str, Any], writing: dict[str, Any]
    ) -> bool:
        """Whether this write waits because another writer keeps changing the group's status.

        Why: a controller of scheduler-plugins left running beside this operator (a migration
        half done) writes its own phase back each time this one writes: on the dev cluster the
        two wrote 944 times each in 30 s, with a PhaseChanged and a StatusRewritten Event each
        time, for as long as both ran. After `CONTESTED_AFTER` writes in a row that found
        someone else's status, one Warning names the other writer, and each write waits twice
        as long as the one before, up to `CONTESTED_LONGEST_SECONDS`; a write that finds its
        own status again ends the contest.
        """
        ours = self._ours.get(key, {})
        stored = _fingerprints(body.get("status"))
        changed = sorted(f for f in writing if f in ours and stored.get(f) != ours[f])
        if not changed:
            self._contested.pop(key, None)
            return False
        clock = self.clock()
        times, last = self._contested.get(key, (0, clock))
        if times >= CONTESTED_AFTER:
            until = last + _CONTESTED.delay(times - CONTESTED_AFTER + 1)
            if clock < until:
                self._retry_at(key, until, clock)
                return True
        times += 1
        self._contested[key] = (times, clock)
        if times == CONTESTED_AFTER:
            await self._warn_contested(key, body, changed, times)
        return False

    async def _warn_contested(
        self, key: GroupKey, body: dict[str, Any], fields: list[str], times: int
    ) -> None:
        """One Warning (and log line) naming who else writes the status, from managedFields."""
        try:
            full = await self.kube.get(PODGROUPS, key[1], key[0])
        except Exception:  # not CancelledError: the Warning goes out without the names
            full = body
        others = sorted(
            {
                str(entry.get("manager") or "?")
                for entry in (full.get("metadata") or {}).get("managedFields") or ()
                # `subresource` is there from Kubernetes 1.22; before, the fields say it.
                if (
                    entry.get("subresource") == "status"
                    or "f:status" in (entry.get("fieldsV1") or {})
                )
                and entry.get("manager") != self.kube.field_manager
            }
        )
        who = ", ".join(others) if others else "another writer"
        named = ", ".join(f"status.{field}" for field in fields)
        message = (
            f"{named} changed by {who} after each of this operator's last {times} writes: "
            "two controllers write this PodGroup's status (a scheduler-plugins controller "
            "still running?); stop the other one. Until then this operator writes it less "
            f"and less often, at most every {CONTESTED_LONGEST_SECONDS:.0f}s"
        )
        logger.warning("PodGroup %s/%s: %s", key[0], key[1], message)
        self._narrate(full, c.EventType.WARNING, c.Reason.STATUS_CONTESTED, message)

    def _first_status_holds(self, key: GroupKey, group: PodGroup, members: list[Any]) -> bool:
        """Whether the group's first status would be held back, known from its phase and counts
        alone (`domain.lifecycle.outlook`), before the status is computed in full.

        Why: while a gang binds and starts, each burst of member events reconciles its group,
        and nearly every such reconcile used to compute a whole status only for
        `_counts_wait` to hold it back (measured under a 1,000 x 10 backlog: 7,500 to 8,000
        reconciles, of which about 1,000 wrote; under 128 binds in flight, reconciles took a
        third of the main process's time, and the process was busy 88% of the time, which
        delays every watch event and PATCH answer it handles). It is the decision `_counts_wait`
        used to make from the full status, and the only place it is made now: the same phase
        (`compute_status` uses `outlook` too), and `Scheduled` is True exactly when minMember
        members are bound. A phase other than Pending, a refusal, or a group with a status goes
        the full way.
        """
        if not self.count_delay or group.status.phase is not None:
            return False
        seen = outlook(group, members, group.status)
        if not self._first_status_waits(key, group.status, seen.phase):
            return False
        return self._pending_wait(key, bound=seen.counts.scheduled >= group.spec.min_member)

    def _counts_wait(
        self, key: GroupKey, patch: dict[str, Any], group: PodGroup, new: PodGroupStatus
    ) -> bool:
        """Whether a change waits: for `count_delay` from when it was first seen (the group is
        touched then), unless a phase or condition change writes it earlier; a placed gang
        still `Pending` waits as its first status would (`_pending_wait`).

        Progress waits: the COUNTERS, condition messages that restate them ("3 member pods can
        run, fewer than minMember 10") while every condition keeps its status and reason, and
        `Scheduled` turning True (the members are bound; their start, moments later, is the
        change users wait for, and its write carries `Scheduled` along). A group's first status
        has been decided before the status was computed (`_first_status_holds`): one that gets
        here is written, and its patch sets the phase, which is not progress.

        Why a placed gang's progress waits longer: under a backlog many groups get their
        `Pending` status while still queued, and when they are placed, their binds and their
        members' starts came as count-only writes two seconds apart. The one in flight when
        the last member started held the `Running` write behind it, one worker per group
        (5,000 x 10 backlog on 500 sim nodes: 2.42 status PATCHes per group, and three of the
        five slowest groups, written `Running` 2.1 to 2.3 s after their last member started,
        had a `Pending` count write in flight when it did). With this wait, the same backlog the
        same hour: 2.01 PATCHes per group, at most 3, against 2.38 and at most 6 (docs/scale.md,
        "2026-11-26, afternoon").
        """
        if not self.count_delay:
            return False
        if not self._only_progress(patch, group.status, new):
            return False
        verdict = self.verdicts.get(key)
        if group.status.phase == c.Phase.PENDING and verdict is not None and verdict.placed:
            return self._pending_wait(key, bound=new.scheduled >= group.spec.min_member)
        return self._delayed(self._counts_since, key, self.count_delay)

    def _delayed(
        self, started: dict[GroupKey, tuple[float, float]], key: GroupKey, delay: float
    ) -> bool:
        """True while `key` is within `delay` of when `started` first had it; the first call
        starts that clock and touches the key again when it runs out, and so does a call whose
        `delay` ends later than any touch set so far (`starting_wait` grows as gangs start
        more slowly)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        clock = started.get(key)
        if clock is None:
            started[key] = (now, now + delay)
            loop.call_later(delay, self.touch, key)
            return True
        since, wake_at = clock
        deadline = since + delay
        if now >= deadline:
            return False
        if deadline > wake_at:
            started[key] = (since, deadline)
            loop.call_later(deadline - now, self.touch, key)
        return True

    @property
    def starting_wait(self) -> float:
        """How long a bound gang's first status (or its progress while `Pending`) waits for its
        members to start: `starting_delay`, or STARTING_LAG_FACTOR times the median time the
        latest gangs took from bound to `Running` when that is longer, at most
        `starting_longest`.

        Why: under a flood of pods the kubelets' status writes queue in the API server, and
        every gang then takes about as long to start. With a fixed 10 s, a 1,000 x 10 backlog
        whose kubelets fell about 10 s behind wrote `Pending` for 620 to 630 of its 1,000
        groups (two runs of three) when their wait ran out, and the groups `bench scale` showed
        (`most_written_groups`) started within a second after; each such write cost a PATCH
        and an Event and held up the `Running` write behind it. A gang slower than its peers
        (an image pull, a node's kubelet down) still gets its `Pending` status, and a cluster
        whose gangs start quickly keeps the short wait."""
        if not self._start_lags:
            return self.starting_delay
        lately = STARTING_LAG_FACTOR * statistics.median(self._start_lags)
        return max(self.starting_delay, min(lately, self.starting_longest))

    def _first_status_waits(
        self, key: GroupKey, previous: PodGroupStatus, phase: str | None
    ) -> bool:
        """A new group's first status, `Pending`, waits for the scheduler's first word on it.

        Why: every new group used to get a bare `Pending` status and a `new -> Pending` Event
        at once, then, a second later, `Running` and another Event: two PATCHes and two Events
        per group, competing with the binds for the API server (measured with `bench scale
        --mode arrival`, 1,000 x 10: 2.13 status PATCHes per group; 1.26 with this wait).
        Waiting lets the first write say something: `Running` when the gang was placed and
        started meanwhile, or the scheduler's refusal (which is never delayed: a refusal is
        news). How long it waits: `_pending_wait`.
        """
        if previous.phase is not None or phase != c.Phase.PENDING:
            return False
        verdict = self.verdicts.get(key)
        return verdict is None or verdict.placed

    def _pending_wait(self, key: GroupKey, *, bound: bool) -> bool:
        """Whether a first status still waits (see `_first_status_waits`), or a placed gang's
        progress while it is `Pending` (see `_counts_wait`).

        A group the scheduler never judges (its pods use another scheduler, or fewer than
        minMember exist) gets its `Pending` status after `count_delay`, and so does a group
        still queued behind others when the operator starts under a backlog. A placed group
        waits for its binds (`binding_delay` from the placement: `set_verdict` restarts the
        clock), then for its members to start (`starting_wait` from when all were bound:
        `bound` is the `Scheduled` condition, True once minMember members are bound).
        """
        if self.verdicts.get(key) is None:
            return self._delayed(self._counts_since, key, self.count_delay)
        if not bound:
            return self._delayed(self._counts_since, key, max(self.count_delay, self.binding_delay))
        self._all_bound_at.setdefault(key, asyncio.get_running_loop().time())
        return self._delayed(self._bound_since, key, max(self.count_delay, self.starting_wait))

    @staticmethod
    def _only_progress(
        patch: dict[str, Any], previous: PodGroupStatus, new: PodGroupStatus
    ) -> bool:
        """The patch changes only counters and what restates them (see `_counts_wait`)."""
        if not set(patch.get("status") or {}) <= COUNTERS | {"conditions"}:
            return False
        before = {x.type: (x.status, x.reason) for x in previous.conditions}
        after = {x.type: (x.status, x.reason) for x in new.conditions}
        if set(before) - set(after):
            return False
        for kind, state in after.items():
            scheduled = kind == c.ConditionType.SCHEDULED and state[0] == c.ConditionStatus.TRUE
            if before.get(kind) != state and not scheduled:
                return False
        return True

    async def _restart_step(
        self,
        key: GroupKey,
        group: PodGroup,
        body: dict[str, Any],
        pods: list[dict[str, Any]],
        now: dt.datetime,
    ) -> bool:
        """Carry out the restart policy's plan; True when it wrote status (the reconcile ends).

        The order makes a crash harmless (see domain/restart.py): status first, with a
        resourceVersion precondition, then deletes with UID preconditions, then creations.
        """
        if group.spec.policy is None and not group.status.restarting_uids:
            return False
        plan = plan_restart(
            group,
            pods,
            now,
            preempted_at=preempted_since(group.status, self.preempted.get(key)),
            timed_out_at=timed_out_since(self.verdicts.get(key)),
        )
        if isinstance(plan, Nothing):
            return False
        if isinstance(plan, Wait):
            self._retry_at(key, plan.until, now)
            if plan.status_patch is None:
                return False
        patch = plan.status_patch  # every plan but Nothing has one (maybe None)
        updated = body
        if patch is not None:
            written = await self._write_status(key, body, patch)
            if written is None:
                return True
            updated = written
        if isinstance(plan, Restart):
            metrics.RESTARTS.inc()
        if isinstance(plan, Restart | Fail) and plan.event is not None:
            self._narrate(updated, plan.event.type, plan.event.reason, plan.event.message)
            logger.info("PodGroup %s/%s: %s", *key, plan.event.message)
        delete = () if isinstance(plan, Wait) else plan.delete
        recreate = plan.recreate if isinstance(plan, Restart | Resume) else ()
        for member in delete:
            try:
                await self.kube.delete(PODS, member.name, member.namespace, uid=member.uid)
            except ApiError as exc:
                if not (exc.not_found or exc.conflict):
                    raise
        for pod in recreate:
            try:
                await self.kube.create(PODS, pod, pod["metadata"]["namespace"])
            except ApiError as exc:
                if not (exc.conflict or exc.namespace_terminating):
                    raise
        return patch is not None

    def _retry_at(self, key: GroupKey, until: dt.datetime, now: dt.datetime) -> None:
        delay = max(0.0, (until - now).total_seconds())
        asyncio.get_running_loop().call_later(delay + 0.05, self.touch, key)

    async def _write_status(
        self, key: GroupKey, body: dict[str, Any], patch: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Merge-patch status over the version we read; None if someone wrote in between."""
        patch = {**patch, "metadata": {"resourceVersion": body["metadata"].get("resourceVersion")}}
        try:
            updated = await self.kube.patch(PODGROUPS, key[1], patch, key[0], subresource="status")
        except ApiError as exc:
            if exc.not_found:
                return None
            if exc.conflict:
                # Recompute from the fresh object, not the stale one.
                try:
                    fresh = await self.kube.get(PODGROUPS, key[1], key[0])
                    self._written[key] = without_managed_fields(fresh)
                except ApiError as gone:
                    if not gone.not_found:
                        raise
                    return None
                self.touch(key)
                return None
            raise
        self.writes += 1
        metrics.STATUS_WRITES.inc()
        updated = self._written[key] = without_managed_fields(updated)
        self._ours[key] = _fingerprints(updated.get("status"))
        self._counts_since.pop(key, None)
        self._bound_since.pop(key, None)
        phase = (updated.get("status") or {}).get("phase")
        if phase != c.Phase.PENDING:
            bound_at = self._all_bound_at.pop(key, None)
            if bound_at is not None and phase == c.Phase.RUNNING:
                self._start_lags.append(asyncio.get_running_loop().time() - bound_at)
        return updated

    def _narrate(
        self, involved: dict[str, Any], event_type: str, reason: str, message: str
    ) -> None:
        """Post an Event in the background (at most EVENT_CONCURRENCY at once): the worker goes
        on to the next group instead of waiting for the answer."""

        async def post() -> None:
            async with self._event_slots:
                await self._emit(involved, event_type, reason, message)

        task = asyncio.create_task(post())
        self._posting.add(task)
        task.add_done_callback(self._posting.discard)

    async def settled(self) -> None:
        """Wait until every Event narrated so far has been answered (tests: the barrier before
        counting Events; the same name and meaning as `Preemptor.settled`)."""
        while self._posting:
            await asyncio.gather(*self._posting, return_exceptions=True)

    async def _emit(
        self, involved: dict[str, Any], event_type: str, reason: str, message: str
    ) -> None:
        """Post an Event, best effort (`KubeClient.narrate`): the status is the record."""
        await self.kube.narrate(
            involved, event_type=event_type, reason=reason, message=message, now=self.clock()
        )

    async def _create_lightweight(self, body: dict[str, Any], pods: list[dict[str, Any]]) -> None:
        meta = body["metadata"]
        try:
            await self.kube.create(PODGROUPS, body, meta["namespace"])
            logger.info(
                "created PodGroup %s/%s for a lightweight gang", meta["namespace"], meta["name"]
            )
        except ApiError as exc:
            if exc.conflict:
                return  # created meanwhile
            if exc.namespace_terminating:
                return  # the namespace is going away with its pods
            if exc.status in (400, 422):
                # Refused as invalid by a rule we do not know: retrying cannot help; say it once.
                await self._warn_invalid_gang_labels(pods, refusal=exc.message)
                return
            raise

    async def _delete(self, key: GroupKey, body: dict[str, Any]) -> None:
        try:
            await self.kube.delete(PODGROUPS, key[1], key[0], uid=body["metadata"].get("uid"))
            logger.info("deleted PodGroup %s/%s: its lightweight gang has no pods left", *key)
        except ApiError as exc:
            if not (exc.not_found or exc.conflict):
                raise

    def pod_gone(self, uid: str) -> None:
        """A pod was deleted: forget that it was warned (a set of every pod ever warned would
        only grow)."""
        for warned in (
            self._warned_pods,
            self._warned_conflicts,
            self._warned_labels,
            self._warned_sub_groups,
        ):
            warned.discard(uid)

    def member_seen(self, pod: dict[str, Any]) -> None:
        """One Warning Event per pod whose label and annotation name different groups.

        Called by the pod informer's fan-out for a pod that is new or whose labels or
        annotations changed, not by `reconcile`: checking every member at every reconcile of
        its group cost a tenth of the reconcile under a backlog, for keys that rarely change.
        """
        meta = pod["metadata"]
        if self.namespaces and meta.get("namespace") not in self.namespaces:
            return  # another operator's (run -n) to tell
        uid = meta.get("uid", "")
        if uid in self._warned_conflicts:
            return
        conflict = membership_conflict(pod)
        if conflict is not None:
            self._warned_conflicts.add(uid)
            self._narrate(
                pod, c.EventType.WARNING, c.Reason.CONFLICTING_MEMBERSHIP, conflict.message
            )

    async def _warn_invalid_gang_labels(
        self, pods: list[dict[str, Any]], refusal: str | None = None
    ) -> bool:
        """One Warning Event per pod whose lightweight-gang keys are invalid; True if any is.

        No PodGroup is created for such a pod, so nothing retries: the Event is the whole answer
        until its owner fixes the labels (a new pod, a new UID, is checked afresh).
        """
        invalid = False
        for pod in pods:
            errors = lightweight_errors(pod)
            if refusal is not None and not errors:
                errors = [f"the PodGroup made from them was refused: {refusal}"]
            if not errors:
                continue
            invalid = True
            uid = pod["metadata"].get("uid", "")
            if uid in self._warned_labels:
                continue
            self._warned_labels.add(uid)
            message = truncate(
                "no PodGroup is created for this pod's gang until its labels/annotations are "
                "fixed: " + "; ".join(errors),
                EVENT_MESSAGE_LIMIT,
            )
            self._narrate(pod, c.EventType.WARNING, c.Reason.INVALID_GANG_LABELS, message)
        return invalid

    def _missing_waits(self, key: GroupKey) -> bool:
        """Whether pods naming a group that does not exist wait `count_delay` for it before
        they are warned.

        Why: a PodGroup and its pods applied together (`kubectl apply -f dir/`, a job
        controller) often reach the API server pods first; each such pod got a Warning it
        never needed (measured: 2,633 `MissingPodGroup` Events while 1,000 gangs arrived).
        A group still missing after the delay is warned about as before, once per pod.
        """
        return bool(self.count_delay) and self._delayed(self._missing_since, key, self.count_delay)

    def _warn_unknown_sub_groups(self, group: PodGroup, pods: list[dict[str, Any]]) -> None:
        """One Warning Event per pod whose sub-group label names no leaf of its group."""
        for pod in pods:
            uid = pod["metadata"].get("uid", "")
            if uid in self._warned_sub_groups:
                continue
            message = unknown_sub_group_message(pod, group.spec)
            if message is not None:
                self._warned_sub_groups.add(uid)
                self._narrate(pod, c.EventType.WARNING, c.Reason.MISSING_SUB_GROUP, message)

    async def _warn_missing_group(self, key: GroupKey, pods: list[dict[str, Any]]) -> None:
        """One Warning Event per pod that names a PodGroup that does not exist."""
        for pod in pods:
            uid = pod["metadata"].get("uid", "")
            if uid in self._warned_pods:
                continue
            self._warned_pods.add(uid)
            message = missing_group_message(pod)
            if message is not None:
                self._narrate(pod, c.EventType.WARNING, c.Reason.MISSING_POD_GROUP, message)
