"""Queue order of gangs, and the pure timeout and backoff helpers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from podgroup_operator.api.limits import MAX_SECONDS
from podgroup_operator.scheduling.queue import (
    Backoff,
    decide_wait,
    members_priority,
    order_gangs,
    pod_created,
    schedule_deadline,
)
from tests.unit.scheduling.helpers import gang

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_priority_then_creation_then_namespace_name_uid() -> None:
    """A recent refusal does not move a gang back: it keeps the place its creation gives it
    (the old rule, last failure else creation, let later gangs overtake a big gang refused
    while its members arrived, and it starved: issue 61)."""
    low_old = gang("low-old", (), min_member=1, priority=0, created=T0)
    high_new = gang("high-new", (), min_member=1, priority=10, created=T0 + timedelta(hours=1))
    failed_recently = gang(
        "failed",
        (),
        min_member=1,
        created=T0 - timedelta(hours=1),
        last_failure=T0 + timedelta(minutes=5),
    )
    same_time_b = gang("b", (), min_member=1, namespace="ns2", created=T0 + timedelta(minutes=1))
    same_time_a = gang("a", (), min_member=1, namespace="ns2", created=T0 + timedelta(minutes=1))
    other_ns = gang("z", (), min_member=1, namespace="ns1", created=T0 + timedelta(minutes=1))
    ordered = order_gangs([failed_recently, same_time_b, low_old, same_time_a, high_new, other_ns])
    assert [g.name for g in ordered] == ["high-new", "failed", "low-old", "z", "a", "b"]


def test_a_partly_bound_gang_goes_first_among_its_priority() -> None:
    """Its bound members hold room for nothing until the rest is placed; a peer decided first
    could take the room the rest needs. Priority still comes first."""
    old = gang("old", (), min_member=4, created=T0)
    partly = gang(
        "partly",
        (),
        min_member=4,
        already_bound=2,
        created=T0 + timedelta(hours=1),
        last_failure=T0 + timedelta(hours=2),
    )
    whole = gang("whole", (), min_member=4, already_bound=4, created=T0 + timedelta(hours=1))
    high = gang("high", (), min_member=4, priority=10, created=T0 + timedelta(hours=3))
    assert partly.partly_bound and not whole.partly_bound and not old.partly_bound
    ordered = order_gangs([whole, old, partly, high])
    assert [g.name for g in ordered] == ["high", "partly", "old", "whole"]


def test_a_gang_refused_short_of_members_keeps_its_place() -> None:
    """Refused (short of members, or of room) and backing off, the oldest gang still comes
    before every gang created after it, however recent its refusal."""
    big = gang("big", (), min_member=32, created=T0, last_failure=T0 + timedelta(seconds=59))
    small = [
        gang(f"s{i}", (), min_member=1, created=T0 + timedelta(seconds=i + 1)) for i in range(5)
    ]
    assert order_gangs([*small, big])[0].name == "big"


def test_uid_breaks_the_last_tie() -> None:
    first = gang("x", (), min_member=1, created=T0, uid="uid-1")
    second = gang("x", (), min_member=1, created=T0, uid="uid-2")
    assert order_gangs([second, first]) == [first, second]


def test_backoff_doubles_and_is_capped() -> None:
    backoff = Backoff(initial_seconds=2, max_seconds=10)
    delays = [backoff.delay(n).total_seconds() for n in range(6)]
    assert delays == [0, 2, 4, 8, 10, 10]
    assert Backoff(1, 60).delay(10_000) == timedelta(seconds=60)


def test_deadline_uses_the_spec_timeout_else_the_default() -> None:
    assert schedule_deadline(T0, 30, 600) == T0 + timedelta(seconds=30)
    assert schedule_deadline(T0, None, 600) == T0 + timedelta(seconds=600)


def test_decide_wait_times_out_and_schedules_the_next_attempt() -> None:
    backoff = Backoff(initial_seconds=5, max_seconds=60)
    failure = T0 + timedelta(seconds=20)
    waiting = decide_wait(
        wait_started=T0,
        timeout_seconds=60,
        default_timeout_seconds=600,
        failed_attempts=2,
        last_failure=failure,
        now=T0 + timedelta(seconds=25),
        backoff=backoff,
    )
    assert not waiting.timed_out
    assert waiting.next_attempt == failure + timedelta(seconds=10)
    assert not waiting.may_attempt
    later = decide_wait(
        wait_started=T0,
        timeout_seconds=60,
        default_timeout_seconds=600,
        failed_attempts=2,
        last_failure=failure,
        now=T0 + timedelta(seconds=60),
        backoff=backoff,
    )
    assert later.timed_out
    assert later.may_attempt


def test_first_attempt_is_due_at_once() -> None:
    first = decide_wait(
        wait_started=T0,
        timeout_seconds=None,
        default_timeout_seconds=600,
        failed_attempts=0,
        last_failure=None,
        now=T0,
        backoff=Backoff(),
    )
    assert first.may_attempt and not first.timed_out
    assert first.deadline == T0 + timedelta(seconds=600)


def test_a_timeout_stored_before_the_bounds_cannot_overflow_a_cycle() -> None:
    """`scheduleTimeoutSeconds: 300000000000` made every scheduling cycle raise OverflowError
    (a deadline past year 9999); the timeout is clamped to one year before any datetime math."""
    decision = decide_wait(
        wait_started=T0,
        timeout_seconds=300_000_000_000,
        default_timeout_seconds=600,
        failed_attempts=10**6,
        last_failure=T0,
        now=T0,
        backoff=Backoff(initial_seconds=1, max_seconds=1e300),
    )
    assert decision.deadline == T0 + timedelta(seconds=MAX_SECONDS)
    assert decision.next_attempt == T0 + timedelta(seconds=MAX_SECONDS)
    assert not decision.timed_out
    assert schedule_deadline(T0, -5, 600) == T0


# --- a gang of one: its pod's priority and age ---------------------------------------------------


def test_a_groups_priority_is_its_highest_waiting_members() -> None:
    assert members_priority([]) == 0
    assert members_priority([{"spec": {}}]) == 0
    assert members_priority([{"spec": {"priority": 5}}, {"spec": {"priority": 1000}}]) == 1000
    assert members_priority([{"spec": {"priority": -10}}]) == -10


def test_a_pods_creation_time_is_read_timezone_aware() -> None:
    assert pod_created({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}}) == T0
    assert pod_created({"metadata": {}}) is None
    assert pod_created({"metadata": {"creationTimestamp": "yesterday"}}) is None


def test_a_lone_pod_goes_before_a_lower_priority_podgroup_created_earlier() -> None:
    podgroup = gang("pg", (), min_member=3, priority=100, created=T0)
    lone_pod = gang(
        "pod:server",
        ({"spec": {"priority": 1000}},),
        min_member=1,
        priority=members_priority([{"spec": {"priority": 1000}}]),
        created=T0 + timedelta(hours=1),
    )
    assert [g.name for g in order_gangs([podgroup, lone_pod])] == ["pod:server", "pg"]
