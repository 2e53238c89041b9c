"""/metrics, /readyz and /livez of the running operator, read as Prometheus and kubelet would."""

from __future__ import annotations

import asyncio
import json

from podgroup_operator import constants as c
from podgroup_operator import tuning
from podgroup_operator.adapters.kube import KubeClient
from podgroup_operator.devcluster.process import OperatorProcess
from tests.kube_helpers import (
    create_group,
    gang_pods,
    http_get,
    pool,
    sample,
    scrape,
    wait_group,
)
from tests.waiting import wait_for


async def test_a_gang_shows_in_the_metrics_and_the_operator_is_ready_and_alive(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    base = f"http://127.0.0.1:{operator.metrics_port}"
    before = await scrape(operator)
    async with pool(kube, count=1, cpu="4", memory="16Gi") as (_, name):
        await create_group(kube, namespace, "seen", minMember=2)
        await gang_pods(kube, namespace, "s", 2, name, group="seen")
        await wait_group(kube, namespace, "seen", timeout=30, phase=c.Phase.RUNNING)
    after = await scrape(operator)

    def grew(name: str, by: float, **labels: str) -> bool:
        return sample(after, name, **labels) - sample(before, name, **labels) >= by

    assert grew("podgroup_binds_total", 2, result="bound")
    assert grew("podgroup_scheduling_attempts_total", 1, result="placed")
    assert grew("podgroup_status_writes_total", 1)
    assert grew(
        "podgroup_webhook_duration_seconds_count", 1, webhook="validate-podgroup", result="allowed"
    )
    assert sample(after, "podgroup_podgroups", phase="Running") >= 1
    assert sample(after, "podgroup_leader") == 1
    # Sampled every half second for as long as the operator runs (the gang above may have
    # taken less than that): the count goes on growing.
    lag_count = "podgroup_event_loop_lag_seconds_count"

    async def sampled_again() -> bool:
        return sample(await scrape(operator), lag_count) > sample(after, lag_count)

    await wait_for(sampled_again, 10, "the event loop's lag to be sampled again")
    # The collector ran at least once after start-up (the informers' first lists end with one).
    assert sum(sample(after, "podgroup_gc_pause_seconds_count", generation=g) for g in "012") >= 1
    # The session's operator runs with the defaults: binds paced between the floor and ceiling.
    allowed = sample(after, "podgroup_binds_allowed_in_flight")
    assert tuning.BIND_CONCURRENCY <= allowed <= tuning.BIND_CONCURRENCY_CEILING
    for kind in ("pods", "nodes", "podgroups", "resourcequotas"):
        assert sample(after, "podgroup_informer_synced", kind=kind) == 1
        assert ("podgroup_informer_objects", (("kind", kind),)) in after
        assert sample(after, "podgroup_informer_lists_total", kind=kind) >= 1
        assert ("podgroup_informer_watch_stalls_total", (("kind", kind),)) in after

    ready_status, ready = await asyncio.to_thread(http_get, f"{base}/readyz")
    assert ready_status == 200 and all(json.loads(ready)["informers_synced"].values())
    assert json.loads(ready)["webhooks_serving"] is True
    live_status, live = await asyncio.to_thread(http_get, f"{base}/livez")
    assert live_status == 200 and not any(json.loads(live)["stuck"].values())
