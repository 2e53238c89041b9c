"""The gang scheduler's parts on their own: the queue's bookkeeping
(controllers/scheduler_queue.py), the worker thread's offload (controllers/offload.py), request
building (controllers/requests.py) and other schedulers' nominations (controllers/preemption.py,
`Nominated`). The scheduler's tests (test_gang_scheduler_unit.py, test_scheduler_thread.py) hold
them to the whole behaviour."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import KubeClient
from podgroup_operator.api.keys import pod_uid
from podgroup_operator.api.models import PodGroup
from podgroup_operator.controllers.offload import Offload
from podgroup_operator.controllers.preemption import Nominated
from podgroup_operator.controllers.requests import Requests
from podgroup_operator.controllers.scheduler_queue import GangQueue, QueueEntry, WaitState
from podgroup_operator.controllers.volumes import VolumeBinder
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.builders import node, pod, podgroup
from tests.fakes import FakeApiServer, FakeIndex

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


# --- request building (controllers/requests.py) ------------------------------------------------


def requests_over(members: FakeIndex[Any, Any]) -> Requests:
    q = GangQueue(members, gone=lambda key: None)
    volumes = VolumeBinder(KubeClient(FakeApiServer()))
    return Requests(members, q, volumes, lambda name: None)


def test_a_groups_request_counts_its_bound_members_toward_its_minimum() -> None:
    bound = pod("gang-0", group="gang", node="n1", phase=c.PodPhase.RUNNING)
    waiting = [pod("gang-1", group="gang"), pod("gang-2", group="gang")]
    members: FakeIndex[Any, Any] = FakeIndex({KEY: [bound, *waiting]})
    requests = requests_over(members)
    group = PodGroup.model_validate(podgroup("gang", min_member=3))

    entry = requests.entry(KEY, waiting, group)
    request = requests.of_group(entry, group)

    assert entry.partly_bound  # one of three holds a node
    assert (request.min_member, request.already_bound) == (3, 1)
    assert request.bound_uids == frozenset({pod_uid(bound)})
    assert [pod_uid(p) for p in request.pending] == [pod_uid(p) for p in waiting]
    assert request.mode is c.GangMode.STRICT and not request.satisfied_before


def test_a_running_group_is_satisfied_before_unless_its_restart_policy_acts() -> None:
    waiting = [pod("gang-1", group="gang")]
    requests = requests_over(FakeIndex())
    running = {"phase": c.Phase.RUNNING}
    plain = PodGroup.model_validate(podgroup("gang", min_member=1, status=running))
    acting = PodGroup.model_validate(
        podgroup("gang", min_member=1, status=running, policy={"action": "RestartGang"})
    )

    assert requests.of_group(requests.entry(KEY, waiting, plain), plain).satisfied_before
    assert not requests.of_group(requests.entry(KEY, waiting, acting), acting).satisfied_before


def test_a_pod_of_no_group_is_a_gang_of_one() -> None:
    lone = pod("solo", priority=7)
    requests = requests_over(FakeIndex())
    key = ("default", "pod:solo")

    request = requests.of_one(requests.entry_of_one(key, [lone]))

    assert (request.key, request.min_member, request.priority) == (key, 1, 7)
    assert request.uid == pod_uid(lone)


# --- other schedulers' nominations (controllers/preemption.py) --------------------------------


def nominated_pod(name: str, target: str | None, priority: int) -> dict[str, Any]:
    body = pod(name, scheduler="default-scheduler", priority=priority, requests={"cpu": 4})
    body["status"]["nominatedNodeName"] = target
    return body


def test_a_nomination_holds_its_room_until_withdrawn() -> None:
    snapshot = Snapshot()
    snapshot.add_node(node("n1", cpu=8))
    nominated = Nominated(snapshot, frozenset({c.SCHEDULER_NAME}))
    theirs = nominated_pod("theirs", "n1", priority=5)
    uid = pod_uid(theirs)

    assert not nominated.track(uid, c.WatchEventType.ADDED, theirs, None)
    assert snapshot.free("n1")["cpu"] == 4000  # the room is held
    assert nominated.pods[uid][:2] == ("n1", 5)

    withdrawn = nominated_pod("theirs", None, priority=5)
    withdrawn["metadata"]["uid"] = uid
    assert nominated.track(uid, c.WatchEventType.MODIFIED, withdrawn, None)  # room given back
    assert snapshot.free("n1")["cpu"] == 8000 and nominated.pods == {}


def test_our_own_pods_nominations_are_not_held_here() -> None:
    snapshot = Snapshot()
    snapshot.add_node(node("n1", cpu=8))
    nominated = Nominated(snapshot, frozenset({"default-scheduler"}))
    ours = nominated_pod("ours", "n1", priority=5)

    assert not nominated.track(pod_uid(ours), c.WatchEventType.ADDED, ours, None)
    assert nominated.pods == {} and snapshot.free("n1")["cpu"] == 8000


def test_a_higher_priority_decision_sees_the_room_of_lower_nominations_only() -> None:
    snapshot = Snapshot()
    snapshot.add_node(node("n1", cpu=8))
    nominated = Nominated(snapshot, frozenset({c.SCHEDULER_NAME}))
    low, high = nominated_pod("low", "n1", priority=1), nominated_pod("high", "n1", priority=9)
    for body in (low, high):
        nominated.track(pod_uid(body), c.WatchEventType.ADDED, body, None)
    assert snapshot.free("n1")["cpu"] == 0

    with nominated.taken_out_below(5):
        assert snapshot.free("n1")["cpu"] == 4000  # the low one's room, not the high one's
    assert snapshot.free("n1")["cpu"] == 0  # held again after the decision
