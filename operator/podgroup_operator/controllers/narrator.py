"""Events posted in the background for the status reconciler and its helpers.

A worker that narrates a transition goes on to its next group at once; at most
EVENT_CONCURRENCY Events are in flight, each best effort (`KubeClient.narrate`): the status is
the record, an Event only tells it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Any

from podgroup_operator.adapters.kube import KubeClient

EVENT_CONCURRENCY = 8
"""Events posted at once, in the background."""


class Narrator:
    """Posts Events without holding the caller; `settled` waits for those posted so far."""

    def __init__(self, kube: KubeClient, clock: Callable[[], dt.datetime]) -> None:
        self.kube = kube
        self.clock = clock
        self._slots = asyncio.Semaphore(EVENT_CONCURRENCY)
        self._posting: set[asyncio.Task[None]] = set()

    def narrate(self, involved: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        """Post an Event in the background."""

        async def post() -> None:
            async with self._slots:
                await self.emit(involved, event_type, reason, message)

        task = asyncio.create_task(post())
        self._posting.add(task)
        task.add_done_callback(self._posting.discard)

    async def emit(
        self, involved: dict[str, Any], event_type: str, reason: str, message: str
    ) -> None:
        """Post an Event and wait for its answer (best effort: never raises an API refusal)."""
        await self.kube.narrate(
            involved, event_type=event_type, reason=reason, message=message, now=self.clock()
        )

    async def settled(self) -> None:
        """Wait until every Event narrated so far has been answered."""
        while self._posting:
            await asyncio.gather(*self._posting, return_exceptions=True)

    async def stop(self) -> None:
        """Cancel the Events still in flight."""
        tasks = list(self._posting)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
