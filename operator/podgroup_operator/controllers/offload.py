"""The gang scheduler's worker thread: a decision runs there while the event loop goes on.

While the thread decides, the snapshot is the thread's alone: every call that would change it
from the event loop (node, pod and PV events, bind answers) goes through `exclusive`, which
queues it in arrival order while a decision is under way. `decided` applies the queue once the
cycle has booked the decision, so that to what came meanwhile, the decision and its bookkeeping
are one step, as on the event loop. Which decisions go to the thread is the scheduler's choice
(controllers/scheduler.py, `GangScheduler._pure`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from podgroup_operator.logs import describe, truncate

logger = logging.getLogger(__name__)
_Outcome = TypeVar("_Outcome")


class Offload:
    """One worker thread for decisions, and the calls held back while it decides."""

    def __init__(self) -> None:
        self._thread: ThreadPoolExecutor | None = None
        self.deciding = False
        """True while a worker thread decides on the snapshot."""
        self._decision: asyncio.Future[Any] | None = None
        """The worker thread's decision under way, if any."""
        self._deferred: list[Callable[[], object]] = []
        """What came for the snapshot meanwhile, in arrival order."""
        self.deferred_total = 0
        """Calls ever queued behind a thread's decision (tests and diagnostics)."""
        self.deferred_errors = 0
        """Of those, the ones that raised when applied."""

    def exclusive(self, call: Callable[..., object], *args: Any) -> None:
        """Call now, or, while a worker thread decides on the snapshot, once it is done."""
        if self.deciding:
            self._deferred.append(functools.partial(call, *args))
            self.deferred_total += 1
        else:
            call(*args)

    async def run(self, call: Callable[..., _Outcome], *args: Any) -> _Outcome:
        """`call(*args)` in the worker thread. The snapshot stays held (`deciding`) until the
        caller says the outcome is booked (`decided`), even after the call returns."""
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="podgroup-decision")
        loop = asyncio.get_running_loop()
        self.deciding = True
        self._decision = loop.run_in_executor(self._thread, call, *args)
        return await asyncio.shield(self._decision)

    def decided(self) -> None:
        """A decision and its bookkeeping are over: apply what waited for the snapshot. If the
        caller was cancelled while the thread decides (the scheduler stopping), that happens when
        the thread returns: a thread cannot be stopped, and the snapshot is its own until then."""
        if not self.deciding:
            return
        decision = self._decision
        if decision is not None and not decision.done():
            decision.add_done_callback(self._thread_ended)
            return
        self._decision = None
        self._thaw()

    def shutdown(self) -> None:
        """Let the thread go; a decision under way ends on its own."""
        if self._thread is not None:
            self._thread.shutdown(wait=False)

    def _thread_ended(self, decision: asyncio.Future[Any]) -> None:
        if not decision.cancelled():
            decision.exception()  # retrieved: its cycle is gone, and so is its result
        self._decision = None
        self._thaw()

    def _thaw(self) -> None:
        """Apply, in arrival order, what came for the snapshot during a thread's decision.
        Each call is isolated as the informers isolate their handlers: one that raises is
        logged (with a traceback for the first few) and the rest still apply."""
        self.deciding = False
        deferred, self._deferred = self._deferred, []
        for call in deferred:
            try:
                call()
            except Exception as exc:
                self.deferred_errors += 1
                logger.error(
                    "%s, held back during a decision in the worker thread, failed: %s",
                    getattr(getattr(call, "func", call), "__qualname__", "a call"),
                    truncate(describe(exc)),
                    exc_info=self.deferred_errors <= 3,
                )
