"""Leader election: the pure decisions, and the elector over the in-memory API server."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import AsyncIterator

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
from tests.clock import T0
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
FAST = Timing(lease_seconds=1, renew_deadline_seconds=0.6, retry_seconds=0.05)


class Recorder:
    def __init__(self) -> None:
        self.started = 0
        self.stopped = 0

    async def on_started(self) -> None:
        self.started += 1

    async def on_stopped(self) -> None:
        self.stopped += 1


async def test_of_two_electors_exactly_one_leads_and_a_release_hands_over_at_once() -> None:
    api = FakeApiServer()
    a = LeaderElector(KubeClient(api), namespace=NS, name=NAME, identity="a", timing=FAST)
    b = LeaderElector(KubeClient(api), namespace=NS, name=NAME, identity="b", timing=FAST)
    ra, rb = Recorder(), Recorder()
    tasks = [
        asyncio.create_task(a.run(ra.on_started, ra.on_stopped)),
        asyncio.create_task(b.run(rb.on_started, rb.on_stopped)),
    ]
    try:
        await asyncio.wait_for(
            asyncio.wait(
                [asyncio.create_task(a.leading.wait()), asyncio.create_task(b.leading.wait())],
                return_when=asyncio.FIRST_COMPLETED,
            ),
            2,
        )
        leader, follower = (a, b) if a.leading.is_set() else (b, a)
        assert not follower.leading.is_set()
        # The follower keeps reading a live lease: wait for a few of its reads, then check.
        reads = api.count("GET", f"/leases/{NAME}")
        while api.count("GET", f"/leases/{NAME}") < reads + 6:
            await asyncio.sleep(0.01)
        assert leader.leading.is_set() and not follower.leading.is_set()
        stored = api.get_object(LEASES, NAME, NS)
        assert stored is not None and stored["spec"]["holderIdentity"] == leader.identity

        await leader.release()
        # Released: the follower takes over at its next retry, long before the lease would end.
        await asyncio.wait_for(follower.leading.wait(), FAST.lease_seconds * 0.9)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_candidate_sees_a_release_without_waiting_for_its_next_read() -> None:
    """Its reads every retry period took the lease over 1.6 s after a release under a bind
    burst (`bench scale --failover term`); the candidate's watch wakes it at the release."""
    slow = Timing(lease_seconds=60, renew_deadline_seconds=40, retry_seconds=30)
    api = FakeApiServer()
    a = LeaderElector(KubeClient(api), namespace=NS, name=NAME, identity="a", timing=slow)
    b = LeaderElector(KubeClient(api), namespace=NS, name=NAME, identity="b", timing=slow)
    ra, rb = Recorder(), Recorder()
    started = asyncio.create_task(a.run(ra.on_started, ra.on_stopped))
    await asyncio.wait_for(a.leading.wait(), 1)
    following = asyncio.create_task(b.run(rb.on_started, rb.on_stopped))
    try:
        # b has read the live lease and watches it (a's watch ended when a began to lead).
        while api.open_watches < 1 or api.count("GET", f"/leases/{NAME}") < 2:
            await asyncio.sleep(0.01)
        assert not b.leading.is_set()
        reads = api.count("GET", f"/leases/{NAME}")
        await a.release()
        await asyncio.wait_for(b.leading.wait(), 1)  # its next read was 30 s away
        # One round trip each: a writes what it last wrote, freed; b takes what it watched.
        assert api.count("GET", f"/leases/{NAME}") == reads
        await b.release()
    finally:
        for task in (started, following):
            task.cancel()
        await asyncio.gather(started, following, return_exceptions=True)


async def test_a_release_after_another_write_reads_the_lease_again_and_frees_it() -> None:
    """The release writes the Lease as this replica last saw it; anything written since (a
    renewal in flight, another client) makes that a conflict, and the release reads again."""
    api = FakeApiServer()
    async with campaign(api) as (elector, _, _):
        await asyncio.wait_for(elector.leading.wait(), 2)
        other = KubeClient(api)
        await other.patch(LEASES, NAME, {"metadata": {"labels": {"touched": "yes"}}}, NS)
        reads = api.count("GET", f"/leases/{NAME}")
        await elector.release()
        assert api.count("GET", f"/leases/{NAME}") == reads + 1
        stored = api.get_object(LEASES, NAME, NS)
        assert stored is not None and stored["spec"]["holderIdentity"] == ""


async def test_a_candidate_that_watched_a_stale_release_reads_and_still_leads() -> None:
    """The Lease a candidate watched freed may be taken by another before it writes: its write
    is refused as a conflict, and its next attempt reads."""
    api = FakeApiServer()
    elector = LeaderElector(KubeClient(api), namespace=NS, name=NAME, identity="b", timing=FAST)
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
    elector._freed_lease = stale  # as the watch would have left it, one write ago
    record = Recorder()
    task = asyncio.create_task(elector.run(record.on_started, record.on_stopped))
    try:
        await asyncio.wait_for(elector.leading.wait(), 2)
        assert api.count("PUT", f"/leases/{NAME}") >= 2  # the refused write, then the one read
        stored = api.get_object(LEASES, NAME, NS)
        assert stored is not None and stored["spec"]["holderIdentity"] == "b"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_leader_that_cannot_renew_stops_leading_before_the_lease_ends() -> None:
    api = FakeApiServer()
    async with campaign(api) as (a, record, _):
        await asyncio.wait_for(a.leading.wait(), 2)
        api.inject_error("*", f"/leases/{NAME}", 500, times=10**6)  # the API server is gone
        loop = asyncio.get_running_loop()
        lost_from = loop.time()
        while a.leading.is_set():
            await asyncio.sleep(0.01)
        assert loop.time() - lost_from < FAST.lease_seconds
        assert (record.started, record.stopped) == (1, 1)


def lease_faults() -> FaultyTransport:
    """The fake API server whose Lease requests fail on demand (`fault`); the rest go through."""
    return FaultyTransport(FakeApiServer(), matching=lambda request: "/leases" in request.path)


@contextlib.asynccontextmanager
async def campaign(
    transport: Transport,
) -> AsyncIterator[tuple[LeaderElector, Recorder, asyncio.Task[None]]]:
    """One elector campaigning through `transport` (the fake API server, or one whose Lease
    requests fail on demand), stopped at the end of the block."""
    elector = LeaderElector(
        KubeClient(transport), namespace=NS, name=NAME, identity="a", timing=FAST
    )
    record = Recorder()
    task = asyncio.create_task(elector.run(record.on_started, record.on_stopped))
    try:
        yield elector, record, task
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_leader_whose_renewal_hangs_stops_leading_before_the_lease_ends() -> None:
    """The client's own timeout is 60 s: without a deadline per attempt, a hung renewal kept
    the replica leading long after another could take the lease (two schedulers)."""
    faulty = lease_faults()
    async with campaign(faulty) as (elector, record, _):
        await asyncio.wait_for(elector.leading.wait(), 2)
        faulty.fault = Fault.HANG
        loop = asyncio.get_running_loop()
        lost_from = loop.time()
        await asyncio.wait_for(_cleared(elector.leading), FAST.lease_seconds)
        assert loop.time() - lost_from < FAST.lease_seconds
        assert faulty.hung >= 1
        assert (record.started, record.stopped) == (1, 1)


async def test_transport_errors_while_campaigning_do_not_end_the_election() -> None:
    """A connection refused (the API server restarting) once escaped `run`: the replica's one
    campaign ended and it never led again."""
    faulty = lease_faults()
    faulty.fault = Fault.REFUSE
    async with campaign(faulty) as (elector, record, task):
        while faulty.refused < 3:  # the barrier: three attempts refused and survived
            await asyncio.sleep(0.005)
        assert not task.done()
        assert not elector.leading.is_set()
        faulty.fault = None  # the API server is back
        await asyncio.wait_for(elector.leading.wait(), 2)
        assert record.started == 1


async def test_a_release_that_gets_no_answer_returns_and_leaves_the_lease_to_expire() -> None:
    faulty = lease_faults()
    async with campaign(faulty) as (elector, _, _):
        await asyncio.wait_for(elector.leading.wait(), 2)
        faulty.fault = Fault.HANG
        await asyncio.wait_for(elector.release(), FAST.renew_deadline_seconds * 3)
        assert not elector.leading.is_set()


async def _cleared(flag: asyncio.Event) -> None:
    while flag.is_set():
        await asyncio.sleep(0.005)


async def test_after_a_pause_longer_than_the_renew_deadline_the_leader_holds_nothing_at_once() -> (
    None
):
    """A process that stood still (SIGSTOP, a paused VM) wakes up leading, and the elector
    notices only when it next tries to renew: `holds` says so at once, before anything else
    runs, so the leader's writes can be refused from the first turn of the loop."""
    async with campaign(FakeApiServer()) as (elector, record, _):
        await asyncio.wait_for(elector.leading.wait(), 2)
        assert elector.holds()
        time.sleep(FAST.renew_deadline_seconds * 1.5)  # the whole event loop stands still
        assert elector.leading.is_set(), "the elector has not run yet"
        assert not elector.holds()
        while not record.stopped:  # alone, it leads again at once (its own lease)
            await asyncio.sleep(0.005)
        assert record.stopped == 1


async def test_a_leader_that_renews_holds_throughout() -> None:
    """`holds` counts from each renewal, not from the first: past one renew deadline of
    renewals, every write may still go out; once the elector has stopped, none may."""
    api = FakeApiServer()
    async with campaign(api) as (elector, record, _):
        await asyncio.wait_for(elector.leading.wait(), 2)
        renewals = api.count("PUT", f"/leases/{NAME}")
        past_a_deadline = renewals + int(FAST.renew_deadline_seconds / FAST.retry_seconds) + 2
        while api.count("PUT", f"/leases/{NAME}") < past_a_deadline:
            assert elector.holds()
            await asyncio.sleep(0.005)
        assert record.stopped == 0
    assert not elector.holds()
