"""Bind pacing on the real control plane: the pacer is told the API server's real answers and
the scheduler's slots follow the limit it chooses.

An operator runtime in this process (as test_operator_in_process.py builds one) schedules pods
of a scheduler name of its own, so the session's operator never binds them. Its pacer is given
a target that makes every real answer plainly fast (10 s) or plainly slow (a microsecond): the
limit must go up in the first case and down in the second. Each case binds one pod, lets a whole
PERIOD_SECONDS pass, and binds MIN_SAMPLES more at once, so that the pacer decides once, on real
answers all within its WINDOW_SECONDS, however fast the machine answers them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from podgroup_operator.adapters.kube import PODS, KubeClient
from podgroup_operator.controllers.runtime import Runtime
from podgroup_operator.controllers.scheduler import GangScheduler
from podgroup_operator.scheduling.pacing import MIN_SAMPLES, PERIOD_SECONDS, BindPacer
from podgroup_operator.settings import OperatorSettings, WebhookMode
from tests.kube_helpers import create_pod, pool
from tests.waiting import until, wait_for

SCHEDULER = "pacing-test-scheduler"
FLOOR, CEILING = 2, 64


@pytest.fixture
async def scheduler(kubeconfig: Path, namespace: str, crds: None) -> AsyncIterator[GangScheduler]:
    """The in-process runtime's scheduler, leading as soon as its informers are synced."""
    settings = OperatorSettings(
        namespaces=[namespace],
        webhook_mode=WebhookMode.OFF,
        metrics_address="",
        leader_election=False,
        scheduler_names=[SCHEDULER],
    )
    runtime = Runtime(settings, KubeClient.from_kubeconfig(str(kubeconfig)))
    await runtime.start()
    try:
        await until(lambda: runtime.leading is not None, "the runtime to lead", 30)
        assert runtime.leading is not None
        assert runtime.leading.scheduler.binder.pacer is not None  # paced unless told a number
        yield runtime.leading.scheduler
    finally:
        await runtime.stop()  # closes its client


async def bind_and_decide(kube: KubeClient, namespace: str, pool_name: str, wave: str) -> None:
    """Bind one pod, wait out a period, bind MIN_SAMPLES more: the pacer has decided by then."""

    async def create_and_wait_bound(names: list[str]) -> None:
        await asyncio.gather(
            *(
                create_pod(
                    kube,
                    namespace,
                    name,
                    scheduler=SCHEDULER,
                    requests={"cpu": "10m"},
                    nodeSelector={"pool": pool_name},
                )
                for name in names
            )
        )

        async def all_bound() -> bool:
            pods = (await kube.list(PODS, namespace))["items"]
            bound = {p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")}
            return set(names) <= bound

        await wait_for(all_bound, 30, f"{wave}: {names} bound")

    await create_and_wait_bound([f"{wave}-first"])
    await asyncio.sleep(PERIOD_SECONDS)  # not a wait for something to happen: time must pass
    await create_and_wait_bound([f"{wave}-{i}" for i in range(MIN_SAMPLES)])


async def test_the_slots_follow_the_pacer_up_on_fast_answers_and_down_on_slow_ones(
    kube: KubeClient, namespace: str, scheduler: GangScheduler
) -> None:
    async with pool(kube, count=1, cpu="8", memory="16Gi") as (_, pool_name):
        fast = scheduler.binder.pacer = BindPacer(floor=FLOOR, ceiling=CEILING, target_seconds=10.0)
        await bind_and_decide(kube, namespace, pool_name, "fast")
        # 2 x min(1.5, (10 s / median) ** 0.25): up, since no real bind takes 2 s.
        assert fast.limit == 3, fast
        assert scheduler.binder.allowed == 3

        slow = scheduler.binder.pacer = BindPacer(
            floor=FLOOR, ceiling=CEILING, target_seconds=1e-6, limit=40
        )
        await bind_and_decide(kube, namespace, pool_name, "slow")
        # 40 x max(0.75, (1 us / median) ** 0.25): down, since every real bind takes over 4 us.
        assert slow.limit == 30, slow
        assert scheduler.binder.allowed == 30
