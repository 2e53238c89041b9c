"""Polling with a deadline: how tests wait for the cluster to converge without fixed sleeps."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def wait_for(
    probe: Callable[[], Awaitable[T]],
    timeout: float = 30.0,
    message: str = "condition",
    *,
    interval: float = 0.1,
) -> T:
    """Call `probe` until it returns something truthy; fail with the last value after `timeout`."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = await probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {message}; last: {last!r}"
            )
        await asyncio.sleep(interval)


async def until(check: Callable[[], Any], what: str, timeout: float = 2.0) -> None:
    """Poll a condition on in-process state (a fake, a store, a child's bookkeeping) every
    millisecond until it holds; fail naming `what` after `timeout` seconds."""

    async def poll() -> None:
        while not check():
            await asyncio.sleep(0.001)

    try:
        await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None
