"""Informers on the real API server: through connections that break (reset, or dead and silent),
and over the TLS connections the operator sizes for watches.

The faults come from a TCP proxy (tests/faults.py) between the informer and the real API
server; the objects are created directly. Each test waits for an object created after the
fault to reach the informer's store, which it cannot do through the broken connection, and then
checks how the informer got there: by watching again from the last version it had, never by
listing every object again.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from podgroup_operator.adapters import heap
from podgroup_operator.adapters.informers import Informer
from podgroup_operator.adapters.kube import PODS, KubeClient
from podgroup_operator.adapters.slim import slim_pod
from tests.conftest import ClusterUnderTest
from tests.faults import FaultyProxy, faulty_proxy
from tests.kube_helpers import create_pod
from tests.waiting import until

WATCH_SECONDS = (2, 2)
"""Watches the server ends after 2 s, so that a dead one shows within seconds, not minutes."""
GRACE_SECONDS = 1.0


@pytest.fixture
async def proxy(cluster: ClusterUnderTest) -> AsyncIterator[FaultyProxy]:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    async with faulty_proxy(config["clusters"][0]["cluster"]["server"]) as running:
        yield running


@pytest.fixture
async def proxied(
    cluster: ClusterUnderTest, proxy: FaultyProxy, tmp_path: Path
) -> AsyncIterator[KubeClient]:
    """A client of the real API server whose every connection goes through `proxy`."""
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = proxy.url
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    client = KubeClient.from_kubeconfig(str(path))
    yield client
    await client.close()


@contextlib.asynccontextmanager
async def pod_informer(client: KubeClient, namespace: str) -> AsyncIterator[Informer]:
    """A running, synced informer of the namespace's pods, whose watches the server ends
    every WATCH_SECONDS."""
    informer = Informer(
        client,
        PODS,
        slim_pod,
        namespace=namespace,
        watch_seconds=WATCH_SECONDS,
        watch_grace_seconds=GRACE_SECONDS,
    )
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 30)
        yield informer
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.fixture
async def informer(proxied: KubeClient, namespace: str) -> AsyncIterator[Informer]:
    async with pod_informer(proxied, namespace) as running:
        yield running


async def _created_and_seen(
    kube: KubeClient, informer: Informer, namespace: str, name: str
) -> None:
    await create_pod(kube, namespace, name)
    await until(
        lambda: informer.store.get(f"{namespace}/{name}") is not None,
        f"{name} in the informer's store",
        timeout=60,
    )


async def test_a_watch_whose_connection_went_silent_is_ended_and_resumed_without_a_list(
    kube: KubeClient, informer: Informer, proxy: FaultyProxy, namespace: str
) -> None:
    await _created_and_seen(kube, informer, namespace, "before")  # a watch is open
    assert proxy.freeze() >= 1
    await _created_and_seen(kube, informer, namespace, "after")
    assert informer.stats.stalls >= 1
    assert informer.stats.lists == 1
    assert informer.stats.gone == 0


async def test_a_reset_connection_is_watched_again_from_the_last_version_without_a_list(
    kube: KubeClient, informer: Informer, proxy: FaultyProxy, namespace: str
) -> None:
    await _created_and_seen(kube, informer, namespace, "before")
    accepted = proxy.accepted
    proxy.reset()
    await _created_and_seen(kube, informer, namespace, "after")
    assert proxy.accepted > accepted  # it did reconnect
    assert informer.stats.failures >= 1  # the open watch failed, and was resumed
    assert informer.stats.lists == 1
    assert informer.stats.gone == 0


async def test_a_watch_of_the_real_api_server_reads_wide_and_closes_its_connection_at_its_end(
    cluster: ClusterUnderTest,
    kube: KubeClient,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    widened: list[tuple[Any, bool]],
) -> None:
    """With the record-sized TLS buffers the operator runs with, each watch over the API
    server's TLS widens its connection (adapters/heap.py) and still delivers; when the server
    ends a watch, its connection is closed, not pooled for the requests that follow."""
    monkeypatch.setattr(asyncio.sslproto.SSLProtocol, "max_size", heap.TLS_READ_BUFFER)
    client = cluster.client()  # a session of its own, opened with the shrunk buffers
    try:
        async with pod_informer(client, namespace) as informer:
            await _created_and_seen(kube, informer, namespace, "seen")
            await until(lambda: len(widened) >= 2, "a second watch under way", timeout=30)
            # Checked while the client is open (closing it closes every connection).
            assert widened[0][0].is_closing()  # the first watch ended; its connection with it
    finally:
        await client.close()
    assert all(result for _, result in widened)
