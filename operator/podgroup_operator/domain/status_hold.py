"""When a PodGroup status write goes out at once, and when it is held back: pure, no clock.

The status reconciler (controllers/status.py) computes a group's status and asks here whether
the write is held; the answer is `None` (write now) or a `Hold` naming until when, which the
reconciler keeps and wakes the group at. Times are seconds of a monotonic clock the caller
reads; a group's hold clocks (`HoldClocks`) start at the first hold and end at its write.

What is held:
* a group's first status while it would say only `Pending`: until the gang scheduler's word
  (a refusal is written at once), then for a placed gang until its members are bound
  (`binding_delay` from the placement) and started (`starting_wait` from when all were bound);
  a group nobody judges waits `count_delay`;
* progress (a change of COUNTERS only, restating condition messages, `Scheduled` turning True):
  `count_delay` from when it was first seen, or, for a placed gang still `Pending`, as long as
  its first status would;
* any write to a status another writer keeps changing (`contest_hold`), with growing waits.
A phase change, any other condition change, and a status rewrite are never held.

Why each tuning constant below holds what it does: docs/decisions/015-status-write-holds.md.
"""

from __future__ import annotations

import enum
import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from podgroup_operator import constants as c
from podgroup_operator.api.backoff import Backoff
from podgroup_operator.api.models import PodGroupStatus
from podgroup_operator.domain.scheduling_status import Verdict

COUNTERS = frozenset({"scheduled", "running", "succeeded", "failed", "terminating"})
"""Status fields that only count members; a change of these alone is progress."""
COUNT_DELAY_SECONDS = 2.0
"""How long progress, and the first status of a group nobody judges, is held from when it was
first seen: a gang's members bind and start within moments of each other."""
BINDING_DELAY_SECONDS = 60.0
"""The longest a placed gang's first status waits for its members to be bound, from the
placement: under a backlog a placed gang's binds queue behind other gangs'."""
STARTING_DELAY_SECONDS = 10.0
"""How long a bound gang's first status waits for its members to start, from when all were
bound, while gangs lately started faster than this (see `starting_wait`)."""
STARTING_LAG_FACTOR = 2.0
"""When the latest gangs took longer than `STARTING_DELAY_SECONDS` from bound to `Running`, a
bound gang's first status waits this many times their median instead (`starting_wait`)."""
STARTING_LAGS_KEPT = 32
"""How many of the latest gangs' times from bound to `Running` that median is taken over."""
STARTING_DELAY_LONGEST_SECONDS = 30.0
"""The longest a bound gang's first status waits for its members to start, however slowly
gangs start lately."""
CONTESTED_AFTER = 3
"""Writes in a row that found another writer's change of a field we wrote before a status is
called contested (and its writes held, `contest_hold`)."""
CONTESTED_FIRST_SECONDS = 2.0
"""The hold before the first write of a contest; it doubles with each contested write."""
CONTESTED_LONGEST_SECONDS = 300.0
"""The longest hold between two writes of a contested status."""
CONTESTED = Backoff(initial_seconds=CONTESTED_FIRST_SECONDS, max_seconds=CONTESTED_LONGEST_SECONDS)


@dataclass(frozen=True)
class HoldTuning:
    """The delays of one reconciler (tests shorten or lengthen them; 0 `count_delay` holds
    nothing but contested writes)."""

    count_delay: float = COUNT_DELAY_SECONDS
    binding_delay: float = BINDING_DELAY_SECONDS
    starting_delay: float = STARTING_DELAY_SECONDS
    starting_longest: float = STARTING_DELAY_LONGEST_SECONDS


class HoldClock(enum.Enum):
    """Which of a group's clocks times a hold."""

    COUNTS = "counts"
    """From the first hold of the group's current change (or the placement, for a placed gang's
    binds)."""
    BOUND = "bound"
    """From when a placed gang was first seen with minMember members bound."""


@dataclass(frozen=True)
class HoldClocks:
    """A group's running hold clocks: when each started (None: not running)."""

    counts_since: float | None = None
    bound_since: float | None = None

    def since(self, clock: HoldClock) -> float | None:
        return self.counts_since if clock is HoldClock.COUNTS else self.bound_since


@dataclass(frozen=True)
class Hold:
    """The write is held until `until`; `since` is when `clock` started (now, if it was not
    running: the caller starts it)."""

    clock: HoldClock
    since: float
    until: float


def starting_wait(start_lags: Sequence[float], tuning: HoldTuning) -> float:
    """How long a bound gang's first status (or its progress while `Pending`) waits for its
    members to start: `starting_delay`, or STARTING_LAG_FACTOR times the median of
    `start_lags` (the latest gangs' times from bound to `Running`) when that is longer, at most
    `starting_longest`."""
    if not start_lags:
        return tuning.starting_delay
    lately = STARTING_LAG_FACTOR * statistics.median(start_lags)
    return max(tuning.starting_delay, min(lately, tuning.starting_longest))


def held(clock: HoldClock, since: float | None, delay: float, now: float) -> Hold | None:
    """A hold of `delay` on `clock` from `since` (from `now` if it is not running); None once
    it has run out."""
    start = now if since is None else since
    until = start + delay
    return Hold(clock, start, until) if now < until else None


def _pending_hold(
    verdict: Verdict | None,
    bound: bool,
    clocks: HoldClocks,
    now: float,
    tuning: HoldTuning,
    start_lags: Sequence[float],
) -> Hold | None:
    """The hold of a first status, or of a placed `Pending` gang's progress: `count_delay` for
    a group the scheduler never judged, `binding_delay` from the placement while the gang is
    not bound (`bound`: minMember members bound), then `starting_wait` from when it was."""
    if verdict is None:
        return held(HoldClock.COUNTS, clocks.counts_since, tuning.count_delay, now)
    if not bound:
        delay = max(tuning.count_delay, tuning.binding_delay)
        return held(HoldClock.COUNTS, clocks.counts_since, delay, now)
    delay = max(tuning.count_delay, starting_wait(start_lags, tuning))
    return held(HoldClock.BOUND, clocks.bound_since, delay, now)


def first_status_hold(
    written: PodGroupStatus,
    phase: str | None,
    scheduled: int,
    min_member: int,
    verdict: Verdict | None,
    clocks: HoldClocks,
    now: float,
    tuning: HoldTuning,
    start_lags: Sequence[float] = (),
) -> Hold | None:
    """The hold of a group's first status, known from the phase and the bound count it would
    have (`domain.lifecycle.outlook`) before the status is computed in full.

    Held: a group with no status yet whose status would say `Pending`, unless the scheduler
    refused it (a refusal is news). A group with a status is not held here (`change_hold`).
    """
    if not tuning.count_delay or written.phase is not None or phase != c.Phase.PENDING:
        return None
    if verdict is not None and not verdict.placed:
        return None
    return _pending_hold(verdict, scheduled >= min_member, clocks, now, tuning, start_lags)


def only_progress(
    fields: Collection[str], written: PodGroupStatus, computed: PodGroupStatus
) -> bool:
    """The change writes only COUNTERS and conditions, and every condition keeps its status and
    reason (its message may restate the counts) except `Scheduled` turning True."""
    if not set(fields) <= COUNTERS | {"conditions"}:
        return False
    before = {x.type: (x.status, x.reason) for x in written.conditions}
    after = {x.type: (x.status, x.reason) for x in computed.conditions}
    if set(before) - set(after):
        return False
    for kind, state in after.items():
        scheduled = kind == c.ConditionType.SCHEDULED and state[0] == c.ConditionStatus.TRUE
        if before.get(kind) != state and not scheduled:
            return False
    return True


def change_hold(
    fields: Collection[str],
    written: PodGroupStatus,
    computed: PodGroupStatus,
    min_member: int,
    verdict: Verdict | None,
    clocks: HoldClocks,
    now: float,
    tuning: HoldTuning,
    start_lags: Sequence[float] = (),
) -> Hold | None:
    """The hold of a change from `written` to `computed` (`fields`: the top-level status fields
    the patch writes): progress (`only_progress`) waits `count_delay` from when it was first
    seen, or, for a placed gang still `Pending`, as its first status would; any other change is
    written at once."""
    if not tuning.count_delay or not only_progress(fields, written, computed):
        return None
    if written.phase == c.Phase.PENDING and verdict is not None and verdict.placed:
        bound = computed.scheduled >= min_member
        return _pending_hold(verdict, bound, clocks, now, tuning, start_lags)
    return held(HoldClock.COUNTS, clocks.counts_since, tuning.count_delay, now)


def contest_hold(times: int, last_write: float, now: float) -> float | None:
    """Until when a write to a contested status is held: `times` writes in a row found another
    writer's change, the last of them at `last_write`. None (write now) before CONTESTED_AFTER
    such writes, and once the hold, doubling from CONTESTED_FIRST_SECONDS, has run out."""
    if times < CONTESTED_AFTER:
        return None
    until = last_write + CONTESTED.delay(times - CONTESTED_AFTER + 1).total_seconds()
    return until if now < until else None
