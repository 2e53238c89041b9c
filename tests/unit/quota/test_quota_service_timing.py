"""QuotaService's waits on the injected clocks: a pending pod's expiry and the sweep of record
entries whose group never came. Time moves only when the test advances it."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import KubeClient
from podgroup_operator.adapters.quota_record import CONFIG_MAPS, RECORD_KEY
from podgroup_operator.controllers.quota import (
    PENDING_POD_TTL,
    SWEEP_INTERVAL,
    ListedObjects,
    QuotaService,
)
from tests.builders import pod, podgroup
from tests.clock import T0, Clock
from tests.fakes import FakeApiServer
from tests.unit.quota.helpers import NS, quota
from tests.waiting import until

DEADLINE = f"{T0 + dt.timedelta(seconds=20):%Y-%m-%dT%H:%M:%SZ}"
"""A record entry's deadline, 20 s after the test's start."""


def service(*objects: dict[str, Any]) -> tuple[Clock, FakeApiServer, QuotaService]:
    clock = Clock()
    fake = FakeApiServer(clock=clock)
    fake.seed(*objects)
    kube = KubeClient(fake)
    quotas = QuotaService(kube, ListedObjects(kube), clock=clock, monotonic=clock.monotonic)
    return clock, fake, quotas


async def test_an_admitted_pod_counts_until_the_watch_shows_it_or_its_ttl_runs_out() -> None:
    """Members of a group reserving 2 CPUs: one admitted but not yet stored (another admission
    step may still refuse it) counts against the reservation for PENDING_POD_TTL seconds."""
    (group,) = FakeApiServer().seed(podgroup("g", NS, min_member=1, totalResources={"cpu": "2"}))
    entry = {"uid": group["metadata"]["uid"], "total": {"cpu": "2"}, "deadline": DEADLINE}
    clock, _, quotas = service(quota("compute", {"requests.cpu": 4}), group, record({"g": entry}))

    async def admitted(name: str, cpu: int) -> bool:
        member = pod(name, group="g", requests={"cpu": cpu})
        return (await quotas.admit_pod(member, dry_run=False)).allowed

    assert await admitted("a", 2)
    assert not await admitted("b", 1)  # a counts, though the watch has not shown it
    clock.advance(PENDING_POD_TTL - 0.1)
    assert not await admitted("b", 1)
    clock.advance(0.1)  # a never showed: it no longer counts
    assert await admitted("b", 1)


async def settle(rounds: int = 500) -> None:
    """Let the service's workers run: yield to the loop (never sleep)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


def record(entries: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": c.QUOTA_LEDGER_CONFIG_MAP, "namespace": NS},
        "data": {RECORD_KEY: json.dumps(entries)},
    }


def stored_entries(fake: FakeApiServer) -> set[str]:
    body = fake.get_object(CONFIG_MAPS, c.QUOTA_LEDGER_CONFIG_MAP, NS)
    assert body is not None
    return set(json.loads(body["data"][RECORD_KEY]))


async def test_an_entry_whose_group_never_came_is_released_by_the_sweep_after_its_deadline() -> (
    None
):
    """No event comes for a group that was admitted but never stored: the sweep, every
    SWEEP_INTERVAL seconds, finds its entry past its deadline."""
    deadline = T0 + dt.timedelta(seconds=20)
    ghost = {
        "uid": "0000-ghost",
        "total": {"cpu": "1"},
        "deadline": f"{deadline:%Y-%m-%dT%H:%M:%SZ}",
    }
    clock, fake, quotas = service(quota("compute", {"requests.cpu": 2}), record({"ghost": ghost}))
    await quotas.namespace(NS)
    quotas.start()
    try:
        await settle()  # the start's reconcile of every known group: the ghost stays
        clock.advance(20.0 - SWEEP_INTERVAL / 2)  # a sweep before the deadline
        await settle()
        assert stored_entries(fake) == {"ghost"}
        clock.advance(SWEEP_INTERVAL)  # the next sweep, after it
        await until(lambda: stored_entries(fake) == set(), "the ghost entry released")
    finally:
        await quotas.stop()
