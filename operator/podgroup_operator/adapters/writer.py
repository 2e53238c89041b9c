"""A child process that sends the scheduler's writes: the operator's second CPU (`--write-process`).

With many binds in flight the operator's one thread limits the bind rate; Python's way to a
second core is a second process (docs/decisions/006-writer-process.md). This one owns an aiohttp
session and does nothing but send the requests it is given and answer with (status, body). Watches
and lists stay in the main process, whose informers need them, and so do status writes, which would
wait behind the binds here. It is on by default: the bind pacer (scheduling/pacing.py) allows up to
256 binds in flight when the API server answers them fast, more than one thread sends. It costs
memory: each request in flight holds a connection, and so a TLS read buffer (adapters/heap.py); `run
--no-write-process` keeps everything in one process.

The protocol is one orjson array per line on the child's stdin and stdout (orjson never emits a
raw newline): `[id, method, path, params, body, content type]` in, `[id, status, body]` out. A
status of 0 means the child got no HTTP answer (connection refused, timeout): the caller sees
`WriterError`, a `ConnectionError`, as it would have seen aiohttp's error from a request of its
own. Lines queued in one turn of the event loop go out in one pipe write.

The child lives as long as its stdin: it ignores SIGINT and SIGTERM (a Ctrl-C reaches the whole
process group while the parent still waits for answers), and when the parent dies, even by
SIGKILL, the end of the pipe stops it. If the child dies, every request in flight fails with
`WriterError` and the next request starts a new child: no write is silently lost, and no caller
waits for ever (a child that gives no answer in `ANSWER_SECONDS` is hung, and is killed).
Stopping closes the child's stdin; it answers what it has in flight and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import logging
import signal
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import orjson

from podgroup_operator import logs
from podgroup_operator.adapters import heap
from podgroup_operator.adapters.kube import JSON, KubeClient, Request

logger = logging.getLogger(__name__)

LINE_LIMIT = 64 * 1024 * 1024
"""Longest line either side reads: a PodGroup status answer is a few KB, a pod list is never
sent through the writer (reads stay in the main process)."""
OTHER_WRITES = 24
"""Connections beyond the binds': pod signals (8 at once: conditions and Events on pods), the
re-read of a pod whose bind failed, and a margin, so that no write waits for a connection
behind the binds. Status writes and their Events stay in the main process
(controllers/runtime.py)."""
STOP_SECONDS = 10.0
"""How long a stop waits for the child to answer what it has in flight."""
TRANSPORT_FAILED = 0
"""The status the child answers with when it got no HTTP answer at all."""
ANSWER_SECONDS = 90.0
"""The longest a request waits for the child's answer. The child's own requests give up after
60 s (adapters/kube.py), so a live child answers sooner; one that has not is hung (stopped,
deadlocked) and is killed, which fails what it held and lets the next request start another:
without this bound a stopped child leaves binds waiting for ever while /livez says healthy."""


_Pending = dict[int, "asyncio.Future[tuple[int, Any]]"]
"""Requests sent to one child and not answered yet, by id."""


class WriterError(ConnectionError):
    """The writer process gave no answer (it died, or its own request failed to connect)."""


class _LineBatcher:
    """Lines queued during one turn of the event loop, written to the pipe in one call."""

    def __init__(self, write: Callable[[bytes], None]) -> None:
        self._write = write
        self._lines: list[bytes] = []

    def put(self, line: bytes) -> None:
        if not self._lines:
            asyncio.get_running_loop().call_soon(self.flush)
        self._lines.append(line)

    def flush(self) -> None:
        """Write what is queued now (the loop would do it at the end of this turn)."""
        lines, self._lines = self._lines, []
        if not lines:
            return
        with contextlib.suppress(ConnectionError, RuntimeError):  # the pipe closed meanwhile
            self._write(b"".join(lines))


class WriterTransport:
    """The `Transport` of the leader's write client: each request goes through the child.

    The child is started on the first request (followers never start one) and again after it
    died. Watches are not served: the informers keep their own client.
    """

    def __init__(
        self,
        command: Sequence[str] | None = None,
        *,
        connections: int = OTHER_WRITES,
        answer_seconds: float = ANSWER_SECONDS,
    ) -> None:
        self.command = list(command or default_command(connections))
        self.answer_seconds = answer_seconds
        self._process: asyncio.subprocess.Process | None = None
        self._batcher: _LineBatcher | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: _Pending = {}
        """The current child's requests awaiting an answer."""
        self._ids = itertools.count()
        self._lock = asyncio.Lock()
        self.starts = 0
        """Children started so far (more than one means one died and was replaced)."""

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.returncode is None else None

    async def _child(self) -> tuple[asyncio.subprocess.Process, _LineBatcher, _Pending]:
        """The live child, its pipe, and its requests awaiting an answer (each child has its
        own, so one that ends fails only what was sent to it)."""
        async with self._lock:
            process = self._process
            if process is None or process.returncode is not None or self._batcher is None:
                process = await asyncio.create_subprocess_exec(
                    *self.command,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    limit=LINE_LIMIT,
                )
                assert process.stdin is not None
                self.starts += 1
                logger.info("writer process %d started", process.pid)
                self._process = process
                self._batcher = _LineBatcher(process.stdin.write)
                self._pending = {}
                self._reader = asyncio.create_task(
                    self._read(process, self._pending), name="writer-answers"
                )
            return process, self._batcher, self._pending

    async def _read(self, process: asyncio.subprocess.Process, pending: _Pending) -> None:
        """Hand each answer to its request; when the child's stdout ends, fail the rest."""
        assert process.stdout is not None
        try:
            while line := await process.stdout.readline():
                ident, status, body = orjson.loads(line)
                future = pending.pop(ident, None)
                if future is not None and not future.done():
                    future.set_result((status, body))
        except Exception as exc:  # an answer that is not one of ours: this child is done
            logger.warning("writer process %d answered what cannot be read: %s", process.pid, exc)
        finally:
            with contextlib.suppress(ProcessLookupError):
                process.kill()  # a child whose stdout broke is of no use any more
            code = await process.wait()
            if self._process is process:
                self._batcher = None
            failed = dict(pending)
            pending.clear()
            if failed:
                logger.warning(
                    "writer process %d ended (exit %s) with %d requests in flight; they fail",
                    process.pid,
                    code,
                    len(failed),
                )
            for future in failed.values():
                if not future.done():
                    future.set_exception(WriterError(f"writer process ended (exit {code})"))

    async def send(self, request: Request) -> tuple[int, Any]:
        process, batcher, pending = await self._child()
        ident = next(self._ids)
        future: asyncio.Future[tuple[int, Any]] = asyncio.get_running_loop().create_future()
        pending[ident] = future
        params = dict(request.params) if request.params else None
        batcher.put(
            orjson.dumps(
                [ident, request.method, request.path, params, request.body, request.content_type]
            )
            + b"\n"
        )
        try:
            async with asyncio.timeout(self.answer_seconds):
                status, body = await future
        except TimeoutError:
            if process is self._process and self._batcher is not None:
                logger.warning(
                    "writer process %d gave no answer in %.0fs; killed, the next write starts "
                    "another",
                    process.pid,
                    self.answer_seconds,
                )
                self._batcher = None  # the next request starts a child at once
                with contextlib.suppress(ProcessLookupError):
                    process.kill()  # its reader then fails what it held (`_read`)
            message = f"no answer from the writer process in {self.answer_seconds:.0f}s"
            raise WriterError(message) from None
        finally:
            pending.pop(ident, None)  # answered, or the caller gave up (its answer drops)
        if status == TRANSPORT_FAILED:
            raise WriterError(str((body or {}).get("message") or "no answer"))
        return status, body

    def stream(self, request: Request) -> AsyncIterator[JSON]:
        raise NotImplementedError("watches stay with the informers' client, not the writer")

    async def close(self) -> None:
        """Let the child answer what it has in flight (bounded), then make sure it is gone."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.returncode is None:
            assert process.stdin is not None
            if self._batcher is not None:
                self._batcher.flush()  # requests sent in this turn of the loop go out first
            process.stdin.close()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STOP_SECONDS):
                    await process.wait()
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader


def writer_connections(bind_concurrency: int) -> int:
    """The child's connection pool for a leader with `bind_concurrency` binds in flight."""
    return bind_concurrency + OTHER_WRITES


def default_command(connections: int) -> list[str]:
    """This interpreter running the child, with the parent's log settings."""
    root = logging.getLogger()
    return [
        sys.executable,
        "-m",
        __name__,
        "--connections",
        str(connections),
        "--log-level",
        logging.getLevelName(root.getEffectiveLevel()),
        "--log-format",
        logs.current_format().value,
    ]


async def serve(
    kube: KubeClient, reader: asyncio.StreamReader, write: Callable[[bytes], None]
) -> None:
    """The child's loop: every request line is sent at once; answers go back as they come."""
    batcher = _LineBatcher(write)
    running: set[asyncio.Task[None]] = set()

    async def answer(line: bytes) -> None:
        ident, method, path, params, body, content_type = orjson.loads(line)
        try:
            status, reply = await kube.transport.send(
                Request(method, path, params, body, content_type)
            )
        except Exception as exc:  # no HTTP answer: the parent raises WriterError
            status, reply = TRANSPORT_FAILED, {"message": f"{type(exc).__name__}: {exc}"[:1000]}
        batcher.put(orjson.dumps([ident, status, reply]) + b"\n")

    while line := await reader.readline():
        task = asyncio.create_task(answer(line))
        running.add(task)
        task.add_done_callback(running.discard)
    await asyncio.gather(*running, return_exceptions=True)
    batcher.flush()  # the last answers, before the caller closes the pipe


async def serve_stdio(kube: KubeClient) -> None:
    """`serve` over this process's stdin and stdout (the child's side of the pipes)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    try:
        await serve(kube, reader, writer.write)
    finally:
        writer.close()


async def _main(connections: int) -> None:
    async with KubeClient.from_kubeconfig(limit=connections) as kube:
        await serve_stdio(kube)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}")
    parser.add_argument("--connections", type=int, default=OTHER_WRITES)
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--log-format", default=logs.LogFormat.TEXT.value)
    args = parser.parse_args(argv)
    logs.configure(
        logging.getLevelNamesMapping()[args.log_level.upper()],
        log_format=logs.LogFormat(args.log_format),
    )
    # The parent decides when this process ends, by closing its stdin: a Ctrl-C sent to the
    # whole process group must not cut the writes the parent is still waiting for.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    heap.shrink_tls_buffers()  # a connection per request in flight: see adapters/heap.py
    asyncio.run(_main(args.connections))
    return 0


if __name__ == "__main__":
    sys.exit(main())
