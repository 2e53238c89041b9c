"""/metrics, /readyz and /livez of the running operator, read as Prometheus and kubelet would."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import KubeClient
from podgroup_operator.devcluster.process import OperatorProcess
from tests.kube_helpers import create_group, gang_pods, pool, wait_group


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_a_gang_shows_in_the_metrics_and_the_operator_is_ready_and_alive(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    base = f"http://127.0.0.1:{operator.metrics_port}"
    before = samples((await asyncio.to_thread(_get, f"{base}/metrics"))[1])
    async with pool(kube, count=1, cpu="4", memory="16Gi") as (_, name):
        await create_group(kube, namespace, "seen", minMember=2)
        await gang_pods(kube, namespace, "s", 2, name, group="seen")
        await wait_group(kube, namespace, "seen", timeout=30, phase=c.Phase.RUNNING)
    status, text = await asyncio.to_thread(_get, f"{base}/metrics")
    assert status == 200
    after = samples(text)

    def grew(name: str, by: float, **labels: str) -> bool:
        return value(after, name, **labels) - value(before, name, **labels) >= by

    assert grew("podgroup_binds_total", 2, result="bound")
    assert grew("podgroup_scheduling_attempts_total", 1, result="placed")
    assert grew("podgroup_status_writes_total", 1)
    assert grew(
        "podgroup_webhook_duration_seconds_count", 1, webhook="validate-podgroup", result="allowed"
    )
    assert value(after, "podgroup_podgroups", phase="Running") >= 1
    assert value(after, "podgroup_leader") == 1
    for kind in ("pods", "nodes", "podgroups", "resourcequotas"):
        assert value(after, "podgroup_informer_synced", kind=kind) == 1
        assert ("podgroup_informer_objects", (("kind", kind),)) in after

    ready_status, ready = await asyncio.to_thread(_get, f"{base}/readyz")
    assert ready_status == 200 and all(json.loads(ready)["informers_synced"].values())
    assert json.loads(ready)["webhooks_serving"] is True
    live_status, live = await asyncio.to_thread(_get, f"{base}/livez")
    assert live_status == 200 and not any(json.loads(live)["stuck"].values())
