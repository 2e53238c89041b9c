"""The gang scheduler's parts on their own: the queue's bookkeeping (controllers/scheduler_queue.py)
and the worker thread's offload (controllers/offload.py). The scheduler's tests
(test_gang_scheduler_unit.py, test_scheduler_thread.py) hold them to the whole behaviour."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from typing import Any

from podgroup_operator.controllers.offload import Offload
from podgroup_operator.controllers.scheduler_queue import GangQueue, QueueEntry, WaitState
from tests.builders import pod
from tests.fakes import FakeIndex

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
KEY = ("default", "gang")
WAIT = 10.0


def queue() -> tuple[GangQueue, list[tuple[str, str]]]:
    gone: list[tuple[str, str]] = []
    return GangQueue(FakeIndex(), gone=gone.append), gone


def test_the_last_pending_member_leaving_forgets_the_groups_wait() -> None:
    q, gone = queue()
    q.add("u1", KEY, pod("gang-0"))
    q.add("u2", KEY, pod("gang-1"))
    q.waiting[KEY] = WaitState(since=NOW, failures=3)
    q.pod_dependent.add(KEY)

    q.drop("u1")
    assert KEY in q.waiting and not gone
    q.drop("u2")
    assert q.pending == {} and q.pending_key == {}
    assert KEY not in q.waiting and KEY not in q.pod_dependent
    assert gone == [KEY]


def test_a_pod_that_changes_group_leaves_its_old_bucket() -> None:
    q, gone = queue()
    other = ("default", "other")
    q.add("u1", KEY, pod("gang-0"))
    q.add("u1", other, pod("gang-0"))
    assert set(q.pending) == {other}
    assert gone == [KEY]
    assert q.stale == {KEY, other}


def test_our_bind_counts_as_bound_until_the_watch_says_so() -> None:
    q, _ = queue()
    q.add("u1", KEY, pod("gang-0"))
    q.in_flight.add("u1")
    q.bound_now("u1")
    q.land("u1")
    assert q.bound_members(KEY) == {"u1"}
    assert q.pending == {} and q.in_flight == set()
    q.forget_bound("u1")
    assert q.bound_members(KEY) == set()


def test_refresh_enters_only_stale_groups_and_leaves_out_those_wholly_in_flight() -> None:
    q, _ = queue()
    q.add("u1", KEY, pod("gang-0"))
    q.add("u2", KEY, pod("gang-1"))
    entered: list[tuple[tuple[str, str], list[str]]] = []

    def entry_of(key: tuple[str, str], waiting: list[dict[str, Any]]) -> QueueEntry:
        entered.append((key, [p["metadata"]["name"] for p in waiting]))
        return QueueEntry(namespace=key[0], name=key[1], waiting=waiting)

    def failed(key: tuple[str, str], exc: Exception) -> None:
        raise AssertionError(f"{key}: {exc}")

    assert set(q.refresh(entry_of, failed)) == {KEY}
    assert entered == [(KEY, ["gang-0", "gang-1"])]
    assert q.refresh(entry_of, failed) == {KEY: q.entries[KEY]}
    assert len(entered) == 1  # nothing changed: not entered again
    q.in_flight |= {"u1", "u2"}
    q.stale.add(KEY)
    assert q.refresh(entry_of, failed) == {}
    assert len(entered) == 1


def test_a_namespace_left_is_said_new_once_and_ends_at_its_time() -> None:
    q, _ = queue()
    until = NOW + dt.timedelta(seconds=60)
    assert q.leave("ns", until)
    assert not q.leave("ns", until)
    assert q.leaving_until("ns", NOW) == until
    assert q.leaving_until("ns", until) is None
    assert "ns" not in q.leaving


async def test_calls_during_a_thread_decision_wait_and_then_apply_in_order() -> None:
    offload = Offload()
    started, release = threading.Event(), threading.Event()
    applied: list[str] = []

    def decide() -> str:
        started.set()
        assert release.wait(WAIT)
        return "placed"

    decision = asyncio.create_task(offload.run(decide))
    async with asyncio.timeout(WAIT):
        while not started.is_set():
            await asyncio.sleep(0.001)
    offload.exclusive(applied.append, "first")
    offload.exclusive(applied.append, "second")
    assert applied == [] and offload.deciding and offload.deferred_total == 2

    release.set()
    async with asyncio.timeout(WAIT):
        assert await decision == "placed"
    assert applied == [] and offload.deciding  # held until the outcome is booked
    offload.decided()
    assert applied == ["first", "second"] and not offload.deciding
    offload.exclusive(applied.append, "now")
    assert applied[-1] == "now"
    offload.shutdown()
