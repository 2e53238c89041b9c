"""Kopf glue of the PodGroup status: indexes of groups and member pods, and event wiring.

Pods are only *watched* here — indexed and observed through `@kopf.index` / `@kopf.on.event`,
which never write annotations or finalizers to them. Each event marks a group dirty in the
`controllers.status.StatusReconciler`, which does the rest.
"""

from __future__ import annotations

from typing import Any

import kopf

from podgroup_operator import constants as c
from podgroup_operator.controllers.status import GroupKey, StatusReconciler
from podgroup_operator.domain.membership import group_key_of


@kopf.index(c.GROUP, c.VERSION, c.PLURAL)
def podgroup_index(
    namespace: str | None, name: str, body: kopf.Body, **_: Any
) -> dict[GroupKey, dict[str, Any]]:
    return {(namespace or "", name): _plain(body)}


@kopf.index("", "v1", "pods")
def member_index(body: kopf.Body, **_: Any) -> dict[GroupKey, dict[str, Any]] | None:
    key = group_key_of(body)
    return None if key is None else {key: _plain(body)}


def _plain(body: kopf.Body) -> dict[str, Any]:
    """The raw dict behind a Kopf body (no copy: Kopf makes a fresh one per event)."""
    return dict(body)


@kopf.on.startup()
async def start_status_reconciler(memo: kopf.Memo, **indices: Any) -> None:
    """Indices arrive as keyword arguments named after their functions (Kopf's convention)."""
    memo.status = StatusReconciler(
        memo.kube,
        indices["podgroup_index"],
        indices["member_index"],
        workers=memo.settings.status_workers,
    )
    memo.status.start()
    memo.pod_groups = {}


@kopf.on.cleanup()
async def stop_status_reconciler(memo: kopf.Memo, **_: Any) -> None:
    await memo.status.stop()


# Event handlers are `async` on purpose: Kopf runs sync handlers in a thread pool, and these
# touch state owned by the event loop (queues, the reconciler's maps).
@kopf.on.event(c.GROUP, c.VERSION, c.PLURAL)
async def podgroup_changed(namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
    memo.status.touch((namespace or "", name))


@kopf.on.event("", "v1", "pods")
async def pod_changed(body: kopf.Body, type: str | None, memo: kopf.Memo, **_: Any) -> None:
    """Mark the pod's group dirty — and its previous group, if its membership changed."""
    uid = body.get("metadata", {}).get("uid")
    key = group_key_of(body)
    previous = memo.pod_groups.get(uid)
    if type == "DELETED":
        memo.pod_groups.pop(uid, None)
    elif key is not None:
        memo.pod_groups[uid] = key
    else:
        memo.pod_groups.pop(uid, None)
    for dirty in {key, previous} - {None}:
        memo.status.touch(dirty)
