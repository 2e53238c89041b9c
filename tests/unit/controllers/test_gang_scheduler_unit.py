"""GangScheduler glue over the in-memory API server: events in, bindings and verdicts out.

The scheduler is fed node/pod/group events by hand (as the informers would deliver them), reads its
PodGroup and member indexes from `FakeIndex`es the test fills, binds through `KubeClient` over
`FakeApiServer` (whose request log counts every binding), and publishes its verdicts to a list.
Cycles are run by calling `await scheduler.cycle()`; the background loop is never started, and
the clock only moves when a test moves it.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator import tuning
from podgroup_operator.adapters.kube import PODS, FencedTransport, KubeClient
from podgroup_operator.api.keys import pod_uid
from podgroup_operator.controllers import binder as binder_module
from podgroup_operator.controllers import scheduler as scheduler_module
from podgroup_operator.controllers.scheduler import GangScheduler
from podgroup_operator.domain.gang_groups import NO_TRUST, GangGroupTrust
from podgroup_operator.domain.scheduling_status import Verdict
from podgroup_operator.scheduling.pacing import BindPacer
from tests.builders import node, pod, podgroup
from tests.clock import T0, Clock
from tests.fakes import FakeApiServer, FakeIndex, Fault, FaultyTransport, Request
from tests.waiting import until

NS = "default"
WAIT_SECONDS = 10.0
"""The most a test waits for a bind held in the background (never reached when it passes)."""

Body = dict[str, Any]
Key = tuple[str, str]


class Harness:
    """The scheduler with its two indexes, a verdict log and the fake API server behind it."""

    thread_members = scheduler_module.DECIDE_IN_THREAD_MEMBERS
    """What its scheduler decides in the worker thread from (see `decisions_in`)."""

    def __init__(
        self,
        default_timeout_seconds: int = 60,
        *,
        fake_timers: bool = False,
        trust: GangGroupTrust = NO_TRUST,
    ) -> None:
        """`fake_timers`: the scheduler's loop waits on the test's clock (`advance` it), not on
        the event loop's. `trust`: the scheduler's `gang_group_trust`."""
        self.clock = Clock()
        self.fake = FakeApiServer(clock=self.clock)
        self.kube = KubeClient(self.fake)
        self.groups: FakeIndex[Key, Body] = FakeIndex()
        self.members: FakeIndex[Key, Body] = FakeIndex()
        self.verdicts: list[tuple[Key, Verdict]] = []
        self.scheduler = GangScheduler(
            self.kube,
            self.groups,
            self.members,
            publish=lambda key, verdict: self.verdicts.append((key, verdict)),
            default_timeout_seconds=default_timeout_seconds,
            clock=self.clock,
            thread_members=self.thread_members,
            gang_group_trust=trust,
            **({"monotonic": self.clock.monotonic} if fake_timers else {}),
        )

    # --- the world -------------------------------------------------------------------------------
    def add_node(self, name: str, cpu: int | str = 8) -> Body:
        (stored,) = self.fake.seed(node(name, cpu=cpu))
        self.scheduler.on_node("ADDED", stored)
        return stored

    def add_group(self, name: str, min_member: int = 2, ns: str = NS, **spec: Any) -> Body:
        """A PodGroup that exists in the API, seen by the index and announced to the scheduler."""
        (stored,) = self.fake.seed(podgroup(name, ns, min_member=min_member, **spec))
        self.groups.put((ns, name), stored)
        self.scheduler.on_group((ns, name))
        return stored

    def add_pods(self, group: str, count: int, cpu: int | str = 1, **kwargs: Any) -> list[Body]:
        """`count` pending members group-0.. for our scheduler, stored and delivered as ADDED."""
        return [self.add_pod(f"{group}-{i}", group=group, cpu=cpu, **kwargs) for i in range(count)]

    def add_pod(
        self,
        name: str,
        *,
        group: str | None = None,
        cpu: int | str = 1,
        scheduler: str | None = c.SCHEDULER_NAME,
        ns: str = NS,
        **kwargs: Any,
    ) -> Body:
        body = pod(name, ns, group=group, requests={"cpu": cpu}, scheduler=scheduler, **kwargs)
        (stored,) = self.fake.seed(body)
        if group is not None:
            self.members.put((ns, group), stored)
        self.scheduler.on_pod("ADDED", stored)
        return stored

    def watch_catches_up(self) -> None:
        """The pod watch delivers every pod's current version (bound ones with nodeName)."""
        for stored in self.fake.objects(PODS, NS):
            group = (stored["metadata"].get("labels") or {}).get(c.LABEL_POD_GROUP)
            if group is not None:
                self.members.put((NS, group), stored)
            self.scheduler.on_pod("MODIFIED", stored)

    # --- observations ----------------------------------------------------------------------------
    def node_of(self, name: str) -> str | None:
        stored = self.fake.get_object(PODS, name, NS)
        assert stored is not None
        return (stored.get("spec") or {}).get("nodeName")

    def bound_pods(self, prefix: str = "", ns: str = NS) -> list[str]:
        return [
            p["metadata"]["name"]
            for p in self.fake.objects(PODS, ns)
            if p["metadata"]["name"].startswith(prefix) and (p.get("spec") or {}).get("nodeName")
        ]

    def binds(self, name: str = "") -> int:
        """Binding POSTs sent, for one pod or for all."""
        return self.fake.count("POST", f"/pods/{name}/binding" if name else "/binding")

    def verdicts_for(self, group: str, ns: str = NS) -> list[Verdict]:
        return [v for k, v in self.verdicts if k == (ns, group)]

    def cpu_free(self, node_name: str) -> int:
        return self.scheduler.snapshot.free(node_name)["cpu"]


@pytest.fixture(autouse=True, params=["on the loop", "in the thread"])
def decisions_in(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs twice: with the default threshold (these gangs are small, so they
    are decided on the event loop) and with every decision made in the worker thread. Both
    must decide and book alike."""
    if request.param == "in the thread":
        monkeypatch.setattr(Harness, "thread_members", 1)
    return str(request.param)


def binding_path(name: str) -> str:
    return PODS.path(NS, name, "binding")


# --- 1. a gang that fits is bound whole ----------------------------------------------------------


async def test_a_gang_that_fits_is_bound_whole_with_one_binding_per_member() -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("gang", min_member=3)
    pods = h.add_pods("gang", 3, cpu=2)

    await h.scheduler.cycle()

    assert h.binds() == 3
    for body in pods:
        name = body["metadata"]["name"]
        assert h.binds(name) == 1
        assert h.node_of(name) == "n1"
    # The binding carries the pod's UID as a precondition and names the node.
    bodies = [r.body for r in h.fake.request_log if r.path.endswith("/binding")]
    assert {b["metadata"]["uid"] for b in bodies} == {pod_uid(p) for p in pods}
    assert {b["target"]["name"] for b in bodies} == {"n1"}
    assert h.verdicts == [((NS, "gang"), Verdict(placed=True))]
    assert h.scheduler.queue.pending == {}
    assert h.scheduler.queue.in_flight == set()
    assert h.scheduler.binder.binds == 3
    assert h.cpu_free("n1") == 2000  # the placement is held (assumed) until the watch confirms


async def test_members_bound_across_nodes_when_none_holds_the_whole_gang() -> None:
    h = Harness()
    h.add_node("n1", cpu=4)
    h.add_node("n2", cpu=4)
    h.add_group("gang", min_member=4)
    h.add_pods("gang", 4, cpu=2)

    await h.scheduler.cycle()

    assert h.binds() == 4
    nodes = sorted(h.node_of(f"gang-{i}") or "" for i in range(4))
    assert nodes == ["n1", "n1", "n2", "n2"]
    assert (h.cpu_free("n1"), h.cpu_free("n2")) == (0, 0)


# --- 2. a gang that does not fit binds nothing ---------------------------------------------------


async def test_a_gang_that_does_not_fit_binds_nothing_and_names_the_shortfall() -> None:
    h = Harness()
    h.add_node("n1", cpu=4)
    h.add_node("n2", cpu=4)
    h.add_group("gang", min_member=3)
    h.add_pods("gang", 3, cpu=3)  # one per node at most: 2 of 3 fit
    before = h.scheduler.snapshot.state()

    await h.scheduler.cycle()

    assert h.binds() == 0
    assert h.bound_pods() == []
    assert h.scheduler.snapshot.state() == before
    ((key, verdict),) = h.verdicts
    assert key == (NS, "gang")
    assert not verdict.placed
    assert verdict.reason == c.Reason.NOT_ENOUGH_RESOURCES
    assert "default/gang: needs 3 more member(s) at once" in verdict.message
    assert "only 2 fit" in verdict.message
    assert "short 1" in verdict.message
    assert "Insufficient cpu" in verdict.message
    # Still waiting, with the refusal counted for backoff.
    assert set(h.scheduler.queue.pending[(NS, "gang")]) == {
        pod_uid(p) for p in h.fake.objects(PODS, NS)
    }
    assert h.scheduler.queue.waiting[(NS, "gang")].failures == 1


async def test_too_few_members_is_refused_as_not_enough_tasks_without_binding() -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("gang", min_member=3)
    h.add_pods("gang", 2, cpu=1)

    await h.scheduler.cycle()

    assert h.binds() == 0
    ((_, verdict),) = h.verdicts
    assert verdict.reason == c.Reason.NOT_ENOUGH_TASKS
    assert "minMember is 3" in verdict.message


# --- 3. two gangs that cannot both fit -----------------------------------------------------------


async def test_of_two_gangs_that_cannot_both_fit_exactly_one_is_bound_whole() -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    for name in ("a", "b"):
        h.add_group(name, min_member=2)
        h.add_pods(name, 2, cpu=3)  # 6 cpu each: one gang fits, not two
    before = h.scheduler.snapshot.state()

    await h.scheduler.cycle()

    bound = {g: len(h.bound_pods(f"{g}-")) for g in ("a", "b")}
    assert sorted(bound.values()) == [0, 2]
    winner = "a" if bound["a"] else "b"
    loser = "b" if winner == "a" else "a"
    assert h.binds() == 2
    assert h.binds(f"{loser}-0") == h.binds(f"{loser}-1") == 0
    assert h.verdicts_for(winner) == [Verdict(placed=True)]
    (refusal,) = h.verdicts_for(loser)
    assert not refusal.placed and refusal.reason == c.Reason.NOT_ENOUGH_RESOURCES
    # Only the winner's members hold the node.
    assert h.scheduler.snapshot.state() != before
    assert h.cpu_free("n1") == 2000


async def test_the_higher_priority_gang_wins_the_room() -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("a", min_member=2)
    h.add_pods("a", 2, cpu=3)
    h.add_group("b", min_member=2)
    h.add_pods("b", 2, cpu=3, priority=100)

    await h.scheduler.cycle()

    assert sorted(h.bound_pods()) == ["b-0", "b-1"]
    assert h.verdicts_for("b") == [Verdict(placed=True)]


# --- 4. failed binds -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "reason", "message"),
    [
        (500, "InternalError", "etcdserver: request timed out"),
        (404, "NotFound", 'pods "gang-1" not found'),
        (
            409,
            "Conflict",
            'Operation cannot be fulfilled on pods/binding "gang-1": Precondition failed: '
            "UID in precondition: x, UID in object meta: y",
        ),
    ],
)
async def test_a_failed_bind_releases_the_pod_and_it_is_retried_next_cycle(
    code: int, reason: str, message: str
) -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("gang", min_member=2)
    g0, g1 = h.add_pods("gang", 2, cpu=2)
    h.fake.inject_error("POST", binding_path("gang-1"), code, reason, message)

    await h.scheduler.cycle()

    assert h.node_of("gang-0") == "n1"
    assert h.node_of("gang-1") is None
    assert h.binds("gang-1") == 1
    # What gang-1 was assumed to hold is released; gang-0 keeps its place.
    assert h.scheduler.snapshot.pod(pod_uid(g1)) is None
    held = h.scheduler.snapshot.pod(pod_uid(g0))
    assert held is not None and held.node == "n1"
    assert h.cpu_free("n1") == 6000
    assert pod_uid(g1) in h.scheduler.queue.pending[(NS, "gang")]
    assert pod_uid(g1) not in h.scheduler.queue.in_flight
    assert h.scheduler._wake.is_set()  # the loop would run another cycle without an event

    h.watch_catches_up()  # gang-0 arrives bound; the member index counts it
    await h.scheduler.cycle()

    assert h.node_of("gang-1") == "n1"
    assert (h.binds("gang-0"), h.binds("gang-1")) == (1, 2)
    assert h.scheduler.queue.pending == {}
    assert h.cpu_free("n1") == 4000


async def test_a_bind_without_an_answer_releases_the_pod_like_a_failed_one() -> None:
    """A lost connection (or a writer process gone) raises no ApiError: the pod must not stay
    assumed on its node while pending, or the next cycle would count it twice."""
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("gang", min_member=2)
    _, g1 = h.add_pods("gang", 2, cpu=2)
    path = binding_path("gang-1")
    faulty = FaultyTransport(h.fake, matching=lambda r: r.path == path, fault=Fault.REFUSE)
    h.scheduler.binder.kube.transport = faulty

    await h.scheduler.cycle()

    assert faulty.refused == 1
    assert (h.node_of("gang-0"), h.node_of("gang-1")) == ("n1", None)
    assert h.scheduler.snapshot.pod(pod_uid(g1)) is None
    assert h.cpu_free("n1") == 6000
    assert pod_uid(g1) in h.scheduler.queue.pending[(NS, "gang")]
    assert pod_uid(g1) not in h.scheduler.queue.in_flight
    assert h.scheduler._wake.is_set()

    faulty.fault = None  # the connection is back
    h.watch_catches_up()
    await h.scheduler.cycle()

    assert h.node_of("gang-1") == "n1"
    assert h.scheduler.queue.pending == {}
    assert h.cpu_free("n1") == 4000


async def test_already_assigned_is_treated_as_placed_and_never_bound_again() -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_node("n2", cpu=8)
    h.add_group("gang", min_member=2)
    _, g1 = h.add_pods("gang", 2, cpu=2)
    # Someone else bound gang-1 meanwhile; the watch has not told the scheduler yet.
    racer = copy.deepcopy(g1)
    racer["spec"]["nodeName"] = "n2"
    h.fake.seed(racer)

    await h.scheduler.cycle()

    assert h.binds("gang-1") == 1  # answered 409 "already assigned"
    assert h.node_of("gang-1") == "n2"  # the apiserver's truth is untouched
    assert h.node_of("gang-0") is not None
    assert pod_uid(g1) in h.scheduler.queue.bound
    assert h.scheduler.queue.pending == {}

    h.clock.advance(120)
    await h.scheduler.cycle()
    await h.scheduler.cycle()

    assert h.binds() == 2  # one per member, no retry
    assert h.verdicts_for("gang") == [Verdict(placed=True)]


async def test_a_conflict_on_a_pod_already_on_our_node_keeps_the_assumption() -> None:
    """A bind whose first answer was lost: the pod is on the node we chose, the retry gets 409.
    The pod itself (not the message) says it is placed."""
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("gang", min_member=2)
    _, g1 = h.add_pods("gang", 2, cpu=2)
    landed = copy.deepcopy(g1)
    landed["spec"]["nodeName"] = "n1"
    h.fake.seed(landed)

    await h.scheduler.cycle()
    await h.scheduler.cycle()

    assert h.binds("gang-1") == 1
    bound = h.scheduler.snapshot.pod(pod_uid(g1))
    assert bound is not None and bound.node == "n1"
    assert h.cpu_free("n1") == 4000
    assert h.scheduler.queue.pending == {}


# --- 5. no double bind ---------------------------------------------------------------------------


async def test_a_stale_pre_bind_event_does_not_cause_a_second_bind() -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("gang", min_member=2)
    stale = h.add_pods("gang", 2, cpu=2)

    await h.scheduler.cycle()
    assert h.binds() == 2

    # The watch lags: pre-bind versions (no nodeName) of both members arrive after the binds.
    for body in stale:
        h.scheduler.on_pod("MODIFIED", body)
    h.clock.advance(5)
    await h.scheduler.cycle()

    assert h.binds() == 2
    assert h.scheduler.queue.pending == {}
    assert {pod_uid(p) for p in stale} <= set(h.scheduler.queue.bound)

    # The bound versions arrive: the scheduler stops remembering its own binds.
    h.watch_catches_up()
    await h.scheduler.cycle()
    assert h.binds() == 2
    assert h.scheduler.queue.bound == {}
    assert h.cpu_free("n1") == 4000


async def test_a_stale_pre_bind_event_keeps_the_bound_capacity_held() -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("a", min_member=2)
    stale = h.add_pods("a", 2, cpu=4)
    await h.scheduler.cycle()
    assert h.bound_pods() == ["a-0", "a-1"]
    held = h.scheduler.snapshot.state()

    for body in stale:
        h.scheduler.on_pod("MODIFIED", body)
    h.add_group("b", min_member=2)
    h.add_pods("b", 2, cpu=4)
    await h.scheduler.cycle()

    # n1 is full with gang a: gang b must be refused, not bound onto the same cpu.
    assert h.bound_pods("b-") == []
    assert h.verdicts_for("b")[-1].reason == c.Reason.NOT_ENOUGH_RESOURCES
    assert h.scheduler.snapshot.state() == held


# --- 6. pods whose PodGroup does not exist -------------------------------------------------------


async def test_pods_wait_for_their_podgroup_and_are_bound_once_it_appears() -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_pods("late", 2, cpu=2)

    await h.scheduler.cycle()
    h.clock.advance(30)
    await h.scheduler.cycle()

    assert h.binds() == 0
    assert h.verdicts == []  # the status reconciler warns about missing groups, not us
    assert set(h.scheduler.queue.pending) == {(NS, "late")}

    h.add_group("late", min_member=2)  # index + on_group
    await h.scheduler.cycle()

    assert sorted(h.bound_pods()) == ["late-0", "late-1"]
    assert h.verdicts_for("late") == [Verdict(placed=True)]


async def test_on_group_wakes_the_loop_only_for_groups_with_pending_members() -> None:
    h = Harness()
    h.add_pods("late", 1)
    h.scheduler._wake.clear()

    h.scheduler.on_group((NS, "other"))
    assert not h.scheduler._wake.is_set()
    h.scheduler.on_group((NS, "late"))
    assert h.scheduler._wake.is_set()


# --- 7. a pod without a group --------------------------------------------------------------------


async def test_a_pod_for_our_scheduler_without_a_group_is_a_gang_of_one() -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_pod("solo", cpu=2)
    h.add_pod("theirs", cpu=2, scheduler=None)  # kube-scheduler's pod: not ours to bind
    h.add_pod("other", cpu=2, scheduler="other-scheduler")

    await h.scheduler.cycle()

    assert h.node_of("solo") == "n1"
    assert h.node_of("theirs") is None and h.node_of("other") is None
    assert h.binds() == 1
    assert h.verdicts == [((NS, "pod:solo"), Verdict(placed=True))]


async def test_a_gang_of_one_that_does_not_fit_is_refused() -> None:
    h = Harness()
    h.add_node("n1", cpu=2)
    h.add_pod("solo", cpu=4)

    await h.scheduler.cycle()

    assert h.binds() == 0
    ((key, verdict),) = h.verdicts
    assert key == (NS, "pod:solo")
    assert verdict.reason == c.Reason.NOT_ENOUGH_RESOURCES


# --- 8. timeout and backoff ----------------------------------------------------------------------


def _hogged(h: Harness) -> Body:
    """n1 with 4 cpu, half of it held by someone else's running pod; gang needs all 4."""
    h.add_node("n1", cpu=4)
    (hog,) = h.fake.seed(pod("hog", NS, requests={"cpu": 2}, node="n1", phase=c.PodPhase.RUNNING))
    h.scheduler.on_pod("ADDED", hog)
    h.add_group("gang", min_member=2, scheduleTimeoutSeconds=5)
    h.add_pods("gang", 2, cpu=2)
    return hog


async def test_schedule_timeout_is_published_once_after_refusals() -> None:
    h = Harness()
    _hogged(h)

    # Refused at t=0, 1, 3 (backoff 1s, 2s); each refusal is published.
    for at in (0, 1, 3):
        h.clock.now = T0 + dt.timedelta(seconds=at)
        await h.scheduler.cycle()
    refusals = h.verdicts_for("gang")
    assert [v.reason for v in refusals] == [c.Reason.NOT_ENOUGH_RESOURCES] * 3

    h.clock.now = T0 + dt.timedelta(seconds=6)  # past scheduleTimeoutSeconds=5
    await h.scheduler.cycle()
    for at in (7, 15, 31, 100, 400):  # later attempts, still refused
        h.clock.now = T0 + dt.timedelta(seconds=at)
        await h.scheduler.cycle()

    verdicts = h.verdicts_for("gang")
    timeouts = [v for v in verdicts if v.reason == c.Reason.SCHEDULE_TIMEOUT]
    assert len(timeouts) == 1
    (timeout,) = timeouts
    assert not timeout.placed
    assert "not placed within 5s" in timeout.message
    assert refusals[-1].message in timeout.message  # names the last refusal
    # After the timeout the refusals are not republished (the timeout stays the verdict).
    assert verdicts[3:] == [timeout]
    assert h.binds() == 0
    assert h.scheduler.queue.waiting[(NS, "gang")].timed_out


def _waiting_since(at: dt.datetime, **status: Any) -> dict[str, Any]:
    """A Pending status whose Unschedulable condition turned True at `at` (a refusal)."""
    refused = {
        "type": "Unschedulable",
        "status": "True",
        "reason": c.Reason.NOT_ENOUGH_RESOURCES.value,
        "message": "0/1 nodes are available",
        "lastTransitionTime": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return {"phase": "Pending", "conditions": [refused], **status}


@pytest.mark.parametrize("restarted", [False, True])
async def test_a_new_leader_resumes_a_wait_that_began_under_the_last_one(restarted: bool) -> None:
    """The gang was refused 4 s before this scheduler started (its status says so): it times
    out 5 s after that, not 5 s after this scheduler first saw it. A restart since then starts
    the wait anew."""
    h = Harness()
    h.add_node("n1", cpu=4)
    (hog,) = h.fake.seed(pod("hog", NS, requests={"cpu": 2}, node="n1", phase=c.PodPhase.RUNNING))
    h.scheduler.on_pod("ADDED", hog)
    extra = {"lastRestartTime": "2026-03-01T11:59:58Z"} if restarted else {}
    status = _waiting_since(T0 - dt.timedelta(seconds=4), **extra)
    h.add_group("gang", min_member=2, scheduleTimeoutSeconds=5, status=status)
    h.add_pods("gang", 2, cpu=2)
    h.clock.now = T0
    await h.scheduler.cycle()
    began = T0 - dt.timedelta(seconds=2 if restarted else 4)
    assert h.scheduler.queue.waiting[(NS, "gang")].since == began
    h.clock.now = T0 + dt.timedelta(seconds=2)
    await h.scheduler.cycle()
    reasons = [v.reason for v in h.verdicts_for("gang")]
    if restarted:
        assert reasons == [c.Reason.NOT_ENOUGH_RESOURCES] * 2
        h.clock.now = T0 + dt.timedelta(seconds=4)
        await h.scheduler.cycle()
        reasons = [v.reason for v in h.verdicts_for("gang")]
    assert reasons[-1] == c.Reason.SCHEDULE_TIMEOUT


async def test_a_wait_that_begins_under_this_leader_is_timed_from_now_whatever_the_status() -> None:
    """After its first queue, a scheduler sees every wait begin: a status that says otherwise
    (a refusal whose restart has not come back from the API yet) does not shorten it."""
    h = Harness()
    h.add_node("n1", cpu=4)
    h.clock.now = T0
    await h.scheduler.cycle()  # the first queue: empty
    (hog,) = h.fake.seed(pod("hog", NS, requests={"cpu": 2}, node="n1", phase=c.PodPhase.RUNNING))
    h.scheduler.on_pod("ADDED", hog)
    status = _waiting_since(T0 - dt.timedelta(seconds=60))
    h.add_group("gang", min_member=2, scheduleTimeoutSeconds=5, status=status)
    h.add_pods("gang", 2, cpu=2)
    h.clock.now = T0 + dt.timedelta(seconds=1)
    await h.scheduler.cycle()
    assert h.scheduler.queue.waiting[(NS, "gang")].since == T0 + dt.timedelta(seconds=1)
    assert [v.reason for v in h.verdicts_for("gang")] == [c.Reason.NOT_ENOUGH_RESOURCES]


def _held_partly(h: Harness, **spec: Any) -> Body:
    """n1 with 4 cpu: a hog holds 1, two of `part`'s three members are bound (2 cpu, as by
    someone else), and its third needs 2 more. Returns the hog."""
    h.add_node("n1", cpu=4)
    (hog,) = h.fake.seed(pod("hog", NS, requests={"cpu": 1}, node="n1", phase=c.PodPhase.RUNNING))
    h.scheduler.on_pod("ADDED", hog)
    h.add_group("part", min_member=3, scheduleTimeoutSeconds=5, **spec)
    for i in range(2):
        h.add_pod(f"part-{i}", group="part", node="n1", phase=c.PodPhase.RUNNING)
    h.add_pod("part-2", group="part", cpu=2)
    return hog


async def _time_out(h: Harness) -> Verdict:
    for at in (0, 1, 3, 6):  # refused, then past scheduleTimeoutSeconds=5
        h.clock.now = T0 + dt.timedelta(seconds=at)
        await h.scheduler.cycle()
    verdict = h.verdicts_for("part")[-1]
    assert verdict.reason == c.Reason.SCHEDULE_TIMEOUT, verdict
    return verdict


async def test_a_strict_gang_held_partly_bound_past_its_timeout_is_left_to_its_policy() -> None:
    """Its restart policy frees what it holds (domain/restart.py); placing its rest meanwhile
    would have the restart delete a gang just placed, so the scheduler waits, for a while."""
    h = Harness()
    hog = _held_partly(h, policy={"action": "RestartGang"})
    timeout = await _time_out(h)
    assert timeout.at == T0 + dt.timedelta(seconds=6)
    assert "2 of minMember 3 members hold nodes meanwhile" in timeout.message
    assert "RestartGang policy acts to free them" in timeout.message

    h.scheduler.on_pod("DELETED", hog)  # room for the rest, within the grace
    h.clock.now = T0 + dt.timedelta(seconds=20)
    await h.scheduler.cycle()
    assert h.bound_pods("part-2") == []
    grace_end = 6 + scheduler_module.RESTART_GRACE_SECONDS
    assert h.scheduler._next_due() == pytest.approx(grace_end - 20)  # a timer, not a spin

    h.clock.now = T0 + dt.timedelta(seconds=grace_end)  # no restart came: decided again
    await h.scheduler.cycle()
    assert h.bound_pods("part-2") == ["part-2"]


@pytest.mark.parametrize("spec", [{}, {"mode": "NonStrict", "policy": {"action": "RestartGang"}}])
async def test_without_a_policy_to_free_them_a_held_gang_is_placed_when_room_comes(
    spec: dict[str, Any],
) -> None:
    h = Harness()
    hog = _held_partly(h, **spec)
    timeout = await _time_out(h)
    if not spec:
        assert "set spec.policy.action RestartGang" in timeout.message

    h.scheduler.on_pod("DELETED", hog)
    await h.scheduler.cycle()
    assert h.bound_pods("part-2") == ["part-2"]


async def test_a_refused_group_is_not_retried_before_its_backoff() -> None:
    h = Harness()
    _hogged(h)

    await h.scheduler.cycle()  # t=0: refused, backoff 1s
    await h.scheduler.cycle()  # t=0: not due
    h.clock.advance(0.5)
    await h.scheduler.cycle()  # t=0.5: not due
    assert len(h.verdicts_for("gang")) == 1
    assert h.scheduler.queue.waiting[(NS, "gang")].failures == 1

    h.clock.advance(0.5)
    await h.scheduler.cycle()  # t=1: due, refused again, backoff 2s
    h.clock.advance(1.5)
    await h.scheduler.cycle()  # t=2.5: not due
    assert len(h.verdicts_for("gang")) == 2
    assert h.scheduler.queue.waiting[(NS, "gang")].failures == 2
    assert h.binds() == 0


@pytest.mark.parametrize("change", ["node added", "pod deleted"])
async def test_a_capacity_change_lets_a_refused_group_retry_before_its_backoff(
    change: str,
) -> None:
    h = Harness()
    hog = _hogged(h)
    for at in (0, 1):  # refused twice: the next attempt is due at t=3
        h.clock.now = T0 + dt.timedelta(seconds=at)
        await h.scheduler.cycle()
    h.clock.now = T0 + dt.timedelta(seconds=2)
    await h.scheduler.cycle()
    assert len(h.verdicts_for("gang")) == 2  # not due yet

    if change == "node added":
        h.add_node("n2", cpu=4)
    else:
        h.scheduler.on_pod("DELETED", hog)
    await h.scheduler.cycle()  # still t=2, before the backoff ends

    assert sorted(h.bound_pods("gang-")) == ["gang-0", "gang-1"]
    assert h.verdicts_for("gang")[-1] == Verdict(placed=True)


DB_AFFINITY = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchLabels": {"app": "db"}},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}


async def _waiting_for_a_db(h: Harness) -> None:
    """A gang whose members must run beside an `app=db` pod, refused twice (none runs), so
    its next attempt is due at t=3; now is t=2."""
    h.add_node("n1", cpu=8)
    h.add_group("gang", min_member=2)
    h.add_pods("gang", 2, cpu=1, affinity=DB_AFFINITY)
    for at in (0, 1):
        h.clock.now = T0 + dt.timedelta(seconds=at)
        await h.scheduler.cycle()
    h.clock.now = T0 + dt.timedelta(seconds=2)
    await h.scheduler.cycle()
    assert len(h.verdicts_for("gang")) == 2  # not due yet
    assert h.scheduler.queue.pod_dependent == {(NS, "gang")}


@pytest.mark.parametrize("change", ["bound elsewhere", "relabelled"])
async def test_a_pod_it_depends_on_lets_a_refused_group_retry_before_its_backoff(
    change: str,
) -> None:
    """kube-scheduler moves its unschedulable pods on an assigned pod's add or update; a gang
    waiting for pod affinity, anti-affinity or spread becomes due one backoff step (1 s)
    after its last refusal then, here at once (its last refusal was at t=1)."""
    h = Harness()
    web = h.add_pod("web", scheduler="default-scheduler", node="n0", labels={"app": "web"})
    await _waiting_for_a_db(h)
    if change == "bound elsewhere":
        h.add_pod("db", scheduler="default-scheduler", node="n1", labels={"app": "db"})
    else:
        relabelled = copy.deepcopy(web)
        relabelled["metadata"]["labels"] = {"app": "db"}
        relabelled["spec"]["nodeName"] = "n1"
        h.scheduler.on_pod("MODIFIED", relabelled)
    await h.scheduler.cycle()  # still t=2, before the backoff ends

    assert sorted(h.bound_pods("gang-")) == ["gang-0", "gang-1"]
    assert h.scheduler.queue.pod_dependent == set()


async def test_a_flood_of_binds_elsewhere_decides_a_pod_dependent_group_once_a_second() -> None:
    """Where another scheduler binds thousands of pods, each bind is such an event: the group
    is decided again one backoff step after its last refusal, never once per bind."""
    h = Harness()
    await _waiting_for_a_db(h)
    for second, count in ((2.0, 30), (2.5, 30), (3.0, 30)):
        h.clock.now = T0 + dt.timedelta(seconds=second)
        for i in range(count):
            name = f"other-{second}-{i}"
            h.add_pod(name, scheduler="default-scheduler", node="n1", cpu="10m")
            await h.scheduler.cycle()
    # Refused at 0 and 1; then at 2 (due again 1 s later) and at 3: never at 2.5.
    assert len(h.verdicts_for("gang")) == 4
    assert h.scheduler.queue.waiting[(NS, "gang")].last_failure == T0 + dt.timedelta(seconds=3)


async def test_our_own_binds_coming_back_do_not_retry_pod_dependent_groups() -> None:
    """Our binds return through the watch as pods the snapshot already holds (assumed): they
    move nothing, or a backlog's every bind would wake every waiting group."""
    h = Harness()
    await _waiting_for_a_db(h)
    h.add_group("other", min_member=1)
    h.add_pods("other", 1, cpu=1)
    await h.scheduler.cycle()
    assert h.bound_pods("other-") == ["other-0"]
    h.watch_catches_up()
    await h.scheduler.cycle()
    assert h.scheduler.queue.waiting[(NS, "gang")].failures == 2
    assert len(h.verdicts_for("gang")) == 2


async def test_nodes_arriving_just_after_the_first_refusal_let_the_gang_try_at_once() -> None:
    h = Harness()
    h.add_group("gang", min_member=2)
    h.add_pods("gang", 2, cpu=2)
    await h.scheduler.cycle()  # pods listed before nodes (operator start): no nodes yet
    assert "the cluster has no nodes" in h.verdicts_for("gang")[-1].message

    h.clock.advance(0.1)
    h.add_node("n1", cpu=8)
    await h.scheduler.cycle()

    assert sorted(h.bound_pods()) == ["gang-0", "gang-1"]


@pytest.mark.parametrize("case", ["missing group", "terminal group"])
async def test_nothing_is_due_while_pods_only_wait_for_an_event(case: str) -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    if case == "terminal group":
        h.add_group("gang", min_member=2, status={"phase": c.Phase.FINISHED})
    h.add_pods("gang", 2, cpu=2)
    await h.scheduler.cycle()
    assert h.binds() == 0

    h.clock.advance(10)
    # Nothing can change without an event (on_group, on_pod): no timed wake-up is needed.
    assert h.scheduler._next_due() is None


# --- 9. gang groups ------------------------------------------------------------------------------


async def test_a_gang_group_is_bound_together_only_when_both_fit() -> None:
    h = Harness()
    h.add_node("n1", cpu=4)
    members = ["default/a", "default/b"]
    h.add_group("a", min_member=2, gangGroup=members)
    h.add_pods("a", 2, cpu=1)  # 2 cpu: fits alone
    h.add_group("b", min_member=2, gangGroup=members)
    h.add_pods("b", 2, cpu=2)  # 4 cpu: fits alone, not together with a
    before = h.scheduler.snapshot.state()

    await h.scheduler.cycle()

    assert h.binds() == 0
    assert h.scheduler.snapshot.state() == before
    for name in ("a", "b"):
        (verdict,) = h.verdicts_for(name)
        assert not verdict.placed
        assert verdict.reason == c.Reason.NOT_ENOUGH_RESOURCES
        assert verdict.message.startswith("gang group [default/")

    h.clock.advance(1)
    h.add_node("n2", cpu=4)
    await h.scheduler.cycle()

    assert sorted(h.bound_pods()) == ["a-0", "a-1", "b-0", "b-1"]
    assert h.binds() == 4
    assert h.verdicts_for("a")[-1] == Verdict(placed=True)
    assert h.verdicts_for("b")[-1] == Verdict(placed=True)


async def test_a_gang_group_waits_while_a_listed_group_does_not_exist() -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("a", min_member=2, gangGroup=["default/a", "default/b"])
    h.add_pods("a", 2, cpu=1)

    await h.scheduler.cycle()

    assert h.binds() == 0
    (verdict,) = h.verdicts_for("a")
    assert not verdict.placed and "gang group [" in verdict.message


def _pod_scheduled(h: Harness, name: str) -> Body:
    stored = h.fake.get_object(PODS, name, NS)
    assert stored is not None
    (condition,) = [
        cond
        for cond in (stored.get("status") or {}).get("conditions") or ()
        if cond["type"] == c.PodConditionType.POD_SCHEDULED
    ]
    return condition


async def test_members_of_a_gang_short_of_members_wait_for_the_gang_not_for_nodes() -> None:
    """2 of minMember 3 exist: they are marked PodScheduled=False with reason WaitingForGang,
    never Unschedulable (cluster-autoscaler would add nodes for them alone, which would idle
    until the third comes); the third member's arrival places the gang."""
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("short", min_member=3)
    h.add_pods("short", 2, cpu=1)

    await h.scheduler.cycle()
    await h.scheduler.signals.idle()

    assert h.binds() == 0
    for name in ("short-0", "short-1"):
        condition = _pod_scheduled(h, name)
        assert condition["status"] == c.ConditionStatus.FALSE
        assert condition["reason"] == c.PodReason.WAITING_FOR_GANG
    (verdict, *_) = h.verdicts_for("short")
    assert verdict.reason is c.Reason.NOT_ENOUGH_TASKS

    h.add_pod("short-2", group="short", cpu=1)
    h.clock.advance(1)  # a new member makes the gang due one backoff step after its refusal
    await h.scheduler.cycle()
    assert h.binds() == 3


async def test_members_of_a_group_whose_spec_does_not_validate_are_told_why_they_wait() -> None:
    """Such a group (stored before the webhook ran, or with it off): the queue waits for it as
    for a missing one, and its members say why, in kube-scheduler's words, once, rather than
    stay Pending with `Events: <none>`; the fix places them."""
    h = Harness()
    h.add_node("n1", cpu=8)
    stored = h.add_group("bad", min_member=0)
    h.add_pods("bad", 2, cpu=1)

    await h.scheduler.cycle()
    h.add_pod("bad-2", group="bad", cpu=1)  # the group is entered in the queue again
    await h.scheduler.cycle()
    await h.scheduler.signals.idle()

    assert h.binds() == 0
    assert h.verdicts_for("bad") == []  # its status is the status reconciler's (InvalidSpec)
    for name in ("bad-0", "bad-1", "bad-2"):
        condition = _pod_scheduled(h, name)
        assert condition["status"] == c.ConditionStatus.FALSE
        assert condition["reason"] == c.PodReason.UNSCHEDULABLE
        assert condition["message"].startswith(
            "PodGroup bad: the spec is not valid: spec.minMember: must be >= 1"
        )
    # One FailedScheduling per member at the first refusal; the same message again within the
    # gang's interval posts none (controllers/podsignals.py), whoever joined since.
    failed = h.fake.events(reason=c.PodReason.FAILED_SCHEDULING)
    assert sorted(e["involvedObject"]["name"] for e in failed) == ["bad-0", "bad-1"]

    fixed = copy.deepcopy(stored)
    fixed["spec"]["minMember"] = 3
    h.groups.put((NS, "bad"), fixed)
    h.scheduler.on_group((NS, "bad"))
    await h.scheduler.cycle()

    assert sorted(h.bound_pods()) == ["bad-0", "bad-1", "bad-2"]


async def test_a_gang_group_whose_partner_does_not_validate_is_refused_naming_it() -> None:
    """Without it the gang group waited in silence: the partner's pods are pending but the
    queue never offers the partner, and a gang group decides only with all of its members."""
    h = Harness()
    h.add_node("n1", cpu=8)
    members = ["default/a", "default/b"]
    h.add_group("a", min_member=2, gangGroup=members)
    h.add_pods("a", 2, cpu=1)
    partner = h.add_group("b", min_member=2, gangGroup=members, scheduleTimeoutSeconds=-1)
    h.add_pods("b", 2, cpu=1)

    await h.scheduler.cycle()

    assert h.binds() == 0
    (verdict,) = h.verdicts_for("a")
    assert not verdict.placed
    assert verdict.reason == c.Reason.INVALID_GANG_GROUP
    assert verdict.message.startswith(
        "gang group member PodGroup default/b: the spec is not valid: "
        "spec.scheduleTimeoutSeconds: must be >= 1"
    )

    fixed = copy.deepcopy(partner)
    del fixed["spec"]["scheduleTimeoutSeconds"]
    h.groups.put((NS, "b"), fixed)
    h.scheduler.on_group((NS, "b"))
    h.clock.advance(60)  # past a's backoff
    await h.scheduler.cycle()

    assert sorted(h.bound_pods()) == ["a-0", "a-1", "b-0", "b-1"]


async def test_a_gang_whose_list_names_a_group_refused_with_another_list_is_not_placed() -> None:
    """x lists [x, y] (y has no pods yet), z lists [z, x]: the lists disagree. x is decided
    first, with y, and refused; z was then placed alone, although its list says z and x start
    together. z now waits with x, saying why."""
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("x", min_member=1, gangGroup=["default/x", "default/y"])
    h.add_pods("x", 1)
    h.add_group("z", min_member=1, gangGroup=["default/z", "default/x"])
    h.add_pods("z", 1)

    await h.scheduler.cycle()

    assert h.binds() == 0
    (verdict,) = h.verdicts_for("z")
    assert not verdict.placed
    assert verdict.message.startswith(
        "gang group member PodGroup default/x was not placed with its own gangGroup"
    )
    assert "default/y has 0 member pod(s)" in verdict.message

    h.add_group("y", min_member=1, gangGroup=["default/x", "default/y"])
    h.add_pods("y", 1)
    h.clock.advance(60)  # past the backoffs
    await h.scheduler.cycle()
    h.clock.advance(60)
    await h.scheduler.cycle()

    assert sorted(h.bound_pods()) == ["x-0", "y-0", "z-0"]


async def test_a_gang_decided_first_waits_for_what_its_partners_lists_name_too() -> None:
    """z lists [z, x], x lists [x, w], and z comes first in the queue: decided by z's list
    alone, x was placed with z although x's own list says it starts with w (no pods yet)."""
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("z", min_member=1, gangGroup=["default/z", "default/x"])
    h.add_pods("z", 1, priority=10)  # first in the queue
    h.add_group("x", min_member=1, gangGroup=["default/x", "default/w"])
    h.add_pods("x", 1)

    await h.scheduler.cycle()

    assert h.binds() == 0
    (verdict,) = h.verdicts_for("z")
    assert not verdict.placed and "default/w has 0 member pod(s)" in verdict.message


async def test_a_gang_group_entry_of_another_namespace_without_consent_holds_nobody() -> None:
    """Tenant a's group lists tenant b's and is short of pods, and comes first in the queue: b's
    gang fits on its own and is placed, with no word of a's; a waits, naming the entry that
    lacks b's consent."""
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("hold", min_member=2, ns="a", gangGroup=["a/hold", "b/fits"])
    h.add_pods("hold", 1, ns="a", priority=10)  # first in the queue
    h.add_group("fits", min_member=2, ns="b")
    h.add_pods("fits", 2, ns="b")

    await h.scheduler.cycle()

    assert sorted(h.bound_pods(ns="b")) == ["fits-0", "fits-1"]
    assert all(v.placed for v in h.verdicts_for("fits", ns="b"))
    (verdict,) = h.verdicts_for("hold", ns="a")
    assert not verdict.placed
    assert verdict.reason == c.Reason.INVALID_GANG_GROUP
    assert verdict.message.startswith(
        "gangGroup of PodGroup a/hold names b/fits, a PodGroup of another namespace that does "
        "not list a/hold back"
    )


async def test_gang_groups_of_two_namespaces_that_list_each_other_start_together() -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    members = ["a/x", "b/y"]
    h.add_group("x", min_member=2, ns="a", gangGroup=members)
    h.add_pods("x", 2, ns="a")
    h.add_group("y", min_member=1, ns="b", gangGroup=members)

    await h.scheduler.cycle()

    assert h.binds() == 0  # y has no pods yet: both wait
    assert "b/y has 0 member pod(s)" in h.verdicts_for("x", ns="a")[-1].message

    h.add_pods("y", 1, ns="b")
    h.clock.advance(60)  # past the backoff
    await h.scheduler.cycle()

    assert sorted(h.bound_pods(ns="a")) == ["x-0", "x-1"]
    assert h.bound_pods(ns="b") == ["y-0"]


async def test_an_admin_trust_lets_one_namespace_name_another_without_consent() -> None:
    """Trusted, a's entry counts: a waits for b's gang as a partner (not for its consent), and
    b, which does not list a, is still decided on its own."""
    h = Harness(trust=GangGroupTrust.of(["a,b"]))
    h.add_node("n1", cpu=8)
    h.add_group("hold", min_member=2, ns="a", gangGroup=["a/hold", "b/fits"])
    h.add_pods("hold", 1, ns="a", priority=10)
    h.add_group("fits", min_member=2, ns="b")
    h.add_pods("fits", 2, ns="b")

    await h.scheduler.cycle()

    assert sorted(h.bound_pods(ns="b")) == ["fits-0", "fits-1"]
    (verdict,) = h.verdicts_for("hold", ns="a")
    assert verdict.reason != c.Reason.INVALID_GANG_GROUP
    assert "a/hold has 1 member pod(s)" in verdict.message


async def test_a_group_pulled_in_by_a_list_not_its_own_is_decided_alone_when_refused() -> None:
    """x lists [x, w] and is short of pods; w lists nothing and fits. x comes first and pulls w
    in; refused, w is decided alone in the same cycle and placed, and x's refusal is not w's."""
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("x", min_member=2, gangGroup=["default/x", "default/w"])
    h.add_pods("x", 1, priority=10)
    h.add_group("w", min_member=2)
    h.add_pods("w", 2)

    await h.scheduler.cycle()

    assert sorted(h.bound_pods("w")) == ["w-0", "w-1"]
    assert h.bound_pods("x") == []
    assert [v.placed for v in h.verdicts_for("w")] == [True]
    (verdict,) = h.verdicts_for("x")
    assert not verdict.placed and "default/x has 1 member pod(s)" in verdict.message


async def test_gang_group_lists_joining_more_than_64_groups_are_refused_naming_them() -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    for i in range(70):
        h.add_group(f"g{i}", min_member=1, gangGroup=[f"default/g{i}", f"default/g{i + 1}"])
    h.add_pods("g0", 1)

    await h.scheduler.cycle()

    assert h.binds() == 0
    (verdict,) = h.verdicts_for("g0")
    assert verdict.reason == c.Reason.INVALID_GANG_GROUP
    assert verdict.message.startswith(
        "the gangGroup lists of this PodGroup and of those it names join more than 64 "
        "PodGroups (default/g0, default/g1, default/g2, default/g3, default/g4 and "
    )


async def test_a_gang_group_member_in_backoff_holds_back_the_others() -> None:
    h = Harness()
    h.add_node("n1", cpu=4)
    members = ["default/a", "default/b"]
    h.add_group("a", min_member=2, gangGroup=members)
    h.add_group("b", min_member=2, gangGroup=members)
    h.add_pods("a", 2, cpu=4)  # a can never fit: one 4-cpu node, two 4-cpu members
    await h.scheduler.cycle()  # b has no pods yet: the gang group waits for them, a backs off
    assert h.verdicts_for("a")[-1].reason == c.Reason.NOT_ENOUGH_TASKS
    assert h.bound_pods("a-") == []

    h.clock.advance(0.5)
    h.add_pods("b", 2, cpu=1)  # b alone would fit
    await h.scheduler.cycle()

    # a has pending members that cannot fit: b must not run without them.
    assert h.bound_pods("b-") == []


async def test_a_partner_whose_pods_are_not_there_yet_holds_back_the_gang_group() -> None:
    """Seen in CI: `left` got its pods first and was bound alone before `right` had any."""
    h = Harness()
    h.add_node("n1", cpu=8)
    members = ["default/left", "default/right"]
    h.add_group("left", min_member=2, gangGroup=members)
    h.add_group("right", min_member=2, gangGroup=members)
    h.add_pods("left", 2, cpu=1)
    await h.scheduler.cycle()
    assert h.bound_pods("left-") == []
    assert h.verdicts_for("left")[-1].reason == c.Reason.NOT_ENOUGH_TASKS

    h.clock.advance(5)
    h.add_pods("right", 2, cpu=1)
    await h.scheduler.cycle()
    assert sorted(h.bound_pods("left-") + h.bound_pods("right-")) == [
        "left-0",
        "left-1",
        "right-0",
        "right-1",
    ]


@pytest.mark.parametrize("turns", [0, 1, 2])
async def test_a_scheduler_stopped_as_it_is_woken_stops(turns: int) -> None:
    """On Python 3.11 `asyncio.wait_for` swallows a cancel that comes as what it waits for
    completes: the scheduler's loop, cancelled in the same turns of the event loop as a pod
    event woke it, ran on, and `stop` waited for it for ever (leadership never handed over).
    Its loop waits on its wake Event itself, a timer of its clock setting it when the next
    retry is due; ruff bans `asyncio.wait_for` in operator/."""
    h = Harness(fake_timers=True)
    timers = h.clock.monotonic
    h.add_node("n1", cpu=1)
    h.add_group("big", min_member=2)
    h.add_pods("big", 2, cpu=1)  # refused: the loop then waits for its wake or the retry
    h.scheduler.start()
    await until(lambda: bool(timers.pending), "the loop's settle")
    h.clock.advance(timers.pending[0] - timers.now())
    await until(lambda: bool(h.verdicts_for("big")), "the refusal")
    await until(lambda: bool(timers.pending), "the loop back in its wait (the retry due in 1 s)")
    h.scheduler.wake()
    for _ in range(turns):
        await asyncio.sleep(0)
    async with asyncio.timeout(1):
        await h.scheduler.stop()


async def test_a_gang_short_of_pods_is_tried_again_when_a_member_comes() -> None:
    """A member's arrival wakes the gang at once: it does not wait out its backoff (up to
    60 s)."""
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("g", min_member=3, scheduleTimeoutSeconds=3600)
    h.add_pods("g", 2, cpu=1)
    for _ in range(6):
        await h.scheduler.cycle()
        h.clock.advance(61)
    await h.scheduler.cycle()
    assert h.scheduler.queue.waiting[(NS, "g")].failures == 7  # next try 60 s after the last

    h.clock.advance(1)
    h.add_pod("g-2", group="g", cpu=1)
    await h.scheduler.cycle()

    assert sorted(h.bound_pods()) == ["g-0", "g-1", "g-2"]


async def test_a_partner_backing_off_is_decided_with_a_gang_group_that_is_due() -> None:
    """`left` waited for `right`'s pods long enough to back off 32 s between tries. When they
    came, `right` waited out `left`'s backoff: a gang group whose members' pods are created a
    minute apart started up to a minute late, and `right`'s pods said nothing meanwhile. The
    gang group is decided together, so it is due when any of its members is."""
    h = Harness()
    h.add_node("n1", cpu=8)
    members = ["default/left", "default/right"]
    for name in ("left", "right"):
        h.add_group(name, min_member=2, gangGroup=members, scheduleTimeoutSeconds=3600)
    h.add_pods("left", 2, cpu=1)
    for _ in range(6):
        await h.scheduler.cycle()
        h.clock.advance(61)
    await h.scheduler.cycle()
    assert h.verdicts_for("left")[-1].reason == c.Reason.NOT_ENOUGH_TASKS
    assert h.scheduler.queue.waiting[(NS, "left")].failures == 7  # next try 60 s after the last

    h.clock.advance(1)
    h.add_pods("right", 2, cpu=1)
    await h.scheduler.cycle()

    assert sorted(h.bound_pods()) == ["left-0", "left-1", "right-0", "right-1"]


async def test_the_running_scheduler_places_a_gang_group_when_its_last_pods_come() -> None:
    """The scheduler's own loop, its waits on the test's clock: `left` is refused for want of
    `right`'s pods, at once and after each backoff (1, 2, 4, 8, 16, 32 s), until its next try
    is 60 s away. `right`'s pods, coming a second after the last refusal, wake the loop, and
    the gang group is placed then, not when `left`'s backoff ends."""
    h = Harness(fake_timers=True)
    timers = h.clock.monotonic
    h.add_node("n1", cpu=8)
    members = ["default/left", "default/right"]
    for name in ("left", "right"):
        h.add_group(name, min_member=2, gangGroup=members, scheduleTimeoutSeconds=3600)
    h.add_pods("left", 2, cpu=1)

    async def next_timer() -> float:
        """Seconds until the loop's timer (its settle, or its wait for the next try) is due."""
        await until(lambda: bool(timers.pending), "the scheduler's loop to wait")
        return timers.pending[0] - timers.now()

    h.scheduler.start()
    try:
        for tries, backoff in enumerate((1, 2, 4, 8, 16, 32, 60), start=1):
            h.clock.advance(await next_timer())  # the settle before a cycle
            await until(lambda n=tries: len(h.verdicts_for("left")) >= n, f"left's refusal {tries}")
            assert h.verdicts_for("left")[-1].reason == c.Reason.NOT_ENOUGH_TASKS
            assert await next_timer() == pytest.approx(backoff)
            if tries < 7:
                h.clock.advance(backoff)
        assert h.scheduler.queue.waiting[(NS, "left")].failures == 7

        h.clock.advance(1.0)
        h.add_pods("right", 2, cpu=1)  # the watch brings them: the loop wakes
        settle = scheduler_module.SETTLE_SECONDS
        await until(lambda: timers.pending == [timers.now() + settle], "the loop woken")
        h.clock.advance(settle)  # its settle, not left's 59 s of backoff
        await until(lambda: len(h.bound_pods()) == 4, "the gang group placed")
    finally:
        await h.scheduler.stop()
    assert sorted(h.bound_pods()) == ["left-0", "left-1", "right-0", "right-1"]
    assert len(h.verdicts_for("left")) == 8  # seven refusals, then the placement


def _right_raises_once(h: Harness, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Building the request of the gang `right` raises the first time, never after; the list
    returned names it once it has."""
    real = h.scheduler.volumes.claims_for
    raised: list[str] = []

    def claims_for(pods: list[Body]) -> Any:
        if any(p["metadata"]["name"].startswith("right-") for p in pods) and not raised:
            raised.append("right")
            raise RuntimeError("a request that cannot be built")
        return real(pods)

    monkeypatch.setattr(h.scheduler.volumes, "claims_for", claims_for)
    return raised


async def test_a_partner_whose_request_raised_is_not_built_again_within_its_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pulling a partner in past its backoff is for refusals: a partner whose request raises
    is backed off like any failing group, not built again by the next due member."""
    h = Harness()
    h.add_node("n1", cpu=8)
    members = ["default/left", "default/right"]
    for name in ("left", "right"):
        h.add_group(name, min_member=2, gangGroup=members)
    h.add_pods("left", 2, cpu=1)
    h.add_pods("right", 2, cpu=1)
    raised = _right_raises_once(h, monkeypatch)
    await h.scheduler.cycle()
    assert raised == ["right"]
    assert h.scheduler.failures.count((NS, "right")) == 1  # built once, not again as a partner
    assert h.bound_pods() == []

    h.clock.advance(2)  # past its backoff: built again, it no longer raises
    await h.scheduler.cycle()
    assert sorted(h.bound_pods()) == ["left-0", "left-1", "right-0", "right-1"]


async def test_a_partner_decided_without_raising_has_its_failure_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A partner whose request raised once, then was built and decided with its gang group,
    is well again: it is pulled in past its refusals' backoff when the gang group is next due,
    as a partner that never raised is. Its failure stayed on record until it was decided on its
    own, and the gang group waited out its backoff, which grew with every refusal meanwhile."""
    h = Harness()
    h.add_node("n1", cpu=8)
    members = ["default/left", "default/right"]
    h.add_group("left", min_member=3, gangGroup=members, scheduleTimeoutSeconds=3600)
    h.add_group("right", min_member=2, gangGroup=members, scheduleTimeoutSeconds=3600)
    h.add_pods("left", 2, cpu=1)  # one short
    h.add_pods("right", 2, cpu=1)
    raised = _right_raises_once(h, monkeypatch)
    await h.scheduler.cycle()
    assert raised == ["right"]
    assert h.scheduler.failures.count((NS, "right")) == 1

    h.clock.advance(2)  # past its backoff: built again, decided with left, short of left's pods
    await h.scheduler.cycle()
    assert h.verdicts_for("right")[-1].reason == c.Reason.NOT_ENOUGH_TASKS
    assert h.scheduler.failures.count((NS, "right")) == 0

    h.clock.advance(1)  # left's last pod: left is due, right backs off 2 s from its refusal
    h.add_pod("left-2", group="left", cpu=1)
    await h.scheduler.cycle()
    assert sorted(h.bound_pods()) == ["left-0", "left-1", "left-2", "right-0", "right-1"]


async def test_a_group_placed_in_its_own_right_is_not_decided_again_in_a_gang_group() -> None:
    h = Harness()
    h.add_node("n1", cpu=4)
    h.add_group("alpha", min_member=2)  # lists nobody; decided first (by name)
    h.add_pods("alpha", 2, cpu=1)
    h.add_group("beta", min_member=2, gangGroup=["default/alpha", "default/beta"])
    h.add_pods("beta", 2, cpu=4)  # never fits

    await h.scheduler.cycle()

    assert sorted(h.bound_pods("alpha-")) == ["alpha-0", "alpha-1"]
    assert h.verdicts_for("alpha") == [Verdict(placed=True)]


# --- 10. terminal groups -------------------------------------------------------------------------


@pytest.mark.parametrize("phase", [c.Phase.FINISHED, c.Phase.FAILED])
async def test_terminal_groups_are_never_scheduled(phase: c.Phase) -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("done", min_member=2, status={"phase": phase})
    h.add_pods("done", 2, cpu=1)

    await h.scheduler.cycle()
    h.clock.advance(3600)
    h.add_node("n2", cpu=8)  # a capacity change does not revive it either
    await h.scheduler.cycle()

    assert h.binds() == 0
    assert h.bound_pods() == []
    assert h.verdicts == []


async def test_a_running_group_is_still_scheduled() -> None:
    """Contrast to the terminal case: only Finished/Failed stop scheduling."""
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("live", min_member=1, status={"phase": c.Phase.RUNNING})
    h.add_pods("live", 1, cpu=1)

    await h.scheduler.cycle()

    assert h.bound_pods() == ["live-0"]


# --- one group that breaks the scheduler stops nobody else ---------------------------------------
class _BrokenFor(FakeIndex[Key, Body]):
    """A group index whose answer for one key raises, as a hostile object's parsing could."""

    def __init__(self, broken: Key) -> None:
        super().__init__()
        self.broken = broken

    def get(self, key: Key, default: Any = None) -> Any:
        if key == self.broken:
            raise OverflowError("date value out of range")
        return super().get(key, default)


async def test_a_group_that_raises_is_reported_and_backed_off_while_others_are_placed() -> None:
    h = Harness()
    h.groups = _BrokenFor((NS, "poison"))
    h.scheduler.parsed.groups = h.groups
    h.add_node("n1", cpu=8)
    h.add_group("healthy", min_member=2)
    h.add_pods("healthy", 2)
    h.add_pods("poison", 2)

    await h.scheduler.cycle()

    assert sorted(h.bound_pods()) == ["healthy-0", "healthy-1"]
    (verdict,) = h.verdicts_for("poison")
    assert verdict.reason == c.Reason.SCHEDULING_FAILED
    assert "OverflowError: date value out of range" in verdict.message
    assert h.scheduler.failures.count((NS, "poison")) == 1

    await h.scheduler.cycle()  # the same failure again: counted, not reported again
    assert len(h.verdicts_for("poison")) == 1
    assert h.scheduler.failures.count((NS, "poison")) == 2


# --- the queue: kept across cycles, requests built only for what is decided ---------------------


def count_calls(monkeypatch: pytest.MonkeyPatch, h: Harness, method: str) -> list[Key]:
    """The group keys `method` (`_queued` or `_request`) is called for, in order."""
    calls: list[Key] = []
    real = getattr(h.scheduler, method)

    def counting(first: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(first if method == "_queued" else first.key)
        return real(first, *args, **kwargs)

    monkeypatch.setattr(h.scheduler, method, counting)
    return calls


async def test_a_budgeted_cycle_builds_requests_only_for_the_groups_it_decides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under a backlog a cycle decides what its budget allows; building the request of every
    waiting group each cycle kept the event loop busy at 5,000 gangs (docs/perf-log/scale.md)."""
    h = Harness()
    h.add_node("n1", cpu=100)
    for i in range(30):
        h.add_group(f"g{i:02}", min_member=2)
        h.add_pods(f"g{i:02}", 2, cpu="100m")
    built = count_calls(monkeypatch, h, "_request")

    await h.scheduler.cycle(budget=0.0)  # a cycle always decides at least one group

    assert built == [(NS, "g00")]
    assert sorted(h.bound_pods()) == ["g00-0", "g00-1"]
    assert h.scheduler._wake.is_set()  # the rest of the queue: another cycle at once

    await h.scheduler.cycle(budget=0.0)

    assert built == [(NS, "g00"), (NS, "g01")]  # in queue order, each built once
    assert len(h.bound_pods()) == 4


async def test_a_queue_entry_is_entered_again_only_when_its_group_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = Harness()
    h.add_node("n1", cpu=4)
    h.add_group("small", min_member=2)
    h.add_pods("small", 2, cpu=1)
    h.add_group("big", min_member=2)
    h.add_pods("big", 2, cpu=3)  # 1 cpu left after "small": refused, and waits
    h.add_group("late", min_member=1)
    queued = count_calls(monkeypatch, h, "_queued")
    built = count_calls(monkeypatch, h, "_request")

    await h.scheduler.cycle()
    assert sorted(queued) == [(NS, "big"), (NS, "small")]  # "late" has no pods
    assert sorted(h.bound_pods()) == ["small-0", "small-1"]

    queued.clear()
    built.clear()
    h.clock.advance(3600)  # "big"'s backoff is over; nothing about it changed
    await h.scheduler.cycle()
    assert queued == []  # "small" is bound: it leaves the queue without being entered
    assert set(h.scheduler.queue.entries) == {(NS, "big")}
    assert built == [(NS, "big")]  # decided again, from the entry it kept

    h.add_pods("late", 1, cpu=1)
    await h.scheduler.cycle()
    assert queued == [(NS, "late")]
    assert "late-0" in h.bound_pods()

    queued.clear()
    h.scheduler.on_group((NS, "big"))  # a new version of the PodGroup
    await h.scheduler.cycle()
    assert (NS, "big") in queued


class GatedBinds:
    """The fake API server, with the requests to one path held until `gate` opens."""

    def __init__(self, api: FakeApiServer, path: str) -> None:
        self.api = api
        self.path = path
        self.gate = asyncio.Event()

    async def send(self, request: Request) -> tuple[int, Any]:
        if request.path == self.path:
            await self.gate.wait()
        return await self.api.send(request)

    def stream(self, request: Request) -> AsyncIterator[Body]:
        return self.api.stream(request)

    async def close(self) -> None:
        await self.api.close()


async def test_a_gang_in_flight_leaves_the_queue_and_a_refused_bind_brings_its_pod_back() -> None:
    """Pipelined cycles go on while binds are in flight: the next one must not decide the gang
    again, and a refusal that comes later must bring the pod back with no other event."""
    h = Harness()
    h.add_node("n1", cpu=8)
    g0, g1 = h.add_pods("gang", 2, cpu=2)
    h.add_group("gang", min_member=2)
    path = binding_path("gang-1")
    gated = GatedBinds(h.fake, path)
    h.scheduler.binder.kube.transport = gated
    h.fake.inject_error("POST", path, 404, "NotFound", 'pods "gang-1" not found')

    await h.scheduler.cycle(pipeline=True)
    (batch,) = h.scheduler.binder.batches
    await h.scheduler.cycle(pipeline=True)  # both binds in flight
    assert (NS, "gang") not in h.scheduler.queue.entries
    assert len(h.scheduler.binder.batches) == 1  # nothing decided, nothing sent again

    await until(lambda: pod_uid(g0) not in h.scheduler.queue.in_flight, "gang-0's bind answered")
    await h.scheduler.cycle(pipeline=True)
    assert (NS, "gang") not in h.scheduler.queue.entries  # gang-1 is still in flight

    gated.gate.set()
    await asyncio.wait_for(batch, WAIT_SECONDS)  # gang-1's bind is refused
    await h.scheduler.cycle()  # no watch event came: gang-0 counts as our own recent bind

    assert (h.node_of("gang-0"), h.node_of("gang-1")) == ("n1", "n1")
    assert h.binds("gang-1") == 2
    assert pod_uid(g1) not in h.scheduler.queue.in_flight


async def test_the_kept_queue_always_matches_one_entered_afresh() -> None:
    """Whatever happened to the pending pods, the binds in flight and the PodGroups, the
    entries the scheduler kept are those it would enter from scratch."""
    h = Harness()
    h.add_node("n1", cpu=6)
    for name, size, cpu in (("a", 2, 1), ("b", 3, 1), ("c", 2, 4), ("d", 2, 1)):
        h.add_group(name, min_member=size)
        h.add_pods(name, size, cpu=cpu)
    h.add_pod("solo", cpu=1)
    h.fake.inject_error("POST", binding_path("b-2"), 404, "NotFound", 'pods "b-2" not found')
    scheduler = h.scheduler

    def fresh() -> dict[Key, Any]:
        kept = dict(scheduler._refresh_queue(h.clock()))
        scheduler.queue.entries, scheduler.queue.stale = {}, set(scheduler.queue.pending)
        entered = dict(scheduler._refresh_queue(h.clock()))
        assert entered == kept
        return entered

    # a and b placed (b's third bind fails); c and d do not fit, and d, the head gang that can
    # fit once a and b end, reserves n1: solo, later and with no maxRunSeconds, waits too.
    await scheduler.cycle()
    assert set(fresh()) == {(NS, "b"), (NS, "c"), (NS, "d"), (NS, "pod:solo")}
    assert scheduler.reservations.book.of((NS, "d")) is not None
    assert [p["metadata"]["name"] for p in scheduler.queue.entries[(NS, "b")].waiting] == ["b-2"]

    h.watch_catches_up()
    body = copy.deepcopy(h.groups.get((NS, "c"))[0])
    body["spec"]["minMember"] = 1
    body["metadata"]["resourceVersion"] = "changed"
    h.groups.put((NS, "c"), body)
    scheduler.on_group((NS, "c"))
    assert fresh()[(NS, "c")].group.spec.min_member == 1  # type: ignore[union-attr]
    moved = copy.deepcopy(h.fake.get_object(PODS, "d-1", NS))
    moved["metadata"]["labels"][c.LABEL_POD_GROUP] = "c"  # d-1 moves to group c
    scheduler.on_pod("MODIFIED", moved)
    scheduler.on_pod("DELETED", h.fake.get_object(PODS, "d-0", NS))
    entries = fresh()
    assert [p["metadata"]["name"] for p in entries[(NS, "c")].waiting] == ["c-0", "c-1", "d-1"]
    assert (NS, "d") not in entries

    await scheduler.cycle()
    fresh()


# --- bind pacing ---------------------------------------------------------------------------------


class RecordingPacer(BindPacer):
    """A pacer that records what it is told and allows `answer` binds in flight."""

    def __init__(self, answer: int) -> None:
        super().__init__(floor=1, ceiling=1000, target_seconds=0.15)
        self.answer = answer
        self.told: list[tuple[float, float]] = []

    def observe(self, seconds: float, now: float) -> int:
        self.told.append((seconds, now))
        return self.answer


async def test_every_bind_answered_is_told_to_the_pacer_and_the_slots_follow_it() -> None:
    h = Harness()
    h.add_node("n1", cpu=100)
    h.add_group("gang", min_member=40)
    h.add_pods("gang", 40, cpu="100m")
    assert isinstance(h.scheduler.binder.pacer, BindPacer)
    assert h.scheduler.binder.allowed == tuning.BIND_CONCURRENCY  # paced by default, from the floor
    h.scheduler.binder.pacer = pacer = RecordingPacer(answer=77)

    await h.scheduler.cycle()

    assert h.binds() == 40
    assert len(pacer.told) == 40
    assert all(seconds >= 0 for seconds, _ in pacer.told)
    assert h.scheduler.binder.allowed == 77


async def test_a_fixed_bind_concurrency_is_never_paced() -> None:
    h = Harness()
    fixed = GangScheduler(
        h.kube, h.groups, h.members, publish=lambda key, verdict: None, bind_concurrency=4
    )
    fixed.on_node("ADDED", h.fake.seed(node("n1", cpu=100))[0])
    h.groups.put((NS, "gang"), h.fake.seed(podgroup("gang", NS, min_member=40))[0])
    for i in range(40):
        (stored,) = h.fake.seed(
            pod(f"gang-{i}", NS, group="gang", requests={"cpu": "100m"}, scheduler=c.SCHEDULER_NAME)
        )
        h.members.put((NS, "gang"), stored)
        fixed.on_pod("ADDED", stored)

    await fixed.cycle()

    assert h.binds() == 40
    assert fixed.binder.pacer is None and fixed.binder.allowed == 4


async def test_failed_binds_are_told_to_the_pacer_too() -> None:
    """A refused or unanswered bind says how long the API server's queue is as surely as a
    bound one: told only successes, a pacer whose binds all fail would never lower the limit."""
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("gang", min_member=3)
    h.add_pods("gang", 3, cpu=1)
    h.fake.inject_error("POST", binding_path("gang-1"), 404, "NotFound", 'pods "gang-1" not found')
    path = binding_path("gang-2")
    faulty = FaultyTransport(h.fake, matching=lambda r: r.path == path, fault=Fault.REFUSE)
    h.scheduler.binder.kube.transport = faulty
    h.scheduler.binder.pacer = pacer = RecordingPacer(answer=5)

    await h.scheduler.cycle()

    assert (h.node_of("gang-0"), h.node_of("gang-1"), h.node_of("gang-2")) == ("n1", None, None)
    assert faulty.refused == 1
    assert len(pacer.told) == 3
    assert h.scheduler.binder.allowed == 5


async def test_a_slow_decision_is_logged_with_the_gang_it_held_the_loop_for(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, decisions_in: str
) -> None:
    # Any decision counts as slow here: what is checked is that the log names the gang.
    monkeypatch.setattr(scheduler_module, "SLOW_DECISION_SECONDS", 0.0)
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("gang", min_member=3)
    h.add_pods("gang", 3)
    with caplog.at_level("WARNING", logger=scheduler_module.__name__):
        await h.scheduler.cycle()
    assert h.binds() == 3
    (slow,) = [r.getMessage() for r in caplog.records if "took" in r.getMessage()]
    assert slow.startswith("deciding default/gang (3 pods waiting) took ")
    if decisions_in == "in the thread":
        assert slow.endswith("in the worker thread, while the event loop went on")
    else:
        assert "lease renewal, webhooks, probes" in slow


# --- a replica that stopped leading sends no bind ------------------------------------------------


async def test_binds_refused_by_the_lease_fence_are_not_sent_and_the_pods_stay_undecided(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A leader that stood still past its renew deadline resumed sending the binds it had
    decided before (controllers/runtime.py fences its clients with `LeaderElector.holds`).
    A refused bind must reach no API server and leave nothing assumed: the pod is pending for
    whoever leads next, and a later cycle that may write binds it. Quietly: hundreds of binds
    can be queued at that moment, and each is no failure but the end of this replica's lead
    (the runtime logs their count once)."""
    caplog.set_level(logging.WARNING, logger=scheduler_module.__name__)
    caplog.set_level(logging.WARNING, logger=binder_module.__name__)
    h = Harness()
    holds = False
    h.scheduler.binder.kube = KubeClient(FencedTransport(h.fake, lambda: holds, "not leading"))
    h.add_node("n1", cpu=8)
    h.add_group("gang", min_member=2)
    pods = h.add_pods("gang", 2, cpu=2)

    await h.scheduler.cycle()

    assert h.binds() == 0
    assert not h.bound_pods()
    assert not any(h.scheduler.snapshot.is_assumed(pod_uid(p)) for p in pods)
    assert h.cpu_free("n1") == 8_000
    assert not caplog.records, [r.getMessage() for r in caplog.records]

    holds = True
    await h.scheduler.cycle()
    assert sorted(h.bound_pods()) == ["gang-0", "gang-1"]


async def test_a_namespace_being_deleted_is_said_once_and_its_gangs_are_left_until_a_recheck(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The namespace controller deletes a big namespace's pods over seconds; meanwhile each
    capacity freed placed its waiting gangs again, every bind was refused and each refusal
    logged (1,888 warnings in 7 s on the dev cluster for 300 gangs of 4 pods)."""
    caplog.set_level(logging.INFO, logger=scheduler_module.__name__)
    caplog.set_level(logging.INFO, logger=binder_module.__name__)
    said_by = (scheduler_module.__name__, binder_module.__name__)
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("gang", min_member=2)
    pods = h.add_pods("gang", 2, cpu=2)
    h.fake.terminate_namespace(NS)

    await h.scheduler.cycle()

    assert h.binds() == 2 and not h.bound_pods()
    assert not any(h.scheduler.snapshot.is_assumed(pod_uid(p)) for p in pods)
    assert h.cpu_free("n1") == 8_000
    said = [r for r in caplog.records if r.name in said_by]
    assert [r.levelno for r in said] == [logging.INFO], [r.getMessage() for r in said]
    assert said[0].getMessage().startswith(f"namespace {NS} is being deleted")
    # Capacity coming back does not decide it again, and no timer spins meanwhile.
    h.add_node("n2", cpu=8)
    await h.scheduler.cycle()
    assert h.binds() == 2
    due = h.scheduler._next_due()
    assert due is not None and due > scheduler_module.LEAVING_RECHECK_SECONDS - 1

    h.clock.advance(scheduler_module.LEAVING_RECHECK_SECONDS)
    await h.scheduler.cycle()
    assert h.binds() == 4  # checked again: still being deleted
    assert len([r for r in caplog.records if r.name in said_by]) == 2


async def test_a_pod_created_in_a_namespace_that_was_being_deleted_is_placed_at_once() -> None:
    """A namespace being deleted refuses new pods: a pod created there says it is back."""
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("gang", min_member=2)
    h.add_pods("gang", 2, cpu=2)
    h.fake.terminate_namespace(NS)
    await h.scheduler.cycle()
    assert h.binds() == 2 and not h.bound_pods()

    h.fake.recreate_namespace(NS)
    h.add_pod("solo", cpu=1)
    await h.scheduler.cycle()

    assert sorted(h.bound_pods()) == ["gang-0", "gang-1", "solo"]


# --- other schedulers' nominated pods ------------------------------------------------------------


def nominate(h: Harness, body: Body, node_name: str | None) -> None:
    """Another scheduler (kube-scheduler preempting) names, or withdraws, the pod's node."""
    body = copy.deepcopy(body)
    body["status"]["nominatedNodeName"] = node_name
    h.scheduler.on_pod("MODIFIED", body)


async def test_room_nominated_to_another_schedulers_pod_is_held_from_gangs_not_above_it() -> None:
    """As kube-scheduler's filters count nominated pods of no lower priority than the pod they
    place: a gang of the same priority leaves the room alone, a higher one takes it, and a
    nomination withdrawn gives the room back at once."""
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_node("n2", cpu=2)
    theirs = h.add_pod("theirs", cpu=6, scheduler=c.DEFAULT_SCHEDULER_NAME, priority=100)
    nominate(h, theirs, "n1")
    h.add_group("low", min_member=1)
    h.add_pods("low", 1, cpu=4, priority=100)

    await h.scheduler.cycle()

    assert h.bound_pods() == []
    assert not h.verdicts_for("low")[-1].placed
    assert h.cpu_free("n1") == 2000  # held while the nomination stands
    h.add_group("high", min_member=1)
    h.add_pods("high", 1, cpu=4, priority=1000)

    await h.scheduler.cycle()

    assert h.node_of("high-0") == "n1"
    # The nominated pod still counts for gangs not above it, though it no longer fits (as
    # in kube-scheduler, whose preemptor must then look again).
    assert h.cpu_free("n1") == -2000
    nominate(h, theirs, None)
    assert h.cpu_free("n1") == 4000
    await h.scheduler.cycle()  # due at once, not after its backoff
    assert h.node_of("low-0") == "n1"


async def test_a_nomination_moved_bound_or_deleted_moves_or_frees_its_room() -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_node("n2", cpu=8)
    theirs = h.add_pod("theirs", cpu=6, scheduler=c.DEFAULT_SCHEDULER_NAME, priority=100)
    nominate(h, theirs, "n1")
    assert (h.cpu_free("n1"), h.cpu_free("n2")) == (2000, 8000)
    nominate(h, theirs, "n2")
    assert (h.cpu_free("n1"), h.cpu_free("n2")) == (8000, 2000)
    bound = copy.deepcopy(theirs)
    bound["spec"]["nodeName"] = "n2"
    bound["status"]["nominatedNodeName"] = "n2"
    h.scheduler.on_pod("MODIFIED", bound)
    assert (h.cpu_free("n1"), h.cpu_free("n2")) == (8000, 2000)
    assert not h.scheduler.snapshot.is_assumed(pod_uid(bound))  # held as bound now
    assert h.scheduler.nominated.pods == {}
    h.scheduler.on_pod("DELETED", bound)
    assert h.cpu_free("n2") == 8000
