"""What the gang scheduler tells the pods themselves, in kube-scheduler's words.

kube-scheduler writes `PodScheduled=False`, reason `Unschedulable`, on every pod it cannot place
(cluster-autoscaler scales up for such pods), posts a `FailedScheduling` Warning, and a
`Scheduled` Event on bind. So does the gang scheduler, per gang
(docs/decisions/012-pod-signals.md):

* every waiting member of a refused gang gets `PodScheduled=False`, reason `Unschedulable`, with
  the gang's message (reason `WaitingForQuota` when its ElasticQuota, not the nodes, holds it
  back: autoscalers add nodes for `Unschedulable` pods only); the condition is patched only
  when the message differs from the one this process last wrote on that pod, or, before it
  wrote any, from the one the pod carries (a pod's own status patch comes back as a watch
  event, and a refusal repeated every cycle must not become a write every cycle; nor may a new
  leader write again on every waiting pod what the last one wrote);
* `FailedScheduling` (Warning) on each waiting member, at most once per gang per message change
  or per `FAILED_SCHEDULING_INTERVAL`, doubled at each repeat up to
  `FAILED_SCHEDULING_LONGEST_INTERVAL` (a gang refused every second must not flood etcd); a
  repeat of the same message on a pod counts up the Event posted before (`count`,
  `lastTimestamp`, one PATCH), as client-go's event correlator does for kube-scheduler, so that
  `kubectl describe pod` reads "(x5 over 10m)" and etcd holds one Event per pod, not one per
  repeat;
* `Scheduled` (Normal) on bind: "Successfully assigned ns/pod to node".

None of this may slow or stop scheduling: calls only queue work, which `SIGNAL_CONCURRENCY`
background workers send, and only one of them while the scheduler has binds in flight (`busy`):
under a backlog every bind is followed by a `Scheduled` Event, and Events in flight beside the
binds take CPU from them (kube-scheduler sends its Events through one sink, one at a time, for
the same reason); the rest go out at full
concurrency as soon as the binds are answered (`resume`). Work is keyed (one condition and one
Event per reason per pod), so a backlog coalesces to the newest message instead of growing. A
failed write is logged and counted (`podgroup_pod_signals_total{result="failed"}`), and the
condition is written again at the next refusal; the pod, not the signal, is the truth.

The condition is a strategic merge patch of `pods/status`: `conditions` merge by `type`, so the
kubelet's and others' conditions stay as they are, and `metadata.uid` in the patch makes the
apiserver refuse it (422, uid is immutable) for a namesake created since. No resourceVersion:
the scheduler is the one writer of PodScheduled on a pod that is not bound yet, and a bind sets
it True; a precondition would only turn every kubelet or label change into a retry.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Iterable

from podgroup_operator import constants as c
from podgroup_operator import metrics
from podgroup_operator.adapters.kube import (
    EVENTS,
    JSON,
    PODS,
    STRATEGIC_PATCH,
    ApiError,
    FencedError,
    KubeClient,
)
from podgroup_operator.api.backoff import Backoff
from podgroup_operator.api.keys import GroupKey
from podgroup_operator.api.times import rfc3339
from podgroup_operator.logs import truncate

logger = logging.getLogger(__name__)


SIGNAL_CONCURRENCY = 8
"""Condition patches and Events in flight at once."""
FAILED_SCHEDULING_INTERVAL = dt.timedelta(seconds=60)
"""A gang still refused with the same message gets its FailedScheduling Events again after this,
then after twice as long at each repeat."""
FAILED_SCHEDULING_LONGEST_INTERVAL = dt.timedelta(minutes=5)
"""The longest wait between repeats (kube-scheduler's event spam filter lets one Event per pod
through every 5 minutes once a pod has had its burst)."""


_REPEATS = Backoff(
    initial_seconds=FAILED_SCHEDULING_INTERVAL.total_seconds(),
    max_seconds=FAILED_SCHEDULING_LONGEST_INTERVAL.total_seconds(),
)


def repeat_interval(repeats: int) -> dt.timedelta:
    """The wait before repeating a gang's unchanged FailedScheduling Events, after `repeats`
    repeats already."""
    return _REPEATS.delay(repeats + 1)


@dataclasses.dataclass(frozen=True)
class Posted:
    """A FailedScheduling Event posted on a pod: where it is, what it says, how often."""

    name: str
    namespace: str
    message: str
    count: int


def unschedulable_patch(
    uid: str,
    message: str,
    now: dt.datetime,
    *,
    first: bool,
    reason: c.PodReason = c.PodReason.UNSCHEDULABLE,
) -> JSON:
    """The strategic merge patch setting PodScheduled=False/`reason` (Unschedulable, or
    WaitingForQuota for a gang held back by its ElasticQuota) with `message`.

    `first`: this process has not written the condition on this pod yet, so it also sets
    lastTransitionTime; a changed message alone keeps the pod's transition time.
    """
    condition: JSON = {
        "type": c.PodConditionType.POD_SCHEDULED.value,
        "status": c.ConditionStatus.FALSE.value,
        "reason": reason.value,
        "message": message[: c.EVENT_MESSAGE_LIMIT],
        "lastProbeTime": None,
    }
    if first:
        condition["lastTransitionTime"] = rfc3339(now)
    return {"metadata": {"uid": uid}, "status": {"conditions": [condition]}}


_OUR_REASONS = (c.PodReason.UNSCHEDULABLE, c.PodReason.WAITING_FOR_QUOTA)


def unschedulable_message(pod: JSON) -> str | None:
    """The message of the pod's `PodScheduled=False` condition this scheduler writes
    (Unschedulable or WaitingForQuota: a quota refusal's message names its quota, so the two
    never share a message), if it has one."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if (
            condition.get("type") == c.PodConditionType.POD_SCHEDULED
            and condition.get("status") == c.ConditionStatus.FALSE
            and condition.get("reason") in _OUR_REASONS
        ):
            return str(condition.get("message") or "")
    return None


def _involved(pod: JSON) -> JSON:
    """The pod as an Event's involvedObject needs it (apiVersion, kind, identity)."""
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            key: meta[key] for key in ("name", "namespace", "uid", "resourceVersion") if key in meta
        },
    }


def _another_uid(exc: ApiError) -> bool:
    """The apiserver refuses a patch naming another incarnation's uid as an immutable-field
    change (422): the pod we meant is gone and a namesake took its name."""
    return exc.status == 422 and "metadata.uid" in exc.message


def _scheduler_of(pod: JSON) -> str:
    return str((pod.get("spec") or {}).get("schedulerName") or c.SCHEDULER_NAME)


class PodSignals:
    """Queues and sends the pod conditions and Events described in the module docstring."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        clock: Callable[[], dt.datetime],
        concurrency: int = SIGNAL_CONCURRENCY,
        busy: Callable[[], bool] = lambda: False,
    ) -> None:
        self.kube = kube
        self.clock = clock
        self.concurrency = concurrency
        self.busy = busy
        """Whether the scheduler has binds in flight: then one worker sends, not `concurrency`."""
        self.failures = 0
        """Writes that failed (also counted in metrics)."""
        self._written: dict[str, str] = {}
        """uid -> the Unschedulable message this process last wrote (or queued) on that pod, or
        found there before writing any."""
        self._told: dict[GroupKey, tuple[str, dt.datetime, int]] = {}
        """Gang -> (message, time, repeats so far) of its last FailedScheduling Events."""
        self.may_patch_events = True
        """False once a PATCH of an Event was forbidden (an install's Role from before)."""
        self._posted: dict[str, Posted] = {}
        """uid -> the FailedScheduling Event last posted on that waiting pod (repeats count it
        up)."""
        self._placing: dict[str, JSON] = {}
        """uid -> pods placed whose bind is in flight (the watch may drop them from pending
        before the bind answers; the Scheduled Event names them and their scheduler)."""
        self._work: dict[tuple[str, str], Callable[[], Awaitable[None]]] = {}
        """(uid, what) -> the newest write to send; insertion order is the queue's order."""
        self._workers: set[asyncio.Task[None]] = set()
        self._active = 0
        """Workers still draining (counted synchronously: a finishing task is not one)."""

    # --- what the scheduler reports -------------------------------------------------------------
    def refused(
        self,
        key: GroupKey,
        pods: Iterable[JSON],
        message: str,
        reason: c.PodReason = c.PodReason.UNSCHEDULABLE,
    ) -> None:
        """The gang `key` was refused: mark its waiting `pods` (PodScheduled=False with
        `reason`) and narrate (rate-limited)."""
        now = self.clock()
        waiting = list(pods)
        for pod in waiting:
            uid = (pod.get("metadata") or {}).get("uid")
            if not uid:
                continue
            written = self._written.get(uid)
            if written is None:
                written = unschedulable_message(pod)  # what an earlier leader wrote, if any
                if written is not None and written == message[: c.EVENT_MESSAGE_LIMIT]:
                    written = message
            if written == message:
                self._written[uid] = message
                continue
            first = written is None
            self._written[uid] = message
            self._submit(
                uid,
                "condition",
                self._condition_writer(pod, message, now, first=first, reason=reason),
            )
        told = self._told.get(key)
        repeats = 0
        if told is not None and told[0] == message:
            if now - told[1] < repeat_interval(told[2]):
                return
            repeats = told[2] + 1
        self._told[key] = (message, now, repeats)
        for pod in waiting:
            uid = (pod.get("metadata") or {}).get("uid") or ""
            self._submit(uid, c.PodReason.FAILED_SCHEDULING, self._failed_writer(pod, message))

    def placed(self, key: GroupKey) -> None:
        """The gang was placed: a later refusal is news again."""
        self._told.pop(key, None)

    def placing(self, pod: JSON | None) -> None:
        """`pod` was placed; its bind goes out now (see `bound`)."""
        uid = ((pod or {}).get("metadata") or {}).get("uid")
        if pod is not None and uid:
            self._placing[uid] = pod

    def bound(self, uid: str, node: str) -> None:
        """The pod was bound to `node`: the `Scheduled` Event, worded as kube-scheduler's."""
        pod = self._placing.pop(uid, None)
        self._written.pop(uid, None)
        self._posted.pop(uid, None)
        if pod is None:
            return  # not placed by this process's decisions: nothing to narrate
        meta = pod.get("metadata") or {}
        self._work.pop((uid, "condition"), None)  # the bind made the pod PodScheduled=True
        message = f"Successfully assigned {meta.get('namespace')}/{meta.get('name')} to {node}"
        self._submit(
            uid,
            c.PodReason.SCHEDULED,
            self._event_writer(pod, c.EventType.NORMAL, c.PodReason.SCHEDULED, message),
        )

    def forget(self, uid: str) -> None:
        """The pod is gone: drop what is remembered and queued for it."""
        self._written.pop(uid, None)
        self._posted.pop(uid, None)
        self._placing.pop(uid, None)
        for what in ("condition", c.PodReason.FAILED_SCHEDULING, c.PodReason.SCHEDULED):
            self._work.pop((uid, what), None)

    def forget_gang(self, key: GroupKey) -> None:
        """The gang has no waiting pods left: its rate limit goes with it."""
        self._told.pop(key, None)

    # --- sending --------------------------------------------------------------------------------
    def _condition_writer(
        self,
        pod: JSON,
        message: str,
        now: dt.datetime,
        *,
        first: bool,
        reason: c.PodReason = c.PodReason.UNSCHEDULABLE,
    ) -> Callable[[], Awaitable[None]]:
        meta = pod.get("metadata") or {}
        name, namespace, uid = meta.get("name", ""), meta.get("namespace"), meta.get("uid", "")

        async def write() -> None:
            try:
                await self.kube.patch(
                    PODS,
                    name,
                    unschedulable_patch(uid, message, now, first=first, reason=reason),
                    namespace,
                    subresource="status",
                    content_type=STRATEGIC_PATCH,
                )
            except ApiError as exc:
                if self._written.get(uid) == message:
                    del self._written[uid]  # written again at the next refusal
                if exc.not_found or exc.conflict or _another_uid(exc):
                    return  # gone, or a namesake: nothing to mark
                raise

        return write

    def _event_writer(
        self,
        pod: JSON,
        event_type: c.EventType,
        reason: c.PodReason,
        message: str,
        *,
        uid: str | None = None,
    ) -> Callable[[], Awaitable[None]]:
        """Post an Event on `pod`; with the pod's `uid`, remembered for repeats to count up (if
        the pod still waits when it is answered)."""
        involved = _involved(pod)
        component = _scheduler_of(pod)
        timestamp = rfc3339(self.clock())

        async def post() -> None:
            try:
                created = await self.kube.create_event(
                    involved,
                    event_type=event_type,
                    reason=reason,
                    message=message,
                    timestamp=timestamp,
                    component=component,
                )
            except ApiError as exc:
                if not exc.namespace_terminating:
                    raise
                # The namespace goes with the pod and every Event about it: nothing to say.
                return
            if uid is not None and uid in self._written:
                meta = created.get("metadata") or {}
                self._posted[uid] = Posted(
                    meta.get("name", ""), meta.get("namespace", ""), message, 1
                )

        return post

    def _failed_writer(self, pod: JSON, message: str) -> Callable[[], Awaitable[None]]:
        """FailedScheduling: the pod's last one counted up when it said the same, else posted."""
        uid = (pod.get("metadata") or {}).get("uid") or ""
        post = self._event_writer(
            pod, c.EventType.WARNING, c.PodReason.FAILED_SCHEDULING, message, uid=uid
        )
        timestamp = rfc3339(self.clock())

        async def write() -> None:
            last = self._posted.get(uid)
            if last is None or last.message != message or not self.may_patch_events:
                await post()
                return
            try:
                await self.kube.patch(
                    EVENTS,
                    last.name,
                    {"count": last.count + 1, "lastTimestamp": timestamp},
                    last.namespace,
                )
            except ApiError as exc:
                if exc.status == 403 and not exc.namespace_terminating:
                    # A Role from before this counting (no `patch` on events): say so once and
                    # post new Events, as before.
                    if self.may_patch_events:
                        self.may_patch_events = False
                        logger.warning(
                            "repeated FailedScheduling Events are posted anew, not counted up: "
                            "%s; grant patch on events (deploy/base/rbac.yaml)",
                            truncate(exc.message),
                        )
                elif not exc.not_found:
                    raise
                await post()  # a new one: gone (Events expire after an hour), or not patchable
                return
            if self._posted.get(uid) is last:
                self._posted[uid] = dataclasses.replace(last, count=last.count + 1)

        return write

    def _submit(self, uid: str, what: str, job: Callable[[], Awaitable[None]]) -> None:
        self._work[(uid, what)] = job
        self._spawn()

    def resume(self) -> None:
        """The scheduler's binds are answered: send what waits at full concurrency again."""
        self._spawn()

    def _allowed(self) -> int:
        return 1 if self.busy() else self.concurrency

    def _spawn(self) -> None:
        while self._work and self._active < min(self._allowed(), len(self._work)):
            self._active += 1
            task = asyncio.create_task(self._drain())
            self._workers.add(task)
            task.add_done_callback(self._workers.discard)

    async def _drain(self) -> None:
        try:
            await self._drain_queue()
        finally:
            self._active -= 1

    async def _drain_queue(self) -> None:
        # A worker beyond what is allowed now (binds started meanwhile) ends; `resume` brings
        # the workers back when the binds are answered.
        while self._work and self._active <= self._allowed():
            work_key = next(iter(self._work))
            job = self._work.pop(work_key)
            try:
                await job()
                metrics.POD_SIGNALS.labels("sent").inc()
            except asyncio.CancelledError:
                raise
            except FencedError:
                pass  # this replica stopped leading (counted by runtime.py)
            except Exception as exc:
                self.failures += 1
                metrics.POD_SIGNALS.labels("failed").inc()
                logger.warning(
                    "pod signal %s for pod uid %s not written: %s",
                    work_key[1],
                    work_key[0],
                    truncate(str(exc)),
                )

    async def idle(self) -> None:
        """Wait until everything queued so far is sent (tests; a clean stop)."""
        while self._workers:
            await asyncio.gather(*self._workers, return_exceptions=True)

    async def stop(self) -> None:
        workers = list(self._workers)
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        self._work.clear()
