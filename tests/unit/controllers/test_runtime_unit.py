"""The runtime over the in-memory API server: readiness follows the informers' first list."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from podgroup_operator.adapters import heap
from podgroup_operator.adapters import informers as informers_module
from podgroup_operator.adapters.kube import JSON, LEASES, KubeClient, Request, Transport
from podgroup_operator.constants import LEADER_LEASE_NAME, SCHEDULER_NAME
from podgroup_operator.controllers.runtime import HeldLoop, Leading, Runtime, measure_loop_lag
from podgroup_operator.scheduling.volumes import BindingMode
from podgroup_operator.settings import OperatorSettings
from tests.builders import node, pod
from tests.fakes import FakeApiServer
from tests.waiting import until


@contextlib.asynccontextmanager
async def leading_over(api: FakeApiServer) -> AsyncIterator[tuple[Runtime, Leading]]:
    """A runtime over `api`, synced and just made leader (without election)."""
    runtime = Runtime(OperatorSettings(leader_election=False, metrics_address=""), KubeClient(api))
    await runtime.start()
    try:
        await asyncio.wait_for(runtime.informers.wait_synced(), 2)
        await until(lambda: runtime.leading is not None, "leading")
        assert runtime.leading is not None
        yield runtime, runtime.leading
    finally:
        await runtime.stop()


async def test_not_ready_before_the_first_list_ready_after_and_leading_without_election() -> None:
    api = FakeApiServer()
    api.seed(node("n1"), pod("p", group="g"))
    pods_listed = api.hold("GET", "/api/v1/pods")
    runtime = Runtime(OperatorSettings(leader_election=False, metrics_address=""), KubeClient(api))
    await runtime.start()
    try:
        for _ in range(100):  # the other kinds list meanwhile; pods are held
            await asyncio.sleep(0)
        ready, details = runtime.readiness()
        assert not ready and details["informers_synced"]["pods"] is False
        pods_listed.set()
        await asyncio.wait_for(runtime.informers.wait_synced(), 2)
        for _ in range(100):
            if runtime.leading is not None:
                break
            await asyncio.sleep(0)
        ready, details = runtime.readiness()
        assert ready and details["leading"] is True
        assert runtime.metric_snapshot()["informers"]["pods"]["objects"] == 1
    finally:
        await runtime.stop()


async def test_the_leaders_scheduler_sees_volumes_claims_and_their_storage_classes() -> None:
    api = FakeApiServer()
    api.seed(
        node("n1"),
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "local"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv1"},
            "spec": {"storageClassName": "local", "capacity": {"storage": "1Gi"}},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "default"},
            "spec": {"storageClassName": "local"},
        },
    )
    async with leading_over(api) as (_, leading):
        scheduler = leading.scheduler
        await until(lambda: set(scheduler.snapshot.volumes.pvs) == {"pv1"}, "the PV's replay")
        member = pod(
            "p", group="g", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
        )
        (claim,) = scheduler.volumes.claims_for([member]).values()
        assert claim.binding_mode is BindingMode.WAIT_FOR_FIRST_CONSUMER


async def test_the_leaders_controllers_start_only_after_every_store_is_replayed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The replay lets the loop run between slices; the scheduler and the status reconciler
    start only once every node and pod was replayed."""
    monkeypatch.setattr(informers_module, "REPLAY_SLICE", 1)
    api = FakeApiServer()
    members = (pod(f"p{i}", group="g", scheduler=SCHEDULER_NAME) for i in range(4))
    api.seed(node("n1"), node("n2"), *members)
    async with leading_over(api) as (_, leading):
        turns = 0
        while leading.scheduler._task is None:
            turns += 1
            await asyncio.sleep(0)
        assert turns > 1  # the replay took several turns of the loop, not one
        # The scheduler started only once every node and pod had been replayed to it.
        assert set(leading.scheduler.queue.pending) == {("default", "g")}
        assert len(leading.scheduler.queue.pending[("default", "g")]) == 4
        assert set(leading.scheduler.snapshot.nodes) == {"n1", "n2"}


async def test_a_new_leader_places_nothing_before_its_pod_watch_caught_up_with_the_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scheduler starts only once the pod watch has brought every change made before this
    replica took the Lease (`Informer.caught_up`, tested in test_informers.py), so that the
    last leader's last binds are in the snapshot before the first placement."""
    asked: list[tuple[str, str]] = []
    caught_up = asyncio.Event()

    async def held(self: informers_module.Informer, version: str, **_: float) -> bool:
        asked.append((self.name, version))
        await caught_up.wait()
        return True

    monkeypatch.setattr(informers_module.Informer, "caught_up", held)
    api = FakeApiServer()
    api.seed(node("n1"), *(pod(f"p{i}", group="g", scheduler=SCHEDULER_NAME) for i in range(2)))
    settings = OperatorSettings(metrics_address="", lease_namespace="default")
    runtime = Runtime(settings, KubeClient(api))
    await runtime.start()
    try:
        await until(lambda: asked, "the wait for the pod watch")
        leading = runtime.leading
        assert leading is not None and runtime.elector is not None
        lease = api.get_object(LEASES, LEADER_LEASE_NAME, "default")
        assert lease is not None and lease["spec"]["holderIdentity"] == runtime.elector.identity
        ((informer, version),) = asked
        assert informer == "pods"
        assert 0 < int(version) <= int(lease["metadata"]["resourceVersion"])
        assert leading.scheduler._task is None
        assert leading.status._tasks  # status work does not wait for it
        caught_up.set()
        await until(lambda: leading.scheduler._task is not None, "the scheduler's start")
    finally:
        await runtime.stop()


class _Timeline:
    """Transports over one fake API server that note, in order, the writer's close and the
    Lease's writes."""

    def __init__(self, api: FakeApiServer) -> None:
        self.api = api
        self.seen: list[str] = []

    def transport(self, name: str) -> Transport:
        timeline = self

        class Noting:
            async def send(self, request: Request) -> tuple[int, Any]:
                if request.method == "PUT" and "/leases/" in request.path:
                    timeline.seen.append(f"{name}: lease written")
                return await timeline.api.send(request)

            def stream(self, request: Request) -> AsyncIterator[JSON]:
                return timeline.api.stream(request)

            async def close(self) -> None:
                timeline.seen.append(f"{name}: closed")

        return Noting()


async def test_the_writer_process_is_done_before_the_lease_is_released() -> None:
    """What the leader handed the writer process before it stopped, cancelled binds too, goes
    out and is answered before the Lease is released: a bind landing after the next leader's
    placements would fail a pod on a node they filled."""
    api = FakeApiServer()
    api.seed(node("n1"))
    timeline = _Timeline(api)
    runtime = Runtime(
        OperatorSettings(metrics_address="", lease_namespace="default"),
        KubeClient(api),
        writer=KubeClient(timeline.transport("writer")),
        lease_kube=KubeClient(timeline.transport("lease")),
    )
    await runtime.start()
    try:
        await until(lambda: runtime.leading is not None, "leading")
        timeline.seen.clear()  # the Lease taken and renewed so far
        await runtime.hand_over()
        assert "writer: closed" in timeline.seen
        assert timeline.seen[-1] == "lease: lease written"  # the release, after the close
        stored = api.get_object(LEASES, LEADER_LEASE_NAME, "default")
        assert stored is not None and stored["spec"]["holderIdentity"] == ""
    finally:
        await runtime.stop()


async def test_losing_the_lead_during_the_replay_starts_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stop during the replay ends it: neither controller starts, no handler is left."""
    monkeypatch.setattr(informers_module, "REPLAY_SLICE", 1)
    api = FakeApiServer()
    api.seed(node("n1"), *(pod(f"p{i}", group="g") for i in range(4)))
    async with leading_over(api) as (runtime, leading):
        await runtime.stop_leading()  # the replay has had at most one turn
        assert leading.scheduler._task is None
        assert leading.status._tasks == []
        for informer in runtime.informers.all():
            assert leading.on_pod not in informer._handlers
            assert leading.on_node not in informer._handlers


async def test_the_loop_lag_is_how_long_something_held_the_event_loop() -> None:
    lags: list[float] = []
    task = asyncio.create_task(measure_loop_lag(lags.append, period=0.01))
    try:
        await until(lambda: lags, "a first sample")
        time.sleep(0.3)  # hold the loop, as a long gang decision does
        await until(lambda: any(lag >= 0.25 for lag in lags), "the held loop's lag")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_held_loop_is_told_with_when_it_began() -> None:
    held: list[tuple[float, float]] = []
    began = time.monotonic()
    task = asyncio.create_task(
        measure_loop_lag(lambda lag: None, period=0.01, held=lambda *a: held.append(a[:2]))
    )
    try:
        await asyncio.sleep(0.05)
        time.sleep(0.3)  # hold the loop, as a long gang decision does
        await until(lambda: held, "the held loop to be told")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    ((lag, since),) = held
    assert lag >= 0.25 and began <= since <= time.monotonic() - 0.3


def test_a_held_loop_is_logged_naming_the_collector_and_at_most_every_ten_seconds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pauses = heap.Pauses()
    pauses.slow.extend(
        [
            heap.SlowPause(5.0, 0.2, 0.2, 2, 9),
            heap.SlowPause(12.0, 0.4, 0.38, 2, 70_000),
            heap.SlowPause(12.5, 0.15, 0.01, 0, 3),
        ]
    )
    clock = [12.6]
    report = HeldLoop(pauses, clock=lambda: clock[0])
    with caplog.at_level(logging.WARNING, logger="podgroup_operator.controllers.runtime"):
        report(0.6, 11.9, 0.5)  # the two collections that ended after 11.9
        clock[0] = 13.0
        report(0.3, 12.7, 0.3)  # within ten seconds: counted, not logged
        clock[0] = 23.0
        report(0.4, 22.1, 0.1)  # no collection in that time, and little CPU
    first, second = (r.getMessage() for r in caplog.records)
    assert first == (
        "the event loop was held 0.60 s (lease renewal, watches, webhooks waited): the process "
        "ran 0.50 s of the last 0.70 s; the garbage collector took 0.55 s of it (generation 2, "
        "0.38 s of CPU, 70000 object(s) freed; generation 0, 0.01 s of CPU, 3 object(s) freed)"
    )
    assert second == (
        "the event loop was held 0.40 s (lease renewal, watches, webhooks waited): the process "
        "ran 0.10 s of the last 0.90 s (it waited for a core); no garbage collection of 0.1 s "
        "or more: a long decision, or a burst of events; held 1 more time(s) since the last "
        "such line"
    )
