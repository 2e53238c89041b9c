"""Slots for binds in flight whose number can change while they are held.

The bind pacer (scheduling/pacing.py) moves the limit while binds are in flight, which
`asyncio.Semaphore`, its count fixed at creation, cannot follow. Lowering the limit never
interrupts a bind: holders finish, and no new one starts until fewer than the new limit hold a
slot. Waiters are served in the order they came (a gang's binds go out together).
"""

from __future__ import annotations

import asyncio
from collections import deque
from types import TracebackType


class Slots:
    """At most `limit` holders at once (`async with slots:`), in arrival order."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"slots need a limit of at least 1, got {limit}")
        self._limit = limit
        self._held = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def limit(self) -> int:
        return self._limit

    @limit.setter
    def limit(self, value: int) -> None:
        if value < 1:
            raise ValueError(f"slots need a limit of at least 1, got {value}")
        self._limit = value
        self._wake()

    @property
    def held(self) -> int:
        """Slots in use now (may exceed `limit` for a while after it was lowered)."""
        return self._held

    @property
    def waiting(self) -> int:
        """Holders-to-be queued now (a scan: for tests and diagnostics, not the bind path)."""
        return sum(not waiter.done() for waiter in self._waiters)

    async def __aenter__(self) -> None:
        # Waiters cancelled while queued stay in the deque until they reach its head (removing
        # each from the middle would cost a scan per cancellation: a stopping leader cancels
        # thousands); `_wake` skips them, and here they are dropped from the head.
        while self._waiters and self._waiters[0].done():
            self._waiters.popleft()
        if self._held < self._limit and not self._waiters:
            self._held += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # `_wake` takes the slot on our behalf before it resolves us
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # granted, then cancelled before we could use it
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._release()

    def _release(self) -> None:
        self._held -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._held < self._limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._held += 1
                waiter.set_result(None)
