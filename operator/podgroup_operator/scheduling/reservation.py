"""The head of the queue reserves, later gangs backfill around it (EASY backfilling).

A gang that cannot fit now, the oldest of its priority (`scheduling.queue` order), gets a
*reservation*: the running gangs are taken out of the snapshot in the order their declared run
times end (`RunningGang.ends`), until the gang fits (`place_group(what_if=True)`, with its
topology constraint and sub-groups); the nodes of that placement are held for it from the
estimated start (the latest end among the gangs that hold those nodes). Without this, every node
that frees goes to a smaller, later gang, and a big gang waits until the queue is empty.

A later gang (queue order: lower priority, or the same priority and younger) may be placed on
reserved nodes only when it is sure to be done before the reservation's start: its own
`maxRunSeconds` ends by then (`Reservation.lets_backfill`). A gang without a limit may use only
nodes the reservation does not need. So backfill never delays the head's start: the guarantee of
Slurm's backfill scheduler. A gang earlier in queue order (higher priority) ignores it.

One reservation per priority level (`ReservationBook`); how this grows is in
docs/decisions/027-reservation-and-backfill.md. Everything here is pure: times are passed in,
nothing reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from podgroup_operator.api.keys import GroupKey
from podgroup_operator.scheduling.gang import GangRequest, Placement, Refusal
from podgroup_operator.scheduling.placement import place_group
from podgroup_operator.scheduling.queue import QueueKey, queue_key
from podgroup_operator.scheduling.resources import Resources, pod_requests
from podgroup_operator.scheduling.snapshot import Snapshot, Undo

_NEVER = datetime.max.replace(tzinfo=UTC)
RESERVED_PREFIX = "reserved:"
"""UIDs of the placeholders that take a reserved node's free room (`fence`)."""


def ends_at(start: datetime, seconds: int | None) -> datetime | None:
    """When a gang started at `start` with a limit of `seconds` is done at the latest."""
    return None if seconds is None else start + timedelta(seconds=seconds)


@dataclass(frozen=True)
class RunningGang:
    """A gang holding nodes: its pods' UIDs in the snapshot and when it is done at the latest
    (None: it declares no limit, and may run for ever)."""

    key: GroupKey
    uids: tuple[str, ...]
    ends: datetime | None


@dataclass(frozen=True)
class Reservation:
    """Nodes held for the head gang of a priority level from its estimated `start`.

    `start` None: a gang it waits for declares no limit, so its start is unknown; it then holds
    the nodes as they free for at most the reservation timeout (`ReservationBook.expire`)."""

    gang: GroupKey
    priority: int
    key: QueueKey
    """The holder's queue key: gangs after it in queue order respect the reservation."""
    nodes: frozenset[str]
    start: datetime | None
    made: datetime
    unknown_since: datetime | None = None
    """Since when its start has been unknown without a break (None: it is known)."""

    def lets_backfill(self, ends: datetime | None) -> bool:
        """Whether a gang done by `ends` (None: never known) may use the reserved nodes."""
        return ends is not None and (self.start is None or ends <= self.start)

    def describe(self, now: datetime) -> str:
        """The message's clause: which nodes, from when."""
        nodes = sorted(self.nodes)
        shown = ", ".join(nodes[:8]) + (f" and {len(nodes) - 8} more" if len(nodes) > 8 else "")
        if self.start is None:
            when = (
                "its start is unknown (a gang running there declares no maxRunSeconds), so the "
                "nodes are held only as they free"
            )
        elif self.start <= now:
            when = "estimated start now, as the gangs running there end"
        else:
            # Absolute, never "in N s": a message that changes at every refusal would rewrite
            # the status and every member's condition each time.
            when = f"estimated start {self.start.isoformat(timespec='seconds')}"
        return (
            f"holds a reservation of {len(nodes)} node(s) ({shown}); {when}; later gangs run "
            "there only if their maxRunSeconds ends before that start"
        )


def plan_reservation(
    gang: GangRequest,
    snapshot: Snapshot,
    running: Sequence[RunningGang],
    now: datetime,
) -> Reservation | None:
    """Where and from when `gang` fits if the running gangs end in the order of their limits
    (those without one last); None if it fits nowhere even with every one of them gone.

    The snapshot is left as it was. The running gangs are taken out one by one in end-time order
    (each removal kept, `simulate_removal`) until the cluster's free total could hold the gang
    (a lower bound, `_needs`); from there a what-if placement is tried at counts growing by
    doubling, and the least count that fits is found by bisection between the last that did not
    and the first that did (fitting only grows as more gangs end). So a plan costs one removal
    per running gang it passes and O(log gangs) placements."""
    order = sorted(
        (g for g in running if g.key != gang.key),
        key=lambda g: (g.ends is None, g.ends or _NEVER, g.key),
    )
    undos: list[Undo] = []

    def remove_to(count: int) -> None:
        while len(undos) < count:
            undos.append(snapshot.simulate_removal(order[len(undos)].uids))
        while len(undos) > count:
            undos.pop()()

    def fits() -> frozenset[str] | None:
        outcome = place_group(gang, snapshot, what_if=True)
        if isinstance(outcome, Refusal):
            return None
        outcome.undo()
        return frozenset(b.node for b in outcome.bindings)

    needs = _needs(gang)
    try:
        count = 0
        while count < len(order) and not _could_hold(snapshot.total_free(), needs):
            count += 1
            remove_to(count)
        failed, step = count - 1, 1
        while (nodes := fits()) is None:
            if count == len(order):
                return None
            failed, count = count, min(len(order), count + step)
            step *= 2
            remove_to(count)
        low, high = failed + 1, count
        while low < high:
            middle = (low + high) // 2
            remove_to(middle)
            if fits() is not None:
                high = middle
            else:
                low = middle + 1
        remove_to(high)
        nodes = fits()
        assert nodes is not None
    finally:
        remove_to(0)
    start: datetime | None = now
    for running_gang in order[:high]:
        on_nodes = any(
            (entry := snapshot.pod(uid)) is not None and entry.node in nodes
            for uid in running_gang.uids
        )
        if not on_nodes:
            continue
        if running_gang.ends is None:
            start = None
            break
        assert start is not None
        start = max(start, running_gang.ends)
    return Reservation(
        gang=gang.key,
        priority=gang.priority,
        key=queue_key(gang),
        nodes=nodes,
        start=start,
        made=now,
        unknown_since=now if start is None else None,
    )


def _needs(gang: GangRequest) -> Resources:
    """A lower bound of what the gang needs in all: per resource, the smallest requests of as
    many pending members as it lacks."""
    lacking = 1 if gang.satisfied_before else max(0, gang.min_member - gang.already_bound)
    requests = [pod_requests(pod) for pod in gang.pending]
    names = {name for request in requests for name in request}
    return {
        name: sum(sorted(request.get(name, 0) for request in requests)[:lacking]) for name in names
    }


def _could_hold(free: Resources, needs: Resources) -> bool:
    return all(free.get(name, 0) >= amount for name, amount in needs.items())


def fence(snapshot: Snapshot, nodes: Iterable[str]) -> Undo:
    """Take the free room of `nodes` with placeholders until the returned undo: a gang that
    may not backfill is placed as if those nodes were full. O(nodes)."""
    bindings = []
    for node in nodes:
        if node not in snapshot.nodes:
            continue
        free = {name: amount for name, amount in snapshot.free(node).items() if amount > 0}
        if free:
            bindings.append((f"{RESERVED_PREFIX}{node}", node, free))
    return snapshot.assume(bindings) if bindings else _noop


def _noop() -> None:
    return None


@dataclass(frozen=True)
class Backfill:
    """A gang placed on reserved nodes because it ends before the reservation's start."""

    reservation: Reservation
    nodes: frozenset[str]

    def describe(self, ends: datetime) -> str:
        start = self.reservation.start
        before = "its start is unknown" if start is None else start.isoformat(timespec="seconds")
        holder = "/".join(self.reservation.gang)
        return (
            f"placed on {len(self.nodes)} node(s) reserved for {holder} "
            f"({', '.join(sorted(self.nodes)[:8])}) because its maxRunSeconds ends at "
            f"{ends.isoformat(timespec='seconds')}, before that gang's estimated start "
            f"({before})"
        )


@dataclass
class ReservationBook:
    """The reservations held, one per priority level, and the gangs whose reservation of
    unknown start timed out (they reserve again only with a known start)."""

    by_priority: dict[int, Reservation] = field(default_factory=dict)
    expired: set[GroupKey] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.by_priority)

    def of(self, gang: GroupKey) -> Reservation | None:
        return next((r for r in self.by_priority.values() if r.gang == gang), None)

    def restricting(self, key: QueueKey) -> list[Reservation]:
        """The reservations a gang with queue key `key` must respect: those of gangs before it
        in queue order (a higher-priority gang, or an older one, is never held back)."""
        return [r for r in self.by_priority.values() if r.key < key]

    def place(
        self,
        gang: GangRequest,
        snapshot: Snapshot,
        ends: datetime | None,
        place: Callable[[GangRequest, Snapshot], Placement | Refusal] = place_group,
    ) -> tuple[Placement | Refusal, list[Backfill], bool]:
        """`place_group`, keeping off the reserved nodes a gang may not backfill.

        The placement is made as usual and checked per node at the end (a placement off the
        reserved nodes costs nothing more); one that lands on nodes of a reservation it may not
        use is undone and made again with those nodes fenced (`fence`). `place` is
        `place_group` (the caller's, so that it may be wrapped). Returns the outcome
        the reservations it backfills, and whether it was refused only because of the fence
        (no preemption helps it then: the room is reserved, not taken)."""
        restricting = self.restricting(queue_key(gang)) if self.by_priority else []
        outcome = place(gang, snapshot)
        if not restricting or not isinstance(outcome, Placement):
            return outcome, [], False
        used = {b.node for b in outcome.bindings}
        barred = [r for r in restricting if not r.lets_backfill(ends) and r.nodes & used]
        if barred:
            outcome.undo()
            undo = fence(snapshot, frozenset().union(*(r.nodes for r in barred)))
            try:
                outcome = place(gang, snapshot)
            finally:
                undo()
            if not isinstance(outcome, Placement):
                return _reserved_refusal(outcome, barred), [], True
            used = {b.node for b in outcome.bindings}
        backfills = [
            Backfill(r, frozenset(r.nodes & used))
            for r in restricting
            if r.nodes & used and r.lets_backfill(ends)
        ]
        return outcome, backfills, False

    def may_reserve(self, gang: GangRequest) -> bool:
        """Whether a refusal of `gang` may give it the reservation of its priority: no older
        gang of its priority holds it (so a busy queue plans once per priority, not per gang)."""
        held = self.by_priority.get(gang.priority)
        return held is None or not held.key < queue_key(gang)

    def refused(
        self,
        gang: GangRequest,
        snapshot: Snapshot,
        running: Sequence[RunningGang],
        now: datetime,
    ) -> Reservation | None:
        """A gang was refused for room: it reserves if it is the head of its priority (no older
        gang of its priority holds one). Returns its reservation, if it holds one now."""
        if not self.may_reserve(gang):
            return None
        return self.adopt(gang, plan_reservation(gang, snapshot, running, now))

    def adopt(self, gang: GangRequest, planned: Reservation | None) -> Reservation | None:
        """Book `planned` (`plan_reservation` for `gang`, which `may_reserve`) as the
        reservation of its priority; None drops the one it held. A start still unknown keeps
        counting from when it first was; a gang whose unknown start timed out (`expire`)
        reserves again only with a known start."""
        held = self.by_priority.get(gang.priority)
        if planned is not None and planned.start is None:
            if gang.key in self.expired:
                planned = None
            elif held is not None and held.gang == gang.key and held.unknown_since is not None:
                planned = replace(planned, unknown_since=held.unknown_since)
        elif planned is not None:
            self.expired.discard(gang.key)
        if planned is None:
            if held is not None and held.gang == gang.key:
                del self.by_priority[gang.priority]
            return None
        self.by_priority[gang.priority] = planned
        return planned

    def release(self, gang: GroupKey) -> Reservation | None:
        """The gang was placed, went, or is no candidate (short of members): its reservation
        goes."""
        for priority, reservation in list(self.by_priority.items()):
            if reservation.gang == gang:
                del self.by_priority[priority]
                return reservation
        return None

    def forget(self, gang: GroupKey) -> None:
        """The gang went: nothing of it is kept."""
        self.release(gang)
        self.expired.discard(gang)

    def expire(self, now: datetime, timeout: timedelta) -> list[Reservation]:
        """Release the reservations whose start has been unknown for `timeout` (nothing running
        on their nodes will finish): their holders wait as any gang, and reserve again only
        with a known start. Returns those released."""
        gone = [
            r
            for r in self.by_priority.values()
            if r.unknown_since is not None and now - r.unknown_since >= timeout
        ]
        for reservation in gone:
            del self.by_priority[reservation.priority]
            self.expired.add(reservation.gang)
        return gone


def _reserved_refusal(refusal: Refusal, barred: Sequence[Reservation]) -> Refusal:
    holders = ", ".join("/".join(r.gang) for r in barred)
    message = (
        f"{refusal.message}; the nodes reserved for {holders} are not used: it declares no "
        "maxRunSeconds that ends before that gang's estimated start"
    )
    return replace(refusal, message=message)
