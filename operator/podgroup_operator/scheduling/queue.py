"""Which gang is decided next, and when a waiting gang gives up or may try again.

Order matters for fairness and for deadlock: if members of two gangs were interleaved, each
could take half the room and neither would ever be whole. So the queue orders *groups* (as
scheduler-plugins' coscheduling `Less` does): higher priority first, then groups partly bound
(see below), then the group's creation time, then namespace, name and UID to make the order total
and deterministic. A group's members are always handed out together.

A gang keeps its place: a refusal, a backoff, a missing member or a restart of the operator
never moves it back (its creation time comes from the API objects). Ordering by the last failure
let every later gang overtake a big gang refused while its members were still arriving, and it
then starved (docs/decisions/027-reservation-and-backfill.md). Backoff still decides *when* a
refused gang is tried again (`decide_wait`); only the order is by age.

Partly bound groups go first among their priority: some members hold nodes while the group is
short of minMember (an operator killed in the middle of a gang's binds, a member bound by someone
else, a lost member's replacement). What they hold is wasted until the rest is placed, so
placing the rest first is the cheapest way out; decided by their age instead, a peer could take
the room the rest needs, and the group would hold its part of the cluster for nothing.
(Volcano's gang plugin, likewise, orders jobs short of minAvailable ahead of those that have
it.) A partly bound group that is refused backs off like any other, so it never holds up the
queue.

Timeouts and backoff are pure functions of times passed in; nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

from podgroup_operator.api.backoff import Backoff
from podgroup_operator.api.limits import clamp_seconds
from podgroup_operator.api.times import parse_time
from podgroup_operator.scheduling.podinfo import pod_priority

_NEVER = datetime.max.replace(tzinfo=UTC)


class Queued(Protocol):
    """What ordering reads from a group; `GangRequest` has it, and so can the caller's types."""

    @property
    def priority(self) -> int: ...
    @property
    def created(self) -> datetime | None: ...
    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def partly_bound(self) -> bool: ...


QueueKey = tuple[int, bool, datetime, str, str, str]
Q = TypeVar("Q", bound=Queued)


def queue_key(gang: Queued) -> QueueKey:
    """Sort key: priority (high first), partly bound first, creation (early first), ns, name, uid.

    Times must be timezone-aware; a group without a creation time sorts after every dated
    group. No failure time is read: a refusal never costs a gang its place.
    """
    since = gang.created or _NEVER
    return (-gang.priority, not gang.partly_bound, since, gang.namespace, gang.name, gang.uid)


def order_gangs(gangs: Iterable[Q]) -> list[Q]:
    """The gangs in the order they should be decided."""
    return sorted(gangs, key=queue_key)


def members_priority(pods: Iterable[Mapping[str, Any]]) -> int:
    """A group's priority in the queue: the highest `spec.priority` among its waiting members
    (0 for none). A pod outside any gang is a gang of one, with its own pod's priority."""
    return max((pod_priority(pod) for pod in pods), default=0)


def pod_created(pod: Mapping[str, Any]) -> datetime | None:
    """The pod's `metadata.creationTimestamp` (a gang of one is queued by its pod's age), or
    None when absent or not a timestamp."""
    value = (pod.get("metadata") or {}).get("creationTimestamp")
    if isinstance(value, datetime):
        return value
    return parse_time(value)


# --- timeout and backoff -------------------------------------------------------------------------
def schedule_deadline(
    wait_started: datetime, timeout_seconds: int | None, default_timeout_seconds: int
) -> datetime:
    """When a gang that started waiting at `wait_started` times out (spec value, else default).

    The timeout is clamped to one year (MAX_SECONDS): a group stored before the CRD had bounds
    (`scheduleTimeoutSeconds: 300000000000`) once made every cycle raise OverflowError here.
    """
    seconds = timeout_seconds if timeout_seconds is not None else default_timeout_seconds
    return wait_started + timedelta(seconds=clamp_seconds(seconds))


@dataclass(frozen=True)
class WaitDecision:
    """Where a waiting gang stands at `now`."""

    timed_out: bool
    """`scheduleTimeoutSeconds` passed: report ScheduleTimeout and release what is held."""
    deadline: datetime
    next_attempt: datetime
    """Earliest time the next placement attempt may run."""
    may_attempt: bool
    """`now` has reached `next_attempt`."""


def decide_wait(
    *,
    wait_started: datetime,
    timeout_seconds: int | None,
    default_timeout_seconds: int,
    failed_attempts: int,
    last_failure: datetime | None,
    now: datetime,
    backoff: Backoff,
) -> WaitDecision:
    """Timed out or not, and when to try next: backoff counts from the last failure.

    Without a failure yet, the next attempt is due at once (`wait_started`).
    """
    deadline = schedule_deadline(wait_started, timeout_seconds, default_timeout_seconds)
    base = last_failure or wait_started
    next_attempt = base + backoff.delay(failed_attempts)
    return WaitDecision(
        timed_out=now >= deadline,
        deadline=deadline,
        next_attempt=next_attempt,
        may_attempt=now >= next_attempt,
    )
