"""Writes PodGroup status: the status reconciler, its one writer.

Every pod or group event marks its group dirty (`touch`); workers read the group and its
members from the informers' indexes, compute the status with the pure domain
(`domain.lifecycle.compute_status`), fold in the gang scheduler's verdict, the quota view and
the preemption fact, and write one status PATCH over the version read when, and only when,
something changed and `domain.status_hold` does not hold it back. A held write is taken up
again when its hold ends (a timer of the injected `MonotonicClock`). Before that, the restart
policy's plan is carried out by `Restarts` (controllers/restarts.py), whose status writes go
through this writer; a reconcile whose restart step wrote ends there.

What holds:
* never two workers on one group; a group touched while reconciled is reconciled again after;
* urgent touches (a member changed phase or went away) have workers of their own, so a gang
  turning Running never waits behind routine writes; routine touches wait `settle` seconds so
  a burst of events becomes one write;
* the watch echo of our own write is not reconciled again (`group_changed`);
* a group whose reconcile raises is backed off and reported once (controllers/isolation.py);
  the others go on.
Pods without their group are handed to `LightweightGangs` (controllers/lightweight.py) and
`MemberWarnings` (controllers/member_warnings.py); a status another writer keeps changing to
`Contests` (controllers/contest.py). It knows nothing of Kopf: the informers feed it
(controllers/runtime.py), and unit tests drive it over the in-memory fake API server.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from podgroup_operator import constants as c
from podgroup_operator import metrics
from podgroup_operator.adapters.informers import Index
from podgroup_operator.adapters.kube import PODGROUPS, ApiError, KubeClient
from podgroup_operator.adapters.record_key import SecretRecordKey
from podgroup_operator.adapters.slim import without_managed_fields
from podgroup_operator.api.keys import GroupKey
from podgroup_operator.api.models import (
    PodGroup,
    PodGroupStatus,
    salvage_status,
    unreadable_fields,
)
from podgroup_operator.api.validation import status_errors, stored_podgroup_errors
from podgroup_operator.controllers.clock import LOOP_CLOCK, MonotonicClock
from podgroup_operator.controllers.contest import Contests
from podgroup_operator.controllers.isolation import ExpectedRefusalError, Failures
from podgroup_operator.controllers.lightweight import LightweightGangs
from podgroup_operator.controllers.member_warnings import MemberWarnings
from podgroup_operator.controllers.narrator import Narrator
from podgroup_operator.controllers.restarts import Restarts
from podgroup_operator.controllers.run_limits import RunLimits
from podgroup_operator.domain.conditions import find_condition
from podgroup_operator.domain.lifecycle import (
    StatusResult,
    compute_status,
    invalid_spec_message,
    invalid_spec_status,
    outlook,
    status_patch,
)
from podgroup_operator.domain.provisioning import ProvisioningView, apply_provisioning
from podgroup_operator.domain.quota import QuotaView, apply_quota_view
from podgroup_operator.domain.restart import current_incarnation
from podgroup_operator.domain.scheduling_status import (
    Preempted,
    Verdict,
    apply_preempted,
    apply_verdict,
    next_verdict,
)
from podgroup_operator.domain.status_hold import (
    BINDING_DELAY_SECONDS,
    COUNT_DELAY_SECONDS,
    STARTING_DELAY_LONGEST_SECONDS,
    STARTING_DELAY_SECONDS,
    STARTING_LAGS_KEPT,
    Hold,
    HoldClock,
    HoldClocks,
    HoldTuning,
    change_hold,
    first_status_hold,
    starting_wait,
)
from podgroup_operator.logs import describe

logger = logging.getLogger(__name__)

URGENT, ROUTINE = 0, 1
"""Lanes of dirty groups, each with its own queue and workers; see `StatusReconciler.touch`."""
ROUTINE_WORKERS = 16
"""Routine reconciles that may run at once by default, however many urgent ones may: see
`StatusReconciler.touch`."""

_LIVE_PHASES = frozenset({c.PodPhase.RUNNING, c.PodPhase.SUCCEEDED})
"""Pod phases that count toward minMember (`starts_short`)."""
_STARTING_PHASES = frozenset({None, c.Phase.PENDING})
"""Group phases from which a start that leaves the gang short stays Pending (`starts_short`)."""


def _resource_version(body: dict[str, Any] | None) -> int:
    try:
        return int((body or {}).get("metadata", {}).get("resourceVersion", 0))
    except (TypeError, ValueError):
        return 0


class InvalidPodGroupError(ExpectedRefusalError, ValueError):
    """The stored PodGroup does not parse, and the API server refused the InvalidSpec status
    that says so (`StatusReconciler._write_invalid`): the worker reports it (one WARNING line
    naming the fields and the fix) and backs off."""


class StatusReconciler:
    """Recompute and patch the status of dirty PodGroups: urgent ones at most `workers` at a
    time, routine ones at most `routine_workers` (by default as many, up to ROUTINE_WORKERS).

    `clock` is wall-clock time (what a status and an Event say); `monotonic` times the holds
    and retries. `count_delay`, `binding_delay`, `starting_delay` and `starting_longest` are
    the hold's tuning (`domain.status_hold.HoldTuning`), settable while it runs; a
    `count_delay` of 0 holds nothing but contested writes."""

    def __init__(  # noqa: PLR0915
        self,
        kube: KubeClient,
        groups: Index,
        members: Index,
        *,
        record_key: SecretRecordKey,
        workers: int = 16,
        routine_workers: int | None = None,
        settle: float = 0.02,
        count_delay: float = COUNT_DELAY_SECONDS,
        binding_delay: float = BINDING_DELAY_SECONDS,
        starting_delay: float = STARTING_DELAY_SECONDS,
        starting_longest: float = STARTING_DELAY_LONGEST_SECONDS,
        namespaces: frozenset[str] = frozenset(),
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        monotonic: MonotonicClock = LOOP_CLOCK,
    ) -> None:
        self.kube = kube
        self.namespaces = namespaces
        """Namespaces whose groups this reconciler writes; empty means all."""
        self.failures = Failures("status of PodGroup", logger, metric="status", monotonic=monotonic)
        self.groups = groups
        self.members = members
        self.clock = clock
        self.monotonic = monotonic
        self.workers = workers
        self.routine_workers = (
            min(workers, ROUTINE_WORKERS) if routine_workers is None else routine_workers
        )
        self.settle = settle
        """Seconds a routine touch waits before its key is queued (0: queued at once)."""
        self.tuning = HoldTuning(count_delay, binding_delay, starting_delay, starting_longest)
        self.narrator = Narrator(kube, clock)
        self.lightweight = LightweightGangs(kube, self.narrator)
        self.warnings = MemberWarnings(self.narrator, monotonic)
        self.contests = Contests(kube, self.narrator)
        self.restarts = Restarts(
            kube,
            record_key,
            self.narrator,
            monotonic,
            write_status=self._write_status,
            touch=self.touch,
        )
        """Carries out the restart policy's plan (controllers/restarts.py)."""
        self.run_limits = RunLimits(
            kube, self.narrator, monotonic, write_status=self._write_status, touch=self.touch
        )
        """Stops a gang past its maxRunSeconds (controllers/run_limits.py)."""
        self._counts_since: dict[GroupKey, tuple[float, float]] = {}
        """When a group's COUNTS hold clock started, and until when a timer is set to touch the
        group (see `_keep_holding`)."""
        self._bound_since: dict[GroupKey, tuple[float, float]] = {}
        """The same for its BOUND hold clock."""
        self._all_bound_at: dict[GroupKey, float] = {}
        """When a placed `Pending` group was first seen with its members all bound, until it
        leaves `Pending` (no write restarts it, unlike its BOUND hold clock)."""
        self._start_lags: deque[float] = deque(maxlen=STARTING_LAGS_KEPT)
        """The latest groups' times from `_all_bound_at` to their `Running` write."""
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
        self.verdicts: dict[GroupKey, Verdict] = {}
        """The gang scheduler's latest verdict per group, folded into the status we write."""
        self.quota_views: dict[GroupKey, QuotaView] = {}
        """The quota controller's latest view per group (reservation, QuotaReserved)."""
        self.preempted: dict[GroupKey, Preempted] = {}
        """Gangs a higher-priority gang preempted (the scheduler's fact): their `Preempted`
        condition, and no restart charged for the break (domain/restart.py)."""
        self.provisioning: dict[GroupKey, ProvisioningView] = {}
        """The provisioning controller's latest word per group: its `Provisioning` condition
        (controllers/provisioning.py)."""
        self._per_group: tuple[dict[GroupKey, Any], ...] = (
            self._counts_since,
            self._bound_since,
            self._all_bound_at,
            self.verdicts,
            self.quota_views,
            self.preempted,
            self.provisioning,
        )
        """What is kept per group beyond its reconcile, dropped once the group is gone."""
        self._tasks: list[asyncio.Task[None]] = []
        self.last_done: float | None = None
        """Monotonic time the last reconcile ended (liveness: workers with a queue finish
        some)."""

    # --- the hold's tuning, settable while running ---------------------------------------------

    @property
    def count_delay(self) -> float:
        return self.tuning.count_delay

    @count_delay.setter
    def count_delay(self, seconds: float) -> None:
        self.tuning = replace(self.tuning, count_delay=seconds)

    @property
    def binding_delay(self) -> float:
        return self.tuning.binding_delay

    @binding_delay.setter
    def binding_delay(self, seconds: float) -> None:
        self.tuning = replace(self.tuning, binding_delay=seconds)

    @property
    def starting_delay(self) -> float:
        return self.tuning.starting_delay

    @starting_delay.setter
    def starting_delay(self, seconds: float) -> None:
        self.tuning = replace(self.tuning, starting_delay=seconds)

    @property
    def starting_longest(self) -> float:
        return self.tuning.starting_longest

    @starting_longest.setter
    def starting_longest(self, seconds: float) -> None:
        self.tuning = replace(self.tuning, starting_longest=seconds)

    @property
    def starting_wait(self) -> float:
        """How long a bound gang's first status waits for its members to start, given how
        long the latest gangs took (`domain.status_hold.starting_wait`)."""
        return starting_wait(self._start_lags, self.tuning)

    # --- state seen from outside ------------------------------------------------------------------

    @property
    def backlog(self) -> int:
        """Groups waiting for a worker."""
        return len(self._queued)

    @property
    def held(self) -> int:
        """Bodies of our own writes the watch has not brought back yet (see `_written`)."""
        return len(self._written)

    # --- what marks a group dirty ----------------------------------------------------------------

    def touch(self, key: GroupKey, *, urgent: bool = False) -> None:
        """Mark a group dirty; a group already waiting is not queued twice, and a group being
        reconciled is queued again when that reconcile ends (never two workers on one group).

        `urgent` touches (a member changed phase or went away: the group's own phase may flip)
        have workers of their own, `workers` of them, and are queued at once; the other touches
        get `routine_workers` and are queued after `settle` seconds, so the rest of a burst
        finds the key queued and adds nothing. Why two lanes: a gang turning Running must not be
        written after, nor alongside, a burst of other groups' first `Pending` status.
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
            self.monotonic.call_later(self.settle, queue.put_nowait, key)
        else:
            queue.put_nowait(key)

    def group_changed(self, key: GroupKey, body: dict[str, Any]) -> None:
        """A PodGroup event: reconcile it, unless it is the echo of our own last status write
        (same uid and resourceVersion as `_written`). A member that changed since touched the
        group itself; anything else that changes the group (its spec, another writer) changes
        the resourceVersion, so it is never mistaken for the echo.
        """
        written = self._written.get(key)
        version = _resource_version(body)
        if (
            written is not None
            and version
            and version == _resource_version(written)
            and (body.get("metadata") or {}).get("uid") == written["metadata"].get("uid")
        ):
            # The store holds it; keeping our copy too would hold a body per group.
            del self._written[key]
            return
        self.touch(key)

    def set_quota_view(self, key: GroupKey, view: QuotaView) -> None:
        """The quota controller's view of the group's reservation, folded into its status."""
        if self.quota_views.get(key) != view:
            self.quota_views[key] = view
            self.touch(key)

    def set_verdict(self, key: GroupKey, verdict: Verdict) -> None:
        """The gang scheduler's verdict on the group, folded into its status. A placement
        restarts the group's COUNTS hold clock: a held first status waits `binding_delay` from
        the placement. A refusal keeps the placement before it (`next_verdict`)."""
        verdict = next_verdict(self.verdicts.get(key), verdict)
        if self.verdicts.get(key) != verdict:
            self.verdicts[key] = verdict
            if verdict.placed:
                self._counts_since.pop(key, None)
            self.touch(key)

    def set_provisioning(self, key: GroupKey, view: ProvisioningView) -> None:
        """The gang's ProvisioningRequest and its state, folded into its status."""
        if self.provisioning.get(key) != view:
            self.provisioning[key] = view
            self.touch(key)

    def set_preempted(self, key: GroupKey, fact: Preempted) -> None:
        """A higher-priority gang evicts this one; known before its pods go, so the restart
        policy sees the fact when their deletion shows."""
        self.preempted[key] = fact
        self.touch(key, urgent=True)

    def pod_gone(self, uid: str) -> None:
        """A pod was deleted: forget that it was warned (a set of every pod ever warned would
        only grow)."""
        self.warnings.pod_gone(uid)
        self.lightweight.pod_gone(uid)

    def member_seen(self, pod: dict[str, Any]) -> None:
        """A pod is new or its labels or annotations changed: one Warning Event if its label
        and annotation name different groups (`MemberWarnings.member_seen`), for pods of the
        namespaces this reconciler writes."""
        namespace = (pod.get("metadata") or {}).get("namespace")
        if self.namespaces and namespace not in self.namespaces:
            return  # another operator's (run -n) to tell
        self.warnings.member_seen(pod)

    def starts_short(self, key: GroupKey, pod: dict[str, Any], old: dict[str, Any] | None) -> bool:
        """The member only started (its phase turned Running, nothing else of its phase or
        deletion changed), and its group still has fewer than minMember members running or
        succeeded, and the group is new or Pending: the group's phase cannot flip on it (the
        phase table, domain/lifecycle.py), so its touch need not be urgent.

        Every member Running or Succeeded counts, whatever incarnation it belongs to: an
        over-count keeps the touch urgent, never the reverse. Why: urgent touches are never
        coalesced, and a burst of starts that complete no gang would delay the one that does.
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

    # --- workers ---------------------------------------------------------------------------------

    def start(self) -> None:
        urgent, routine = self._lanes
        self._tasks = [
            *(asyncio.create_task(self._worker(urgent)) for _ in range(self.workers)),
            *(asyncio.create_task(self._worker(routine)) for _ in range(self.routine_workers)),
        ]

    async def stop(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.narrator.stop()

    async def settled(self) -> None:
        """Wait until every Event narrated so far has been answered (tests: the barrier before
        counting Events; the same name and meaning as `Preemptor.settled`)."""
        await self.narrator.settled()

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
                self.last_done = self.monotonic.now()
                if key in self._again:
                    self.touch(key, urgent=self._again.pop(key))

    async def _report_failure(self, key: GroupKey, exc: Exception, delay: float) -> None:
        """One Warning Event on the PodGroup naming the cause (best effort, never raises)."""
        body = self._current(key)
        if body is None:
            return
        try:
            await self.narrator.emit(
                body,
                c.EventType.WARNING,
                c.Reason.RECONCILE_FAILED,
                f"status not updated: {describe(exc)}; retrying in {delay:.0f}s with backoff",
            )
        except Exception as failure:
            logger.warning("Event about PodGroup %s/%s not posted: %s", *key, describe(failure))

    # --- one reconcile: read, compute, fold, patch --------------------------------------------

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
            self.contests.forget(key)
            self.restarts.forget(key)
            self.run_limits.forget(key)
            pods = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            if not pods:
                self.warnings.group_found(key)
                return  # members on their way out (often a namespace being deleted): no group
            if not await self.lightweight.adopt(key, pods):
                self.warnings.group_missing(key, pods, self.count_delay, self.touch)
            return
        self.warnings.group_found(key)
        if await self.lightweight.remove(key, body, pods):
            return
        try:
            group = PodGroup.model_validate(body)
        except ValidationError as exc:
            # Its spec was admitted before our webhook ran (or with it off); the CRD schema kept
            # the worst out. Said in its status until it is fixed (the fix is a watch event).
            await self._write_invalid(key, body, stored_podgroup_errors(body, exc))
            return
        if group.spec.sub_groups:
            self.warnings.unknown_sub_groups(group, pods)
        now = self.clock()
        self.restarts.keep_bare(key, group, pods)
        if await self.restarts.step(
            key,
            group,
            body,
            pods,
            now,
            preempted=self.preempted.get(key),
            verdict=self.verdicts.get(key),
        ):
            # The restart wrote status; the rest is computed over what it wrote, in the next
            # reconcile (the watch echo of our own write does not bring it: group_changed).
            self.touch(key)
            return
        if await self.run_limits.step(key, group, body, pods, now):
            self.touch(key)  # stopped past its maxRunSeconds: the rest over what was written
            return
        members = current_incarnation(group.status, pods)
        # Stored fields we cannot read (models.salvage_status) are rewritten at once: what
        # they show is not what the operator acts on.
        rewrite = unreadable_fields(group.unreadable_status)
        if not rewrite and self._first_status_holds(key, group, members):
            return
        result, status = self._desired(key, group, members, now)
        if status.phase == c.Phase.RUNNING:
            self.restarts.ran(key, members)
        patch = status_patch(group.status, status, rewrite)
        if patch is None:
            return
        if not rewrite:
            hold = change_hold(
                patch.get("status") or {},
                group.status,
                status,
                group.spec.min_member,
                self.verdicts.get(key),
                self._clocks(key),
                self.monotonic.now(),
                self.tuning,
                self._start_lags,
            )
            if hold is not None:
                self._keep_holding(key, hold)
                return
        contested_until = await self.contests.holds(
            key, body, patch["status"], self.monotonic.now()
        )
        if contested_until is not None:
            self._touch_at(key, contested_until)
            return
        # A merge patch replaces `conditions` whole: write only over the version we read (the
        # restart step and a lagging watch are the other ways this status changes).
        updated = await self._write_status(key, body, patch)
        if updated is None:
            return
        if rewrite:
            self.narrator.narrate(
                updated,
                c.EventType.WARNING,
                c.Reason.STATUS_REWRITTEN,
                "status fields this operator cannot read were rewritten from the members: "
                + "; ".join(status_errors(group.unreadable_status)),
            )
        for event in result.events:
            self.narrator.narrate(updated, event.type, event.reason, event.message)

    def _desired(
        self, key: GroupKey, group: PodGroup, members: list[Any], now: dt.datetime
    ) -> tuple[StatusResult, PodGroupStatus]:
        """The status the members make (`compute_status`), with what the other parts said of
        the gang laid over it: the scheduler's verdict, the quota reservation, a preemption,
        a ProvisioningRequest."""
        result = compute_status(group, members, group.status, now)
        id_seed = group.metadata.uid or "/".join(key)
        status = apply_verdict(
            result.status, self.verdicts.get(key), group.spec.min_member, now, id_seed=id_seed
        )
        status = apply_quota_view(status, self.quota_views.get(key), now, id_seed=id_seed)
        status = apply_preempted(status, self.preempted.get(key), now, id_seed=id_seed)
        status = apply_provisioning(status, self.provisioning.get(key), now, id_seed=id_seed)
        return result, status

    # --- holding writes back (domain/status_hold.py decides) ----------------------------------

    def _started(self, clock: HoldClock) -> dict[GroupKey, tuple[float, float]]:
        return self._counts_since if clock is HoldClock.COUNTS else self._bound_since

    def _clocks(self, key: GroupKey) -> HoldClocks:
        counts = self._counts_since.get(key)
        bound = self._bound_since.get(key)
        return HoldClocks(
            counts_since=None if counts is None else counts[0],
            bound_since=None if bound is None else bound[0],
        )

    def _first_status_holds(self, key: GroupKey, group: PodGroup, members: list[Any]) -> bool:
        """Whether the group's first status is held, decided from its phase and bound count
        alone (`domain.lifecycle.outlook`) before the status is computed in full (a held
        status is not computed at all)."""
        if not self.count_delay or group.status.phase is not None:
            return False
        seen = outlook(group, members, group.status)
        hold = first_status_hold(
            group.status,
            seen.phase,
            seen.counts.scheduled,
            group.spec.min_member,
            self.verdicts.get(key),
            self._clocks(key),
            self.monotonic.now(),
            self.tuning,
            self._start_lags,
        )
        if hold is None:
            return False
        self._keep_holding(key, hold)
        return True

    def _keep_holding(self, key: GroupKey, hold: Hold) -> None:
        """Start the hold's clock if it is not running, and set a timer to touch the group when
        the hold ends, unless one still to run is set for then or later."""
        started = self._started(hold.clock)
        kept = started.get(key)
        now = self.monotonic.now()
        if hold.clock is HoldClock.BOUND:
            self._all_bound_at.setdefault(key, now)
        if kept is None or hold.until > kept[1] or kept[1] <= now:
            started[key] = (hold.since, hold.until)
            self._touch_at(key, hold.until)

    def _touch_at(self, key: GroupKey, when: float) -> None:
        """Touch the group at monotonic time `when`."""
        self.monotonic.call_later(when - self.monotonic.now(), self.touch, key)

    # --- writes --------------------------------------------------------------------------------

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
            self.narrator.narrate(updated, c.EventType.WARNING, c.Reason.INVALID_SPEC, message)

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
        self.contests.wrote(key, updated.get("status"))
        self._counts_since.pop(key, None)
        self._bound_since.pop(key, None)
        phase = (updated.get("status") or {}).get("phase")
        if phase != c.Phase.PENDING:
            bound_at = self._all_bound_at.pop(key, None)
            if bound_at is not None and phase == c.Phase.RUNNING:
                self._start_lags.append(self.monotonic.now() - bound_at)
        return updated
