"""The collector stays off the informers' loads, and what they loaded is frozen afterwards."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import gc
import ssl
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from podgroup_operator.adapters import heap
from podgroup_operator.adapters.informers import Informer
from podgroup_operator.adapters.kube import PODS, KubeClient
from podgroup_operator.adapters.slim import slim_pod
from podgroup_operator.tls import make_serving_cert
from tests.builders import pod
from tests.fakes import FakeApiServer

ASYNCIO_TLS_READ_BUFFER = asyncio.sslproto.SSLProtocol.max_size
"""CPython's own size, read before any test changes it."""


@pytest.fixture(autouse=True)
def collector() -> Iterator[None]:
    """Each test starts with the collector on, nothing frozen and asyncio's own TLS buffers,
    and leaves it so."""
    gc.unfreeze()
    gc.enable()
    threshold = gc.get_threshold()
    callbacks = list(gc.callbacks)
    asyncio.sslproto.SSLProtocol.max_size = ASYNCIO_TLS_READ_BUFFER
    yield
    gc.unfreeze()
    gc.enable()
    gc.set_threshold(*threshold)
    gc.callbacks[:] = callbacks
    asyncio.sslproto.SSLProtocol.max_size = ASYNCIO_TLS_READ_BUFFER


def test_nested_pauses_resume_the_collector_only_when_the_last_ends() -> None:
    with heap.paused():
        assert not gc.isenabled()
        with heap.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # another list is still loading
        loaded = [{"n": i} for i in range(100)]
    assert gc.isenabled()
    assert gc.get_freeze_count() > len(loaded)


def test_a_pause_that_raises_still_resumes_the_collector() -> None:
    with pytest.raises(RuntimeError), heap.paused():
        raise RuntimeError("the list failed")
    assert gc.isenabled()


def test_a_process_that_turned_the_collector_off_keeps_it_off_and_nothing_is_frozen() -> None:
    gc.disable()
    with heap.paused():
        pass
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_frozen_object_is_still_freed_when_nothing_refers_to_it() -> None:
    """Freezing hides objects from the cycle collector, not from reference counting: a store
    entry replaced by a newer version goes at once."""
    freed: list[str] = []

    class Entry(dict[str, Any]):
        def __del__(self) -> None:
            freed.append("entry")

    with heap.paused():
        store = {"default/p": Entry(name="p")}
    assert gc.get_freeze_count() > 0
    store["default/p"] = Entry(name="p, newer")
    assert freed == ["entry"]


def test_configure_raises_the_young_threshold_and_freezes_what_start_up_loaded() -> None:
    heap.configure()
    assert gc.get_threshold()[0] == heap.YOUNG_THRESHOLD
    assert gc.get_freeze_count() > 0


def test_each_collection_is_timed_in_its_generation_with_cumulative_buckets() -> None:
    pauses = heap.Pauses()
    gc.disable()  # no collection but the ones asked for
    gc.callbacks.append(pauses)
    gc.collect(1)
    gc.collect(2)
    gc.collect(2)
    gc.callbacks.remove(pauses)
    assert pauses.count == [0, 1, 2]
    assert pauses.total[0] == 0.0 and pauses.total[1] > 0.0 and pauses.total[2] > 0.0
    for generation, counts in enumerate(pauses.buckets):
        assert counts == sorted(counts)  # cumulative: each bucket holds the ones below it
        assert counts[-1] == pauses.count[generation]  # no collection took 30 s


def test_configure_times_every_later_collection_once() -> None:
    heap.configure()
    heap.configure()
    assert gc.callbacks.count(heap.pauses) == 1
    before = heap.pauses.count[2]
    gc.collect()
    assert heap.pauses.count[2] == before + 1


def test_configure_sizes_tls_read_buffers_to_one_record() -> None:
    assert ASYNCIO_TLS_READ_BUFFER == 256 * 1024  # what the module's figures were measured over
    heap.configure()
    assert asyncio.sslproto.SSLProtocol.max_size == heap.TLS_READ_BUFFER == 16 * 1024


BODY = bytes(range(256)) * 4096
"""1 MiB: sixty-four times the shrunk buffer, in a pattern a lost or repeated chunk would break."""


async def _tls_memory_and_bodies(tmp_path: Path, connections: int) -> tuple[int, list[bytes]]:
    """Bytes allocated while `connections` TLS requests are in flight to a local server (both
    ends in this process), and the bodies they then read."""
    files = make_serving_cert(tmp_path, "local", ["127.0.0.1"])
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(files.certfile, files.pkeyfile)
    trusting = ssl.create_default_context(cafile=str(files.cafile))
    arrived = asyncio.Semaphore(0)
    answer = asyncio.Event()

    async def handler(request: web.Request) -> web.Response:
        arrived.release()
        await answer.wait()
        return web.Response(body=BODY)

    app = web.Application()
    app.router.add_get("/", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=serving)
    await site.start()
    port = runner.addresses[0][1]
    connector = aiohttp.TCPConnector(ssl=trusting, limit=connections)
    try:
        async with aiohttp.ClientSession(connector=connector) as session:

            async def get() -> bytes:
                async with session.get(f"https://127.0.0.1:{port}/") as response:
                    return await response.read()

            tracemalloc.start()
            try:
                requests = [asyncio.create_task(get()) for _ in range(connections)]
                for _ in range(connections):
                    await arrived.acquire()
                held = tracemalloc.get_traced_memory()[0]
            finally:
                tracemalloc.stop()
            answer.set()
            return held, await asyncio.gather(*requests)
    finally:
        await runner.cleanup()


async def test_tls_connections_hold_a_record_sized_buffer_and_still_read_big_bodies_whole(
    tmp_path: Path,
) -> None:
    """Twenty connections held open: with asyncio's buffers they cost 40 of 256 KiB (both
    ends); shrunk, a sixteenth of that. A body far bigger than the buffer still arrives whole."""
    connections = 20
    default, default_bodies = await _tls_memory_and_bodies(tmp_path / "default", connections)
    heap.shrink_tls_buffers()
    shrunk, shrunk_bodies = await _tls_memory_and_bodies(tmp_path / "shrunk", connections)
    assert default > 2 * connections * ASYNCIO_TLS_READ_BUFFER
    assert default - shrunk > 2 * connections * (ASYNCIO_TLS_READ_BUFFER - heap.TLS_READ_BUFFER)
    assert default_bodies == shrunk_bodies == [BODY] * connections


async def test_an_informer_lists_with_the_collector_paused_and_is_synced_after_the_freeze() -> None:
    api = FakeApiServer()
    api.seed(*(pod(f"p{i}", group="g") for i in range(5)))
    kube = KubeClient(api)
    during: list[bool] = []
    list_page = kube.list_page

    async def recording(*args: Any, **kwargs: Any) -> Any:
        during.append(gc.isenabled())
        return await list_page(*args, **kwargs)

    kube.list_page = recording  # type: ignore[method-assign]
    informer = Informer(kube, PODS, slim_pod, page_size=2)
    handled: list[bool] = []
    informer.add_handler(lambda kind, obj, old: handled.append(gc.isenabled()))
    await informer._list()
    assert during == [False, False, False]
    assert handled == [False] * 5  # the fan-out of the first list is part of the load
    assert gc.isenabled() and informer.synced.is_set()
    assert gc.get_freeze_count() > 0
