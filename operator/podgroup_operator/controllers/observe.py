"""The operator's own HTTP endpoints: `/metrics`, `/readyz` and `/livez`.

Besides Kopf's liveness endpoint, whose answer is whatever the probe handlers return, cached for
ten seconds, and which has no readiness:

* `/metrics`: the Prometheus exposition of `metrics.REGISTRY` (prometheus-client renders it);
* `/readyz`: 200 once every informer has its first list (before that, placement would not see
  the whole cluster and quota answers would be wrong) and the admission server accepts
  connections, 503 with what is missing otherwise;
* `/livez`: 503 when a loop with work to do has not made progress for `STUCK_SECONDS`
  (a scheduler that stopped cycling, status workers that stopped finishing); a blocked event
  loop does not answer at all, which fails the probe too.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from podgroup_operator.metrics import REGISTRY

logger = logging.getLogger(__name__)

STUCK_SECONDS = 180.0
"""Longer than the longest wait a healthy loop has with work queued (the scheduler's 60 s
backoff cap, a status write's request timeout)."""


class Observable(Protocol):
    def readiness(self) -> tuple[bool, dict[str, Any]]: ...

    def liveness(self, stuck_after: float) -> tuple[bool, dict[str, Any]]: ...


async def _accepts(address: tuple[str, int]) -> bool:
    """Whether something accepts TCP connections there (the admission server, once up)."""
    try:
        async with asyncio.timeout(1.0):
            _, writer = await asyncio.open_connection(*address)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True


async def serve(
    runtime: Observable, host: str, port: int, *, webhooks: tuple[str, int] | None = None
) -> web.AppRunner:
    """Start the endpoints; the caller keeps the runner and calls `cleanup()` on stop.

    With `webhooks` (where the admission server listens), readiness also needs that server to
    accept connections: Kopf starts it after the startup handlers, and an apiserver calling it
    before then gets "connection refused" on every PodGroup write.
    """

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def readyz(_: web.Request) -> web.Response:
        ready, details = runtime.readiness()
        if webhooks is not None:
            details["webhooks_serving"] = await _accepts(webhooks)
            ready = ready and details["webhooks_serving"]
        return web.json_response(details, status=200 if ready else 503)

    async def livez(_: web.Request) -> web.Response:
        alive, details = runtime.liveness(STUCK_SECONDS)
        return web.json_response(details, status=200 if alive else 503)

    app = web.Application()
    app.add_routes(
        [web.get("/metrics", metrics), web.get("/readyz", readyz), web.get("/livez", livez)]
    )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    logger.info("metrics, readiness and liveness served on http://%s:%d", host, port)
    return runner
