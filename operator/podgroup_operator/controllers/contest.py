"""Telling when another writer keeps changing a PodGroup status the operator writes.

The status reconciler records what it wrote (`wrote`) and, before each write, asks `holds`:
a field it wrote that differs when it comes to write again was changed by someone else. After
CONTESTED_AFTER such writes in a row, one Warning Event (and log line) names the other writers
from managedFields, and each further write is held as `domain.status_hold.contest_hold` says;
a write that finds its own fields again ends the contest. Why: two controllers writing one
status (a scheduler-plugins controller left running) would otherwise fight without end.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import PODGROUPS, KubeClient
from podgroup_operator.api.keys import GroupKey
from podgroup_operator.controllers.narrator import Narrator
from podgroup_operator.domain.status_hold import (
    CONTESTED_AFTER,
    CONTESTED_LONGEST_SECONDS,
    contest_hold,
)

logger = logging.getLogger(__name__)


def fingerprints(status: dict[str, Any] | None) -> dict[str, int]:
    """A hash of each top-level field of a status, as JSON with sorted keys."""
    return {
        field: hash(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
        for field, value in (status or {}).items()
    }


class Contests:
    """Per group: the fingerprints of our last write, and how many writes in a row found
    another writer's change (with the time of the last)."""

    def __init__(self, kube: KubeClient, narrator: Narrator) -> None:
        self.kube = kube
        self.narrator = narrator
        self._ours: dict[GroupKey, dict[str, int]] = {}
        self._contested: dict[GroupKey, tuple[int, float]] = {}

    def wrote(self, key: GroupKey, status: dict[str, Any] | None) -> None:
        """Our write of `status` was stored."""
        self._ours[key] = fingerprints(status)

    def forget(self, key: GroupKey) -> None:
        self._ours.pop(key, None)
        self._contested.pop(key, None)

    async def holds(
        self, key: GroupKey, body: dict[str, Any], writing: dict[str, Any], now: float
    ) -> float | None:
        """Until when writing `writing` (status fields) over `body` is held; None: write now.
        A write that is not held and finds another writer's change counts one more."""
        ours = self._ours.get(key, {})
        stored = fingerprints(body.get("status"))
        changed = sorted(f for f in writing if f in ours and stored.get(f) != ours[f])
        if not changed:
            self._contested.pop(key, None)
            return None
        times, last = self._contested.get(key, (0, now))
        until = contest_hold(times, last, now)
        if until is not None:
            return until
        times += 1
        self._contested[key] = (times, now)
        if times == CONTESTED_AFTER:
            await self._warn(key, body, changed, times)
        return None

    async def _warn(
        self, key: GroupKey, body: dict[str, Any], fields: list[str], times: int
    ) -> None:
        """One Warning (and log line) naming who else writes the status, from managedFields."""
        try:
            full = await self.kube.get(PODGROUPS, key[1], key[0])
        except Exception:  # not CancelledError: the Warning goes out without the names
            full = body
        others = sorted(
            {
                str(entry.get("manager") or "?")
                for entry in (full.get("metadata") or {}).get("managedFields") or ()
                # `subresource` is set from Kubernetes 1.22; on older servers the fields say it.
                if (
                    entry.get("subresource") == "status"
                    or "f:status" in (entry.get("fieldsV1") or {})
                )
                and entry.get("manager") != self.kube.field_manager
            }
        )
        who = ", ".join(others) if others else "another writer"
        named = ", ".join(f"status.{field}" for field in fields)
        message = (
            f"{named} changed by {who} after each of this operator's last {times} writes: "
            "two controllers write this PodGroup's status (a scheduler-plugins controller "
            "still running?); stop the other one. Until then this operator writes it less "
            f"and less often, at most every {CONTESTED_LONGEST_SECONDS:.0f}s"
        )
        logger.warning("PodGroup %s/%s: %s", key[0], key[1], message)
        self.narrator.narrate(full, c.EventType.WARNING, c.Reason.STATUS_CONTESTED, message)
