"""The collector stays off the informers' loads, and what they loaded is frozen afterwards."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import contextlib
import gc
import ssl
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from podgroup_operator.adapters import heap
from podgroup_operator.adapters.informers import Informer
from podgroup_operator.adapters.kube import PODS, AiohttpTransport, KubeClient, Request
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


def test_widening_leaves_anything_but_an_asyncio_tls_transport_alone() -> None:
    """Plain HTTP (a local API server, the fake) already reads asyncio's 256 KiB a turn."""
    assert heap.widen_tls_buffer(None) is False
    assert heap.widen_tls_buffer(object()) is False


WATCH_EVENTS = 2_000
"""Watch lines the local server streams: about 2 MiB, many times a record."""


@contextlib.asynccontextmanager
async def _tls_watch_server(tmp_path: Path) -> AsyncIterator[tuple[AiohttpTransport, list[int]]]:
    """A local TLS server streaming WATCH_EVENTS watch lines at /watch and a Status at /get,
    a transport to it, and the client port of each request it served."""
    files = make_serving_cert(tmp_path, "local", ["127.0.0.1"])
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(files.certfile, files.pkeyfile)
    trusting = ssl.create_default_context(cafile=str(files.cafile))
    client_ports: list[int] = []

    def served(request: web.Request) -> None:
        assert request.transport is not None
        client_ports.append(request.transport.get_extra_info("peername")[1])

    async def watch(request: web.Request) -> web.StreamResponse:
        served(request)
        response = web.StreamResponse()
        await response.prepare(request)
        for index in range(WATCH_EVENTS):
            line = {"type": "ADDED", "object": {"index": index, "padding": "x" * 1000}}
            await response.write(orjson.dumps(line) + b"\n")
        await response.write_eof()
        return response

    async def get(request: web.Request) -> web.Response:
        served(request)
        return web.json_response({"kind": "Status", "status": "Success"})

    app = web.Application()
    app.router.add_get("/watch", watch)
    app.router.add_get("/get", get)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=serving)
    await site.start()
    transport = AiohttpTransport(
        f"https://127.0.0.1:{runner.addresses[0][1]}", ssl_context=trusting
    )
    try:
        yield transport, client_ports
    finally:
        await transport.close()
        await runner.cleanup()


async def test_a_watch_widens_its_tls_connection_and_no_request_inherits_it(
    tmp_path: Path, widened: list[tuple[Any, bool]]
) -> None:
    """With the record-sized buffers the operator runs with, a watch over TLS reads its whole
    stream through a connection widened to WATCH_READ_BUFFER; that connection closes with the
    watch, so the request after it is served on a new connection (another client port)."""
    heap.shrink_tls_buffers()
    async with _tls_watch_server(tmp_path) as (transport, client_ports):
        events = [event async for event in transport.stream(Request("GET", "/watch"))]
        status, body = await transport.send(Request("GET", "/get"))
    assert [event["object"]["index"] for event in events] == list(range(WATCH_EVENTS))
    assert (status, body["status"]) == (200, "Success")
    assert [result for _, result in widened] == [True]
    protocol = widened[0][0]._ssl_protocol
    assert protocol.max_size == heap.WATCH_READ_BUFFER
    assert len(protocol.get_buffer(-1)) == heap.WATCH_READ_BUFFER
    assert asyncio.sslproto.SSLProtocol.max_size == heap.TLS_READ_BUFFER  # the others' size
    assert len(client_ports) == 2 and client_ports[0] != client_ports[1]


async def test_a_watch_lets_the_event_loop_turn_between_its_events(tmp_path: Path) -> None:
    """However much one read brought, at most WATCH_EVENTS_PER_TURN events are handed on
    between two turns of the event loop, which a task counting turns sees; and some reads do
    bring a turn's worth or more (the most handed on between two turns is exactly that)."""
    heap.shrink_tls_buffers()
    events: list[Any] = []
    handed_between_turns: list[int] = []
    done = asyncio.Event()

    async def count_turns() -> None:
        last = 0
        while not done.is_set():
            handed_between_turns.append(len(events) - last)
            last = len(events)
            await asyncio.sleep(0)

    async with _tls_watch_server(tmp_path) as (transport, _):
        counter = asyncio.create_task(count_turns())
        async for event in transport.stream(Request("GET", "/watch")):
            events.append(event)
        done.set()
        await counter
    assert len(events) == WATCH_EVENTS
    assert max(handed_between_turns) == heap.WATCH_EVENTS_PER_TURN


def test_slow_collections_are_kept_with_when_they_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    """Driven by hand: what the collector's callback is told, with the clocks it reads set."""
    pauses = heap.Pauses()
    ticks = iter([10.0, 10.05, 20.0, 20.3, 30.0, 30.12])
    cpu = iter([1.0, 2.0, 2.25, 3.0, 3.02])  # each start, and a slow collection's end
    monkeypatch.setattr(heap.time, "perf_counter", lambda: next(ticks))
    monkeypatch.setattr(heap.time, "thread_time", lambda: next(cpu))
    monkeypatch.setattr(heap.time, "monotonic", lambda: 100.0 + len(pauses.slow))
    for generation, freed in ((0, 5), (2, 70_000), (1, 0)):
        pauses("start", {"generation": generation})
        pauses("stop", {"generation": generation, "collected": freed, "uncollectable": 0})
    # 50 ms is not slow; 300 ms (generation 2) and 120 ms (generation 1) are, in that order.
    slow = [
        (round(p.seconds, 2), round(p.cpu, 2), p.generation, p.freed)
        for p in pauses.slow_since(0.0)
    ]
    assert slow == [(0.3, 0.25, 2, 70_000), (0.12, 0.02, 1, 0)]
    assert [p.generation for p in pauses.slow_since(100.5)] == [1]
