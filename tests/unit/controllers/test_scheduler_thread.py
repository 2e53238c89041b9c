"""Large gangs are decided in the scheduler's worker thread while the event loop goes on; what
comes for the snapshot meanwhile (events, bind answers) waits for the decision and then
applies in order (controllers/scheduler.py).

A decision is held in the thread by a wrapper around the pure `place_group` that waits for the
test's word, so each test sees the loop run while the thread decides, and nothing here depends
on timing: the test waits for the thread to say it started, and every wait has a bound.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from podgroup_operator.constants import SCHEDULER_NAME, WatchEventType
from podgroup_operator.controllers import offload as offload_module
from podgroup_operator.controllers import preemption as preemption_module
from podgroup_operator.controllers import scheduler as scheduler_module
from podgroup_operator.scheduling.gang import NODE_EXPRESSION_COST, POD_TERM_COST, GangRequest
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.unit.controllers.test_gang_scheduler_unit import Harness

WAIT = 10.0
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
PV = {
    "metadata": {"name": "pv-1"},
    "spec": {"storageClassName": "local", "capacity": {"storage": "1Gi"}},
    "status": {"phase": "Available"},
}


class HeldDecision:
    """`place_group` that, for the gangs named, waits in the thread until `release()`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *held: str) -> None:
        self.held = set(held)
        self.started = threading.Event()
        self.proceed = threading.Event()
        self.threads: list[str] = []
        real: Callable[[GangRequest, Snapshot], Any] = scheduler_module.place_group

        def place(request: GangRequest, snapshot: Snapshot) -> Any:
            self.threads.append(threading.current_thread().name)
            if request.name in self.held:
                self.started.set()
                assert self.proceed.wait(WAIT), "the test never released the decision"
            return real(request, snapshot)

        monkeypatch.setattr(scheduler_module, "place_group", place)

    async def wait_started(self) -> None:
        assert await asyncio.to_thread(self.started.wait, WAIT), "no decision started"

    def release(self) -> None:
        self.proceed.set()


async def eventually(check: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while not check():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def threaded_harness() -> Harness:
    h = Harness()
    h.scheduler.thread_members = 2
    return h


async def held_in_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Harness, HeldDecision, asyncio.Task[None]]:
    """A gang of two that fits on n1, its decision started and held in the worker thread."""
    h = threaded_harness()
    h.add_node("n1", cpu=8)
    h.add_group("gang", min_member=2)
    h.add_pods("gang", 2)
    decision = HeldDecision(monkeypatch, "gang")
    cycle = asyncio.create_task(h.scheduler.cycle())
    await decision.wait_started()
    return h, decision, cycle


async def test_a_node_arriving_while_the_thread_decides_waits_for_it_then_applies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h, decision, cycle = await held_in_thread(monkeypatch)
    # The event loop runs (this test is on it) while the thread decides.
    assert h.scheduler.offload.deciding
    h.add_node("n2", cpu=8)
    h.scheduler.volumes.on_volume(WatchEventType.ADDED, PV, None)
    assert h.scheduler.offload.deferred_total == 2
    # The thread's snapshot is not touched.
    assert "n2" not in h.scheduler.snapshot.nodes
    assert "pv-1" not in h.scheduler.snapshot.volumes.pvs
    decision.release()
    await asyncio.wait_for(cycle, WAIT)

    assert not h.scheduler.offload.deciding
    assert "n2" in h.scheduler.snapshot.nodes
    assert "pv-1" in h.scheduler.snapshot.volumes.pvs
    assert sorted(h.bound_pods()) == ["gang-0", "gang-1"]
    assert decision.threads == ["podgroup-decision_0"]


async def test_a_gang_under_the_threshold_is_decided_on_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = threaded_harness()
    h.add_node("n1", cpu=8)
    h.add_group("solo", min_member=1)
    h.add_pods("solo", 1)
    decision = HeldDecision(monkeypatch)

    await h.scheduler.cycle()

    assert h.bound_pods() == ["solo-0"]
    assert decision.threads == [threading.current_thread().name]


def affinity_to_app(terms: int) -> dict[str, Any]:
    """`terms` required pod-affinity terms, each to the pods labelled `app` (any value)."""
    term = {
        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
        "topologyKey": "kubernetes.io/hostname",
    }
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term] * terms}}


@pytest.mark.parametrize(("terms", "in_thread"), [(1, False), (2, True)])
async def test_a_small_gang_whose_pod_terms_are_costly_is_decided_in_the_thread(
    monkeypatch: pytest.MonkeyPatch, terms: int, in_thread: bool
) -> None:
    """A member with hundreds of pod-affinity terms held the event loop for seconds (scheduler
    DECIDE_IN_THREAD_COST_US): the threshold here is 2 terms times the snapshot's 2 pods."""
    h = Harness()
    h.scheduler.thread_cost_us = 4 * POD_TERM_COST
    h.add_node("n1", cpu=8)
    for name in ("web-0", "web-1"):
        h.add_pod(name, node="n1", phase="Running", labels={"app": "web"})
    h.add_group("solo", min_member=1)
    h.add_pods("solo", 1, affinity=affinity_to_app(terms))
    decision = HeldDecision(monkeypatch)

    await h.scheduler.cycle()

    assert h.bound_pods("solo") == ["solo-0"]
    loop_thread = threading.current_thread().name
    assert decision.threads == ["podgroup-decision_0" if in_thread else loop_thread]


async def test_a_small_gang_with_costly_node_affinity_is_decided_in_the_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """100 preferred node-affinity terms of 10 expressions took 2.1 s for one member on 5,000
    nodes: here 3 expressions on the one node reach the threshold."""
    h = Harness()
    h.scheduler.thread_cost_us = 3 * NODE_EXPRESSION_COST
    h.add_node("n1", cpu=8)
    expression = {"key": "kubernetes.io/hostname", "operator": "Exists"}
    preferred = [{"weight": 1, "preference": {"matchExpressions": [expression] * 3}}]
    h.add_group("solo", min_member=1)
    h.add_pods("solo", 1, affinity={"nodeAffinity": {PREFERRED: preferred}})
    decision = HeldDecision(monkeypatch)

    await h.scheduler.cycle()

    assert h.bound_pods("solo") == ["solo-0"]
    assert decision.threads == ["podgroup-decision_0"]


async def test_bind_answers_during_a_later_decision_are_booked_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pipelined cycle sends the first gang's binds, then decides the second in the thread:
    the first gang's bind answers come meanwhile and are booked (pods no longer pending)
    only once that decision is done."""
    monkeypatch.setattr(scheduler_module, "YIELD_SECONDS", 0.0)  # send binds between decisions
    h = threaded_harness()
    h.add_node("n1", cpu=8)
    h.add_group("first", min_member=2, priority=10)
    h.add_pods("first", 2)
    h.add_group("second", min_member=2)
    h.add_pods("second", 2)
    decision = HeldDecision(monkeypatch, "second")

    cycle = asyncio.create_task(h.scheduler.cycle(pipeline=True))
    await decision.wait_started()
    await eventually(lambda: h.binds() == 2, "the first gang's binds to be answered")
    await eventually(
        lambda: h.scheduler.offload.deferred_total >= 4, "their answers to be held back"
    )
    assert sorted(h.bound_pods()) == ["first-0", "first-1"]
    assert ("default", "first") in h.scheduler.queue.pending  # not booked yet
    decision.release()
    await asyncio.wait_for(cycle, WAIT)
    await eventually(lambda: h.binds() == 4, "the second gang's binds")
    await eventually(lambda: not h.scheduler.binder.batches, "every bind batch to end")

    assert ("default", "first") not in h.scheduler.queue.pending
    assert not h.scheduler.queue.in_flight
    assert sorted(h.bound_pods()) == ["first-0", "first-1", "second-0", "second-1"]


async def test_a_cycle_cancelled_mid_decision_leaves_the_snapshot_to_the_thread_until_it_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h, decision, cycle = await held_in_thread(monkeypatch)
    cycle.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cycle
    assert h.scheduler.offload.deciding  # the thread cannot be stopped: still its snapshot
    h.add_node("n2", cpu=8)
    assert "n2" not in h.scheduler.snapshot.nodes
    decision.release()
    await eventually(lambda: not h.scheduler.offload.deciding, "the thread to end")

    assert "n2" in h.scheduler.snapshot.nodes
    assert h.binds() == 0  # the cancelled cycle's placement is never sent


async def test_a_held_back_event_that_raises_is_logged_and_the_rest_still_apply(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    h, decision, cycle = await held_in_thread(monkeypatch)
    nameless = {"metadata": {"namespace": "default"}, "spec": {"schedulerName": SCHEDULER_NAME}}
    h.scheduler.on_pod("ADDED", nameless)  # a pending pod of ours without a name: raises
    h.add_node("n2", cpu=8)
    decision.release()
    with caplog.at_level("ERROR", logger=offload_module.__name__):
        await asyncio.wait_for(cycle, WAIT)

    assert "n2" in h.scheduler.snapshot.nodes
    assert h.scheduler.offload.deferred_errors == 1
    assert any(
        "GangScheduler._on_pod, held back during a decision" in r.getMessage()
        for r in caplog.records
    )
    assert sorted(h.bound_pods()) == ["gang-0", "gang-1"]


async def test_a_large_gangs_preemption_plan_is_made_in_the_thread_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = threaded_harness()
    h.add_node("n1", cpu=4)
    h.add_group("low", min_member=2)
    for i in range(2):
        h.add_pod(f"low-{i}", group="low", cpu=2, node="n1", priority=1)
    h.add_group("high", min_member=2)
    h.add_pods("high", 2, cpu=2, priority=10)
    planned_in: list[str] = []
    real = preemption_module.plan_preemption

    def plan(*args: Any) -> Any:
        planned_in.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(preemption_module, "plan_preemption", plan)

    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()

    assert planned_in == ["podgroup-decision_0"]
    assert len([r for r in h.fake.request_log if r.method == "DELETE"]) == 2
    assert not h.scheduler.offload.deciding


@pytest.mark.parametrize(("pods_from", "where"), [(5, "podgroup-decision_0"), (6, "MainThread")])
async def test_a_small_gangs_plan_on_a_snapshot_of_many_pods_is_made_in_the_thread(
    monkeypatch: pytest.MonkeyPatch, pods_from: int, where: str
) -> None:
    """Decided on the event loop (two members, no terms), but planned in the thread once the
    snapshot holds `plan_thread_pods` pods: a plan walks the pods of the nodes it may free."""
    h = Harness()
    h.scheduler.plan_thread_pods = pods_from
    h.add_node("n1", cpu=4)
    h.add_node("n2", cpu=1)
    h.add_group("low", min_member=2)
    for i in range(2):
        h.add_pod(f"low-{i}", group="low", cpu=2, node="n1", priority=1)
    for i in range(3):
        h.add_pod(f"other-{i}", cpu="100m", node="n2", priority=1)
    h.add_group("high", min_member=2)
    h.add_pods("high", 2, cpu=2, priority=10)
    planned_in: list[str] = []
    decided_in: list[str] = []
    real_plan = preemption_module.plan_preemption
    real_place = scheduler_module.place_group

    def plan(*args: Any) -> Any:
        planned_in.append(threading.current_thread().name)
        return real_plan(*args)

    def place(*args: Any) -> Any:
        decided_in.append(threading.current_thread().name)
        return real_place(*args)

    monkeypatch.setattr(preemption_module, "plan_preemption", plan)
    monkeypatch.setattr(scheduler_module, "place_group", place)

    assert h.scheduler.snapshot.pod_count == 5  # at the threshold of the first case only

    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()

    assert decided_in == ["MainThread"]
    assert planned_in == [where]
    assert len([r for r in h.fake.request_log if r.method == "DELETE"]) == 2
    assert not h.scheduler.offload.deciding
