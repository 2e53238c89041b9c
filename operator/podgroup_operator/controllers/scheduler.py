"""Runs the scheduling cycle: waiting gangs in queue order, each decided by the core, bound.

Pods whose `spec.schedulerName` is one of ours (`podgroup-scheduler`, or the names given to
`run --scheduler-name`) wait here until their whole gang fits. Every node and every bound pod
(anyone's) keeps a `scheduling.Snapshot` current. `GangScheduler` feeds its parts from the watch
and runs the cycle over them; each part does one job:

- the queue (controllers/scheduler_queue.py): pending members by group, each waiting group's
  entry, kept from cycle to cycle, its wait and backoff, the pods in flight;
- the requests (controllers/requests.py): a waiting group's queue entry and `GangRequest`,
  built from the store when the cycle comes to decide it;
- the cycle (`GangScheduler.cycle`, here): takes the entries in queue order, has a group's
  request built unless it backs off, decides it against the snapshot (placements are assumed
  into it, refusals leave it untouched) and hands the bindings to the binder;
- the gang groups (controllers/gang_groups.py): the PodGroups a gang is decided together with
  (`spec.gangGroup`), and each PodGroup's model, parsed once per resourceVersion;
- preemption (controllers/preemption.py): a gang refused for room plans, evicts and holds the
  room for itself (`Preemptor`); other schedulers' nominated pods hold theirs (`Nominated`);
- the binder (controllers/binder.py): sends a decision's bindings concurrently, paced, a gang's
  volumes first, and undoes a pod's assumption when its bind fails. A failed bind puts the pod
  back in its group's queue (the members already bound stay bound and count toward minMember
  next time); the watch then brings the truth. A bind refused because the namespace is being
  deleted leaves that namespace's gangs undecided for a while instead (`GangQueue.leaving`);
- the offload (controllers/offload.py): a large gang is decided in a worker thread
  (`DECIDE_IN_THREAD_MEMBERS`), and so is one whose constraints make it costly
  (`DECIDE_IN_THREAD_COST_US`), and so is a preemption plan on a large snapshot
  (`PLAN_IN_THREAD_PODS`), so that lease renewal, webhooks, probes, the watches and status
  writes go on meanwhile (docs/decisions/008-worker-thread-decisions.md). Everything that would
  change the snapshot from the event loop meanwhile is queued in arrival order and applied once the
  decision is booked.

A NonStrict gang's members that fit are held in the snapshot while it waits, for at most
`run --nonstrict-hold-seconds` (scheduling/holds.py): the holder's refusal names the nodes it
holds, and another gang's refusal names the holder when the held room is what stopped it.

The scheduler never writes PodGroup status: its verdicts go to the status reconciler (see
domain/scheduling_status.py). It knows nothing of Kopf: the informers feed it node, pod and
group events (controllers/runtime.py), for every namespace, so the snapshot holds every bound pod
of the cluster; `namespaces` only limits which pending pods it places. A group whose decision
raises is backed off and reported in its status (controllers/isolation.py); the cycle goes on
with the others.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from podgroup_operator import constants as c
from podgroup_operator import metrics, tuning
from podgroup_operator.adapters.informers import Index
from podgroup_operator.adapters.kube import JSON, KubeClient
from podgroup_operator.api.backoff import Backoff
from podgroup_operator.api.elastic_quota import pod_quota_ref
from podgroup_operator.api.keys import GroupKey, is_lone_pod, lone_pod_key, pod_uid
from podgroup_operator.api.models import PodGroup, PodGroupSpec
from podgroup_operator.api.times import parse_time
from podgroup_operator.controllers.binder import Binder, BindOutcomes
from podgroup_operator.controllers.clock import LOOP_CLOCK, MonotonicClock, sleep
from podgroup_operator.controllers.gang_groups import GangGroups, ParsedGroups
from podgroup_operator.controllers.isolation import Failures
from podgroup_operator.controllers.offload import Offload
from podgroup_operator.controllers.podsignals import PodSignals
from podgroup_operator.controllers.preemption import Nominated, Preemptor
from podgroup_operator.controllers.provisioning import Provisioning
from podgroup_operator.controllers.quota_queues import QuotaQueues
from podgroup_operator.controllers.requests import Requests, policy_acts
from podgroup_operator.controllers.reservations import RESERVATION_TIMEOUT_SECONDS, Reservations
from podgroup_operator.controllers.scheduler_queue import (
    GangQueue,
    QueueEntry,
    RequestOf,
    WaitState,
)
from podgroup_operator.controllers.volumes import VolumeBinder, VolumeBindingError
from podgroup_operator.domain.gang_groups import (
    NO_TRUST,
    GangGroupTrust,
    lacking_consent_message,
)
from podgroup_operator.domain.lifecycle import count_members
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.domain.restart import held_partly, repairs_sub_groups
from podgroup_operator.domain.scheduling_status import Preempted, Verdict, wait_started
from podgroup_operator.logs import describe, truncate
from podgroup_operator.scheduling.elastic.tree import QuotaTree
from podgroup_operator.scheduling.gang import (
    Binding,
    GangRequest,
    Placement,
    Refusal,
    decision_cost,
)
from podgroup_operator.scheduling.gates import gated_message, scheduling_gates
from podgroup_operator.scheduling.holds import Hold, Holds, stopped_by
from podgroup_operator.scheduling.placement import place_gang_group, place_group
from podgroup_operator.scheduling.preemption import DisruptionBudget
from podgroup_operator.scheduling.provisioning import pod_sets, still_missing
from podgroup_operator.scheduling.queue import (
    decide_wait,
    order_gangs,
)
from podgroup_operator.scheduling.reclaim import may_reclaim
from podgroup_operator.scheduling.registry import depends_on_pods
from podgroup_operator.scheduling.resources import Resources, add_resources
from podgroup_operator.scheduling.snapshot import Snapshot, holds_node
from podgroup_operator.scheduling.topology import placed_in

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
whatever its size (docs/decisions/008-worker-thread-decisions.md)."""
DECIDE_IN_THREAD_MEMBERS = 64
"""Gangs (or gang groups) with at least this many waiting members are decided in a worker
thread; a smaller one costs less on the event loop than the trip to the thread and back
(docs/decisions/008-worker-thread-decisions.md)."""
PLAN_IN_THREAD_PODS = 10_000
"""A preemption plan on a snapshot of at least this many pods is made in the worker thread,
whatever the gang's size: a plan walks the pods of the nodes it may free, not only the gang's
members (docs/decisions/008-worker-thread-decisions.md)."""
PLACED, REFUSED, ERROR = "placed", "refused", "error"
"""Results of one decision, as the scheduling metrics label them."""
YIELD_SECONDS = 0.01
"""Within a pipelined cycle, binds go out and the event loop runs other work this often."""
SETTLE_SECONDS = 0.02
"""A short pause after the first event of a burst, so a ReplicaSet's pods arrive together."""
LEAVING_RECHECK_SECONDS = 60
"""How long the gangs of a namespace whose bind was refused because it is being deleted are left
undecided (`GangQueue.leaving`), unless a pod created there says it is back sooner."""
RESTART_GRACE_SECONDS = 30
"""How long a Strict gang held partly bound past its schedule timeout, with a restart policy,
is left undecided: the status reconciler's restart step restarts it (domain/restart.py decides,
controllers/restarts.py carries it out), and placing its rest meanwhile would have that restart
delete a gang just placed. Bounded, so that a restart that does not come (the reconciler counts
the members otherwise) never leaves the gang undecided."""


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


class GangScheduler:
    """Keeps the snapshot, feeds it and the queue from the watch, and runs scheduling cycles
    with its parts (see the module docstring)."""

    def __init__(  # noqa: PLR0915
        self,
        kube: KubeClient,
        groups: Index,
        members: Index,
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
        monotonic: MonotonicClock = LOOP_CLOCK,
        gang_group_trust: GangGroupTrust = NO_TRUST,
        nonstrict_hold_seconds: float = tuning.NONSTRICT_HOLD_SECONDS,
        provisioning: Provisioning | None = None,
        reservation_timeout_seconds: float = RESERVATION_TIMEOUT_SECONDS,
    ) -> None:
        self.monotonic = monotonic
        """Times the loop's waits: for the next backoff or timeout, the settle, a retry."""
        self.namespaces = namespaces
        """Namespaces whose pending pods this scheduler places; empty means all."""
        self.scheduler_names = scheduler_names
        """The `spec.schedulerName`s of the pods this scheduler places (`run --scheduler-name`)."""
        self.signals = PodSignals(kube, clock=clock, busy=lambda: self.binder.busy)
        """PodScheduled conditions and scheduling Events on pods (controllers/podsignals.py)."""
        self.failures = Failures(
            "scheduling of gang", logger, metric="scheduling", monotonic=monotonic
        )
        self.members = members
        """Index view: (namespace, name) -> member pod bodies."""
        self.publish = publish
        self.default_timeout_seconds = default_timeout_seconds
        self.clock = clock
        self.backoff = Backoff(initial_seconds=1, max_seconds=60)
        self.queue = GangQueue(members, gone=self._gone)
        """Pending members, queue entries, waits and backoff (controllers/scheduler_queue.py)."""
        self.parsed = ParsedGroups(groups)
        """PodGroup models, parsed once per resourceVersion (controllers/gang_groups.py)."""
        self.offload = Offload()
        """The worker thread for large or costly decisions (controllers/offload.py)."""
        self.gang_groups = GangGroups(self.parsed, self.queue, gang_group_trust)
        """Which PodGroups are decided together (`spec.gangGroup`; controllers/gang_groups.py)."""
        self.snapshot = Snapshot(gang_of=group_key_of, max_pd_volumes=max_pd_volumes)
        self.quota_queues = QuotaQueues(self.snapshot)
        """Each ElasticQuota's waiting gangs, their order and positions, per cycle."""
        self.volumes = volumes if volumes is not None else VolumeBinder(kube)
        """PVs into the snapshot, members' claims into requests, volumes bound before pods."""
        self.volumes.attach(self.snapshot, self.on_volumes_changed, self.offload.exclusive)
        self.requests = Requests(members, self.queue, self.volumes, topology_levels)
        """Queue entries and `GangRequest`s from the store (controllers/requests.py)."""
        self.binder = Binder(
            kube,
            self.snapshot,
            self.volumes,
            self.signals,
            self.offload.exclusive,
            BindOutcomes(
                bound=self._bound,
                landed=self.queue.land,
                retry=self.wake,
                leaving=self._namespace_leaving,
                volumes_failed=self._volumes_failed,
                gang_of=self.queue.pending_key.get,
            ),
            bind_concurrency=bind_concurrency,
        )
        """Binds, pacing, volumes first, fencing (controllers/binder.py)."""
        self.repairs: dict[GroupKey, PodGroupSpec] = {}
        """Specs of the groups whose restart policy repairs a broken sub-group alone now
        (`restart.repairs_sub_groups`): as preemption victims they lose whole sub-groups only."""
        self.preemption = Preemptor(
            kube,
            self.snapshot,
            groups,
            budgets=budgets,
            on_preempted=on_preempted,
            repairs=lambda: dict(self.repairs),
            clock=clock,
            run=self._plan,
        )
        self.holds = Holds(nonstrict_hold_seconds)
        """NonStrict gangs' partial placements, held in the snapshot until placed, timed out or
        past the hold cap (`run --nonstrict-hold-seconds`; scheduling/holds.py)."""
        self.reservations = Reservations(
            kube,
            self.snapshot,
            self.parsed,
            members,
            clock=clock,
            timeout_seconds=reservation_timeout_seconds,
        )
        """The head gang of each priority reserves, later gangs backfill (reservations.py)."""
        self.nominated = Nominated(self.snapshot, scheduler_names)
        """Other schedulers' pods nominated to a node, their room held (preemption.py)."""
        self.last_cycle: float | None = None
        """Loop time the last cycle ended (liveness: a scheduler with pending gangs cycles)."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.thread_members = thread_members
        """Waiting members from which a decision runs in the worker thread
        (DECIDE_IN_THREAD_MEMBERS)."""
        self.thread_cost_us = thread_cost_us
        """Constraint cost from which it does too (DECIDE_IN_THREAD_COST_US)."""
        self.plan_thread_pods = plan_thread_pods
        """Snapshot pods from which a preemption plan runs in the worker thread
        (PLAN_IN_THREAD_PODS)."""
        self.provisioning = provisioning if provisioning is not None else Provisioning()
        """One ProvisioningRequest per gang refused for room (controllers/provisioning.py);
        off unless the runtime gives one, whose `due` is `provisioned`."""

    # --- events ---------------------------------------------------------------------------------
    def on_node(self, event_type: str | None, node: JSON, old: JSON | None = None) -> None:
        self.offload.exclusive(self._on_node, event_type, node, old)

    def on_pod(self, event_type: str | None, pod: JSON) -> None:
        self.offload.exclusive(self._on_pod, event_type, pod)

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
            self.queue.retry_all()
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
        if self.nominated.track(uid, event_type, pod, node):
            self.queue.retry_all()
            self.wake()
        if node or event_type == c.WatchEventType.DELETED:
            self.queue.forget_bound(uid)
        if event_type == c.WatchEventType.ADDED and self.queue.leaving:
            self.queue.leaving.pop((pod.get("metadata") or {}).get("namespace", ""), None)
        if event_type == c.WatchEventType.DELETED:
            self.snapshot.remove_pod(uid)
            self.preemption.pod_gone(uid)
            self.queue.drop(uid)
            self.signals.forget(uid)
            self.queue.retry_all()
            self.wake()
            return
        if node and self.queue.pod_dependent and holds_node(pod) and self._moves_pods(uid, pod):
            self.queue.pods_moved()
            self.wake()
        if node or not self.snapshot.is_assumed(uid):
            # An unbound version (often older than our bind) never erases an assumption,
            # as kube-scheduler's cache ignores updates of unassigned pods.
            self.snapshot.add_pod(pod)
        if not holds_node(pod) and node:
            self.queue.retry_all()  # a bound pod finished: capacity came back
            self.wake()
        if self._wants_us(pod) and uid not in self.queue.bound:
            key = self._queue_key(pod)
            before = self.queue.pending.get(key, {}).get(uid)
            if self.queue.pending_key.get(uid) != key:
                self.queue.new_member(key)
                self.wake()  # a new pod to place, or one that changed group
            elif before is not None and scheduling_gates(before) != scheduling_gates(pod):
                self.wake()  # a gate was removed: the gang may be due now (`_gated`)
            self.queue.add(uid, key, pod)
        else:
            self.queue.drop(uid)

    def on_volumes_changed(self) -> None:
        """A PV, claim or StorageClass changed: a gang waiting on volumes may fit now."""
        self.queue.retry_all()
        self.wake()

    def on_topology(self, kind: c.WatchEventType, body: JSON, old: JSON | None) -> None:
        """A Topology came, went or changed its levels: a gang whose constraint names it is
        decided again now (requests resolve their Topology at each attempt)."""
        self.queue.retry_all()
        self.wake()

    def set_quota_tree(self, tree: QuotaTree | None) -> None:
        """The ElasticQuota tree changed (controllers/elastic_quotas.py): quota use is rebuilt
        from the snapshot's pods, and every waiting gang is decided again now."""
        self.offload.exclusive(self._set_quota_tree, tree)

    def _set_quota_tree(self, tree: QuotaTree | None) -> None:
        self.snapshot.quotas.set_tree(tree)
        self.queue.retry_all()
        self.wake()

    def on_group(self, key: GroupKey) -> None:
        self.parsed.forget(key)
        self._note_repairs(key)
        self._note_quota_ref(key)
        self.queue.stale.add(key)
        if key in self.queue.pending:
            self.wake()

    def _note_quota_ref(self, key: GroupKey) -> None:
        """Keep the snapshot's gang -> quota map current (`QuotaState.set_group_ref`): the
        quota the group's label names, which its members naming none are charged to."""
        body = next(iter(self.parsed.groups.get(key, [])), None) or {}
        ref = pod_quota_ref((body.get("metadata") or {}).get("labels"))
        self.offload.exclusive(self.snapshot.quotas.set_group_ref, key, ref)

    def _note_repairs(self, key: GroupKey) -> None:
        """Keep `repairs` current for a changed group; only a `scope: SubGroup` policy costs
        a parse (cached per resourceVersion, `ParsedGroups`)."""
        body = next(iter(self.parsed.groups.get(key, [])), None) or {}
        policy = (body.get("spec") or {}).get("policy") or {}
        group = self.parsed.get(key) if policy.get("scope") == c.RestartScope.SUB_GROUP else None
        if group is not None and repairs_sub_groups(group):
            self.repairs[key] = group.spec
        else:
            self.repairs.pop(key, None)

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
        return (
            key if key is not None else lone_pod_key(meta.get("namespace", "default"), meta["name"])
        )

    def _gone(self, key: GroupKey) -> None:
        """The group's last pending member went (`GangQueue.drop`): forget the rest of it."""
        self.failures.forget(key)
        self.signals.forget_gang(key)
        self._release(key)
        self.holds.forget(key)
        self.preemption.forget(key)
        self.provisioning.done(key, placed=True)
        self.reservations.forget(key)

    def _release(self, key: GroupKey) -> Hold | None:
        """Give back what a NonStrict gang held (returned: a hold booked again for the same
        decision keeps its start), and the room nominated for it by preemption."""
        self.preemption.release(key)
        return self.holds.take(key)

    def _expire_holds(self, now: dt.datetime) -> None:
        """Release the NonStrict holds past their cap; the waiting gangs may use the room now."""
        released = self.holds.expire(now, self.queue.waiting)
        for hold in released:
            logger.info(
                "NonStrict gang %s released its hold of %d member(s) at its %ds cap",
                hold.label,
                len(hold.uids),
                self.holds.cap.total_seconds(),
            )
        if released:
            self.queue.retry_all()

    def _moves_pods(self, uid: str, pod: JSON) -> bool:
        """A bound pod the snapshot did not hold (bound by someone else), or whose labels
        changed: what pod affinity, anti-affinity and spread count may have moved. Our own
        binds coming back are held already, as assumptions, and move nothing."""
        entry = self.snapshot.pod(uid)
        return entry is None or entry.info.labels != (
            (pod.get("metadata") or {}).get("labels") or {}
        )

    def wake(self) -> None:
        self._wake.set()

    # --- the loop -------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        tasks = [*self.binder.batches, *([self._task] if self._task is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.preemption.stop()
        await self.reservations.stop()
        await self.signals.stop()
        self.offload.shutdown()

    async def _run(self) -> None:
        while True:
            if not self._wake.is_set():  # with work already waiting, no timer is needed
                timeout = self._next_due()
                timer = (
                    None if timeout is None else self.monotonic.call_later(timeout, self._wake.set)
                )
                try:
                    await self._wake.wait()
                finally:
                    if timer is not None:
                        timer.cancel()
            self._wake.clear()
            await sleep(self.monotonic, SETTLE_SECONDS)
            try:
                await self.cycle(CYCLE_BUDGET_SECONDS, pipeline=True)
                self.last_cycle = self.monotonic.now()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("scheduling cycle failed; retrying")
                await sleep(self.monotonic, 1.0)

    def _next_due(self) -> float | None:
        """Seconds until the earliest backoff, timeout or hold cap expires (None: wait for
        events)."""
        if not self.queue.waiting:
            return None
        now = self.clock()
        soonest = None
        expiry = self.holds.next_expiry()
        if expiry is not None:
            soonest = max(0.05, (expiry - now).total_seconds())
        for key, state in self.queue.waiting.items():
            try:
                seconds = self._due_in(key, state, now)
            except Exception as exc:
                delay, _ = self.failures.failed(key, exc)
                seconds = delay
            if seconds is not None:
                soonest = seconds if soonest is None else min(soonest, seconds)
        return soonest

    def _due_in(self, key: GroupKey, state: WaitState, now: dt.datetime) -> float | None:
        leaving_until = self.queue.leaving_until(key[0], now)
        if leaving_until is not None:
            return max(0.05, (leaving_until - now).total_seconds())
        group = self.parsed.get(key)
        restart_until = self._left_to_restart(key, group, state, now)
        if restart_until is not None:
            return max(0.05, (restart_until - now).total_seconds())
        if not is_lone_pod(key) and (group is None or _terminal(group)):
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

    async def cycle(self, budget: float | None = None, *, pipeline: bool = False) -> None:
        """A pass over the waiting groups in queue order, binding what it placed:

        1. refresh the queue: enter again the groups whose pods, binds or PodGroup changed;
        2. take the entries in queue order (`scheduling.queue.order_gangs`);
        3. stop when the budget is spent, and ask for another cycle at once;
        4. while pipelining, send the binds so far and let the event loop run;
        5. build the group's request, unless it backs off or waits for a time;
        6. decide it (with its gang group): assume its placement, or record the refusal;
        7. dispatch the binds.

        With a `budget` (seconds), step 3 makes a backlog of 1,000 gangs start binding after the
        first few decisions instead of after all of them. With `pipeline`, the binds run in the
        background while the next cycle decides (their pods are in flight, never decided
        twice); without it, the cycle returns once its binds are answered (as tests expect).
        """
        now = self.clock()
        loop = asyncio.get_running_loop()
        last_yield = loop.time()
        self._expire_holds(now)
        if self.reservations.book and self.reservations.expire(now):
            self.queue.retry_all()
        # 1. Refresh the queue.
        queue = self._refresh_queue(now)
        self.quota_queues.refresh(queue.values())
        built: dict[tuple[GroupKey, bool], GangRequest | None] = {}

        def request_of(key: GroupKey, *, partner: bool = False) -> GangRequest | None:
            """The group's request, built the first time this cycle asks (see `_queued`);
            with `partner`, whatever its backoff says (see `GangGroups.assemble`)."""
            if (key, partner) not in built:
                queued = queue.get(key)
                built[key, partner] = (
                    None if queued is None else self._request_or_none(queued, now, partner=partner)
                )
            return built[key, partner]

        decided: set[GroupKey] = set()
        self.gang_groups.placed_now = set()
        binds: list[Binding] = []
        # The budget counts deciding (and building what is decided), never ordering the queue:
        # a cycle must always decide at least one group.
        deadline = None if budget is None else loop.time() + budget
        # 2. Take the entries in queue order.
        for queued in order_gangs(queue.values()):
            if queued.key in decided:
                continue
            # 3. Stop at the budget: the rest of the queue in the next cycle, in the same order.
            if deadline is not None and decided and loop.time() > deadline:
                self.wake()
                break
            # 4. Let binds, watch events and status writes run between decisions.
            if pipeline and loop.time() - last_yield > YIELD_SECONDS:
                self.binder.dispatch(binds)
                binds = []
                await asyncio.sleep(0)
                last_yield = loop.time()
            # A StrictFIFO quota decides its head only; its others wait, without a backoff.
            if (behind := self.quota_queues.held_back(queued.key)) is not None:
                self._behind_head(queued.key, behind, now)
                continue
            # 5. Build the request.
            request = request_of(queued.key)
            if request is None:
                continue  # backing off, or its request failed (reported by `_request_or_none`)
            # 6. Decide.
            await self._decide_timed(request, request_of, decided, binds, now)
        self.holds.decided(decided)  # resting NonStrict gangs owe these no more (holds.py)
        # 7. Dispatch the binds.
        if pipeline:
            self.binder.dispatch(binds)
        elif binds:
            await self.binder.bind_all(binds)

    async def _decide_timed(
        self,
        request: GangRequest,
        request_of: RequestOf,
        decided: set[GroupKey],
        binds: list[Binding],
        now: dt.datetime,
    ) -> None:
        """`_decide`, isolated (a decision that raises backs the group off), booked (the
        worker thread's held-back calls applied), counted in the metrics, and logged when slow."""
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
            threaded = self.offload.deciding
            self.offload.decided()
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
                else "everything on the event loop (lease renewal, webhooks, probes) waited for it",
            )

    async def _decide(
        self,
        request: GangRequest,
        request_of: RequestOf,
        decided: set[GroupKey],
        binds: list[Binding],
        now: dt.datetime,
    ) -> str | None:
        """Decide one group (or its gang group): assume its placement or record the refusal.
        Returns "placed" or "refused", or None when the decision waits for a partner."""
        gang_groups = self.gang_groups
        listed, lacking = gang_groups.joined(request.key, self.parsed.get(request.key))
        if (
            invalid := gang_groups.invalid_partner(listed)
            or gang_groups.too_joined(listed)
            or (lacking and lacking_consent_message(*lacking))
        ) is not None:
            decided.add(request.key)
            self._refused(request.key, c.Reason.INVALID_GANG_GROUP, invalid, now)
            return REFUSED
        if (held_back := gang_groups.partner_not_placed(request.key, listed, decided)) is not None:
            decided.add(request.key)
            self._refused(request.key, *held_back, now)
            return REFUSED
        gang_group = gang_groups.assemble(request, listed, request_of, decided)
        if gang_group is None:
            return None  # a partner is not up for a decision: the gang group waits with it
        decided.update(r.key for r in gang_group)
        with self.nominated.taken_out_below(min(r.priority for r in gang_group)):
            result = await self._decide_now(request, gang_group, decided, binds, now)
        if result == PLACED:
            gang_groups.placed_now.update(r.key for r in gang_group)
        for partner in gang_group:
            # Built and decided without raising: a partner's failure is behind it too, and
            # its refusals' backoff is skipped again when the gang group is next due.
            self.failures.succeeded(partner.key)
        return result

    async def _decide_now(
        self,
        request: GangRequest,
        gang_group: Sequence[GangRequest],
        decided: set[GroupKey],
        binds: list[Binding],
        now: dt.datetime,
    ) -> str:
        """`_decide` with the nominated pods of lower priority out of the snapshot (a gang group:
        `_decide_gang_group`)."""
        if len(gang_group) > 1:
            return await self._decide_gang_group(request, gang_group, decided, binds, now)
        before = self._release(request.key)  # decide afresh, with what this group held
        resting = request.mode is c.GangMode.NON_STRICT and not self.holds.may_hold(
            request.key, now
        )
        if resting:  # its hold reached the cap: it holds nothing for now (scheduling/holds.py)
            request = dataclasses.replace(request, mode=c.GangMode.STRICT)
        ends = self.reservations.ends(request, now)
        decision, backfills, fenced = await self._pure(
            [request], self.reservations.book.place, request, self.snapshot, ends, place_group
        )
        if isinstance(decision, Placement):
            self.reservations.placed(request, backfills, ends)
            self._placed(decision)
            binds.extend(decision.bindings)
            return PLACED
        else:
            state = self.queue.waiting.get(request.key)
            message = decision.message
            if decision.partial and not (state and state.timed_out):
                # NonStrict: what fitted stays held (in memory, never bound) so the gang
                # accumulates capacity across cycles; others cannot take it meanwhile, for
                # at most the hold cap (scheduling/holds.py).
                hold = self._hold(request.key, decision, now, before)
                message = f"{message}; {hold.describe()}"
            else:
                decision.undo()
            if decision.reason is c.Reason.NOT_ENOUGH_RESOURCES:
                message += await self._held_room(request, decision)
            if resting:
                cap = int(self.holds.cap.total_seconds())
                message += (
                    f"; its NonStrict hold was released at the {cap}s cap so that other gangs "
                    "may use the room: it holds nothing until the gangs waiting then have been "
                    "decided"
                )
            if decision.reason is c.Reason.WAITING_FOR_QUOTA:
                message = await self.preemption.refused(
                    request, message, now, ran_seconds=self._ran_seconds
                )
            if decision.reason is c.Reason.NOT_ENOUGH_RESOURCES and not decision.partial:
                message = await self._make_room(
                    request, message, now, resting=resting, fenced=fenced
                )
            elif decision.reason is not c.Reason.NOT_ENOUGH_RESOURCES:
                self.reservations.release(request.key)  # not a candidate now (short of members)
            if decision.reason is c.Reason.NOT_ENOUGH_RESOURCES:
                message += await self._provision(request, decision, now)
            self._refused(request.key, decision.reason, message, now)
            return REFUSED

    async def _decide_gang_group(
        self,
        request: GangRequest,
        gang_group: Sequence[GangRequest],
        decided: set[GroupKey],
        binds: list[Binding],
        now: dt.datetime,
    ) -> str:
        """`_decide_now` for a gang group: placed together, or refused together; the refusal
        goes to the groups it holds back (`GangGroups.held_with`) only, and the others leave
        `decided`, to be decided on their own later in the cycle."""
        for member in gang_group:
            self.preemption.release(member.key)
        outcome = await self._pure(gang_group, place_gang_group, gang_group, self.snapshot)
        if isinstance(outcome, Refusal):
            message = outcome.message
            if outcome.reason is c.Reason.NOT_ENOUGH_RESOURCES:
                message = await self.preemption.refused(gang_group, message, now)
            held = self.gang_groups.held_with(request.key, gang_group)
            for member in gang_group:
                if member.key in held:
                    self._refused(member.key, outcome.reason, message, now)
                else:  # pulled in by a list not its own
                    decided.discard(member.key)
            return REFUSED
        for placement in outcome.placements:
            self._placed(placement)
        binds.extend(outcome.bindings)
        return PLACED

    async def _make_room(
        self, request: GangRequest, message: str, now: dt.datetime, *, resting: bool, fenced: bool
    ) -> str:
        """A strict gang refused for room: it reserves if it is the head of its priority (not
        while `resting`), and unless the room is `fenced` (reserved for an older gang, which
        evicting would not free) it takes back what others borrowed from its quota below its
        min, else preempts by priority. Returns the refusal's message with what each added."""
        if not resting:  # a resting NonStrict gang lets the others have the room
            message += await self._reserve(request, now, fenced)
        if fenced:
            return message
        if may_reclaim(request, self.snapshot):
            message = await self.preemption.refused(
                request, message, now, ran_seconds=self._ran_seconds
            )
            if request.key in self.preemption.nominations:
                return message  # a reclaim plan was adopted: no priority preemption besides
        return await self.preemption.refused(request, message, now)

    async def _reserve(self, request: GangRequest, now: dt.datetime, fenced: bool) -> str:
        """A gang refused for room reserves if it is the head of its priority; what its
        refusal adds then (`; holds a reservation of ...`), else nothing. The plan is a few
        what-if placements: in the worker thread as a preemption plan would be."""
        if fenced or not self.reservations.may_reserve(request):
            return ""
        running = self.reservations.running(now)
        planned = await self._plan([request], self.reservations.plan, request, running)
        held = self.reservations.adopt(request, planned)
        return "" if held is None else f"; {held.describe(now)}"

    async def _provision(self, request: GangRequest, refusal: Refusal, now: dt.datetime) -> str:
        """A gang refused for room: have the nodes it still lacks provisioned, unless it has a
        request in flight, preemption frees room for it, or provisioning is off for it
        (controllers/provisioning.py). Returns what the refusal's message adds."""
        key = request.key
        nomination = self.preemption.nominations.get(key)
        if nomination is not None and nomination.victims:
            return ""
        if (waiting := self.provisioning.in_flight(key)) is not None:
            return f"; waiting for {waiting}"
        chosen = self.provisioning.wants(key, now)
        if chosen is None:
            return ""
        try:
            if refusal.partial:  # NonStrict: what fits is held already
                held = {binding.pod_uid for binding in refusal.partial}
                sets = pod_sets([pod for pod in request.pending if pod_uid(pod) not in held])
            else:
                sets = await self._pure([request], still_missing, request, self.snapshot)
        except ValueError as exc:
            return f"; no ProvisioningRequest: {exc}"
        return self.provisioning.ask(key, chosen, sets, request.pending)

    def provisioned(self, key: GroupKey) -> None:
        """The gang's requested nodes are there (or its next request is due): decide it in
        the next cycle, whatever its backoff."""
        state = self.queue.waiting.get(key)
        if state is not None:
            state.failures, state.last_failure = 0, None
        self.queue.stale.add(key)
        self.wake()

    def _hold(self, key: GroupKey, refusal: Refusal, now: dt.datetime, before: Hold | None) -> Hold:
        """Book a NonStrict refusal's partial members as the gang's hold."""
        nodes: dict[str, Resources] = {}
        for binding in refusal.partial:
            taken = self.snapshot.pod_request(binding.pod_uid) or {}
            nodes[binding.node] = add_resources(nodes.get(binding.node, {}), taken)
        uids = [binding.pod_uid for binding in refusal.partial]
        return self.holds.book(key, nodes, uids, refusal.undo, now, before=before)

    async def _held_room(self, request: GangRequest, refusal: Refusal) -> str:
        """What a refusal adds when other gangs' NonStrict holds are what stopped the gang:
        `; {cpu: 4} on node-a held by NonStrict gang ns/g until ...` for each (empty if not)."""
        others = self.holds.others(request.key)
        if not others:
            return ""
        own = [binding.pod_uid for binding in refusal.partial]
        found = await self._pure([request], stopped_by, request, self.snapshot, others, own)
        return "".join(f"; {hold.on(nodes)}" for hold, nodes in found)

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
        (`thread`, see `_plan`). After that, the snapshot stays held (`Offload.deciding`) until
        the cycle has booked the outcome (`Offload.decided`): to what came meanwhile, the
        decision and its bookkeeping are one step, as on the event loop."""
        members = sum(len(request.pending) for request in requests)
        cost = decision_cost(requests, pods=self.snapshot.pod_count, nodes=len(self.snapshot))
        if not thread and members < self.thread_members and cost < self.thread_cost_us:
            return call(*args)
        return await self.offload.run(call, *args)

    def _refresh_queue(self, now: dt.datetime) -> dict[GroupKey, QueueEntry]:
        """The waiting groups' entries, with those of stale groups entered again (`_queued`)."""
        return self.queue.refresh(
            lambda key, waiting: self._queued(key, waiting, now),
            lambda key, exc: self._failed(key, exc, now),
        )

    def _queued(self, key: GroupKey, waiting: list[JSON], now: dt.datetime) -> QueueEntry | None:
        """The group's place in this cycle's queue, or None while it waits for an event (no
        PodGroup yet, a finished one, or a gated member: `_gated`). The wait starts here, when
        the group is first queued, whether or not a cycle gets to decide it."""
        if (gated := gated_message(waiting)) is not None:
            self._gated(key, gated)
            return None
        if is_lone_pod(key):
            self.queue.waiting.setdefault(key, WaitState(since=now))
            return self.requests.entry_of_one(key, waiting)
        group = self.parsed.get(key)
        if group is None and (problem := self.parsed.problem(key)) is not None:
            # A spec that does not validate: its members say why they wait, as a refused
            # gang's do, and wait for the fix (a watch event).
            self.signals.refused(key, waiting, f"PodGroup {key[1]}: {problem}")
            self.provisioning.done(key, placed=False)
            return None
        if group is None or _terminal(group):
            # No PodGroup yet (the status reconciler warns the pods), or a finished one: the
            # pods wait for an event, not for a timer.
            return None
        if key not in self.queue.waiting:
            # A wait that began under an earlier leader goes on from when it began; later,
            # this leader sees every wait begin (a wait restored then could predate a restart
            # whose status has not come back yet, and time the new gang out at once).
            since = wait_started(group.status, now) if self.queue.resuming else now
            self.queue.waiting[key] = WaitState(since=since)
        return self.requests.entry(key, waiting, group)

    def _gated(self, key: GroupKey, message: str) -> None:
        """A waiting member has scheduling gates: the gang is not decided, holds nothing and
        waits for the event that removes the last gate (`_on_pod` wakes the loop then).

        Its wait is forgotten, so it neither times out while gated (Kueue may hold a gang for
        hours) nor backs off once ungated: the first cycle after the last gate goes decides
        it. Its PodGroup says why (`SchedulingGated`); the gated pods themselves carry the API
        server's `PodScheduled=False` reason `SchedulingGated`, and are not marked
        `Unschedulable` (cluster-autoscaler would add nodes for them)."""
        self.queue.waiting.pop(key, None)
        self.queue.pod_dependent.discard(key)
        self.reservations.release(key)  # a gated gang is no candidate: it holds no nodes
        if self._release(key) is not None:
            self.queue.retry_all()  # the room its NonStrict hold kept is free for the others
        self.holds.forget(key)
        self.provisioning.done(key, placed=False)
        if not is_lone_pod(key):
            self.publish(
                key, Verdict(placed=False, reason=c.Reason.SCHEDULING_GATED, message=message)
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
        """What the core decides for a queued group (built by `requests`), or None while it
        backs off or waits (unless it is the `partner` of a gang group that is due, refused but
        never failed: `GangGroups.assemble`)."""
        key, group = queued.key, queued.group
        state = self.queue.waiting.setdefault(key, WaitState(since=now))
        if self.queue.leaving_until(key[0], now) is not None:
            return None
        if group is None:  # a pod of no group: a gang of one
            retry = self.backoff.delay(state.failures)
            if state.last_failure is not None and now < state.last_failure + retry:
                return None
            return self.requests.of_one(queued)
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
        return self.requests.of_group(queued, group)

    def _left_to_restart(
        self, key: GroupKey, group: PodGroup | None, state: WaitState, now: dt.datetime
    ) -> dt.datetime | None:
        """Until when a timed-out gang is left to the restart policy (None: decided as usual).

        A Strict gang held partly bound past its timeout, with a RestartGang or FailGang
        policy, is restarted or failed by the status reconciler's restart step
        (controllers/restarts.py, domain/restart.py's `timed_out_at`); for
        RESTART_GRACE_SECONDS after the timeout it is not placed."""
        if state.timed_out_at is None or group is None or not policy_acts(group):
            return None
        until = state.timed_out_at + dt.timedelta(seconds=RESTART_GRACE_SECONDS)
        if now >= until or not self._held_partly(key, group):
            return None
        return until

    def _held_partly(self, key: GroupKey, group: PodGroup) -> int:
        """`restart.held_partly` over the members as this scheduler sees them, so that it
        leaves to the restart plan exactly the gangs the plan restarts."""
        return held_partly(group, count_members(self.members.get(key, [])))

    def _placed(self, placement: Placement) -> None:
        self.queue.waiting.pop(placement.gang, None)
        self.holds.forget(placement.gang)
        self.queue.pod_dependent.discard(placement.gang)
        self.preemption.forget(placement.gang)
        self.provisioning.done(placement.gang, placed=True)
        self.publish(
            placement.gang,
            Verdict(placed=True, placement=placed_in(placement.domain, placement.sub_domains)),
        )
        self.signals.placed(placement.gang)
        bucket = self.queue.pending.get(placement.gang, {})
        for binding in placement.bindings:
            self.queue.in_flight.add(binding.pod_uid)
            self.signals.placing(bucket.get(binding.pod_uid))
        self.queue.stale.add(placement.gang)

    def _failed(self, key: GroupKey, exc: Exception, now: dt.datetime) -> None:
        """Deciding this group raised: back it off, say so in its status (once), go on."""
        state = self.queue.waiting.setdefault(key, WaitState(since=now))
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
        """Record a refusal: backoff, the members' PodScheduled condition and the verdict. A
        quota refusal's verdict ends with the gang's place in its quota's queue; its members'
        message does not, since that place moves with every gang admitted or arriving and each
        move would patch every member."""
        state = self.queue.waiting.setdefault(key, WaitState(since=now))
        state.failures += 1
        state.last_failure = now
        if state.message != message:
            logger.info("gang %s/%s waits: %s", key[0], key[1], truncate(message))
        state.message = message
        members = self.queue.pending.get(key, {}).values()
        if any(depends_on_pods(pod) for pod in members):
            self.queue.pod_dependent.add(key)
        pod_reason = _pod_reason(reason)
        if reason is not c.Reason.NOT_ENOUGH_RESOURCES:
            self.provisioning.done(key, placed=False)  # waits for something nodes do not give
        elif self.provisioning.in_flight(key) is not None:
            pod_reason = c.PodReason.WAITING_FOR_PROVISIONING
        self.signals.refused(key, members, message, pod_reason)
        if reason is c.Reason.WAITING_FOR_QUOTA:
            message += self.quota_queues.position_text(key)
            state.message = message
        if not state.timed_out:
            state.reason = reason
            self.publish(key, Verdict(placed=False, reason=reason, message=message))

    def _ran_seconds(self, key: GroupKey) -> float:
        """How long a PodGroup's gang has run, for quota reclaim's `minRunSeconds`: since the
        last of its running members started. 0 when none is known to run, and for a pod of no
        group (not in the members index): never taken before a `minRunSeconds` passes."""
        members = self.members.get(key, ())
        started = [
            parsed
            for pod in members
            if (pod.get("status") or {}).get("phase") == c.PodPhase.RUNNING
            and (parsed := parse_time((pod.get("status") or {}).get("startTime"))) is not None
        ]
        if not started:
            return 0.0
        return (self.clock() - max(started)).total_seconds()

    def _behind_head(self, key: GroupKey, message: str, now: dt.datetime) -> None:
        """A gang behind the head of its StrictFIFO quota: it says so, and is not backed off
        (it is no failure of its own; it is decided when it is the head)."""
        state = self.queue.waiting.setdefault(key, WaitState(since=now))
        members = self.queue.pending.get(key, {}).values()
        self.signals.refused(key, members, message, c.PodReason.WAITING_FOR_QUOTA)
        message += self.quota_queues.position_text(key)  # the PodGroup's only (`_refused`)
        state.message = message
        if not state.timed_out:
            state.reason = c.Reason.WAITING_FOR_QUOTA
            self.publish(key, Verdict(placed=False, reason=state.reason, message=message))

    # --- what the binder says (`BindOutcomes`) ---------------------------------------------------
    def _bound(self, binding: Binding) -> None:
        """Forget the pod as pending at once: a watch event may lag behind the bind."""
        self.queue.bound_now(binding.pod_uid)

    def _namespace_leaving(self, namespace: str) -> None:
        """A bind refused because `namespace` is being deleted: leave its gangs undecided for a
        while (`GangQueue.leaving`), saying so once, and release the room they reserved."""
        until = self.clock() + dt.timedelta(seconds=LEAVING_RECHECK_SECONDS)
        if self.reservations.release_namespace(namespace):
            self.queue.retry_all()
            self.wake()
        if self.queue.leave(namespace, until):
            logger.info(
                "namespace %s is being deleted: its gangs are not scheduled (a bind there was "
                "refused); checked again in %ds or when a pod is created there",
                namespace,
                LEAVING_RECHECK_SECONDS,
            )

    def _volumes_failed(self, key: GroupKey | None, exc: VolumeBindingError) -> None:
        """The gang's volumes were not bound (its pods un-assumed by the binder): say why in
        its status and ask for a cycle."""
        if key is not None:
            self._refused(key, c.Reason.VOLUME_BINDING_FAILED, str(exc), self.clock())
        self.wake()


def _placement_facts(node: JSON) -> tuple[Any, ...]:
    """The slim node without its resourceVersion (which every heartbeat bumps)."""
    meta = node.get("metadata") or {}
    return (meta.get("labels"), node.get("spec"), node.get("status"))


def _pod_reason(reason: c.Reason) -> c.PodReason:
    """The PodScheduled reason of a gang refused with `reason`: WaitingForQuota when its quota
    holds it back, WaitingForGang while it is short of members, else kube-scheduler's
    Unschedulable. Cluster-autoscaler and Karpenter add nodes for Unschedulable pods only, and
    nodes added for the first two would idle."""
    if reason is c.Reason.WAITING_FOR_QUOTA:
        return c.PodReason.WAITING_FOR_QUOTA
    if reason is c.Reason.NOT_ENOUGH_TASKS:
        return c.PodReason.WAITING_FOR_GANG
    return c.PodReason.UNSCHEDULABLE


def _terminal(group: PodGroup) -> bool:
    return group.status.phase is not None and c.Phase(group.status.phase).terminal


def timeout_of(deadline: dt.datetime, since: dt.datetime) -> int:
    return int((deadline - since).total_seconds())
