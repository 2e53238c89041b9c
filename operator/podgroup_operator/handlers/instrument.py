"""Webhook latency for /metrics: each admission handler timed, by webhook and result.

A refusal (`kopf.AdmissionError`) is an ordinary answer, counted as "denied" and logged at
INFO, not as an error; anything else that escapes a handler is counted as "error".
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import kopf

from podgroup_operator.metrics import WEBHOOK_LATENCY

logger = logging.getLogger(__name__)

Handler = Callable[..., Any]


def timed(webhook: str) -> Callable[[Handler], Callable[..., Awaitable[None]]]:
    """Wrap an admission handler (sync or async) so that every answer is timed.

    The wrapper is a coroutine function without `__wrapped__`: Kopf decides between awaiting a
    handler and running it in a thread by looking through wrappers, and would otherwise run
    this coroutine function as a sync handler (its coroutine never awaited, nothing checked).
    """

    def wrap(handler: Handler) -> Callable[..., Awaitable[None]]:
        async def answer(**kwargs: Any) -> None:
            started = time.perf_counter()
            result = "allowed"
            try:
                outcome = handler(**kwargs)
                if inspect.isawaitable(outcome):
                    await outcome
            except kopf.AdmissionError as refusal:
                result = "denied"
                logger.info("%s denied: %s", webhook, str(refusal)[:1000])
                raise
            except Exception:
                result = "error"
                raise
            finally:
                WEBHOOK_LATENCY.labels(webhook, result).observe(time.perf_counter() - started)

        answer.__name__ = handler.__name__
        answer.__qualname__ = handler.__qualname__
        answer.__doc__ = handler.__doc__
        return answer

    return wrap
