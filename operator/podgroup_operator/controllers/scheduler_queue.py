"""The gang scheduler's queue: pending members by group, queue entries, waits and backoff.

Every pending member of ours sits in `pending` by group. Each waiting group has an entry
(`QueueEntry`), kept from cycle to cycle and entered again only when its pods, its binds in
flight or its PodGroup change (`GangQueue.stale`). What the scheduler remembers of a waiting
group (since when it waits, how often it was refused: `WaitState`) lives here, and goes when the
group's last pending member goes. Which groups are due when (backoff, timeouts) is decided by
`scheduling.queue.decide_wait`; the entries are built by controllers/requests.py when the
scheduler queues a group (`GangScheduler._queued`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from podgroup_operator import constants as c
from podgroup_operator.adapters.informers import Index
from podgroup_operator.adapters.kube import JSON
from podgroup_operator.api.keys import GroupKey, pod_uid
from podgroup_operator.api.models import PodGroup
from podgroup_operator.scheduling.gang import GangRequest
from podgroup_operator.scheduling.snapshot import holds_node


@dataclass
class WaitState:
    """How long a group has waited and how often it was refused (memory; status has the rest).

    Everything the scheduler remembers of a waiting group lives here or in the other maps that
    `GangQueue.drop` clears when its last pending member goes: a busy cluster creates and deletes
    groups all day, and memory kept per group ever seen grows without end."""

    since: dt.datetime
    failures: int = 0
    last_failure: dt.datetime | None = None
    timed_out: bool = False
    timed_out_at: dt.datetime | None = None
    """When the group timed out: a Strict gang held partly bound is then left to the restart
    policy for a while (`GangScheduler._left_to_restart`)."""
    reason: c.Reason | None = None
    """The reason the group was last told it waits (`podgroup_waiting_gangs`)."""
    message: str | None = None
    """The last refusal: logged when it changes, quoted when the group times out."""


@dataclass(frozen=True)
class QueueEntry:
    """A waiting group's place in the queue: what ordering reads (`scheduling.queue.Queued`),
    without the group's request.

    Under a backlog a cycle decides what its budget allows and asks for the next cycle at once,
    so building every waiting group's request each cycle would hold the event loop for groups
    it never decides (docs/decisions/011-scheduler-queue-under-a-backlog.md). So the
    entries are kept from cycle to cycle (`GangQueue.refresh`), and a request is built only
    when a cycle comes to decide the group, or a gang group needs its partner's."""

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


class RequestOf(Protocol):
    """A cycle's requests by group (`GangScheduler.cycle`); `partner` builds one whatever the
    group's backoff says, for a gang group that is due (`GangGroups.assemble`)."""

    def __call__(self, key: GroupKey, *, partner: bool = False) -> GangRequest | None: ...


class GangQueue:
    """The pending members, the waiting groups' entries and waits, and the pods in flight."""

    def __init__(self, members: Index, *, gone: Callable[[GroupKey], None]) -> None:
        self.members = members
        """Index view: (namespace, name) -> member pod bodies."""
        self._gone = gone
        """Called when a group's last pending member goes, after its wait is forgotten."""
        self.pending: dict[GroupKey, dict[str, JSON]] = {}
        self.pending_key: dict[str, GroupKey] = {}
        """uid -> the bucket a pending pod sits in (its group may change with its labels)."""
        self.pod_dependent: set[GroupKey] = set()
        """Waiting groups with a member whose placement depends on other pods
        (`scheduling.registry.depends_on_pods`): a pod that arrives bound, or a bound pod
        whose labels change, may let them in (`pods_moved`). kube-scheduler moves
        its unschedulable pods on such an event, into its backoff queue; these likewise become
        due one backoff step (1 s) after their last refusal instead of up to 60 s. Not at once:
        in a cluster where another scheduler binds thousands of pods, every bind is such an
        event, and each would make every such group be decided again."""
        self.in_flight: set[str] = set()
        """Pods placed whose bind is not answered yet (the scheduler adds them, `land` ends
        them)."""
        self.entries: dict[GroupKey, QueueEntry] = {}
        """The waiting groups' queue entries, kept from cycle to cycle (`refresh`)."""
        self.stale: set[GroupKey] = set()
        """Groups whose entry must be built again: their pending members, the members in
        flight or the PodGroup changed since it was built."""
        self.resuming = True
        """Until the first queue is built: the waits found then began under an earlier leader
        (or none), and resume from the status (`domain.scheduling_status.wait_started`)."""
        self.bound: dict[str, GroupKey] = {}
        """Pods we bound whose bound version the watch has not delivered yet: never again."""
        self._bound_by_group: dict[GroupKey, set[str]] = {}
        """`bound` by group, so a request does not scan every pod in flight."""
        self.waiting: dict[GroupKey, WaitState] = {}
        self.leaving: dict[str, dt.datetime] = {}
        """Namespaces being deleted (a bind there was refused so), until when their gangs are
        not decided: the namespace controller deletes a big namespace's pods over seconds, and
        each capacity freed would place its gangs again, each bind refused
        (docs/decisions/011-scheduler-queue-under-a-backlog.md). A pod created there ends it early:
        a namespace being deleted refuses new pods, so it was created again."""

    # --- pending members ------------------------------------------------------------------------
    def add(self, uid: str, key: GroupKey, pod: JSON) -> None:
        """The pod is pending in group `key` (it leaves another group it sat in)."""
        if self.pending_key.get(uid, key) != key:
            self.drop(uid)  # its membership changed: leave the old group's bucket
        self.pending_key[uid] = key
        self.pending.setdefault(key, {})[uid] = pod
        self.stale.add(key)

    def drop(self, uid: str) -> None:
        """The pod is no longer pending; with its group's last pending member, the group's
        wait is forgotten too (`gone`)."""
        key = self.pending_key.pop(uid, None)
        if key is not None:
            self.stale.add(key)
        bucket = self.pending.get(key) if key is not None else None
        if key is not None and bucket is not None:
            bucket.pop(uid, None)
            if not bucket:
                del self.pending[key]
                self.waiting.pop(key, None)
                self.pod_dependent.discard(key)
                self._gone(key)

    def land(self, uid: str) -> None:
        """The pod's bind is answered (or given up): not in flight any more. If it is still
        pending (the bind failed), its group's queue entry gets it back."""
        self.in_flight.discard(uid)
        key = self.pending_key.get(uid)
        if key is not None:
            self.stale.add(key)

    # --- our binds ------------------------------------------------------------------------------
    def bound_now(self, uid: str) -> None:
        """Forget the pod as pending at once: a watch event may lag behind the bind."""
        key = self.pending_key.get(uid)
        if key is not None:
            self.bound[uid] = key
            self._bound_by_group.setdefault(key, set()).add(uid)
        self.drop(uid)

    def forget_bound(self, uid: str) -> None:
        """The watch shows the pod bound (or gone): our own record of the bind is done."""
        key = self.bound.pop(uid, None)
        if key is not None:
            uids = self._bound_by_group.get(key)
            if uids is not None:
                uids.discard(uid)
                if not uids:
                    del self._bound_by_group[key]

    def bound_members(self, key: GroupKey) -> set[str]:
        """UIDs of the group's members holding a node, our own recent binds and those in flight
        included (they count before the watch reports them: no false NotEnoughTasks meanwhile,
        such as a pipelined cycle deciding the members that came after a placement whose binds
        are not answered yet)."""
        bound = {
            pod_uid(m)
            for m in self.members.get(key, [])
            if holds_node(m) and not (m.get("metadata") or {}).get("deletionTimestamp")
        }
        flying = self.pending.get(key, {}).keys() & self.in_flight
        return bound | self._bound_by_group.get(key, set()) | flying

    # --- backoff --------------------------------------------------------------------------------
    def new_member(self, key: GroupKey) -> None:
        """A pod joined the group: it is due one backoff step (1 s) after its last refusal.

        A gang short of pods starts soon after its last pods come, as kube-scheduler tries a new
        pod at once (docs/decisions/011-scheduler-queue-under-a-backlog.md). One step, not none:
        pods arriving one by one retry the gang once a second, not once per pod. A gang group's
        partners backing off are decided with it (`GangGroups.assemble`)."""
        state = self.waiting.get(key)
        if state is not None and state.failures > 1:
            state.failures = 1

    def pods_moved(self) -> None:
        """Other pods' labels or places changed: the `pod_dependent` groups are due one
        backoff step (1 s) after their last refusal."""
        for key in self.pod_dependent:
            state = self.waiting.get(key)
            if state is not None and state.failures > 1:
                state.failures = 1

    def retry_all(self) -> None:
        """Capacity changed: waiting groups may try again now instead of after their backoff."""
        for state in self.waiting.values():
            state.last_failure = None
            state.failures = 0

    # --- namespaces being deleted ---------------------------------------------------------------
    def leave(self, namespace: str, until: dt.datetime) -> bool:
        """Leave `namespace`'s gangs undecided until `until`; whether it was not left before."""
        new = namespace not in self.leaving
        self.leaving[namespace] = until
        return new

    def leaving_until(self, namespace: str, now: dt.datetime) -> dt.datetime | None:
        """Until when `namespace`'s gangs are left undecided (None: they are decided)."""
        until = self.leaving.get(namespace)
        if until is not None and now >= until:
            del self.leaving[namespace]
            return None
        return until

    # --- the entries ----------------------------------------------------------------------------
    def refresh(
        self,
        entry_of: Callable[[GroupKey, list[JSON]], QueueEntry | None],
        failed: Callable[[GroupKey, Exception], None],
    ) -> dict[GroupKey, QueueEntry]:
        """The waiting groups' entries, with those of stale groups entered again (`entry_of`
        their members not in flight; one that raises is `failed` and entered again next time).

        Kept, because entering every waiting group again each cycle would hold the loop for groups
        where nothing changed (docs/decisions/011-scheduler-queue-under-a-backlog.md)."""
        stale, self.stale = self.stale, set()
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
                        entry = entry_of(key, waiting)
                    except Exception as exc:
                        failed(key, exc)
                        self.stale.add(key)  # entered again next cycle, as before
            if entry is None:
                self.entries.pop(key, None)
            else:
                self.entries[key] = entry
        self.resuming = False
        return self.entries
