"""Failure isolation for the controllers' per-object loops: count, back off, report once.

One bad object (a PodGroup whose numbers overflow a date, a pod whose labels cannot make a
PodGroup) never stops the work for everybody else, nor fills the log with a traceback a second.
Each loop (status, scheduling, quota) asks this tracker what to do when processing one
object raised: how long to back that object off (the scheduler's `Backoff`, 1 s doubling to
5 min), and whether this failure is news (first failure, or a different cause), in which case the
loop reports it where users look (an Event or condition naming the cause) and the log gets one
traceback. An expected refusal (`ExpectedRefusalError`: a condition the code explains, such as a
stored object the schema no longer admits) gets one WARNING line with its cause and fix instead,
and no traceback: tracebacks are for the unexpected. Repeats of the same failure are counted, not
logged again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import TypeVar

from podgroup_operator import metrics
from podgroup_operator.adapters.kube import FencedError
from podgroup_operator.api.backoff import Backoff
from podgroup_operator.controllers.clock import LOOP_CLOCK, MonotonicClock
from podgroup_operator.logs import describe

K = TypeVar("K", bound=Hashable)


class ExpectedRefusalError(Exception):
    """A failure the code expects and explains: its message names the cause and the fix. Loops
    log it as one WARNING line, without a traceback (`Failures.failed`)."""


@dataclass
class Failure:
    count: int
    cause: str


@dataclass
class Failures:
    """Failures per key of one loop (see the module docstring)."""

    loop: str
    """Names the loop in log lines, e.g. "status of PodGroup"."""
    logger: logging.Logger
    metric: str = ""
    """The loop's label on `podgroup_reconcile_errors_total` (e.g. "status")."""
    backoff: Backoff = field(default_factory=lambda: Backoff(initial_seconds=1, max_seconds=300))
    monotonic: MonotonicClock = LOOP_CLOCK
    """Times the back-off before `retry` (`attempt`)."""
    _failures: dict[Hashable, Failure] = field(default_factory=dict)

    def failed(self, key: Hashable, exc: BaseException) -> tuple[float, bool]:
        """Record a failure; (seconds to back off, whether it is news worth reporting)."""
        cause = describe(exc)
        previous = self._failures.get(key)
        news = previous is None or previous.cause != cause
        count = 1 if previous is None else previous.count + 1
        self._failures[key] = Failure(count, cause)
        if self.metric:
            metrics.RECONCILE_ERRORS.labels(self.metric).inc()
        delay = self.backoff.delay(count).total_seconds()
        if news and isinstance(exc, ExpectedRefusalError):
            self.logger.warning(
                "%s %s refused: %s; retrying with backoff, other objects go on",
                self.loop,
                _name(key),
                exc,
            )
        elif news:
            self.logger.error(
                "%s %s failed: %s; retrying with backoff, other objects go on",
                self.loop,
                _name(key),
                cause,
                exc_info=exc,
            )
        else:
            self.logger.debug("%s %s failed again (%d): %s", self.loop, _name(key), count, cause)
        return delay, news

    async def attempt(
        self, key: K, work: Awaitable[None], retry: Callable[[K], object]
    ) -> tuple[Exception, float] | None:
        """Await one object's work. If it raises, back the object off (`retry(key)` after the
        delay) and return (cause, delay) when the failure is news, for the loop to report where
        users look; the loop itself goes on with the other objects."""
        try:
            await work
        except asyncio.CancelledError:
            raise
        except FencedError:
            return None  # this replica stopped leading: no fault of the object's (runtime.py)
        except Exception as exc:
            delay, news = self.failed(key, exc)
            self.monotonic.call_later(delay, retry, key)
            return (exc, delay) if news else None
        self.succeeded(key)
        return None

    def succeeded(self, key: Hashable) -> None:
        if self._failures.pop(key, None) is not None:
            self.logger.info("%s %s recovered", self.loop, _name(key))

    def forget(self, key: Hashable) -> None:
        """The object is gone: drop its failures without a word (no recovery to report)."""
        self._failures.pop(key, None)

    def count(self, key: Hashable) -> int:
        failure = self._failures.get(key)
        return 0 if failure is None else failure.count

    def __len__(self) -> int:
        return len(self._failures)


def _name(key: Hashable) -> str:
    return "/".join(map(str, key)) if isinstance(key, tuple) else str(key)
