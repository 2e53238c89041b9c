"""Kopf glue of the gang scheduler: start it, stop it, and feed it node, pod and group events.

The scheduling itself is `controllers.scheduler.GangScheduler`.
"""

from __future__ import annotations

from typing import Any

import kopf

from podgroup_operator import constants as c
from podgroup_operator.controllers.scheduler import GangScheduler


@kopf.on.startup()
async def start_scheduler(memo: kopf.Memo, **indices: Any) -> None:
    memo.scheduler = GangScheduler(
        memo.kube,
        indices["podgroup_index"],
        indices["member_index"],
        publish=memo.status.set_verdict,
        default_timeout_seconds=memo.settings.default_schedule_timeout_seconds,
    )
    memo.scheduler.start()


@kopf.on.cleanup()
async def stop_scheduler(memo: kopf.Memo, **_: Any) -> None:
    await memo.scheduler.stop()


# Async, not sync: Kopf would run sync handlers in threads, racing the scheduling cycle on the
# snapshot and the pending map.
@kopf.on.event("", "v1", "nodes")
async def node_event(type: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    memo.scheduler.on_node(type, dict(body))


@kopf.on.event("", "v1", "pods")
async def pod_event_for_scheduler(
    type: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any
) -> None:
    memo.scheduler.on_pod(type, dict(body))


@kopf.on.event(c.GROUP, c.VERSION, c.PLURAL)
async def group_event_for_scheduler(
    namespace: str | None, name: str, memo: kopf.Memo, **_: Any
) -> None:
    memo.scheduler.on_group((namespace or "", name))
