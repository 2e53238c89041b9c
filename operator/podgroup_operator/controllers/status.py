"""The status reconciler: recompute dirty PodGroups with the pure domain, write one PATCH.

Every pod or group event marks its group dirty (`touch`); a small pool of workers recomputes
dirty groups with `domain.lifecycle.compute_status`, folds in the gang scheduler's verdict and
the restart policy's plan, and writes one status PATCH when, and only when, something changed.
A burst of pod events therefore becomes one write, and a group that did not change costs no
write at all. It does I/O through the adapters and knows nothing of Kopf: the handlers feed it
(see handlers/podgroups.py), and tests drive it over the in-memory fake API server.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import ValidationError

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import PODGROUPS, PODS, ApiError, KubeClient
from podgroup_operator.api.models import PodGroup
from podgroup_operator.domain.lifecycle import compute_status, status_patch
from podgroup_operator.domain.lightweight import (
    is_operator_created,
    lightweight_errors,
    podgroup_for,
)
from podgroup_operator.domain.membership import membership_conflict
from podgroup_operator.domain.restart import (
    Fail,
    Nothing,
    Restart,
    Wait,
    current_incarnation,
    plan_restart,
)
from podgroup_operator.domain.scheduling_status import Verdict, apply_verdict
from podgroup_operator.logs import truncate

logger = logging.getLogger(__name__)

GroupKey = tuple[str, str]

EVENT_MESSAGE_LIMIT = 1024
"""Characters of an Event message we post (events.k8s.io/v1 caps `note` at 1 kB)."""


class Index(Protocol):
    """What the reconciler reads of an index (Kopf's `kopf.Index`, or a fake in tests)."""

    def get(self, key: GroupKey, default: Any = None) -> Any: ...


def _namespace_terminating(exc: ApiError) -> bool:
    """A namespace being deleted refuses new objects with 403; there is nothing left to do."""
    return exc.status == 403 and "being terminated" in exc.message


def _resource_version(body: dict[str, Any] | None) -> int:
    try:
        return int((body or {}).get("metadata", {}).get("resourceVersion", 0))
    except (TypeError, ValueError):
        return 0


class StatusReconciler:
    """Recompute and patch the status of dirty PodGroups, at most `workers` at a time."""

    def __init__(
        self,
        kube: KubeClient,
        groups: Index,
        members: Index,
        *,
        workers: int = 8,
        settle: float = 0.05,
        retry_delay: float = 1.0,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.kube = kube
        self.groups = groups
        self.members = members
        self.clock = clock
        self.workers = workers
        self.settle = settle
        self.retry_delay = retry_delay
        self.writes = 0
        """Status PATCHes sent since start (exposed for tests and metrics)."""
        self._dirty: asyncio.Queue[GroupKey] = asyncio.Queue()
        self._queued: set[GroupKey] = set()
        self._running: set[GroupKey] = set()
        self._again: set[GroupKey] = set()
        self._written: dict[GroupKey, dict[str, Any]] = {}
        self._warned_pods: set[str] = set()
        self._warned_conflicts: set[str] = set()
        self._warned_labels: set[str] = set()
        self.verdicts: dict[GroupKey, Verdict] = {}
        """The gang scheduler's latest verdict per group, folded into the status we write."""
        self._tasks: list[asyncio.Task[None]] = []

    def touch(self, key: GroupKey) -> None:
        """Mark a group dirty; a group already waiting is not queued twice, and a group being
        reconciled is queued again when that reconcile ends (never two workers on one group)."""
        if key in self._running:
            self._again.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._dirty.put_nowait(key)

    def set_verdict(self, key: GroupKey, verdict: Verdict) -> None:
        if self.verdicts.get(key) != verdict:
            self.verdicts[key] = verdict
            self.touch(key)

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._worker()) for _ in range(self.workers)]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _worker(self) -> None:
        while True:
            key = await self._dirty.get()
            # Let the rest of a burst (a ReplicaSet's pods binding, starting) land first: events
            # for this key meanwhile find it still queued and add nothing. One write, not five.
            if self.settle:
                await asyncio.sleep(self.settle)
            self._queued.discard(key)
            self._running.add(key)
            try:
                await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("status of PodGroup %s/%s not updated; retrying", *key)
                await asyncio.sleep(self.retry_delay)
                self._again.add(key)
            finally:
                self._running.discard(key)
                if key in self._again:
                    self._again.discard(key)
                    self.touch(key)

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
        await self._warn_conflicts(pods)
        body = self._current(key)
        if body is None:
            pods = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            if not pods:
                return  # members on their way out (often a namespace being deleted): no group
            invalid = await self._warn_invalid_gang_labels(pods)
            lightweight = podgroup_for(key[0], pods)
            if lightweight is not None:
                await self._create_lightweight(lightweight, pods)
            elif not invalid:
                await self._warn_missing_group(key, pods)
            return
        if not pods and is_operator_created(body):
            # A lightweight gang whose pods are all gone: its PodGroup goes with them.
            await self._delete(key, body)
            return
        try:
            group = PodGroup.model_validate(body)
        except ValidationError as exc:
            # Admitted before our webhook ran (or with it off); the CRD schema kept the worst out.
            logger.warning("PodGroup %s/%s is not valid, status left alone: %s", *key, exc)
            return
        now = self.clock()
        if await self._restart_step(key, group, body, pods, now):
            return  # the restart wrote status; its watch event brings us back here
        result = compute_status(group, current_incarnation(group.status, pods), group.status, now)
        status = apply_verdict(
            result.status,
            self.verdicts.get(key),
            group.spec.min_member,
            now,
            id_seed=group.metadata.uid or "/".join(key),
        )
        patch = status_patch(group.status, status)
        if patch is None:
            return
        # Other writers own parts of status too (the quota service's QuotaReserved condition);
        # a merge patch replaces `conditions` whole, so write only over the version we read.
        updated = await self._write_status(key, body, patch)
        if updated is None:
            return
        for event in result.events:
            await self._emit(updated, event.type, event.reason, event.message)

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
        plan = plan_restart(group, pods, now)
        if isinstance(plan, Nothing):
            return False
        if isinstance(plan, Wait):
            self._retry_at(key, plan.until, now)
            if plan.status_patch is None:
                return False
        patch = getattr(plan, "status_patch", None)
        updated = body
        if patch is not None:
            written = await self._write_status(key, body, patch)
            if written is None:
                return True
            updated = written
        if isinstance(plan, Restart | Fail) and plan.event is not None:
            await self._emit(updated, plan.event.type, plan.event.reason, plan.event.message)
            logger.info("PodGroup %s/%s: %s", *key, plan.event.message)
        for member in getattr(plan, "delete", ()):
            try:
                await self.kube.delete(PODS, member.name, member.namespace, uid=member.uid)
            except ApiError as exc:
                if not (exc.not_found or exc.conflict):
                    raise
        for pod in getattr(plan, "recreate", ()):
            try:
                await self.kube.create(PODS, pod, pod["metadata"]["namespace"])
            except ApiError as exc:
                if not (exc.conflict or _namespace_terminating(exc)):
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
                    self._written[key] = await self.kube.get(PODGROUPS, key[1], key[0])
                except ApiError as gone:
                    if not gone.not_found:
                        raise
                    return None
                self.touch(key)
                return None
            raise
        self.writes += 1
        self._written[key] = updated
        return updated

    async def _emit(
        self, involved: dict[str, Any], event_type: str, reason: str, message: str
    ) -> None:
        """Post an Event, best effort: the status is the record, an Event only narrates it.

        A namespace being deleted refuses new Events (403); retrying the whole reconcile for
        that would only repeat a status write that already succeeded.
        """
        try:
            await self.kube.create_event(
                involved,
                event_type=event_type,
                reason=reason,
                message=message,
                timestamp=self.clock().strftime("%Y-%m-%dT%H:%M:%SZ"),
            )
        except ApiError as exc:
            logger.warning(
                "Event %s on %s not posted: %s",
                reason,
                involved["metadata"].get("name"),
                exc.message,
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
            if _namespace_terminating(exc):
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

    async def _warn_conflicts(self, pods: list[dict[str, Any]]) -> None:
        """One Warning Event per pod whose label and annotation name different groups."""
        for pod in pods:
            uid = pod["metadata"].get("uid", "")
            if uid in self._warned_conflicts:
                continue
            conflict = membership_conflict(pod)
            if conflict is not None:
                self._warned_conflicts.add(uid)
                await self._emit(
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
            await self._emit(pod, c.EventType.WARNING, c.Reason.INVALID_GANG_LABELS, message)
        return invalid

    async def _warn_missing_group(self, key: GroupKey, pods: list[dict[str, Any]]) -> None:
        """One Warning Event per pod that names a PodGroup that does not exist."""
        for pod in pods:
            uid = pod["metadata"].get("uid", "")
            if uid in self._warned_pods:
                continue
            self._warned_pods.add(uid)
            await self._emit(
                pod,
                c.EventType.WARNING,
                c.Reason.MISSING_POD_GROUP,
                f"PodGroup {key[1]} does not exist in namespace {key[0]}; create it "
                "or fix the pod's membership label/annotation. The pod is not counted.",
            )
