"""The process's memory: CPython's cyclic garbage collector kept off the informers' big loads,
and asyncio's TLS read buffers sized to a TLS record.

The collector walks every tracked object, and an informer's LIST allocates objects that all
survive: left alone, it runs again and again for nothing (docs/decisions/004-gc-off-big-loads.md).

* `paused()` is held around each informer list and the fan-out of what it loaded. When the last
  concurrent list ends, one full collection frees whatever cycles the pause let pile up, and
  `gc.freeze()` moves the survivors (the stores, the snapshot built from them) out of the walk of
  every later collection. Freezing hides objects from the cycle collector only: reference
  counting still frees a frozen store entry the moment a newer version replaces it, and the slim
  objects the stores keep hold no reference cycles. A frozen object that later becomes part of
  cyclic garbage stays until the process exits: at worst what one list loaded, per list.
* `configure()`, once before the operator runs, does the same for what start-up loaded
  (modules, classes, Kopf's and the clients' machinery), which is never garbage, and raises the
  young generation's threshold (`YOUNG_THRESHOLD`): the operator's objects are mostly freed by
  reference counting the moment they are done. It also times every later collection (`Pauses`),
  since a full one holds the event loop as long as it walks.

The TLS buffers: asyncio gives every TLS connection a 256 KiB read buffer, allocated when the
connection opens, whatever it will carry. `configure()` and the writer process
(`--write-process`) set `TLS_READ_BUFFER` instead: a TLS record carries at most 16 KiB, so a read
still takes a whole record. A watch is the one connection that carries more than a record at a
time, and it widens its own buffer back (`widen_tls_buffer`). See
docs/decisions/005-tls-read-buffers.md.
"""

from __future__ import annotations

import asyncio.sslproto
import contextlib
import gc
import time
from collections import deque
from collections.abc import Iterator
from typing import Any, NamedTuple


class _Pause:
    """A process-wide pause that nests: informers list concurrently, and the collector runs
    again only when the last of them is done."""

    def __init__(self) -> None:
        self.depth = 0
        self.resume = False
        """Whether the collector was enabled when the outermost pause began (a process that
        turned it off itself keeps it off, and nothing is frozen for it)."""

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        if self.depth == 0:
            self.resume = gc.isenabled()
            gc.disable()
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if self.depth == 0 and self.resume:
                gc.collect()
                gc.freeze()
                gc.enable()


paused = _Pause()
"""Hold around a load whose objects will live long (`with paused(): ...`)."""


YOUNG_THRESHOLD = 10_000
"""Allocations net of deallocations between young collections (CPython's default: 700); the
older generations keep CPython's defaults (docs/decisions/004-gc-off-big-loads.md)."""


TLS_READ_BUFFER = 16 * 1024
"""Bytes of each TLS connection's read buffer: one TLS record (asyncio's default: 256 KiB;
docs/decisions/005-tls-read-buffers.md)."""


def shrink_tls_buffers() -> None:
    """Give TLS connections opened from now on a read buffer of `TLS_READ_BUFFER` bytes."""
    asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER


WATCH_READ_BUFFER = 256 * 1024
"""Bytes a watch's TLS connection reads at a time: asyncio's own default, whatever
`shrink_tls_buffers` set for the others (see `widen_tls_buffer`;
docs/decisions/005-tls-read-buffers.md)."""


WATCH_EVENTS_PER_TURN = 16
"""Events of one wide read a watch hands on before it lets the event loop turn (see
`widen_tls_buffer`; docs/decisions/005-tls-read-buffers.md)."""


def widen_tls_buffer(transport: object) -> bool:
    """Let one TLS connection read `WATCH_READ_BUFFER` bytes per turn of the event loop; False
    when `transport` is not asyncio's TLS transport (plain HTTP reads 256 KiB already).

    The event loop reads each ready socket once per turn, at most a buffer's worth, and the pod
    watch carries every bind and every kubelet status write of the cluster: read a record per
    turn, it fell behind (docs/decisions/005-tls-read-buffers.md). `KubeClient.stream` hands on
    at most `WATCH_EVENTS_PER_TURN` events of a wide read before it lets the loop turn, so the
    rest of the loop does not wait for all of them. The buffer belongs to the connection;
    `KubeClient.stream` closes a widened connection when its watch ends, so the connections of
    binds and status writes, taken from the pool, keep their record-sized ones.

    asyncio has no public way to size one connection's reads: the TLS transport's protocol
    (`_ssl_protocol`, an `asyncio.sslproto.SSLProtocol`, since Python 3.5) reads `max_size` at
    each read, so an attribute on that instance overrides the class's for that connection only.
    """
    protocol = getattr(transport, "_ssl_protocol", None)
    if not isinstance(protocol, asyncio.sslproto.SSLProtocol):
        return False
    protocol.max_size = WATCH_READ_BUFFER  # type: ignore[misc]  # shadows the ClassVar here only
    return True


SLOW_PAUSE_SECONDS = 0.1
"""A collection this long or longer is kept in `Pauses.slow`, with when it ended."""
SLOW_PAUSES_KEPT = 16


PAUSE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Upper bounds, in seconds, of the buckets `Pauses` counts collections in."""


class SlowPause(NamedTuple):
    """One collection of SLOW_PAUSE_SECONDS or more."""

    end: float
    """`time.monotonic()` when it ended."""
    seconds: float
    """Wall time it held the process."""
    cpu: float
    """CPU time its thread spent in it: much less than `seconds` when the process waited for a
    core (a small machine whose API server and etcd take both), not the collector's work."""
    generation: int
    freed: int
    """Objects it freed: many when the time went to freeing a heap of cyclic garbage, none
    when it went to walking live objects."""


class Pauses:
    """How long each of the collector's runs held the process, per generation, as cumulative
    bucket counts, a count and a sum (`podgroup_gc_pause_seconds`).

    A run of the collector holds the event loop as a long decision does, and the loop's lag
    alone does not say which it was. Kept in plain lists, with no lock: `gc.callbacks` run
    at any allocation, and a callback that took a lock the interrupted code held would never
    return. Collections do not nest, and the interpreter lock orders them across threads.
    """

    def __init__(self) -> None:
        self.buckets = [[0] * len(PAUSE_BUCKETS) for _ in range(3)]
        self.count = [0, 0, 0]
        self.total = [0.0, 0.0, 0.0]
        self._start = 0.0
        self._start_cpu = 0.0
        self.slow: deque[SlowPause] = deque(maxlen=SLOW_PAUSES_KEPT)
        """The latest collections of SLOW_PAUSE_SECONDS or more: what held the event loop,
        when, and whether it worked or waited for a core (`slow_since`)."""

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            self._start_cpu = time.thread_time()
            return
        elapsed = time.perf_counter() - self._start
        generation = info["generation"]
        self.count[generation] += 1
        self.total[generation] += elapsed
        counts = self.buckets[generation]
        for index, bound in enumerate(PAUSE_BUCKETS):
            if elapsed <= bound:
                counts[index] += 1
        if elapsed >= SLOW_PAUSE_SECONDS:
            cpu = time.thread_time() - self._start_cpu
            freed = int(info.get("collected", 0))
            self.slow.append(SlowPause(time.monotonic(), elapsed, cpu, generation, freed))

    def slow_since(self, since: float) -> list[SlowPause]:
        """The slow collections that ended after `since` (a `time.monotonic()` reading),
        oldest first."""
        return [pause for pause in self.slow if pause.end > since]


pauses = Pauses()
"""The process's record, once `configure()` installed it."""


def configure() -> None:
    """Shrink the TLS read buffers; raise the young threshold; collect once, then keep
    everything loaded so far out of later collections; time every later collection
    (`pauses`)."""
    shrink_tls_buffers()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    gc.collect()
    gc.freeze()
    if pauses not in gc.callbacks:
        gc.callbacks.append(pauses)
