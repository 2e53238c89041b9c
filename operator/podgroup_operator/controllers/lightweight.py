"""Lightweight gangs: the PodGroups the operator makes and removes for gangs declared on pods.

For pods whose group does not exist, `adopt` creates the PodGroup their labels or annotations
declare (`domain.lightweight.podgroup_for`), or, when those keys are invalid, posts one Warning
Event per pod naming each key to fix and creates nothing (no retry: a fixed pod is a new event).
`remove` deletes an operator-made PodGroup whose pods are all gone. The status reconciler calls
both from its reconcile of a group key; it knows nothing else of lightweight gangs.
"""

from __future__ import annotations

import logging
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import PODGROUPS, ApiError, KubeClient
from podgroup_operator.api.keys import GroupKey
from podgroup_operator.controllers.narrator import Narrator
from podgroup_operator.domain.lightweight import (
    is_operator_created,
    lightweight_errors,
    podgroup_for,
)
from podgroup_operator.logs import truncate

logger = logging.getLogger(__name__)


class LightweightGangs:
    """Creates and deletes the PodGroups of lightweight gangs; warns once per pod with bad keys."""

    def __init__(self, kube: KubeClient, narrator: Narrator) -> None:
        self.kube = kube
        self.narrator = narrator
        self._warned: set[str] = set()
        """UIDs of pods warned about their keys (forgotten when the pod goes: `pod_gone`)."""

    async def adopt(self, key: GroupKey, pods: list[dict[str, Any]]) -> bool:
        """Pods (not being deleted) of the group `key`, which does not exist: True when they
        declare a lightweight gang, whose PodGroup is then created (or its keys warned about)."""
        invalid = await self.warn_invalid_keys(pods)
        body = podgroup_for(key[0], pods)
        if body is not None:
            await self._create(body, pods)
        return invalid or body is not None

    async def remove(self, key: GroupKey, body: dict[str, Any], pods: list[Any]) -> bool:
        """Delete the group when the operator made it and its pods are all gone; True if so."""
        if pods or not is_operator_created(body):
            return False
        try:
            await self.kube.delete(PODGROUPS, key[1], key[0], uid=body["metadata"].get("uid"))
            logger.info("deleted PodGroup %s/%s: its lightweight gang has no pods left", *key)
        except ApiError as exc:
            if not (exc.not_found or exc.conflict):
                raise
        return True

    def pod_gone(self, uid: str) -> None:
        """A pod was deleted: forget that it was warned."""
        self._warned.discard(uid)

    async def _create(self, body: dict[str, Any], pods: list[dict[str, Any]]) -> None:
        meta = body["metadata"]
        try:
            await self.kube.create(PODGROUPS, body, meta["namespace"])
            logger.info(
                "created PodGroup %s/%s for a lightweight gang", meta["namespace"], meta["name"]
            )
        except ApiError as exc:
            if exc.conflict:
                return  # created meanwhile
            if exc.namespace_terminating:
                return  # the namespace is going away with its pods
            if exc.status in (400, 422):
                # Refused as invalid by a rule we do not know: retrying cannot help; say it once.
                await self.warn_invalid_keys(pods, refusal=exc.message)
                return
            raise

    async def warn_invalid_keys(
        self, pods: list[dict[str, Any]], refusal: str | None = None
    ) -> bool:
        """One Warning Event per pod whose lightweight-gang keys are invalid (or whose PodGroup
        the API server refused: `refusal`); True if any pod's are."""
        invalid = False
        for pod in pods:
            errors = lightweight_errors(pod)
            if refusal is not None and not errors:
                errors = [f"the PodGroup made from them was refused: {refusal}"]
            if not errors:
                continue
            invalid = True
            uid = pod["metadata"].get("uid", "")
            if uid in self._warned:
                continue
            self._warned.add(uid)
            message = truncate(
                "no PodGroup is created for this pod's gang until its labels/annotations are "
                "fixed: " + "; ".join(errors),
                c.EVENT_MESSAGE_LIMIT,
            )
            self.narrator.narrate(pod, c.EventType.WARNING, c.Reason.INVALID_GANG_LABELS, message)
        return invalid
