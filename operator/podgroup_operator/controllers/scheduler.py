"""The bundled gang scheduler: events feed it, the pure core decides, binds go out at once.

Pods whose `spec.schedulerName` is one of ours (`podgroup-scheduler`, or the names given to
`run --scheduler-name`) wait here until their whole gang fits. Every
node and every bound pod (anyone's) keeps a `scheduling.Snapshot` current; every pending member
sits in `pending` by group. Each waiting group has an entry in the queue (`QueueEntry`), kept
from cycle to cycle and entered again only when its pods, its binds in flight or its PodGroup
change. A cycle takes the entries in queue order, builds a group's `GangRequest` when it comes
to decide it, decides it against the snapshot (placements are assumed into it, refusals leave
it untouched), and sends all bindings of a decision concurrently, as many in flight as the
bind pacer allows (scheduling/pacing.py: more while the API server answers binds fast, fewer
when it slows, so that our status writes and the kubelets' do not queue behind a flood; `run
--bind-concurrency N` fixes the number instead). A failed bind releases what that pod held
and puts it back in its group's queue (the members already bound stay bound and count toward
minMember next time); the watch then brings the truth. A bind refused because the namespace is
being deleted leaves that namespace's gangs undecided for a while instead (`leaving`). A gang
whose placement chose volumes for its claims has them bound first, and none of its pods is
bound if that fails (controllers/volumes.py).

The scheduler never writes PodGroup status: its verdicts go to the status reconciler (see
domain/scheduling_status.py). It knows nothing of Kopf: the informers feed it node, pod and
group events (controllers/runtime.py), for every namespace, so the snapshot holds every bound pod
of the cluster; `namespaces` only limits which pending pods it places. A group whose decision
raises is backed off and reported in its status (controllers/isolation.py); the cycle goes on
with the others.

A large gang is decided in a worker thread (`DECIDE_IN_THREAD_MEMBERS`), and so is one whose
constraints make it costly (`DECIDE_IN_THREAD_COST_US`), so that lease renewal, webhooks, probes,
the watches and status writes go on meanwhile: one decision of thousands of constrained members,
or of one member with hundreds of pod-affinity terms, takes seconds, longer than the leader may
go without renewing. The snapshot is the thread's alone while it decides: everything that would
change it from the event loop (node, pod and PV events, bind answers) is queued in arrival order
and applied once the decision is booked, before the scheduler does anything else. For the
scheduler that is what the event loop held by the decision did before; only the other work no
longer waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import ValidationError

from podgroup_operator import constants as c
from podgroup_operator import metrics
from podgroup_operator.adapters.kube import JSON, PODS, ApiError, FencedError, KubeClient
from podgroup_operator.api.backoff import Backoff
from podgroup_operator.api.keys import GroupKey, gang_group_key, pod_uid
from podgroup_operator.api.limits import MAX_GANG_GROUP, summarize
from podgroup_operator.api.models import PodGroup
from podgroup_operator.api.quantity import to_milli
from podgroup_operator.api.validation import stored_podgroup_errors
from podgroup_operator.controllers.isolation import Failures, describe
from podgroup_operator.controllers.pacing import Slots
from podgroup_operator.controllers.podsignals import PodSignals
from podgroup_operator.controllers.preemption import Preemptor
from podgroup_operator.controllers.volumes import VolumeBinder, VolumeBindingError, with_volumes
from podgroup_operator.domain.lifecycle import count_members, invalid_spec_message
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.domain.restart import held_partly
from podgroup_operator.domain.scheduling_status import Preempted, Verdict, wait_started
from podgroup_operator.logs import truncate
from podgroup_operator.scheduling.gang import (
    Binding,
    GangRequest,
    Placement,
    Refusal,
    decision_cost,
)
from podgroup_operator.scheduling.pacing import BindPacer
from podgroup_operator.scheduling.placement import place_gang_group, place_group
from podgroup_operator.scheduling.podinfo import pod_priority
from podgroup_operator.scheduling.preemption import DisruptionBudget
from podgroup_operator.scheduling.queue import decide_wait, order_gangs
from podgroup_operator.scheduling.snapshot import NO_UNDO, Snapshot, Undo, holds_node
from podgroup_operator.scheduling.subgroups import sub_group_tree
from podgroup_operator.scheduling.topology import placed_in, topology_of

logger = logging.getLogger(__name__)
_Outcome = TypeVar("_Outcome")


CYCLE_BUDGET_SECONDS = 0.2
"""Deciding time per cycle (see `cycle`)."""
SLOW_DECISION_SECONDS = 1.0
"""A gang's decision longer than this is logged with the gang's name (and, when it ran on the
event loop, everything else there waited for it)."""
DECIDE_IN_THREAD_COST_US = 100_000
"""A gang whose constraints may cost this many microseconds (`gang.decision_cost`: pod terms
times placed pods, node-affinity expressions times nodes) is decided in the worker thread too,
whatever its size: so at most about 100 ms of such work holds the event loop."""
DECIDE_IN_THREAD_MEMBERS = 64
"""Gangs (or gang groups) with at least this many waiting members are decided in a worker
thread. Why not every gang: a decision of a few members takes well under a millisecond (`bench
core`), less than handing it to a thread and back, and in a thread it contends with the event
loop for the interpreter lock. A constrained member costs about 0.1 to 0.2 ms on 5,000 nodes
(`bench core --scenario anti-affinity|spread|affinity|claims`, 4,000 members in 0.4 to 0.7 s),
so a gang under this size holds the event loop for some tens of milliseconds at most."""
PLAN_IN_THREAD_PODS = 10_000
"""A preemption plan on a snapshot of at least this many pods is made in the worker thread,
whatever the gang's size. Why: a plan walks the pods of the nodes it may free, not only the
gang's members. Measured on 5,000 nodes of 20 one-cpu pods (100,000 pods), a 3-member gang
needing a whole node: 0.02 s when the plan frees 3 nodes, but 0.9 s to refuse when each node
also holds one pod above the gang's priority (a DaemonSet's, say), every time the gang is
tried, with the event loop held."""
PLACED, REFUSED, ERROR = "placed", "refused", "error"
"""Results of one decision, as the scheduling metrics label them."""
YIELD_SECONDS = 0.01
"""Within a pipelined cycle, binds go out and the event loop runs other work this often."""
SETTLE_SECONDS = 0.02
"""A short pause after the first event of a burst, so a ReplicaSet's pods arrive together."""
LEAVING_RECHECK_SECONDS = 60
"""How long the gangs of a namespace whose bind was refused because it is being deleted are left
undecided (`GangScheduler.leaving`), unless a pod created there says it is back sooner."""
RESTART_GRACE_SECONDS = 30
"""How long a Strict gang held partly bound past its schedule timeout, with a restart policy,
is left undecided: the status reconciler restarts it (domain/restart.py), and placing its rest
meanwhile would have that restart delete a gang just placed. Bounded, so that a restart that
does not come (the reconciler counts the members otherwise) never leaves the gang undecided."""


@dataclass
class WaitState:
    """How long a group has waited and how often it was refused (memory; status has the rest).

    Everything the scheduler remembers of a waiting group lives here or in the other maps that
    `_drop_pending` clears when its last pending member goes: a busy cluster creates and deletes
    groups all day, and memory kept per group ever seen grows without end."""

    since: dt.datetime
    failures: int = 0
    last_failure: dt.datetime | None = None
    timed_out: bool = False
    timed_out_at: dt.datetime | None = None
    """When the group timed out: a Strict gang held partly bound is then left to the restart
    policy for a while (`_left_to_restart`)."""
    reason: c.Reason | None = None
    """The reason the group was last told it waits (`podgroup_waiting_gangs`)."""
    message: str | None = None
    """The last refusal: logged when it changes, quoted when the group times out."""


def _acting(group: PodGroup) -> bool:
    """Whether the group has a restart policy that acts (RestartGang or FailGang)."""
    return group.spec.policy is not None and group.spec.policy.action != c.PolicyAction.NONE


def _holding(group: PodGroup, holding: int) -> str:
    """What a timed-out gang's ScheduleTimeout message says of the `holding` members that hold
    nodes while it is short of minMember (`restart.held_partly`), if any."""
    if not holding:
        return "retrying with backoff. "
    policy = group.spec.policy
    if policy is not None and policy.action != c.PolicyAction.NONE:
        return (
            f"{holding} of minMember {group.spec.min_member} members hold nodes meanwhile, so "
            f"the {policy.action} policy acts to free them. "
        )
    return (
        f"retrying with backoff; {holding} of minMember {group.spec.min_member} members hold "
        "nodes meanwhile: set spec.policy.action RestartGang to have the gang restarted to free "
        "them after this timeout. "
    )


def _depends_on_pods(pod: JSON) -> bool:
    """Does where this pod may go depend on other pods' labels and places (`pod_dependent`)?"""
    spec = pod.get("spec") or {}
    if spec.get("topologySpreadConstraints"):
        return True
    affinity = spec.get("affinity") or {}
    return any(
        (affinity.get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        for kind in ("podAffinity", "podAntiAffinity")
    )


@dataclass(frozen=True)
class QueueEntry:
    """A waiting group's place in the queue: what ordering reads (`scheduling.queue.Queued`),
    without the group's request.

    Why entries, not requests: under a backlog a cycle decides what its budget allows (a few
    hundred gangs) and asks for the next cycle at once. Building every waiting group's request
    each cycle (its bound members, claims, backoff) kept the event loop busy: in a probed
    5,000 x 10 backlog it was busy 99% of the time from 20 to 40 s after start, 40 to 53% of
    that building requests, most of them never decided, while pod events waited. So the
    entries are kept from cycle to cycle (`GangScheduler._refresh_queue`), and a request is
    built only when a cycle comes to decide the group, or a gang group needs its partner's."""

    namespace: str
    name: str
    waiting: list[JSON]
    """The members to place: pending, and not in flight."""
    group: PodGroup | None = None
    """The parsed PodGroup; None for a pod of no group (a gang of one)."""
    priority: int = 0
    created: dt.datetime | None = None
    last_failure: dt.datetime | None = None
    uid: str = ""
    partly_bound: bool = False
    """Some members hold nodes while the group is short of minMember: decided first among its
    priority (`scheduling.queue`)."""

    @property
    def key(self) -> GroupKey:
        return (self.namespace, self.name)


class _RequestOf(Protocol):
    """A cycle's requests by group (`GangScheduler.cycle`); `partner` builds one whatever the
    group's backoff says, for a gang group that is due (`GangScheduler._gang_group`)."""

    def __call__(self, key: GroupKey, *, partner: bool = False) -> GangRequest | None: ...


class GangScheduler:
    """Keeps the snapshot and the pending members, and runs scheduling cycles."""

    def __init__(
        self,
        kube: KubeClient,
        groups: Any,
        members: Any,
        *,
        publish: Callable[[GroupKey, Verdict], None],
        default_timeout_seconds: int = 60,
        namespaces: frozenset[str] = frozenset(),
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        volumes: VolumeBinder | None = None,
        budgets: Callable[[], Sequence[DisruptionBudget]] = tuple,
        on_preempted: Callable[[GroupKey, Preempted], None] = lambda key, fact: None,
        scheduler_names: frozenset[str] = frozenset({c.SCHEDULER_NAME}),
        bind_concurrency: int | None = None,
        max_pd_volumes: int | None = None,
        thread_members: int = DECIDE_IN_THREAD_MEMBERS,
        thread_cost_us: float = DECIDE_IN_THREAD_COST_US,
        plan_thread_pods: int = PLAN_IN_THREAD_PODS,
        topology_levels: Callable[[str], tuple[str, ...] | None] = lambda name: None,
    ) -> None:
        self.kube = kube
        self.topology_levels = topology_levels
        """A Topology's levels by name, coarse to fine (None: no such Topology)."""
        self.namespaces = namespaces
        """Namespaces whose pending pods this scheduler places; empty means all."""
        self.scheduler_names = scheduler_names
        """The `spec.schedulerName`s of the pods this scheduler places (`run --scheduler-name`)."""
        self.signals = PodSignals(kube, clock=clock, busy=lambda: bool(self._binding))
        """PodScheduled conditions and scheduling Events on pods (controllers/podsignals.py)."""
        self.failures = Failures("scheduling of gang", logger, metric="scheduling")
        self.groups = groups
        """Index view: (namespace, name) -> PodGroup bodies (at most one)."""
        self.members = members
        """Index view: (namespace, name) -> member pod bodies."""
        self.publish = publish
        self.default_timeout_seconds = default_timeout_seconds
        self.clock = clock
        self.backoff = Backoff(initial_seconds=1, max_seconds=60)
        self.snapshot = Snapshot(gang_of=group_key_of, max_pd_volumes=max_pd_volumes)
        self.volumes = volumes if volumes is not None else VolumeBinder(kube)
        """PVs into the snapshot, members' claims into requests, volumes bound before pods."""
        self.volumes.attach(self.snapshot, self.on_volumes_changed, self._exclusive)
        self.preemption = Preemptor(
            kube,
            self.snapshot,
            groups,
            budgets=budgets,
            on_preempted=on_preempted,
            clock=clock,
            run=self._plan,
        )
        self.pending: dict[GroupKey, dict[str, JSON]] = {}
        self.pod_dependent: set[GroupKey] = set()
        """Waiting groups whose members' placement depends on other pods (required pod
        affinity or anti-affinity of their own, topology spread): a pod that arrives bound, or
        a bound pod whose labels change, may let them in. kube-scheduler moves its
        unschedulable pods on such an event, into its backoff queue; these likewise become due
        one backoff step (1 s) after their last refusal instead of up to 60 s. Not at once: in
        a cluster where another scheduler binds thousands of pods, every bind is such an event,
        and each would make every such group be decided again."""
        self.in_flight: set[str] = set()
        """Pods placed whose bind is not answered yet (`_placed` adds them, `_land` ends them)."""
        self._queue: dict[GroupKey, QueueEntry] = {}
        """The waiting groups' queue entries, kept from cycle to cycle (`_refresh_queue`)."""
        self._stale: set[GroupKey] = set()
        """Groups whose entry must be built again: their pending members, the members in
        flight or the PodGroup changed since it was built."""
        self._resuming = True
        """Until the first queue is built: the waits found then began under an earlier leader
        (or none), and resume from the status (`domain.scheduling_status.wait_started`)."""
        self.pending_key: dict[str, GroupKey] = {}
        """uid -> the bucket a pending pod sits in (its group may change with its labels)."""
        self.bound: dict[str, GroupKey] = {}
        """Pods we bound whose bound version the watch has not delivered yet: never again."""
        self._bound_by_group: dict[GroupKey, set[str]] = {}
        """`bound` by group, so a request does not scan every pod in flight."""
        self.waiting: dict[GroupKey, WaitState] = {}
        self.leaving: dict[str, dt.datetime] = {}
        """Namespaces being deleted (a bind there was refused so), until when their gangs are
        not decided. Why: the namespace controller deletes a big namespace's pods over seconds,
        and meanwhile every capacity freed placed its waiting gangs again, each bind refused
        and logged (deleting 300 gangs of 4 pods logged 1,888 refused binds in 7 s). A pod
        created there ends it early: a namespace being deleted refuses new pods, so it was
        created again."""
        self.held: dict[GroupKey, Callable[[], None]] = {}
        """NonStrict gangs' partial placements, held in the snapshot until placed or timed out."""
        self.nominated: dict[str, tuple[str, int, Undo]] = {}
        """Pending pods of other schedulers nominated to a node while their victims leave
        (kube-scheduler's preemption): UID -> (node, priority, the undo of its hold). Their room
        is held in the snapshot for gangs of no higher priority, as kube-scheduler's filters
        hold it (a gang of higher priority decides with the lower ones taken out: `_decide`);
        without it a gang took the room a preemption had just freed, and the preemptor evicted
        again. Held for good, not per decision: a burst of preemptions then costs each
        decision nothing."""
        self._nominated_priorities: Counter[int] = Counter()
        """How many `nominated` pods have each priority (a gang above none skips the lookup)."""
        self.binds = 0
        self.last_cycle: float | None = None
        """Loop time the last cycle ended (liveness: a scheduler with pending gangs cycles)."""
        self._parsed: dict[GroupKey, tuple[str | None, PodGroup | None, str | None]] = {}
        self._placed_now: set[GroupKey] = set()
        """Groups placed in the current cycle (see `_partner_not_placed`)."""
        self._binding: set[asyncio.Task[None]] = set()
        """Bind batches still in flight (pipelined cycles)."""
        self.pacer = (
            BindPacer(
                floor=c.BIND_CONCURRENCY,
                ceiling=c.BIND_CONCURRENCY_CEILING,
                target_seconds=c.BIND_LATENCY_TARGET_SECONDS,
            )
            if bind_concurrency is None
            else None
        )
        """Moves the binds in flight with their latency (scheduling/pacing.py); None when
        `bind_concurrency` fixes the number."""
        self._bind_slots = Slots(bind_concurrency or c.BIND_CONCURRENCY)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.thread_members = thread_members
        """Waiting members from which a decision runs in `_thread` (DECIDE_IN_THREAD_MEMBERS)."""
        self.thread_cost_us = thread_cost_us
        """Constraint cost from which it does too (DECIDE_IN_THREAD_COST_US)."""
        self.plan_thread_pods = plan_thread_pods
        """Snapshot pods from which a preemption plan runs in `_thread` (PLAN_IN_THREAD_PODS)."""
        self._thread: ThreadPoolExecutor | None = None
        self.deciding_in_thread = False
        """True while a worker thread decides on the snapshot (see the module docstring)."""
        self._decision: asyncio.Future[Any] | None = None
        """The worker thread's decision under way, if any."""
        self._deferred: list[Callable[[], object]] = []
        """What came for the snapshot meanwhile, in arrival order."""
        self.deferred_total = 0
        """Calls ever queued behind a thread's decision (tests and diagnostics)."""
        self.deferred_errors = 0
        """Of those, the ones that raised when applied."""

    # --- events ---------------------------------------------------------------------------------
    def on_node(self, event_type: str | None, node: JSON, old: JSON | None = None) -> None:
        self._exclusive(self._on_node, event_type, node, old)

    def on_pod(self, event_type: str | None, pod: JSON) -> None:
        self._exclusive(self._on_pod, event_type, pod)

    def _exclusive(self, call: Callable[..., object], *args: Any) -> None:
        """Call now, or, while a worker thread decides on the snapshot, once it is done."""
        if self.deciding_in_thread:
            self._deferred.append(functools.partial(call, *args))
            self.deferred_total += 1
        else:
            call(*args)

    def _on_node(self, event_type: str | None, node: JSON, old: JSON | None = None) -> None:
        """Nodes heartbeat every few seconds; only a change placement reads (labels, taints,
        capacity, readiness: what the slim node keeps) refreshes the snapshot, wakes the loop
        and lets waiting gangs retry before their backoff ends."""
        if (
            event_type == c.WatchEventType.MODIFIED
            and old is not None
            and _placement_facts(old) == _placement_facts(node)
        ):
            return
        if event_type == c.WatchEventType.DELETED:
            self.snapshot.remove_node(node["metadata"]["name"])
        else:
            self.snapshot.add_node(node)
            self._retry_all()
        self.wake()

    def _on_pod(self, event_type: str | None, pod: JSON) -> None:
        """Keep the snapshot and the pending buckets current; wake the loop only when a
        decision may change: a pod to place, or capacity that came back.

        Most pod events under a backlog are our own binds coming back and pods turning
        Running; waking a cycle for each of them rebuilt every waiting gang's request dozens
        of times a second for nothing (a bound pod taking capacity never makes a waiting gang
        fit)."""
        uid = pod_uid(pod)
        node = (pod.get("spec") or {}).get("nodeName")
        self._track_nomination(uid, event_type, pod, node)
        if node or event_type == c.WatchEventType.DELETED:
            self._forget_bound(uid)
        if event_type == c.WatchEventType.ADDED and self.leaving:
            self.leaving.pop((pod.get("metadata") or {}).get("namespace", ""), None)
        if event_type == c.WatchEventType.DELETED:
            self.snapshot.remove_pod(uid)
            self.preemption.pod_gone(uid)
            self._drop_pending(uid)
            self.signals.forget(uid)
            self._retry_all()
            self.wake()
            return
        if node and self.pod_dependent and holds_node(pod) and self._moves_pods(uid, pod):
            for key in self.pod_dependent:
                state = self.waiting.get(key)
                if state is not None and state.failures > 1:
                    state.failures = 1  # due one backoff step (1 s) after its last refusal
            self.wake()
        if node or not self.snapshot.is_assumed(uid):
            # An unbound version (often older than our bind) never erases an assumption,
            # as kube-scheduler's cache ignores updates of unassigned pods.
            self.snapshot.add_pod(pod)
        if not holds_node(pod) and node:
            self._retry_all()  # a bound pod finished: capacity came back
            self.wake()
        if self._wants_us(pod) and uid not in self.bound:
            key = self._queue_key(pod)
            if self.pending_key.get(uid) != key:
                self._new_member(key)
                self.wake()  # a new pod to place, or one that changed group
            self._add_pending(uid, key, pod)
        else:
            self._drop_pending(uid)

    def _track_nomination(
        self, uid: str, event_type: str | None, pod: JSON, node: str | None
    ) -> None:
        """Keep `nominated` current; a nomination withdrawn (not bound, not deleted: those
        retry as capacity does) gives its room back to the waiting gangs."""
        target = None
        spec = pod.get("spec") or {}
        if (
            event_type != c.WatchEventType.DELETED
            and not node
            and spec.get("schedulerName") not in self.scheduler_names
            and not (pod.get("metadata") or {}).get("deletionTimestamp")
        ):
            target = (pod.get("status") or {}).get("nominatedNodeName") or None
        before = self.nominated.pop(uid, None)
        if before is not None:
            before[2]()  # the hold ends (a pod bound meanwhile is booked again as bound)
            self._nominated_priorities[before[1]] -= 1
        if target is not None:
            priority = pod_priority(pod)
            hold = self.snapshot.hold([(str(target), pod)])
            self.nominated[uid] = (str(target), priority, hold)
            self._nominated_priorities[priority] += 1
        if before is not None and not node and before[0] != target:
            self._retry_all()
            self.wake()

    def on_volumes_changed(self) -> None:
        """A PV, claim or StorageClass changed: a gang waiting on volumes may fit now."""
        self._retry_all()
        self.wake()

    def on_topology(self, kind: c.WatchEventType, body: JSON, old: JSON | None) -> None:
        """A Topology came, went or changed its levels: a gang whose constraint names it is
        decided again now (requests resolve their Topology at each attempt)."""
        self._retry_all()
        self.wake()

    def on_group(self, key: GroupKey) -> None:
        self._parsed.pop(key, None)
        self._stale.add(key)
        if key in self.pending:
            self.wake()

    def _wants_us(self, pod: JSON) -> bool:
        spec = pod.get("spec") or {}
        meta = pod.get("metadata") or {}
        return (
            spec.get("schedulerName") in self.scheduler_names
            and (not self.namespaces or meta.get("namespace") in self.namespaces)
            and not spec.get("nodeName")
            and not meta.get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase", c.PodPhase.PENDING) == c.PodPhase.PENDING
        )

    @staticmethod
    def _queue_key(pod: JSON) -> GroupKey:
        """The pod's group, or a gang of one named after the pod when it has no group."""
        key = group_key_of(pod)
        meta = pod["metadata"]
        return key if key is not None else (meta.get("namespace", "default"), f"pod:{meta['name']}")

    def _add_pending(self, uid: str, key: GroupKey, pod: JSON) -> None:
        if self.pending_key.get(uid, key) != key:
            self._drop_pending(uid)  # its membership changed: leave the old group's bucket
        self.pending_key[uid] = key
        self.pending.setdefault(key, {})[uid] = pod
        self._stale.add(key)

    def _drop_pending(self, uid: str) -> None:
        key = self.pending_key.pop(uid, None)
        if key is not None:
            self._stale.add(key)
        bucket = self.pending.get(key) if key is not None else None
        if key is not None and bucket is not None:
            bucket.pop(uid, None)
            if not bucket:
                del self.pending[key]
                self.waiting.pop(key, None)
                self.pod_dependent.discard(key)
                self.failures.forget(key)
                self.signals.forget_gang(key)
                self._release(key)
                self.preemption.forget(key)

    def _release(self, key: GroupKey) -> None:
        """Give back what a NonStrict gang held, and the room nominated for it by preemption."""
        self.preemption.release(key)
        undo = self.held.pop(key, None)
        if undo is not None:
            undo()

    def _moves_pods(self, uid: str, pod: JSON) -> bool:
        """A bound pod the snapshot did not hold (bound by someone else), or whose labels
        changed: what pod affinity, anti-affinity and spread count may have moved. Our own
        binds coming back are held already, as assumptions, and move nothing."""
        entry = self.snapshot.pod(uid)
        return entry is None or entry.info.labels != (
            (pod.get("metadata") or {}).get("labels") or {}
        )

    def _new_member(self, key: GroupKey) -> None:
        """A pod joined the group: it is due one backoff step (1 s) after its last refusal.

        Why: a gang short of pods (NotEnoughTasks) backed off up to 60 s between tries, so one
        whose last pods came a minute after the first started up to a minute late. kube-
        scheduler likewise tries a new pod at once, and coscheduling moves the waiting pods of
        its gang on a pod's arrival. One step, not none: pods arriving one by one retry the
        gang once a second, not once per pod. A gang group's partners backing off are decided
        with it (`_gang_group`)."""
        state = self.waiting.get(key)
        if state is not None and state.failures > 1:
            state.failures = 1

    def _retry_all(self) -> None:
        """Capacity changed: waiting groups may try again now instead of after their backoff."""
        for state in self.waiting.values():
            state.last_failure = None
            state.failures = 0

    def wake(self) -> None:
        self._wake.set()

    # --- the loop -------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        tasks = [*self._binding, *([self._task] if self._task is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.preemption.stop()
        await self.signals.stop()
        if self._thread is not None:
            self._thread.shutdown(wait=False)  # a decision under way ends on its own

    async def _run(self) -> None:
        while True:
            if not self._wake.is_set():  # with work already waiting, no timer is needed
                timeout = self._next_due()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(SETTLE_SECONDS)
            try:
                await self.cycle(CYCLE_BUDGET_SECONDS, pipeline=True)
                self.last_cycle = asyncio.get_running_loop().time()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("scheduling cycle failed; retrying")
                await asyncio.sleep(1.0)

    def _next_due(self) -> float | None:
        """Seconds until the earliest backoff or timeout expires (None: wait for events)."""
        if not self.waiting:
            return None
        now = self.clock()
        soonest = None
        for key, state in self.waiting.items():
            try:
                seconds = self._due_in(key, state, now)
            except Exception as exc:
                delay, _ = self.failures.failed(key, exc)
                seconds = delay
            if seconds is not None:
                soonest = seconds if soonest is None else min(soonest, seconds)
        return soonest

    def _due_in(self, key: GroupKey, state: WaitState, now: dt.datetime) -> float | None:
        leaving_until = self._leaving_until(key[0], now)
        if leaving_until is not None:
            return max(0.05, (leaving_until - now).total_seconds())
        group = self._group(key)
        restart_until = self._left_to_restart(key, group, state, now)
        if restart_until is not None:
            return max(0.05, (restart_until - now).total_seconds())
        if not key[1].startswith("pod:") and (group is None or _terminal(group)):
            return None  # waits for an event (the group appearing), not for a time
        decision = decide_wait(
            wait_started=state.since,
            timeout_seconds=group.spec.schedule_timeout_seconds if group else None,
            default_timeout_seconds=self.default_timeout_seconds,
            failed_attempts=state.failures,
            last_failure=state.last_failure,
            now=now,
            backoff=self.backoff,
        )
        timing_out = group is not None and not (decision.timed_out or state.timed_out)
        due = min(decision.next_attempt, decision.deadline) if timing_out else decision.next_attempt
        return max(0.05, (due - now).total_seconds())

    def _group(self, key: GroupKey) -> PodGroup | None:
        """The group's model, parsed once per resourceVersion (every cycle asks for every
        waiting group; parsing each time was the cycle's main cost under a backlog)."""
        body = next(iter(self.groups.get(key, [])), None)
        if body is None:
            self._parsed.pop(key, None)
            return None
        version = (body.get("metadata") or {}).get("resourceVersion")
        cached = self._parsed.get(key)
        if cached is not None and cached[0] == version and version:
            return cached[1]
        problem = None
        try:
            group: PodGroup | None = PodGroup.model_validate(body)
        except ValidationError as exc:
            group = None
            problem = invalid_spec_message(stored_podgroup_errors(body, exc))
        self._parsed[key] = (version, group, problem)
        return group

    def _invalid_spec(self, key: GroupKey) -> str | None:
        """What is wrong with the group's stored spec, when `_group` found it does not validate."""
        self._group(key)
        cached = self._parsed.get(key)
        return None if cached is None else cached[2]

    async def cycle(self, budget: float | None = None, *, pipeline: bool = False) -> None:
        """A pass over the waiting groups in queue order, binding what it placed.

        With a `budget` (seconds), the pass stops deciding when it is spent and asks for another
        cycle at once: a backlog of 1,000 gangs then starts binding after the first few
        decisions instead of after all of them. With `pipeline`, the binds run in the
        background while the next cycle decides (their pods are in flight, never decided
        twice); without it, the cycle returns once its binds are answered (as tests expect).
        """
        now = self.clock()
        loop = asyncio.get_running_loop()
        last_yield = loop.time()
        queue = self._refresh_queue(now)
        built: dict[tuple[GroupKey, bool], GangRequest | None] = {}

        def request_of(key: GroupKey, *, partner: bool = False) -> GangRequest | None:
            """The group's request, built the first time this cycle asks (see `_queued`);
            with `partner`, whatever its backoff says (see `_gang_group`)."""
            if (key, partner) not in built:
                queued = queue.get(key)
                built[key, partner] = (
                    None if queued is None else self._request_or_none(queued, now, partner=partner)
                )
            return built[key, partner]

        decided: set[GroupKey] = set()
        self._placed_now = set()
        binds: list[Binding] = []
        # The budget counts deciding (and building what is decided), never ordering the queue:
        # a cycle must always decide at least one group.
        deadline = None if budget is None else loop.time() + budget
        for queued in order_gangs(queue.values()):
            if queued.key in decided:
                continue
            if deadline is not None and decided and loop.time() > deadline:
                self.wake()  # the rest of the queue in the next cycle, in the same order
                break
            if pipeline and loop.time() - last_yield > YIELD_SECONDS:
                # Let binds, watch events and status writes run between decisions.
                self._dispatch(binds)
                binds = []
                await asyncio.sleep(0)
                last_yield = loop.time()
            request = request_of(queued.key)
            if request is None:
                continue  # backing off, or its request failed (reported by `_request_or_none`)
            started = time.perf_counter()
            try:
                result = await self._decide(request, request_of, decided, binds, now)
            except Exception as exc:
                decided.add(request.key)
                self._failed(request.key, exc, now)
                result = ERROR
            else:
                self.failures.succeeded(request.key)
            finally:
                threaded = self.deciding_in_thread
                self._decided()
            elapsed = time.perf_counter() - started
            if threaded:
                metrics.SCHEDULING_IN_THREAD.inc()
            if result is not None:
                metrics.SCHEDULING_ATTEMPTS.labels(result).inc()
                metrics.SCHEDULING_LATENCY.labels(result).observe(elapsed)
            if elapsed > SLOW_DECISION_SECONDS:
                logger.warning(
                    "deciding %s/%s (%d pods waiting) took %.1fs; %s",
                    request.namespace,
                    request.name,
                    len(request.pending),
                    elapsed,
                    "in the worker thread, while the event loop went on"
                    if threaded
                    else "everything on the event loop (lease renewal, webhooks, probes) "
                    "waited for it",
                )
        if pipeline:
            self._dispatch(binds)
        elif binds:
            await self._bind_all(binds)

    @property
    def binds_allowed(self) -> int:
        """Binds allowed in flight now: the pacer's choice, or the fixed `bind_concurrency`."""
        return self._bind_slots.limit

    def _dispatch(self, binds: list[Binding]) -> None:
        """Send binds in the background (their pods are in flight, never decided twice)."""
        if binds:
            task = asyncio.create_task(self._bind_all(binds))
            self._binding.add(task)
            task.add_done_callback(self._bind_batch_done)

    def _bind_batch_done(self, task: asyncio.Task[None]) -> None:
        self._binding.discard(task)
        if not self._binding:
            self.signals.resume()  # narration waited behind the binds (controllers/podsignals.py)

    async def _decide(
        self,
        request: GangRequest,
        request_of: _RequestOf,
        decided: set[GroupKey],
        binds: list[Binding],
        now: dt.datetime,
    ) -> str | None:
        """Decide one group (or its gang group): assume its placement or record the refusal.
        Returns "placed" or "refused", or None when the decision waits for a partner."""
        listed = self._joined(self._group(request.key))
        if (invalid := self._invalid_partner(listed) or self._too_joined(listed)) is not None:
            decided.add(request.key)
            self._refused(request.key, c.Reason.INVALID_GANG_GROUP, invalid, now)
            return REFUSED
        if (held_back := self._partner_not_placed(request.key, listed, decided)) is not None:
            decided.add(request.key)
            self._refused(request.key, *held_back, now)
            return REFUSED
        gang_group = self._gang_group(request, listed, request_of, decided)
        if gang_group is None:
            return None  # a partner is not up for a decision: the gang group waits with it
        decided.update(r.key for r in gang_group)
        priority = min(r.priority for r in gang_group)
        lower: list[str] = []
        if any(count and below < priority for below, count in self._nominated_priorities.items()):
            lower = [uid for uid, (_, p, _) in self.nominated.items() if p < priority]
        restore = self.snapshot.simulate_removal(lower) if lower else NO_UNDO
        try:
            result = await self._decide_now(request, gang_group, binds, now)
            if result == PLACED:
                self._placed_now.update(r.key for r in gang_group)
            for partner in gang_group:
                # Built and decided without raising: a partner's failure is behind it too, and
                # its refusals' backoff is skipped again when the gang group is next due.
                self.failures.succeeded(partner.key)
            return result
        finally:
            restore()
            for uid in lower:  # withdrawn while the decision awaited: not to be put back
                if uid not in self.nominated and self.snapshot.is_assumed(uid):
                    self.snapshot.remove_pod(uid)

    async def _decide_now(
        self,
        request: GangRequest,
        gang_group: Sequence[GangRequest],
        binds: list[Binding],
        now: dt.datetime,
    ) -> str:
        """`_decide` with the nominated pods of lower priority out of the snapshot."""
        if len(gang_group) > 1:
            for member in gang_group:
                self.preemption.release(member.key)
            outcome = await self._pure(gang_group, place_gang_group, gang_group, self.snapshot)
            if isinstance(outcome, Refusal):
                message = outcome.message
                if outcome.reason is c.Reason.NOT_ENOUGH_RESOURCES:
                    message = await self.preemption.refused(gang_group, message, now)
                for member in gang_group:
                    self._refused(member.key, outcome.reason, message, now)
                return REFUSED
            for placement in outcome.placements:
                self._placed(placement)
            binds.extend(outcome.bindings)
            return PLACED
        self._release(request.key)  # decide afresh, with what this group held until now
        decision = await self._pure([request], place_group, request, self.snapshot)
        if isinstance(decision, Placement):
            self._placed(decision)
            binds.extend(decision.bindings)
            return PLACED
        else:
            state = self.waiting.get(request.key)
            if decision.partial and not (state and state.timed_out):
                # NonStrict: what fitted stays held (in memory, never bound) so the gang
                # accumulates capacity across cycles; others cannot take it meanwhile.
                # Two such gangs can hold each other off: the timeout releases them.
                self.held[request.key] = decision.undo
            else:
                decision.undo()
            message = decision.message
            if decision.reason is c.Reason.NOT_ENOUGH_RESOURCES and not decision.partial:
                message = await self.preemption.refused(request, message, now)
            self._refused(request.key, decision.reason, message, now)
            return REFUSED

    async def _plan(
        self, requests: Sequence[GangRequest], call: Callable[..., _Outcome], *args: Any
    ) -> _Outcome:
        """`_pure` for a preemption plan: in the worker thread also on a snapshot of
        PLAN_IN_THREAD_PODS pods or more."""
        thread = self.snapshot.pod_count >= self.plan_thread_pods
        return await self._pure(requests, call, *args, thread=thread)

    async def _pure(
        self,
        requests: Sequence[GangRequest],
        call: Callable[..., _Outcome],
        *args: Any,
        thread: bool = False,
    ) -> _Outcome:
        """`call(*args)`, a pure placement or preemption plan on the snapshot for `requests`:
        here, or in the worker thread for DECIDE_IN_THREAD_MEMBERS waiting members or more,
        constraints that make it costly (DECIDE_IN_THREAD_COST_US), or when the caller says
        (`thread`, see `_plan`). After that, the snapshot
        stays held (`deciding_in_thread`) until the cycle has booked the outcome (`_decided`):
        to what came meanwhile, the decision and its bookkeeping are one step, as on the event
        loop."""
        members = sum(len(request.pending) for request in requests)
        cost = decision_cost(requests, pods=self.snapshot.pod_count, nodes=len(self.snapshot))
        if not thread and members < self.thread_members and cost < self.thread_cost_us:
            return call(*args)
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="podgroup-decision")
        loop = asyncio.get_running_loop()
        self.deciding_in_thread = True
        self._decision = loop.run_in_executor(self._thread, call, *args)
        return await asyncio.shield(self._decision)

    def _decided(self) -> None:
        """A decision and its bookkeeping are over: apply what waited for the snapshot. If the
        cycle was cancelled while the thread decides (the scheduler stopping), that happens when
        the thread returns: a thread cannot be stopped, and the snapshot is its own until then."""
        if not self.deciding_in_thread:
            return
        decision = self._decision
        if decision is not None and not decision.done():
            decision.add_done_callback(self._thread_ended)
            return
        self._decision = None
        self._thaw()

    def _thread_ended(self, decision: asyncio.Future[Any]) -> None:
        if not decision.cancelled():
            decision.exception()  # retrieved: its cycle is gone, and so is its result
        self._decision = None
        self._thaw()

    def _thaw(self) -> None:
        """Apply, in arrival order, what came for the snapshot during a thread's decision.
        Each call is isolated as the informers isolate their handlers: one that raises is
        logged (with a traceback for the first few) and the rest still apply."""
        self.deciding_in_thread = False
        deferred, self._deferred = self._deferred, []
        for call in deferred:
            try:
                call()
            except Exception as exc:
                self.deferred_errors += 1
                logger.error(
                    "%s, held back during a decision in the worker thread, failed: %s",
                    getattr(getattr(call, "func", call), "__qualname__", "a call"),
                    truncate(describe(exc)),
                    exc_info=self.deferred_errors <= 3,
                )

    def _refresh_queue(self, now: dt.datetime) -> dict[GroupKey, QueueEntry]:
        """The waiting groups' entries, with those of stale groups entered again.

        Why kept: entering every waiting group again each cycle (its members not in flight, its
        PodGroup, its priority) took 0.10 to 0.14 s per 5,000 groups in the unit harness, every
        cycle, with the loop held, while nothing had changed for most of them."""
        stale, self._stale = self._stale, set()
        for key in stale:
            bucket = self.pending.get(key)
            entry = None
            if bucket:
                # Under a backlog most buckets are wholly in flight: find that with one set
                # intersection instead of a Python-level scan of the bucket.
                flying = bucket.keys() & self.in_flight
                if len(flying) < len(bucket):
                    waiting = [p for uid, p in bucket.items() if uid not in flying]
                    try:
                        entry = self._queued(key, waiting, now)
                    except Exception as exc:
                        self._failed(key, exc, now)
                        self._stale.add(key)  # entered again next cycle, as before
            if entry is None:
                self._queue.pop(key, None)
            else:
                self._queue[key] = entry
        self._resuming = False
        return self._queue

    def _queued(self, key: GroupKey, waiting: list[JSON], now: dt.datetime) -> QueueEntry | None:
        """The group's place in this cycle's queue, or None while it waits for an event (no
        PodGroup yet, or a finished one). The wait starts here, when the group is first queued,
        whether or not a cycle gets to decide it."""
        if key[1].startswith("pod:"):
            self.waiting.setdefault(key, WaitState(since=now))
            return QueueEntry(namespace=key[0], name=key[1], waiting=waiting)
        group = self._group(key)
        if group is None and (problem := self._invalid_spec(key)) is not None:
            # A spec that does not validate: its members say why they wait, as a refused
            # gang's do, and wait for the fix (a watch event).
            self.signals.refused(key, waiting, f"PodGroup {key[1]}: {problem}")
            return None
        if group is None or _terminal(group):
            # No PodGroup yet (the status reconciler warns the pods), or a finished one: the
            # pods wait for an event, not for a timer.
            return None
        if key not in self.waiting:
            # A wait that began under an earlier leader goes on from when it began; later,
            # this leader sees every wait begin (a wait restored then could predate a restart
            # whose status has not come back yet, and time the new gang out at once).
            since = wait_started(group.status, now) if self._resuming else now
            self.waiting[key] = WaitState(since=since)
        return QueueEntry(
            namespace=key[0],
            name=key[1],
            waiting=waiting,
            group=group,
            priority=max(
                (int((p.get("spec") or {}).get("priority") or 0) for p in waiting), default=0
            ),
            created=group.metadata.creation_timestamp,
            last_failure=group.status.last_failure_time,
            uid=group.metadata.uid or "",
            partly_bound=0 < len(self._bound_members(key)) < group.spec.min_member,
        )

    def _request_or_none(
        self, queued: QueueEntry, now: dt.datetime, *, partner: bool = False
    ) -> GangRequest | None:
        """`_request`, with a group whose request raises backed off and reported (None)."""
        try:
            return self._request(queued, now, partner=partner)
        except Exception as exc:
            self._failed(queued.key, exc, now)
            return None

    def _request(
        self, queued: QueueEntry, now: dt.datetime, *, partner: bool = False
    ) -> GangRequest | None:
        """What the core decides for a queued group, or None while it backs off (unless it is
        the `partner` of a gang group that is due, refused but never failed: `_gang_group`)."""
        key, waiting, group = queued.key, queued.waiting, queued.group
        state = self.waiting.setdefault(key, WaitState(since=now))
        if self._leaving_until(key[0], now) is not None:
            return None
        if group is None:  # a pod of no group: a gang of one
            retry = self.backoff.delay(state.failures)
            if state.last_failure is not None and now < state.last_failure + retry:
                return None
            return GangRequest(
                namespace=key[0],
                name=key[1],
                min_member=1,
                pending=waiting,
                claims=self.volumes.claims_for(waiting),
            )
        decision = decide_wait(
            wait_started=state.since,
            timeout_seconds=group.spec.schedule_timeout_seconds,
            default_timeout_seconds=self.default_timeout_seconds,
            failed_attempts=state.failures,
            last_failure=state.last_failure,
            now=now,
            backoff=self.backoff,
        )
        if decision.timed_out and not state.timed_out and state.message is not None:
            state.timed_out = True
            state.timed_out_at = now
            state.reason = c.Reason.SCHEDULE_TIMEOUT
            self._release(key)  # a NonStrict gang that timed out holds nothing while backing off
            self.publish(
                key,
                Verdict(
                    placed=False,
                    reason=c.Reason.SCHEDULE_TIMEOUT,
                    message=f"not placed within {timeout_of(decision.deadline, state.since)}s; "
                    f"{_holding(group, self._held_partly(key, group))}"
                    f"Last refusal: {state.message}",
                    at=now,
                ),
            )
        # A partner skips the backoff of its refusals, never that of a request that raised
        # (`_failed`): that one waits its turn, as any group whose processing raises does.
        skips_backoff = partner and not self.failures.count(key)
        if not (decision.may_attempt or skips_backoff) or self._left_to_restart(
            key, group, state, now
        ):
            return None
        bound = self._bound_members(key)
        satisfied = group.status.phase in (c.Phase.RUNNING, c.Phase.UNKNOWN) and not _acting(group)
        return GangRequest(
            namespace=key[0],
            name=key[1],
            uid=queued.uid,
            min_member=group.spec.min_member,
            pending=waiting,
            mode=group.spec.mode or c.GangMode.STRICT,
            already_bound=len(bound),
            bound_uids=frozenset(bound),
            satisfied_before=satisfied,
            min_resources=(
                {k: to_milli(v) for k, v in group.spec.min_resources.items()}
                if group.spec.min_resources
                else None
            ),
            priority=queued.priority,
            created=queued.created,
            last_failure=queued.last_failure,
            claims=self.volumes.claims_for(waiting),
            topology=topology_of(group.spec.topology_constraint, self.topology_levels),
            sub_groups=sub_group_tree(
                group.spec,
                waiting,
                [m for m in self.members.get(key, []) if pod_uid(m) in bound],
                self.topology_levels,
                group.status.placement,
            ),
        )

    def _joined(self, group: PodGroup | None) -> list[str]:
        """The group's gangGroup, joined with the lists of the PodGroups it names, and theirs in
        turn, in the order first named; at most MAX_GANG_GROUP entries (see `_too_joined`).

        Why: lists that disagree (x lists [x, w], z lists [z, x]) decided by z's list alone
        placed x without w, whatever x's list says; Koordinator's gangs likewise wait for
        every gang their partners wait for."""
        if group is None or not group.spec.gang_group:
            return []
        listed = list(group.spec.gang_group)
        seen = set(listed)
        index = 0
        while index < len(listed) and len(listed) <= MAX_GANG_GROUP:
            partner = self._group(gang_group_key(listed[index]))
            index += 1
            for entry in (partner.spec.gang_group or ()) if partner is not None else ():
                if entry not in seen:
                    seen.add(entry)
                    listed.append(entry)
        return listed

    @staticmethod
    def _too_joined(listed: list[str]) -> str | None:
        """Why a gang group cannot be decided when its joined lists (`listed`, from `_joined`)
        name more than MAX_GANG_GROUP PodGroups, the most one list may name; else None."""
        if len(listed) <= MAX_GANG_GROUP:
            return None
        return (
            f"the gangGroup lists of this PodGroup and of those it names join more than "
            f"{MAX_GANG_GROUP} PodGroups ({summarize(listed)}); make the lists agree and name "
            f"at most {MAX_GANG_GROUP}"
        )

    def _partner_not_placed(
        self, key: GroupKey, listed: list[str], decided: set[GroupKey]
    ) -> tuple[c.Reason, str] | None:
        """(reason, message) when a PodGroup of the gang's joined lists (`listed`, from
        `_joined`) was decided this cycle with a gang group of its own and not placed: this
        gang waits with it. None otherwise.

        Why: gangGroup lists that disagree (x lists [x, w], z lists [z, x]) put x in another
        gang group than z's when x comes first in the queue. x, refused with its own (w has no
        pods), counted as decided, and z was placed without it although z's list says they
        start together. Lists that agree decide every listed gang at once and never come
        here."""
        for entry in listed:
            partner = gang_group_key(entry)
            if partner == key or partner not in decided or partner in self._placed_now:
                continue
            state = self.waiting.get(partner)
            reason = state.reason if state is not None and state.reason else None
            said = (state.message if state is not None else None) or ""
            return (
                reason or c.Reason.NOT_ENOUGH_RESOURCES,
                f"gang group member PodGroup {entry} was not placed with its own gangGroup, "
                f"which lists other PodGroups than this one's: {said}",
            )
        return None

    def _invalid_partner(self, listed: list[str]) -> str | None:
        """What is wrong with the first PodGroup of the gang's joined lists (`listed`, from
        `_joined`) whose spec does not validate, or None. Without it the gang group waited in
        silence for a partner the queue never offers (`_queued`)."""
        for entry in listed:
            if (problem := self._invalid_spec(gang_group_key(entry))) is not None:
                return f"gang group member PodGroup {entry}: {problem}"
        return None

    def _gang_group(
        self,
        request: GangRequest,
        listed: list[str],
        request_of: _RequestOf,
        decided: set[GroupKey],
    ) -> list[GangRequest] | None:
        """This request plus every other PodGroup of its joined lists (`listed`, from
        `_joined`: its `gangGroup` and theirs) that is waiting too; None when a partner with
        pending pods is not up for a decision this cycle (binds in flight, a restart's grace,
        its namespace being left): deciding without it would bind part of the gang group.

        A partner backing off is decided with it: the gang group is decided as one, so it is
        due when any of its members is. Why: a partner that had waited long for this gang's
        pods backed off up to 60 s between tries, and the gang group started that much after
        the last pods came, the newcomers saying nothing meanwhile.

        A listed group already placed this cycle (one decided and not placed has had this gang
        refused: `_partner_not_placed`), or already placed before (minMember members bound), is
        left out; one that does not exist yet, or whose pods are not all there, makes the whole
        gang group wait.
        """
        if len(listed) <= 1:
            return [request]
        members = [request]
        for entry in listed:
            key = namespace, name = gang_group_key(entry)
            if key == request.key or key in decided:
                continue
            if (partner_request := request_of(key) or request_of(key, partner=True)) is not None:
                members.append(partner_request)
            elif key in self.pending:
                return None
            elif (partner := self._group(key)) is None:
                members.append(
                    GangRequest(namespace=namespace, name=name, min_member=1, pending=())
                )
            elif len(bound := self._bound_members(key)) < partner.spec.min_member:
                # Its pods are not there yet: the gang group waits for them (NotEnoughTasks).
                members.append(
                    GangRequest(
                        namespace=namespace,
                        name=name,
                        min_member=partner.spec.min_member,
                        already_bound=len(bound),
                        bound_uids=frozenset(bound),
                    )
                )
        return members

    def _forget_bound(self, uid: str) -> None:
        """The watch shows the pod bound (or gone): our own record of the bind is done."""
        key = self.bound.pop(uid, None)
        if key is not None:
            uids = self._bound_by_group.get(key)
            if uids is not None:
                uids.discard(uid)
                if not uids:
                    del self._bound_by_group[key]

    def _left_to_restart(
        self, key: GroupKey, group: PodGroup | None, state: WaitState, now: dt.datetime
    ) -> dt.datetime | None:
        """Until when a timed-out gang is left to the restart policy (None: decided as usual).

        A Strict gang held partly bound past its timeout, with a RestartGang or FailGang
        policy, is restarted or failed by the status reconciler (domain/restart.py,
        `timed_out_at`); for RESTART_GRACE_SECONDS after the timeout it is not placed."""
        if state.timed_out_at is None or group is None or not _acting(group):
            return None
        until = state.timed_out_at + dt.timedelta(seconds=RESTART_GRACE_SECONDS)
        if now >= until or not self._held_partly(key, group):
            return None
        return until

    def _held_partly(self, key: GroupKey, group: PodGroup) -> int:
        """`restart.held_partly` over the members as this scheduler sees them, so that it
        leaves to the restart plan exactly the gangs the plan restarts."""
        return held_partly(group, count_members(self.members.get(key, [])))

    def _bound_members(self, key: GroupKey) -> set[str]:
        """UIDs of the group's members holding a node, our own recent binds included (they
        count before the watch reports them: no false NotEnoughTasks meanwhile)."""
        bound = {
            pod_uid(m)
            for m in self.members.get(key, [])
            if holds_node(m) and not (m.get("metadata") or {}).get("deletionTimestamp")
        }
        return bound | self._bound_by_group.get(key, set())

    def _placed(self, placement: Placement) -> None:
        self.waiting.pop(placement.gang, None)
        self.pod_dependent.discard(placement.gang)
        self.preemption.forget(placement.gang)
        self.publish(
            placement.gang,
            Verdict(placed=True, placement=placed_in(placement.domain, placement.sub_domains)),
        )
        self.signals.placed(placement.gang)
        bucket = self.pending.get(placement.gang, {})
        for binding in placement.bindings:
            self.in_flight.add(binding.pod_uid)
            self.signals.placing(bucket.get(binding.pod_uid))
        self._stale.add(placement.gang)

    def _failed(self, key: GroupKey, exc: Exception, now: dt.datetime) -> None:
        """Deciding this group raised: back it off, say so in its status (once), go on."""
        state = self.waiting.setdefault(key, WaitState(since=now))
        state.failures += 1
        state.last_failure = now
        _, news = self.failures.failed(key, exc)
        if news:
            message = (
                f"the scheduler failed on this group and retries with backoff: {describe(exc)}"
            )
            state.message, state.reason = message, c.Reason.SCHEDULING_FAILED
            self.publish(
                key, Verdict(placed=False, reason=c.Reason.SCHEDULING_FAILED, message=message)
            )

    def _refused(self, key: GroupKey, reason: c.Reason, message: str, now: dt.datetime) -> None:
        state = self.waiting.setdefault(key, WaitState(since=now))
        state.failures += 1
        state.last_failure = now
        if state.message != message:
            logger.info("gang %s/%s waits: %s", key[0], key[1], truncate(message))
        state.message = message
        members = self.pending.get(key, {}).values()
        if any(_depends_on_pods(pod) for pod in members):
            self.pod_dependent.add(key)
        self.signals.refused(key, members, message)
        if not state.timed_out:
            state.reason = reason
            self.publish(key, Verdict(placed=False, reason=reason, message=message))

    def _bound(self, binding: Binding) -> None:
        """Forget the pod as pending at once: a watch event may lag behind the bind."""
        key = self.pending_key.get(binding.pod_uid)
        if key is not None:
            self.bound[binding.pod_uid] = key
            self._bound_by_group.setdefault(key, set()).add(binding.pod_uid)
        self._drop_pending(binding.pod_uid)

    async def _send_bind(self, binding: Binding) -> None:
        """Send one bind and tell the pacer how long it took to answer, whether it bound or
        failed: a bind refused or timed out after seconds says the API server's queue is long as
        surely as a slow success (counting successes only, binds that all time out would never
        lower the limit). A cancelled or fenced bind says nothing and is not told."""
        sent = asyncio.get_running_loop().time()
        try:
            await self.kube.bind(binding.namespace, binding.pod, binding.node, binding.pod_uid)
        except FencedError:
            raise  # never sent: it says nothing of the API server's queue
        except Exception:  # not CancelledError, a BaseException
            self._answered(sent)
            raise
        self._answered(sent)

    def _answered(self, sent: float) -> None:
        if self.pacer is not None:
            answered = asyncio.get_running_loop().time()
            self._bind_slots.limit = self.pacer.observe(answered - sent, answered)

    async def _bind_all(self, bindings: list[Binding]) -> None:
        async def bind(binding: Binding) -> None:
            async with self._bind_slots:
                try:
                    await self._send_bind(binding)
                    self.binds += 1
                    metrics.BINDS.labels("bound").inc()
                    self.signals.bound(binding.pod_uid, binding.node)
                    self._exclusive(self._bound, binding)
                except FencedError:
                    # This replica stopped leading: un-assume quietly; the scheduler is being
                    # stopped, and the new leader decides the pod afresh.
                    self._exclusive(self.snapshot.remove_pod, binding.pod_uid)
                except ApiError as exc:
                    if exc.namespace_terminating:
                        self._exclusive(self._namespace_leaving, binding)
                        return
                    if exc.conflict and await self._bound_meanwhile(binding):
                        # By us (a retried request) or anyone: placed.
                        self._exclusive(self._bound, binding)
                        return
                    # Node gone, pod deleted or bound meanwhile: release what we assumed and let
                    # the next cycle (fed by the watch) decide again.
                    self._exclusive(self._bind_failed, binding, exc)
                except Exception as exc:
                    # No answer (a connection lost, the writer process gone): bound or not, the
                    # next cycle decides again, and a bind that did land answers it with 409.
                    self._exclusive(self._bind_failed, binding, exc)
                finally:
                    self._exclusive(self._land, binding.pod_uid)

        async def bind_with_volumes(gang: list[Binding]) -> None:
            """Bind the gang's volumes first; if that fails, none of its pods is bound."""
            try:
                await self.volumes.prepare(gang)
            except VolumeBindingError as exc:
                self._exclusive(self._volumes_failed, gang, exc)
                return
            except FencedError:  # no longer leading: un-assume quietly, as `bind` does
                for binding in gang:
                    self._exclusive(self.snapshot.remove_pod, binding.pod_uid)
                    self._exclusive(self._land, binding.pod_uid)
                return
            await asyncio.gather(*(bind(b) for b in gang))

        plain, with_claims = with_volumes(bindings, self.pending_key.get)
        await asyncio.gather(
            *(bind(b) for b in plain), *(bind_with_volumes(gang) for gang in with_claims)
        )

    def _land(self, uid: str) -> None:
        """The pod's bind is answered (or given up): not in flight any more. If it is still
        pending (the bind failed), its group's queue entry gets it back."""
        self.in_flight.discard(uid)
        key = self.pending_key.get(uid)
        if key is not None:
            self._stale.add(key)

    def _bind_failed(self, binding: Binding, exc: Exception) -> None:
        """Un-assume the pod (it stays pending) and ask for a cycle."""
        logger.warning(
            "bind %s/%s -> %s failed: %s",
            binding.namespace,
            binding.pod,
            binding.node,
            truncate(describe(exc)),
        )
        metrics.BINDS.labels("failed").inc()
        self.snapshot.remove_pod(binding.pod_uid)
        self.wake()

    def _namespace_leaving(self, binding: Binding) -> None:
        """A bind refused because the pod's namespace is being deleted: un-assume the pod, and
        leave the namespace's gangs undecided for a while (`leaving`), saying so once."""
        metrics.BINDS.labels("failed").inc()
        self.snapshot.remove_pod(binding.pod_uid)
        if binding.namespace not in self.leaving:
            logger.info(
                "namespace %s is being deleted: its gangs are not scheduled (a bind there was "
                "refused); checked again in %ds or when a pod is created there",
                binding.namespace,
                LEAVING_RECHECK_SECONDS,
            )
        self.leaving[binding.namespace] = self.clock() + dt.timedelta(
            seconds=LEAVING_RECHECK_SECONDS
        )

    def _leaving_until(self, namespace: str, now: dt.datetime) -> dt.datetime | None:
        """Until when `namespace`'s gangs are left undecided (None: they are decided)."""
        until = self.leaving.get(namespace)
        if until is not None and now >= until:
            del self.leaving[namespace]
            return None
        return until

    def _volumes_failed(self, gang: list[Binding], exc: VolumeBindingError) -> None:
        """Un-assume the gang's pods (they stay pending) and say why in its status."""
        key = self.pending_key.get(gang[0].pod_uid)
        logger.warning("volumes of %s not bound: %s", key, exc)
        for binding in gang:
            metrics.BINDS.labels("failed").inc()
            self.snapshot.remove_pod(binding.pod_uid)
            self._land(binding.pod_uid)
        if key is not None:
            self._refused(key, c.Reason.VOLUME_BINDING_FAILED, str(exc), self.clock())
        self.wake()

    async def _bound_meanwhile(self, binding: Binding) -> bool:
        """After a 409 on the binding: is this pod (same UID) on a node now?

        The apiserver answers 409 Conflict both for a pod already assigned and for a failed
        UID precondition, with nothing but the message text to tell them apart; the pod
        itself does."""
        try:
            pod = await self.kube.get(PODS, binding.pod, binding.namespace)
        except ApiError:
            return False
        return pod_uid(pod) == binding.pod_uid and bool((pod.get("spec") or {}).get("nodeName"))


def _placement_facts(node: JSON) -> tuple[Any, ...]:
    """The slim node without its resourceVersion (which every heartbeat bumps)."""
    meta = node.get("metadata") or {}
    return (meta.get("labels"), node.get("spec"), node.get("status"))


def _terminal(group: PodGroup) -> bool:
    return group.status.phase is not None and c.Phase(group.status.phase).terminal


def timeout_of(deadline: dt.datetime, since: dt.datetime) -> int:
    return int((deadline - since).total_seconds())
