"""Monotonic time and timers, injected into every controller that waits.

A controller reads `now()` and sets `call_later` timers through a `MonotonicClock` instead of
the event loop: the operator hands it `LoopClock` (the running loop's clock), unit tests a fake
they advance by hand (tests/clock.py), so no test waits for time to pass.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol


class Timer(Protocol):
    """A callback set to run later; `cancel` keeps it from running."""

    def cancel(self) -> None: ...


class MonotonicClock(Protocol):
    """Seconds that only go forward (never the wall clock), and timers counted in them."""

    def now(self) -> float:
        """The current time, in seconds from an arbitrary origin."""
        ...

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer:
        """Run `callback(*args)` once, `delay` seconds from `now()` (at once if `delay` <= 0)."""
        ...


class LoopClock:
    """The running event loop's clock and timers (`loop.time`, `loop.call_later`)."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer:
        return asyncio.get_running_loop().call_later(max(0.0, delay), callback, *args)


LOOP_CLOCK = LoopClock()
"""The clock every controller uses unless a test hands it another."""


async def sleep(clock: MonotonicClock, seconds: float) -> None:
    """Wait `seconds` of `clock`'s time (a timer of it wakes the waiter; cancelling the wait
    cancels the timer)."""
    woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not woken.done():
            woken.set_result(None)

    timer = clock.call_later(seconds, wake)
    try:
        await woken
    finally:
        timer.cancel()


@contextlib.asynccontextmanager
async def timeout(clock: MonotonicClock, seconds: float) -> AsyncIterator[None]:
    """`asyncio.timeout` counted on `clock`: the block is cancelled, and TimeoutError raised,
    when it has not ended `seconds` after it began."""
    async with asyncio.timeout(None) as deadline:

        def expire() -> None:
            if deadline.when() is None:  # not expiring already
                deadline.reschedule(asyncio.get_running_loop().time())

        timer = clock.call_later(seconds, expire)
        try:
            yield
        finally:
            timer.cancel()
