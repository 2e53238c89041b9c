"""The writer process (adapters/writer.py): requests sent through a child, answers matched back.

The children here are real processes over real pipes; behind them is the in-memory fake API
server (the real control plane's version is tests/integration/test_own_cluster.py).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from podgroup_operator.adapters.kube import PODS, ApiError, KubeClient, Request
from podgroup_operator.adapters.writer import (
    TRANSPORT_FAILED,
    WriterError,
    WriterTransport,
    serve,
    writer_connections,
)
from podgroup_operator.controllers.podsignals import SIGNAL_CONCURRENCY
from tests.builders import pod
from tests.waiting import until

REPO = Path(__file__).resolve().parents[3]

FAKE_CHILD = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {repo!r})
    from podgroup_operator.adapters.kube import KubeClient
    from podgroup_operator.adapters.writer import serve_stdio
    from tests.builders import pod
    from tests.fakes import FakeApiServer

    fake = FakeApiServer()
    for name in ("a", "b"):
        fake.seed(pod(name, "ns"))
    asyncio.run(serve_stdio(KubeClient(fake)))
    """
).format(repo=str(REPO))
"""A writer child whose API server is the fake, seeded with pods ns/a and ns/b."""

WAIT = 30.0
"""The answer bound for a child that does answer: its start (imports) takes a second or more on
a loaded machine, and nothing here waits that long when the test passes."""
SILENT_CHILD = "import sys; sys.stdin.read()"
"""A child that reads every request and never answers (until it is killed)."""


def child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


async def test_a_bind_through_the_writer_gets_the_api_servers_answer() -> None:
    kube = KubeClient(WriterTransport(child(FAKE_CHILD)))
    try:
        await kube.bind("ns", "a", "node-1", None)
        with pytest.raises(ApiError) as again:
            await kube.bind("ns", "a", "node-2", None)
        assert again.value.conflict  # the fake's 409, status and body carried back
        bound = await kube.get(PODS, "a", "ns")
        assert bound["spec"]["nodeName"] == "node-1"
    finally:
        await kube.close()


async def test_concurrent_requests_each_get_their_own_answer() -> None:
    transport = WriterTransport(child(FAKE_CHILD))
    kube = KubeClient(transport)
    try:
        names = [f"p{i}" for i in range(60)]
        created = await asyncio.gather(
            *(kube.create(PODS, pod(name, "ns"), "ns") for name in names)
        )
        assert [c["metadata"]["name"] for c in created] == names
        assert transport.starts == 1  # one child served them all
    finally:
        await kube.close()


async def test_answers_that_come_back_out_of_order_reach_their_own_callers() -> None:
    """Matched by id, not by order: this child answers five requests last to first."""
    code = textwrap.dedent(
        """
        import sys, orjson
        held = [orjson.loads(sys.stdin.readline()) for _ in range(5)]
        for ident, method, path, *_ in reversed(held):
            sys.stdout.buffer.write(orjson.dumps([ident, 200, {"path": path}]) + b"\\n")
        sys.stdout.flush()
        sys.stdin.read()
        """
    )
    transport = WriterTransport(child(code))
    try:
        paths = [f"/api/v1/namespaces/ns/pods/p{i}" for i in range(5)]
        answers = await asyncio.gather(*(transport.send(Request("GET", p)) for p in paths))
        assert [body["path"] for _, body in answers] == paths
    finally:
        await transport.close()


async def test_a_dead_child_fails_what_it_held_and_the_next_request_starts_another() -> None:
    transport = WriterTransport(child(SILENT_CHILD))
    held = asyncio.create_task(transport.send(Request("POST", "/api/v1/namespaces/ns/events")))
    await until(
        lambda: transport.pid is not None and transport._pending,
        "the request to reach a running child",
        timeout=10.0,
    )
    first = transport.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    with pytest.raises(WriterError, match="writer process ended"):
        await held
    transport.command = child(FAKE_CHILD)
    try:
        status, body = await transport.send(Request("GET", "/api/v1/namespaces/ns/pods/b"))
        assert (status, body["metadata"]["name"]) == (200, "b")
        assert transport.starts == 2 and transport.pid not in (None, first)
    finally:
        await transport.close()


async def test_a_child_that_gives_no_answer_is_killed_and_the_next_request_starts_another() -> None:
    """A hung child (SIGSTOP on the dev cluster) held the leader's binds for ever."""
    transport = WriterTransport(child(SILENT_CHILD), answer_seconds=0.5)
    requests = [Request("POST", f"/api/v1/namespaces/ns/pods/p{i}/binding") for i in range(2)]
    outcomes = await asyncio.gather(*(transport.send(r) for r in requests), return_exceptions=True)
    assert all(isinstance(outcome, WriterError) for outcome in outcomes), outcomes
    assert any("no answer from the writer process in 0s" in str(o) for o in outcomes), outcomes
    first = transport.starts
    transport.command = child(FAKE_CHILD)
    transport.answer_seconds = WAIT  # its replacement's start (imports) may take a second or more
    try:
        status, body = await transport.send(Request("GET", "/api/v1/namespaces/ns/pods/b"))
        assert (status, body["metadata"]["name"]) == (200, "b")
        assert transport.starts == first + 1 == 2
    finally:
        await transport.close()


async def test_close_lets_the_child_answer_what_was_sent_and_leaves_no_process() -> None:
    transport = WriterTransport(child(FAKE_CHILD))
    kube = KubeClient(transport)
    await kube.get(PODS, "a", "ns")  # the child is up
    pid = transport.pid
    sent = asyncio.create_task(kube.create(PODS, pod("late", "ns"), "ns"))
    await asyncio.sleep(0)  # the request is queued for this turn's pipe write
    await kube.close()
    assert (await sent)["metadata"]["name"] == "late"
    assert pid is not None and not Path(f"/proc/{pid}").exists()


async def test_serve_answers_a_failed_request_with_the_transport_failure_status() -> None:
    class Refusing:
        async def send(self, request: Request) -> tuple[int, object]:
            raise ConnectionRefusedError("connection refused")

        def stream(self, request: Request) -> object:
            raise NotImplementedError

        async def close(self) -> None:
            return None

    reader = asyncio.StreamReader()
    reader.feed_data(orjson.dumps([7, "POST", "/x", None, {}, "application/json"]) + b"\n")
    reader.feed_eof()
    written: list[bytes] = []
    await serve(KubeClient(Refusing()), reader, written.append)  # type: ignore[arg-type]
    (answer,) = [orjson.loads(line) for line in b"".join(written).splitlines()]
    assert answer[:2] == [7, TRANSPORT_FAILED]
    assert "ConnectionRefusedError: connection refused" in answer[2]["message"]


async def test_the_parent_raises_writer_error_for_a_transport_failure_in_the_child() -> None:
    code = textwrap.dedent(
        """
        import sys, orjson
        for line in sys.stdin:
            ident = orjson.loads(line)[0]
            sys.stdout.buffer.write(orjson.dumps([ident, 0, {"message": "timed out"}]) + b"\\n")
            sys.stdout.flush()
        """
    )
    transport = WriterTransport(child(code))
    try:
        with pytest.raises(WriterError, match="timed out"):
            await transport.send(Request("POST", "/api/v1/namespaces/ns/pods/a/binding"))
    finally:
        await transport.close()


async def test_an_unreadable_answer_ends_that_child_and_fails_what_it_held() -> None:
    code = "import sys; sys.stdin.readline(); print('not an answer', flush=True); sys.stdin.read()"
    transport = WriterTransport(child(code))
    try:
        with pytest.raises(WriterError, match="writer process ended"):
            await transport.send(Request("POST", "/api/v1/namespaces/ns/events"))
        assert transport.pid is None  # killed, not left running beside the next one
    finally:
        await transport.close()


def test_the_childs_pool_leaves_room_beside_the_binds() -> None:
    """Pod signals (conditions and Events on pods) have their slots, and a margin remains."""
    assert writer_connections(32) - 32 >= 2 * SIGNAL_CONCURRENCY


def test_a_watch_is_never_sent_through_the_writer() -> None:
    with pytest.raises(NotImplementedError, match="informers"):
        WriterTransport(child(SILENT_CHILD)).stream(Request("GET", "/api/v1/pods"))
