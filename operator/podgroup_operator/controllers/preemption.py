"""Carrying out preemption for the scheduler: plan, nominate, evict, hold the room.

The planning is pure (`scheduling.plan_preemption`); this module does what a plan says, with
the API writes kube-scheduler makes for the same decision:

1. `status.nominatedNodeName` on each pending member of the preemptor (a pods/status patch),
   so `kubectl get pod -o wide` and cluster tooling see where it is headed;
2. every pod of every victim gang deleted with a UID precondition (a recreated namesake is
   left alone), each counted in `podgroup_preemptions`;
3. Events naming the other side: `Preempted` on each victim pod and on its PodGroup,
   `Preempting` on the preemptor's PodGroup; and, before any pod is deleted, the victim
   PodGroup's fact handed to the status reconciler (`on_preempted`), the only writer of
   PodGroup status, so the restart policy knows the break is a preemption.

The room is held: the victims take seconds to terminate, and their capacity comes back pod by
pod, which a lower-priority gang deciding in between would otherwise take. So the preemptor's
nominated placement stays assumed in the snapshot (capacity booked, like kube-scheduler's nominated
pods) from the plan until its next decision; each decision releases it, tries a normal placement,
and, if that still fails while victims are terminating, books it again instead of planning anew. A
nomination ends when the gang is placed, when its pods are gone, or `NOMINATION_SECONDS` after the
plan (a victim that never goes away must not hold the room for ever); only then may the gang plan
again.

The nominations of other schedulers are held too (`Nominated`): a pod kube-scheduler nominated
to a node (`status.nominatedNodeName`) while its victims leave keeps that room from the gangs of
no higher priority, as kube-scheduler's filters keep it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator import metrics
from podgroup_operator.adapters.informers import Index
from podgroup_operator.adapters.kube import JSON, PODS, ApiError, FencedError, KubeClient
from podgroup_operator.api.keys import GroupKey, pod_uid
from podgroup_operator.api.models import PodGroupSpec
from podgroup_operator.domain.scheduling_status import Preempted
from podgroup_operator.logs import truncate
from podgroup_operator.scheduling import (
    Binding,
    DisruptionBudget,
    GangRequest,
    PreemptionPlan,
    PreemptionPolicy,
    PreemptionRefusal,
    Snapshot,
    Victim,
    VictimGang,
    disruption_budget,
    plan_preemption,
)
from podgroup_operator.scheduling.podinfo import pod_info, pod_priority
from podgroup_operator.scheduling.reclaim import (
    RanSeconds,
    plan_reclaim,
    preemption_quota_problems,
)
from podgroup_operator.scheduling.resources import pod_requests
from podgroup_operator.scheduling.snapshot import NO_UNDO, Undo

logger = logging.getLogger(__name__)


NOMINATION_SECONDS = 120
"""How long a plan's nomination holds the room while its victims terminate: past the default
30 s grace period with margin; a victim still there after it no longer blocks a new plan."""
WRITE_CONCURRENCY = 16
"""Deletions, status patches and Events of one plan in flight at once."""


@dataclass
class Nomination:
    """A plan being carried out: the victims still to go and the room held meanwhile."""

    keys: tuple[GroupKey, ...]
    """The preemptor: one gang, or every gang of a gang group (all share this nomination)."""
    bindings: tuple[Binding, ...]
    victims: set[str]
    """UIDs of victim pods whose deletion the watch has not shown yet."""
    expires: dt.datetime
    message: str
    priority: int
    """The preemptor's (a gang group's lowest): a higher-priority gang may take the room."""
    pods: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    """The nominated members' latest bodies (what is booked while holding)."""
    undo: Undo = field(default=NO_UNDO)


def preemption_policy(pods: Sequence[Mapping[str, Any]]) -> PreemptionPolicy:
    """`Never` when any member says so (the PriorityClass's policy, copied at admission): a
    gang is one decision, and a member that must not preempt makes the gang not preempt."""
    for pod in pods:
        if (pod.get("spec") or {}).get("preemptionPolicy") == PreemptionPolicy.NEVER:
            return PreemptionPolicy.NEVER
    return PreemptionPolicy.PREEMPT_LOWER_PRIORITY


def budgets_of(objects: Iterable[Mapping[str, Any]], *, v1beta1: bool) -> list[DisruptionBudget]:
    """The cluster's PodDisruptionBudgets as the planner reads them.

    policy/v1beta1 (served alone before Kubernetes 1.21) reads an empty selector as "no pod",
    policy/v1 as "every pod of the namespace"; the planner's model is v1's, so such a v1beta1
    budget protects nothing and is left out.
    """
    out = []
    for raw in objects:
        if v1beta1 and not ((raw.get("spec") or {}).get("selector") or {}):
            continue
        out.append(disruption_budget(raw))
    return out


def _verb(plan: PreemptionPlan) -> str:
    return "reclaimed" if plan.reclaim_for is not None else "preempted"


def _why(priority: int, victim: VictimGang, plan: PreemptionPlan | None = None) -> str:
    if plan is not None and plan.reclaim_for is not None:
        part = f"sub-group {victim.sub_group} of " if victim.sub_group is not None else ""
        return (
            f"quota {plan.reclaim_for} takes back what its min promises; {part}"
            f"{victim.label} ran on what it borrowed and is evicted whole "
            f"({len(victim.pods)} pod(s))"
        )
    if victim.gang is not None and victim.sub_group is not None:
        return (
            f"priority {priority} over {victim.priority}; sub-group {victim.sub_group} of "
            f"{victim.gang[0]}/{victim.gang[1]} is evicted whole ({len(victim.pods)} pod(s)) "
            "to make room; the other sub-groups keep running (policy scope SubGroup repairs "
            "it alone)"
        )
    return (
        f"priority {priority} over {victim.priority}; {victim.label} is evicted whole "
        f"({len(victim.pods)} pod(s)) to make room"
    )


def _facts(
    preemptor: str, priority: int, plan: PreemptionPlan, now: dt.datetime
) -> dict[GroupKey, Preempted]:
    """One fact per victim PodGroup, naming the sub-groups taken when only those were."""
    parts: dict[GroupKey, list[VictimGang]] = {}
    for victim in plan.victims:
        if victim.gang is not None:
            parts.setdefault(victim.gang, []).append(victim)
    facts = {}
    for key, taken in parts.items():
        subs = tuple(sorted(v.sub_group for v in taken if v.sub_group is not None))
        message = "; ".join(_why(priority, v, plan) for v in taken)
        facts[key] = Preempted(preemptor, message, now, sub_groups=subs)
    return facts


async def _run_here(requests: Sequence[GangRequest], call: Callable[..., Any], *args: Any) -> Any:
    """`Preemptor.run` when no scheduler gives one: the plan is made at once, here."""
    return call(*args)


@dataclass(eq=False, repr=False)
class Preemptor:
    """The scheduler's preemption step, called when a gang is refused for room.

    One per `GangScheduler`, built by it with its own snapshot, index and clock. It holds live
    state (nominations, writes in flight), so it compares by identity (`eq=False`), and its
    repr does not print the snapshot (`repr=False`)."""

    kube: KubeClient
    snapshot: Snapshot
    groups: Index
    """Index view: (namespace, name) -> PodGroup bodies (for the Events' objects)."""
    _: KW_ONLY
    budgets: Callable[[], Sequence[DisruptionBudget]]
    on_preempted: Callable[[GroupKey, Preempted], None]
    repairs: Callable[[], Mapping[GroupKey, PodGroupSpec]] = field(default=dict)
    """The specs of the gangs that lose whole sub-groups only as victims (`plan_preemption`),
    a copy the plan may read in the worker thread."""
    clock: Callable[[], dt.datetime]
    run: Callable[..., Awaitable[Any]] = field(default=_run_here)
    """How a plan is made: `run(group, plan_preemption, group, snapshot, budgets, repairs)`. The
    scheduler gives its own, which runs a large or costly gang's plan in its worker thread."""
    nominations: dict[GroupKey, Nomination] = field(default_factory=dict, init=False)
    _writes: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(WRITE_CONCURRENCY), init=False
    )
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False)

    # --- the scheduler's calls -------------------------------------------------------------------
    async def refused(
        self,
        requests: GangRequest | Sequence[GangRequest],
        message: str,
        now: dt.datetime,
        *,
        ran_seconds: RanSeconds | None = None,
    ) -> str:
        """The gang (or gang group, which must fit together) was refused for room: go on with
        its nomination, or plan one. With `ran_seconds` (how long each gang has run), the
        plan is a quota reclaim (`scheduling.reclaim.plan_reclaim`, one gang) instead of
        priority preemption; the nomination, eviction and held room are the same.

        Returns the message the refusal should publish (the placement's shortfall, and what
        preemption does about it). Never plans while an earlier plan's victims terminate.
        """
        group = [requests] if isinstance(requests, GangRequest) else list(requests)
        keys = tuple(r.key for r in group)
        nomination = self.nominations.get(keys[0])
        if (
            nomination is not None
            and nomination.keys == keys
            and nomination.victims
            and now < nomination.expires
        ):
            nomination.pods.update((pod_uid(p), p) for r in group for p in r.pending)
            self._hold(nomination)
            return (
                f"{message}; preempting: waiting for {len(nomination.victims)} evicted pod(s) "
                "to terminate; the room they free is held for this gang"
            )
        for key in keys:
            self.forget(key)
        group = [replace(r, preemption_policy=preemption_policy(r.pending)) for r in group]
        priority = min(r.priority for r in group)
        # Room held for lower-priority preemptors is theirs only until a higher-priority gang
        # needs it (kube-scheduler's nominated pods likewise): their pending members must never
        # look like victims, so their holds are lifted while planning, and dropped if the plan
        # nominates any of their nodes (they plan again when next decided).
        yielded = self._lift_below(priority)
        plan: PreemptionPlan | PreemptionRefusal
        if ran_seconds is not None:
            plan = await self.run(
                group, plan_reclaim, group[0], self.snapshot, ran_seconds, self.repairs()
            )
        else:
            plan = await self.run(
                group, plan_preemption, group, self.snapshot, self.budgets(), self.repairs()
            )
        if ran_seconds is None and not isinstance(plan, PreemptionRefusal):
            problems = preemption_quota_problems(group[0], self.snapshot, plan.victims)
            if problems:
                plan = PreemptionRefusal(keys, "; ".join(problems))
        taken = set() if isinstance(plan, PreemptionRefusal) else {b.node for b in plan.nominations}
        for other in yielded:
            if taken & {b.node for b in other.bindings}:
                for key in other.keys:
                    self.nominations.pop(key, None)
            else:
                self._hold(other)
        if isinstance(plan, PreemptionRefusal):
            if ran_seconds is not None:
                return f"{message}; {plan.message}"
            return f"{message}; no preemption: {plan.message}"
        nomination = Nomination(
            keys=keys,
            bindings=plan.nominations,
            victims={v.uid for v in plan.victim_pods},
            expires=now + dt.timedelta(seconds=NOMINATION_SECONDS),
            message=plan.message,
            priority=priority,
            pods={pod_uid(p): p for r in group for p in r.pending},
        )
        for key in keys:
            self.nominations[key] = nomination
        self._hold(nomination)
        if plan.empty:
            return f"{message}; {plan.message}; the room is held for this gang"
        preemptor = ", ".join(r.label for r in group)
        logger.info("gang %s: %s", preemptor, truncate(plan.message))
        for key, fact in _facts(preemptor, priority, plan, now).items():
            # Before any pod goes: the restart policy must know the break is a preemption.
            self.on_preempted(key, fact)
        self._spawn(self._execute(group, preemptor, priority, plan))
        return f"{message}; {plan.message}"

    def release(self, key: GroupKey) -> None:
        """Give back the held room before the gang is decided again (the nomination stays)."""
        nomination = self.nominations.get(key)
        if nomination is not None:
            nomination.undo()
            nomination.undo = NO_UNDO

    def forget(self, key: GroupKey) -> None:
        """The gang was placed, or its pods are gone: the nomination ends (for every gang of
        its gang group)."""
        nomination = self.nominations.get(key)
        if nomination is not None:
            self.release(key)
            for other in nomination.keys:
                if self.nominations.get(other) is nomination:
                    del self.nominations[other]

    def pod_gone(self, uid: str) -> None:
        """The watch shows a pod deleted: one victim fewer to wait for."""
        for nomination in self.nominations.values():
            nomination.victims.discard(uid)

    async def stop(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def settled(self) -> None:
        """Wait until every write started so far has been answered (tests)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # --- the room held ---------------------------------------------------------------------------
    def _hold(self, nomination: Nomination) -> None:
        """Book the nominated members on their nodes (over capacity while victims are still
        there), so no other gang can take the room as the victims leave. They are booked with
        their facts (priority, gang, labels), so lower-priority gangs never count them as
        victims and inter-pod rules see them."""
        nomination.undo()
        triples = []
        infos = {}
        for binding in nomination.bindings:
            pod = nomination.pods.get(binding.pod_uid)
            if pod is None or binding.node not in self.snapshot.nodes:
                continue
            request = pod_requests(pod)
            triples.append((binding.pod_uid, binding.node, request))
            infos[binding.pod_uid] = pod_info(pod, binding.pod_uid, request, self.snapshot.gang_of)
        nomination.undo = self.snapshot.assume(triples, infos) if triples else NO_UNDO

    def _lift_below(self, priority: int) -> list[Nomination]:
        """Lift the holds of nominations of lower priority; returns them (each once)."""
        lifted: dict[int, Nomination] = {}
        for nomination in self.nominations.values():
            if nomination.priority < priority and id(nomination) not in lifted:
                nomination.undo()
                nomination.undo = NO_UNDO
                lifted[id(nomination)] = nomination
        return list(lifted.values())

    # --- the writes ------------------------------------------------------------------------------
    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _limited(self, coro: Any) -> None:
        async with self._writes:
            with contextlib.suppress(FencedError):  # no longer leading (counted by runtime.py)
                await coro

    async def _execute(
        self, group: Sequence[GangRequest], preemptor: str, priority: int, plan: PreemptionPlan
    ) -> None:
        """Nominate, evict, narrate. Each write is best effort and logged: a failed deletion
        leaves its victim in the nomination, which then expires and lets the gang plan again."""
        writes = [self._limited(self._nominate(b)) for b in plan.nominations]
        for victim in plan.victims:
            why = f"{_verb(plan)} by gang {preemptor}: {_why(priority, victim, plan)}"
            writes.extend(self._limited(self._evict(victim, pod, why)) for pod in victim.pods)
            if victim.gang is not None:
                writes.append(
                    self._limited(
                        self._event(self._group_body(victim.gang), c.Reason.PREEMPTED, why)
                    )
                )
        writes.extend(
            self._limited(
                self._event(self._group_body(r.key), c.Reason.PREEMPTING, truncate(plan.message))
            )
            for r in group
        )
        await asyncio.gather(*writes)

    async def _nominate(self, binding: Binding) -> None:
        try:
            await self.kube.patch_status(
                PODS, binding.pod, binding.namespace, {"nominatedNodeName": binding.node}
            )
        except ApiError as exc:
            logger.warning("nominating %s/%s failed: %s", binding.namespace, binding.pod, exc)

    async def _evict(self, victim: VictimGang, pod: Victim, why: str) -> None:
        try:
            await self.kube.delete(PODS, pod.name, pod.namespace, uid=pod.uid)
        except ApiError as exc:
            if exc.not_found or exc.conflict:
                # Gone already, or a namesake with another UID: nothing of the victim is left.
                self.pod_gone(pod.uid)
                return
            logger.warning("evicting %s/%s failed: %s", pod.namespace, pod.name, exc)
            return
        metrics.PREEMPTIONS.inc()
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        }
        await self._event(body, c.Reason.PREEMPTED, f"{why}; was on node {pod.node}")

    def _group_body(self, key: GroupKey) -> JSON | None:
        return next(iter(self.groups.get(key, [])), None)

    async def _event(self, involved: JSON | None, reason: c.Reason, message: str) -> None:
        if involved is None:
            return  # a gang of one, or a PodGroup gone meanwhile: its pods carry the Events
        await self.kube.narrate(
            involved,
            event_type=c.EventType.NORMAL,
            reason=reason,
            message=message,
            now=self.clock(),
        )


class Nominated:
    """Pending pods of other schedulers nominated to a node while their victims leave
    (kube-scheduler's preemption), their room held in the snapshot.

    The room is held for gangs of no higher priority, as kube-scheduler's filters hold it; a
    gang of higher priority decides with the lower ones taken out (`taken_out_below`). Without
    it a gang took the room a preemption had just freed, and the preemptor evicted again. Held
    for good, not per decision: a burst of preemptions then costs each decision nothing."""

    def __init__(self, snapshot: Snapshot, scheduler_names: frozenset[str]) -> None:
        self.snapshot = snapshot
        self.scheduler_names = scheduler_names
        """Our own `spec.schedulerName`s: their pods' nominations are ours (`Preemptor`)."""
        self.pods: dict[str, tuple[str, int, Undo]] = {}
        """UID -> (node, priority, the undo of its hold)."""
        self._priorities: Counter[int] = Counter()
        """How many `pods` have each priority (a gang above none skips the lookup)."""

    def track(self, uid: str, event_type: str | None, pod: JSON, node: str | None) -> bool:
        """Keep `pods` current from a pod event; True when a nomination withdrawn (not bound,
        not deleted: those retry as capacity does) gave its room back to the waiting gangs."""
        target = None
        spec = pod.get("spec") or {}
        if (
            event_type != c.WatchEventType.DELETED
            and not node
            and spec.get("schedulerName") not in self.scheduler_names
            and not (pod.get("metadata") or {}).get("deletionTimestamp")
        ):
            target = (pod.get("status") or {}).get("nominatedNodeName") or None
        before = self.pods.pop(uid, None)
        if before is not None:
            before[2]()  # the hold ends (a pod bound meanwhile is booked again as bound)
            self._priorities[before[1]] -= 1
        if target is not None:
            priority = pod_priority(pod)
            hold = self.snapshot.hold([(str(target), pod)])
            self.pods[uid] = (str(target), priority, hold)
            self._priorities[priority] += 1
        return before is not None and not node and before[0] != target

    @contextlib.contextmanager
    def taken_out_below(self, priority: int) -> Iterator[None]:
        """The snapshot without the nominated pods of lower priority than `priority`, for one
        decision; those withdrawn meanwhile (while the decision awaited) are not put back."""
        lower: list[str] = []
        if any(count and below < priority for below, count in self._priorities.items()):
            lower = [uid for uid, (_, p, _) in self.pods.items() if p < priority]
        restore = self.snapshot.simulate_removal(lower) if lower else NO_UNDO
        try:
            yield
        finally:
            restore()
            for uid in lower:
                if uid not in self.pods and self.snapshot.is_assumed(uid):
                    self.snapshot.remove_pod(uid)
