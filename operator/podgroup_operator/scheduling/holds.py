"""NonStrict holds: what a NonStrict gang keeps booked while it waits, for how long, and when
it may hold again.

A refused NonStrict gang keeps the members that fitted assumed in the snapshot, never bound
(`placement.place_group`), so that it gathers room across cycles. Unbounded, a hold keeps every
other gang off that room for as long as the gang waits (its scheduleTimeoutSeconds may be a
year), and two half-fitting NonStrict gangs hold each other off. So `Holds` keeps these rules:

- a hold lasts at most `cap` from when it began, however often its gang is decided meanwhile
  (each decision releases the hold and books it afresh, keeping when it began);
- past the cap the hold is released (`expire`) and the gang rests: it holds nothing, decided as
  a Strict gang, until every other gang waiting at the release has been decided since (placed,
  refused or gone), so those take the freed room first; or one cap later at the latest, so a
  gang that cannot be decided (its namespace being deleted) never keeps it from holding again;
- so of two gangs holding each other off, the one whose hold ends second is decided with the
  other's room free: it is placed if it fits at all, and neither waits for ever.

Pure: the caller gives the time (`now`) and the snapshot's undo of each hold.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from podgroup_operator.api.keys import GroupKey
from podgroup_operator.api.times import rfc3339
from podgroup_operator.constants import GangMode
from podgroup_operator.scheduling.gang import GangRequest, Placement
from podgroup_operator.scheduling.placement import place_group
from podgroup_operator.scheduling.resources import Resources, format_resources
from podgroup_operator.scheduling.snapshot import Snapshot, Undo

MAX_NAMED_NODES = 8
"""A hold's message names at most this many nodes and counts the rest (a message is published
on the group and on each of its pods)."""


@dataclass(frozen=True)
class Hold:
    """One NonStrict gang's members held in the snapshot: on which nodes, how much on each,
    since when and until when at the latest."""

    gang: GroupKey
    since: dt.datetime
    until: dt.datetime
    nodes: tuple[tuple[str, Resources], ...]
    """(node, what the held members take there), by node name."""
    uids: frozenset[str]
    """The held members' UIDs (assumed in the snapshot, never bound)."""
    undo: Undo = field(compare=False, repr=False)

    @property
    def label(self) -> str:
        return f"{self.gang[0]}/{self.gang[1]}"

    def describe(self) -> str:
        """`holds 2 member(s) on node-a, node-b until 2026-03-01T12:00:30Z`: the holder's line."""
        names = [node for node, _ in self.nodes]
        shown = ", ".join(names[:MAX_NAMED_NODES])
        if len(names) > MAX_NAMED_NODES:
            shown += f" and {len(names) - MAX_NAMED_NODES} more node(s)"
        return f"holds {len(self.uids)} member(s) on {shown} until {rfc3339(self.until)}"

    def on(self, nodes: Iterable[str]) -> str:
        """`{cpu: 4} on node-a held by NonStrict gang ns/g until ...`: what another gang's
        refusal says of this hold on `nodes` (those it would have used)."""
        wanted = set(nodes)
        parts = [
            f"{format_resources(taken)} on {node}" for node, taken in self.nodes if node in wanted
        ]
        shown = ", ".join(parts[:MAX_NAMED_NODES])
        if len(parts) > MAX_NAMED_NODES:
            shown += f" and {len(parts) - MAX_NAMED_NODES} more node(s)"
        return f"{shown} held by NonStrict gang {self.label} until {rfc3339(self.until)}"


@dataclass
class _Rest:
    """A gang whose hold reached the cap: it holds nothing until `owed` have been decided, or
    until `until`."""

    owed: set[GroupKey]
    until: dt.datetime


class Holds:
    """The NonStrict holds of one scheduler and the gangs resting after one (module docstring).

    `cap_seconds` bounds every hold; the scheduler's `run --nonstrict-hold-seconds`."""

    def __init__(self, cap_seconds: float) -> None:
        if cap_seconds <= 0:
            raise ValueError(f"a NonStrict hold cap must be positive seconds; got {cap_seconds}")
        self.cap = dt.timedelta(seconds=cap_seconds)
        self.held: dict[GroupKey, Hold] = {}
        self.resting: dict[GroupKey, _Rest] = {}

    def __contains__(self, key: object) -> bool:
        return key in self.held

    def take(self, key: GroupKey) -> Hold | None:
        """Release the gang's hold (if any) and return it: its decision starts afresh, and a
        hold it books again keeps the released one's start (`book`)."""
        hold = self.held.pop(key, None)
        if hold is not None:
            hold.undo()
        return hold

    def may_hold(self, key: GroupKey, now: dt.datetime) -> bool:
        """Whether the gang may hold now: not resting, or its rest is over."""
        rest = self.resting.get(key)
        if rest is None:
            return True
        if rest.owed and now < rest.until:
            return False
        del self.resting[key]
        return True

    def book(
        self,
        key: GroupKey,
        nodes: Mapping[str, Resources],
        uids: Iterable[str],
        undo: Undo,
        now: dt.datetime,
        *,
        before: Hold | None = None,
    ) -> Hold:
        """Record a hold the snapshot booked (`undo` releases it). It began when `before`, the
        gang's hold released for this decision, began, else now; it ends a cap after that."""
        since = before.since if before is not None else now
        hold = Hold(
            gang=key,
            since=since,
            until=since + self.cap,
            nodes=tuple(sorted(nodes.items())),
            uids=frozenset(uids),
            undo=undo,
        )
        self.held[key] = hold
        return hold

    def expire(self, now: dt.datetime, waiting: Iterable[GroupKey]) -> list[Hold]:
        """Release the holds past their cap; each gang rests until the other `waiting` gangs
        have been decided. Returns the holds released."""
        due = [hold for hold in self.held.values() if hold.until <= now]
        if not due:
            return []
        others = set(waiting)
        for hold in due:
            self.take(hold.gang)
            self.resting[hold.gang] = _Rest(owed=others - {hold.gang}, until=now + self.cap)
        return due

    def decided(self, keys: Iterable[GroupKey]) -> None:
        """These gangs were decided (or went): resting gangs no longer wait for them."""
        if not self.resting:
            return
        done = set(keys)
        for rest in self.resting.values():
            rest.owed -= done

    def forget(self, key: GroupKey) -> None:
        """The gang was placed or went: release its hold and forget its rest."""
        self.take(key)
        self.resting.pop(key, None)
        self.decided((key,))

    def next_expiry(self) -> dt.datetime | None:
        """When the next hold reaches its cap (None: nothing held)."""
        return min((hold.until for hold in self.held.values()), default=None)

    def others(self, key: GroupKey) -> list[Hold]:
        """The holds of gangs other than `key`."""
        return [hold for gang, hold in self.held.items() if gang != key]


def stopped_by(
    gang: GangRequest, snapshot: Snapshot, holds: Sequence[Hold], own: Iterable[str] = ()
) -> list[tuple[Hold, frozenset[str]]]:
    """The `holds` without which the refused `gang` would have been placed, each with the nodes
    it holds room on that the gang would have used: what the gang's refusal names. Empty when
    the holds are not what stopped it.

    A what-if on the snapshot, left as it was: the holds' members and the gang's own members
    held for it (`own`) are taken out, the gang is placed whole (as Strict), and all is put back.
    """
    if not holds:
        return []
    removed = [uid for hold in holds for uid in hold.uids]
    restore = snapshot.simulate_removal([*removed, *own])
    try:
        strict = dataclasses.replace(gang, mode=GangMode.STRICT)
        outcome = place_group(strict, snapshot)
        if not isinstance(outcome, Placement):
            return []
        outcome.undo()
        used = {binding.node for binding in outcome.bindings}
        found = []
        for hold in holds:
            nodes = used.intersection(node for node, _ in hold.nodes)
            if nodes:
                found.append((hold, frozenset(nodes)))
        return found
    finally:
        restore()
