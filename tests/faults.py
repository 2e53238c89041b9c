"""A TCP proxy in front of the real API server that breaks connections the way networks do.

Why a proxy and not a fake: the faults an informer must survive happen below HTTP, to a real
server's real connections. `reset()` aborts every connection open now (both ends see a reset,
as when a load balancer or the server's host drops them). `freeze()` keeps every connection
open now but carries no more bytes either way, for good: a connection to a host that died
without closing it, or through a middlebox that lost its state, looks exactly like this to the
client, which waits for bytes that never come. Connections opened afterwards work normally.
Bytes pass through untouched, so TLS is end to end with the API server.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class _Pair:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class FaultyProxy:
    """Listens on 127.0.0.1; `url` is the server's URL with the proxy's port."""

    def __init__(self, server_url: str) -> None:
        parts = urlsplit(server_url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 443
        self._scheme = parts.scheme
        self._pairs: list[_Pair] = []
        self._frozen: list[_Pair] = []
        """Kept open (and referenced) until `stop`."""
        self._server: asyncio.Server | None = None
        self.accepted = 0
        """Connections accepted so far (a client that reconnected shows here)."""

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"{self._scheme}://127.0.0.1:{port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def stop(self) -> None:
        self._pairs += self._frozen
        self._frozen = []
        self.reset()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def reset(self) -> None:
        """Abort every connection open now."""
        for pair in self._pairs:
            for task in pair.tasks:
                task.cancel()
            for writer in (pair.client, pair.upstream):
                writer.transport.abort()
        self._pairs.clear()

    def freeze(self) -> int:
        """Carry no more bytes on any connection open now; returns how many were carrying any."""
        live = [pair for pair in self._pairs if not all(task.done() for task in pair.tasks)]
        for pair in live:
            for task in pair.tasks:
                task.cancel()
        self._frozen += self._pairs
        self._pairs = []
        return len(live)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(self._host, self._port)
        except OSError:
            writer.transport.abort()
            return
        pair = _Pair(writer, up_writer)
        self._pairs.append(pair)
        pair.tasks = [
            asyncio.create_task(_pipe(reader, up_writer)),
            asyncio.create_task(_pipe(up_reader, writer)),
        ]


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    # The other side closed: pass the close on (a frozen pair is cancelled before this).
    with contextlib.suppress(ConnectionError, RuntimeError):
        writer.write_eof()


@contextlib.asynccontextmanager
async def faulty_proxy(server_url: str) -> AsyncIterator[FaultyProxy]:
    proxy = FaultyProxy(server_url)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()
