"""Leader election: the pure decisions, and the elector over the in-memory API server."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podgroup_operator.adapters.kube import LEASES, KubeClient, Transport
from podgroup_operator.controllers.leader import LeaderElector, Timing
from podgroup_operator.domain.leadership import (
    LONGEST_LEASE_SECONDS,
    MAX_TRANSITIONS,
    LeaseRecord,
    Step,
    decide,
    released,
)
from tests.clock import T0, Clock
from tests.fakes import FakeApiServer, Fault, FaultyTransport

NS, NAME = "kube-system", "podgroup-operator-leader"


def held_by(holder: str, transitions: int = 0) -> LeaseRecord:
    return LeaseRecord(holder, 15, T0, T0, transitions)


def test_no_lease_is_taken() -> None:
    decision = decide(None, "a", now=T0, observed_at=None, lease_seconds=15)
    assert decision.step is Step.ACQUIRE and decision.record == LeaseRecord("a", 15, T0, T0, 0)


def test_our_own_lease_is_renewed_and_keeps_its_acquire_time() -> None:
    later = T0 + dt.timedelta(seconds=5)
    decision = decide(held_by("a"), "a", now=later, observed_at=T0, lease_seconds=15)
    assert decision.step is Step.RENEW
    assert decision.record is not None
    assert (decision.record.acquire_time, decision.record.renew_time) == (T0, later)


@given(st.integers(min_value=0, max_value=14_999))
def test_a_live_lease_of_another_holder_is_waited_for(elapsed_ms: int) -> None:
    now = T0 + dt.timedelta(milliseconds=elapsed_ms)
    assert decide(held_by("a"), "b", now=now, observed_at=T0, lease_seconds=15).step is Step.WAIT


@given(st.integers(min_value=15_000, max_value=10**9))
def test_a_lease_unchanged_for_its_duration_is_taken_with_one_more_transition(
    elapsed_ms: int,
) -> None:
    now = T0 + dt.timedelta(milliseconds=elapsed_ms)
    decision = decide(held_by("a", 3), "b", now=now, observed_at=T0, lease_seconds=15)
    assert decision.step is Step.ACQUIRE
    assert decision.record is not None
    assert (decision.record.holder, decision.record.transitions) == ("b", 4)


def test_expiry_is_judged_on_our_clock_from_when_we_saw_the_record_change() -> None:
    """The holder's renewTime may come from a clock far ahead: it is never compared to ours."""
    skewed = LeaseRecord("a", 15, T0, T0 + dt.timedelta(hours=1), 0)
    seen = T0 + dt.timedelta(seconds=100)
    now = seen + dt.timedelta(seconds=14)
    assert decide(skewed, "b", now=now, observed_at=seen, lease_seconds=15).step is Step.WAIT


def test_another_holders_lease_is_believed_for_at_most_the_longest_lease() -> None:
    """A record written with 2^31-1 seconds would otherwise be waited out for 68 years."""
    overlong = LeaseRecord("stale", 2**31 - 1, T0, T0, 3)
    seen = T0 + dt.timedelta(seconds=5)

    def at(seconds: float) -> Step:
        now = seen + dt.timedelta(seconds=seconds)
        return decide(overlong, "a", now=now, observed_at=seen, lease_seconds=15).step

    assert at(LONGEST_LEASE_SECONDS - 0.001) is Step.WAIT
    assert at(LONGEST_LEASE_SECONDS) is Step.ACQUIRE
    short = decide(
        overlong,
        "a",
        now=seen + dt.timedelta(seconds=4),
        observed_at=seen,
        lease_seconds=15,
        longest_lease_seconds=4,
    )
    assert short.step is Step.ACQUIRE and short.record is not None
    assert short.record.transitions == 4


@pytest.mark.parametrize(("left", "written"), [(MAX_TRANSITIONS, 0), (-3, 0), (41, 42)])
def test_transitions_start_again_from_zero_past_what_an_int32_holds(
    left: int, written: int
) -> None:
    """The API server refuses 2^31 (`ReadInt32: overflow`): every take-over failed."""
    expired = LeaseRecord("stale", 1, T0, T0, left)
    later = T0 + dt.timedelta(seconds=2)
    decision = decide(expired, "a", now=later, observed_at=T0, lease_seconds=15)
    assert decision.step is Step.ACQUIRE and decision.record is not None
    assert decision.record.transitions == written


def test_a_released_lease_is_free_at_once() -> None:
    free = released(held_by("a"), T0)
    assert free.holder == ""
    assert decide(free, "b", now=T0, observed_at=T0, lease_seconds=15).step is Step.ACQUIRE


def test_the_record_round_trips_through_the_lease_spec() -> None:
    record = LeaseRecord("a", 15, T0, T0 + dt.timedelta(microseconds=5), 2)
    assert LeaseRecord.from_spec(record.to_spec()) == record


# --- the elector over the fake API server ---------------------------------------------------------
# Its waits (retries, deadlines, each attempt's budget) run on the test's clock: `run_until`
# moves it on a retry period at a time and lets the electors run between steps.
FAST = Timing(lease_seconds=1, renew_deadline_seconds=0.6, retry_seconds=0.05)


class Recorder:
    def __init__(self) -> None:
        self.started = 0
        self.stopped = 0

    async def on_started(self) -> None:
        self.started += 1

    async def on_stopped(self) -> None:
        self.stopped += 1


def elector(
    transport: Transport, identity: str, clock: Clock, timing: Timing = FAST
) -> LeaderElector:
    return LeaderElector(
        KubeClient(transport),
        namespace=NS,
        name=NAME,
        identity=identity,
        timing=timing,
        clock=clock,
        monotonic=clock.monotonic,
    )


async def turns(rounds: int = 100) -> None:
    """Let the electors run: yield to the loop (never sleep)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


async def run_until(
    clock: Clock, check: Callable[[], object], what: str, *, within: float
) -> float:
    """Let the electors run, moving the clock on a retry period at a time, until `check()`
    holds; fail if it does not within `within` seconds of the clock. The seconds it took."""
    start = clock.monotonic.now()
    while True:
        await turns()
        took = clock.monotonic.now() - start
        if check():
            return took
        if took >= within:
            raise AssertionError(f"{what}: not within {within}s")
        clock.advance(FAST.retry_seconds)


def lease_holder(api: FakeApiServer) -> str:
    stored = api.get_object(LEASES, NAME, NS)
    assert stored is not None
    return str(stored["spec"]["holderIdentity"])


def running(elector: LeaderElector, record: Recorder) -> asyncio.Task[None]:
    return asyncio.create_task(elector.run(record.on_started, record.on_stopped))


async def stopped(*tasks: asyncio.Task[None]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_of_two_electors_exactly_one_leads_and_a_release_hands_over_at_once() -> None:
    clock, api = Clock(), FakeApiServer()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    ra, rb = Recorder(), Recorder()
    tasks = [running(a, ra), running(b, rb)]
    try:
        await run_until(
            clock, lambda: a.leading.is_set() or b.leading.is_set(), "a leader", within=0
        )
        leader, follower = (a, b) if a.leading.is_set() else (b, a)
        assert not follower.leading.is_set()
        # The follower keeps reading a live lease: a few of its reads, then check.
        reads = api.count("GET", f"/leases/{NAME}")
        await run_until(
            clock,
            lambda: api.count("GET", f"/leases/{NAME}") >= reads + 6,
            "the follower's reads",
            within=FAST.lease_seconds,
        )
        assert leader.leading.is_set() and not follower.leading.is_set()
        assert lease_holder(api) == leader.identity

        await leader.release()
        # Released: the follower takes over long before the lease would end.
        await run_until(
            clock, follower.leading.is_set, "the follower to lead", within=FAST.lease_seconds * 0.9
        )
    finally:
        await stopped(*tasks)


async def test_a_candidate_sees_a_release_without_waiting_for_its_next_read() -> None:
    """Its reads every retry period took the lease over 1.6 s after a release under a bind
    burst (`bench scale --failover term`); the candidate's watch wakes it at the release."""
    slow = Timing(lease_seconds=60, renew_deadline_seconds=40, retry_seconds=30)
    clock, api = Clock(), FakeApiServer()
    a, b = elector(api, "a", clock, slow), elector(api, "b", clock, slow)
    ra, rb = Recorder(), Recorder()
    started = running(a, ra)
    await run_until(clock, a.leading.is_set, "a to lead", within=0)
    following = running(b, rb)
    try:
        # b has read the live lease and watches it (a's watch ended when a began to lead).
        await run_until(
            clock,
            lambda: api.open_watches >= 1 and api.count("GET", f"/leases/{NAME}") >= 2,
            "b reading and watching",
            within=0,
        )
        assert not b.leading.is_set()
        reads = api.count("GET", f"/leases/{NAME}")
        await a.release()
        await run_until(clock, b.leading.is_set, "b to lead", within=0)  # its next read: 30 s
        # One round trip each: a writes what it last wrote, freed; b takes what it watched.
        assert api.count("GET", f"/leases/{NAME}") == reads
        await b.release()
    finally:
        await stopped(started, following)


async def test_a_release_after_another_write_reads_the_lease_again_and_frees_it() -> None:
    """The release writes the Lease as this replica last saw it; anything written since (a
    renewal in flight, another client) makes that a conflict, and the release reads again."""
    clock, api = Clock(), FakeApiServer()
    async with campaign(api, clock) as (leader, _, _):
        await run_until(clock, leader.leading.is_set, "leading", within=0)
        other = KubeClient(api)
        await other.patch(LEASES, NAME, {"metadata": {"labels": {"touched": "yes"}}}, NS)
        reads = api.count("GET", f"/leases/{NAME}")
        await leader.release()
        assert api.count("GET", f"/leases/{NAME}") == reads + 1
        assert lease_holder(api) == ""


async def test_a_candidate_that_watched_a_stale_release_reads_and_still_leads() -> None:
    """The Lease a candidate watched freed may be taken by another before it writes: its write
    is refused as a conflict, and its next attempt reads."""
    clock, api = Clock(), FakeApiServer()
    candidate = elector(api, "b", clock)
    stale = {
        "metadata": {"name": NAME, "namespace": NS, "resourceVersion": "1"},
        "spec": released(held_by("a"), T0).to_spec(),
    }
    await KubeClient(api).create(
        LEASES,
        {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", **stale},
        NS,
    )
    await KubeClient(api).patch(LEASES, NAME, {"metadata": {"labels": {"later": "yes"}}}, NS)
    candidate._freed_lease = stale  # as the watch would have left it, one write ago
    task = running(candidate, Recorder())
    try:
        await run_until(clock, candidate.leading.is_set, "b to lead", within=FAST.retry_seconds)
        assert api.count("PUT", f"/leases/{NAME}") >= 2  # the refused write, then the one read
        assert lease_holder(api) == "b"
    finally:
        await stopped(task)


def lease_faults() -> FaultyTransport:
    """The fake API server whose Lease requests fail on demand (`fault`); the rest go through."""
    return FaultyTransport(FakeApiServer(), matching=lambda request: "/leases" in request.path)


@contextlib.asynccontextmanager
async def campaign(
    transport: Transport, clock: Clock
) -> AsyncIterator[tuple[LeaderElector, Recorder, asyncio.Task[None]]]:
    """One elector campaigning through `transport` (the fake API server, or one whose Lease
    requests fail on demand) on `clock`, stopped at the end of the block."""
    candidate = elector(transport, "a", clock)
    record = Recorder()
    task = running(candidate, record)
    try:
        yield candidate, record, task
    finally:
        await stopped(task)


async def test_a_leader_that_cannot_renew_stops_leading_at_the_renew_deadline() -> None:
    clock, api = Clock(), FakeApiServer()
    async with campaign(api, clock) as (leader, record, _):
        await run_until(clock, leader.leading.is_set, "leading", within=0)
        api.inject_error("*", f"/leases/{NAME}", 500, times=10**6)  # the API server is gone
        took = await run_until(
            clock, lambda: not leader.leading.is_set(), "to stop leading", within=FAST.lease_seconds
        )
        # From its last renewal, at most a retry period before the errors began.
        assert FAST.renew_deadline_seconds - FAST.retry_seconds - 1e-6 <= took
        assert took < FAST.lease_seconds
        assert (record.started, record.stopped) == (1, 1)


async def test_a_leader_whose_renewal_hangs_stops_leading_before_the_lease_ends() -> None:
    """The client's own timeout is 60 s: without a deadline per attempt, a hung renewal kept
    the replica leading long after another could take the lease (two schedulers)."""
    clock, faulty = Clock(), lease_faults()
    async with campaign(faulty, clock) as (leader, record, _):
        await run_until(clock, leader.leading.is_set, "leading", within=0)
        faulty.fault = Fault.HANG
        took = await run_until(
            clock, lambda: not leader.leading.is_set(), "to stop leading", within=FAST.lease_seconds
        )
        assert took < FAST.lease_seconds
        assert faulty.hung >= 1
        assert (record.started, record.stopped) == (1, 1)


async def test_transport_errors_while_campaigning_do_not_end_the_election() -> None:
    """A connection refused (the API server restarting) once escaped `run`: the replica's one
    campaign ended and it never led again."""
    clock, faulty = Clock(), lease_faults()
    faulty.fault = Fault.REFUSE
    async with campaign(faulty, clock) as (candidate, record, task):
        await run_until(clock, lambda: faulty.refused >= 3, "three refused attempts", within=1)
        assert not task.done()
        assert not candidate.leading.is_set()
        faulty.fault = None  # the API server is back
        await run_until(clock, candidate.leading.is_set, "leading", within=FAST.retry_seconds)
        assert record.started == 1


async def test_a_release_that_gets_no_answer_returns_and_leaves_the_lease_to_expire() -> None:
    clock, faulty = Clock(), lease_faults()
    async with campaign(faulty, clock) as (leader, _, _):
        await run_until(clock, leader.leading.is_set, "leading", within=0)
        faulty.fault = Fault.HANG
        releasing = asyncio.create_task(leader.release())
        took = await run_until(
            clock, releasing.done, "the release to return", within=FAST.renew_deadline_seconds * 3
        )
        await releasing
        assert took >= FAST.renew_deadline_seconds - 1e-6  # it waited for its deadline
        assert not leader.leading.is_set()


async def test_after_a_pause_longer_than_the_renew_deadline_the_leader_holds_nothing_at_once() -> (
    None
):
    """A process that stood still (SIGSTOP, a paused VM) wakes up leading, and the elector
    notices only when it next tries to renew: `holds` says so at once, before anything else
    runs, so the leader's writes can be refused from the first turn of the loop."""
    clock = Clock()
    async with campaign(FakeApiServer(), clock) as (leader, record, _):
        await run_until(clock, leader.leading.is_set, "leading", within=0)
        assert leader.holds()
        clock.advance(FAST.renew_deadline_seconds * 1.5)  # time passes; the loop does not run
        assert leader.leading.is_set(), "the elector has not run yet"
        assert not leader.holds()
        await run_until(clock, lambda: record.stopped, "to stop leading", within=0)
        assert record.stopped == 1  # alone, it leads again at once (its own lease)


async def test_a_leader_that_renews_holds_throughout() -> None:
    """`holds` counts from each renewal, not from the first: past one renew deadline of
    renewals, every write may still go out; once the elector has stopped, none may."""
    clock, api = Clock(), FakeApiServer()
    async with campaign(api, clock) as (leader, record, _):
        await run_until(clock, leader.leading.is_set, "leading", within=0)
        renewals = api.count("PUT", f"/leases/{NAME}")
        past_a_deadline = renewals + int(FAST.renew_deadline_seconds / FAST.retry_seconds) + 2
        while api.count("PUT", f"/leases/{NAME}") < past_a_deadline:
            assert leader.holds()
            clock.advance(FAST.retry_seconds)
            await turns()
        assert record.stopped == 0
    assert not leader.holds()
