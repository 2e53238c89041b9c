"""Who leads: the decisions of leader election on a Lease, as pure functions of what was read.

A Lease, because several replicas serve the admission webhooks, but only one may schedule, write
status and restart gangs, or two schedulers would bind the same capacity twice. The replicas
agree through a `coordination.k8s.io/v1` Lease, written with a resourceVersion precondition, in
the shape client-go's `tools/leaderelection` uses (so `kubectl describe lease` reads the same):

* a candidate takes the lease when nobody holds it, or when the holder has not renewed it for
  `leaseDurationSeconds` *as observed on the candidate's own clock* since the record last
  changed (clocks of different machines are never compared, as in client-go);
* the holder renews it every retry period and gives up leading when it could not renew within
  its renew deadline, which is shorter than the lease, so it stops before anyone else can start;
* a holder that stops cleanly releases the lease (no holder, one-second duration), so another
  replica takes over at its next retry instead of after the whole lease.

Nothing here reads a clock or talks to the API server: `controllers/leader.py` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from podgroup_operator.api.times import parse_time, rfc3339_micro

MAX_TRANSITIONS = 2**31 - 1
"""`leaseTransitions` is an int32: the count after this one starts again from 0, so a Lease left
at the top (by hand, or by a tool gone wrong) never makes a take-over write 2^31, which the API
server refuses (`ReadInt32: overflow`)."""

LONGEST_LEASE_SECONDS = 300
"""The longest `leaseDurationSeconds` of another holder this candidate believes: a record stays
its holder's for that long after it last changed, and one written with 2^31-1 would keep every
replica waiting 68 years. A live holder renews every few
seconds, so this only cuts short the wait for a holder that stopped: 5 minutes at most."""


class Step(StrEnum):
    ACQUIRE = "acquire"
    """Write `record`: we take the lease (it was free, ours after a restart, or expired)."""
    RENEW = "renew"
    """Write `record`: we hold the lease and extend it."""
    WAIT = "wait"
    """Another replica holds a live lease: try again after the retry period."""


@dataclass(frozen=True)
class LeaseRecord:
    """The fields of `Lease.spec` that election reads and writes."""

    holder: str = ""
    lease_seconds: int = 15
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    transitions: int = 0

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any] | None) -> LeaseRecord:
        spec = spec or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=parse_time(spec.get("acquireTime")),
            renew_time=parse_time(spec.get("renewTime")),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_seconds,
            "acquireTime": _format(self.acquire_time),
            "renewTime": _format(self.renew_time),
            "leaseTransitions": self.transitions,
        }


@dataclass(frozen=True)
class Decision:
    step: Step
    record: LeaseRecord | None = None
    """What to write for ACQUIRE and RENEW."""


def decide(
    current: LeaseRecord | None,
    identity: str,
    *,
    now: datetime,
    observed_at: datetime | None,
    lease_seconds: int,
    longest_lease_seconds: int = LONGEST_LEASE_SECONDS,
) -> Decision:
    """What `identity` does with the lease it just read.

    `current` is None when no Lease exists. `observed_at` is when this candidate last saw the
    record change (its own clock); `now` is the same clock's current reading. Another holder's lease
    is believed for at most `longest_lease_seconds` (see LONGEST_LEASE_SECONDS).
    """
    if current is None:
        return Decision(Step.ACQUIRE, LeaseRecord(identity, lease_seconds, now, now, 0))
    if current.holder == identity:
        return Decision(
            Step.RENEW,
            replace(
                current,
                lease_seconds=lease_seconds,
                renew_time=now,
                acquire_time=current.acquire_time or now,
            ),
        )
    believed = min(max(current.lease_seconds, 1), longest_lease_seconds)
    expired = (
        not current.holder
        or observed_at is None
        or now >= observed_at + timedelta(seconds=believed)
    )
    if not expired:
        return Decision(Step.WAIT)
    transitions = current.transitions + 1 if 0 <= current.transitions < MAX_TRANSITIONS else 0
    return Decision(Step.ACQUIRE, LeaseRecord(identity, lease_seconds, now, now, transitions))


def released(current: LeaseRecord, now: datetime) -> LeaseRecord:
    """The record a leader writes when it stops cleanly: free at once for the others."""
    return replace(current, holder="", lease_seconds=1, renew_time=now, acquire_time=now)


def _format(value: datetime | None) -> str | None:
    return None if value is None else rfc3339_micro(value)
