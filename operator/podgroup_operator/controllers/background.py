"""The loop a controller runs in the background, started and stopped with the leader's work.

Status writers and mirrors (controllers/topology.py, elastic_quotas.py, dialects.py) each run
one task from `start` until `stop`; `Background` is that task, named for logs and debuggers.
`stop` waits for the task to end, so nothing it writes lands after the leader stepped down.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import ClassVar


class Background:
    """One named task running `_run` between `start` and `stop` (idempotent both)."""

    task_name: ClassVar[str] = "background"
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self.task_name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        raise NotImplementedError
