"""The runtime over the in-memory API server: readiness follows the informers' first list."""

from __future__ import annotations

import asyncio

from podgroup_operator.adapters.kube import KubeClient
from podgroup_operator.controllers.runtime import Runtime
from podgroup_operator.settings import OperatorSettings
from tests.builders import node, pod
from tests.fakes import FakeApiServer


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
