"""Warnings on pods whose group membership cannot work: a group that does not exist, a label
and an annotation naming different groups, or a sub-group label naming no leaf of the group.

One Warning Event per pod and cause, never repeated while the pod lives (`pod_gone` forgets
it). Pods naming a missing group are warned only once it has been missing for the delay the
caller gives (a PodGroup applied with its pods often reaches the API server after them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.api.keys import GroupKey
from podgroup_operator.api.models import PodGroup
from podgroup_operator.controllers.clock import MonotonicClock
from podgroup_operator.controllers.narrator import Narrator
from podgroup_operator.domain.membership import membership_conflict, missing_group_message
from podgroup_operator.domain.status_hold import HoldClock, held
from podgroup_operator.domain.subgroups import unknown_sub_group_message


class MemberWarnings:
    """The Warning Events about pods' membership keys, each posted once per pod."""

    def __init__(self, narrator: Narrator, monotonic: MonotonicClock) -> None:
        self.narrator = narrator
        self.monotonic = monotonic
        self._missing_since: dict[GroupKey, tuple[float, float]] = {}
        """When pods were first seen waiting for their missing group, and until when a timer
        is set to look again."""
        self._warned_missing: set[str] = set()
        self._warned_conflicts: set[str] = set()
        self._warned_sub_groups: set[str] = set()

    def group_missing(
        self,
        key: GroupKey,
        pods: list[dict[str, Any]],
        delay: float,
        again: Callable[[GroupKey], object],
    ) -> None:
        """Pods (not being deleted) name the group `key`, which does not exist: warn each once
        when it has been missing `delay` seconds; until then `again(key)` is called when the
        delay ends."""
        if delay:
            since, wake_at = self._missing_since.get(key, (None, None))
            now = self.monotonic.now()
            hold = held(HoldClock.COUNTS, since, delay, now)
            if hold is not None:
                if wake_at is None or hold.until > wake_at:
                    self._missing_since[key] = (hold.since, hold.until)
                    self.monotonic.call_later(hold.until - now, again, key)
                return
        for pod in pods:
            uid = pod["metadata"].get("uid", "")
            if uid in self._warned_missing:
                continue
            self._warned_missing.add(uid)
            message = missing_group_message(pod)
            if message is not None:
                self.narrator.narrate(pod, c.EventType.WARNING, c.Reason.MISSING_POD_GROUP, message)

    def group_found(self, key: GroupKey) -> None:
        """The group exists, or none of its pods are left: stop timing its absence."""
        self._missing_since.pop(key, None)

    def member_seen(self, pod: dict[str, Any]) -> None:
        """One Warning Event for a pod whose label and annotation name different groups."""
        uid = pod["metadata"].get("uid", "")
        if uid in self._warned_conflicts:
            return
        conflict = membership_conflict(pod)
        if conflict is not None:
            self._warned_conflicts.add(uid)
            self.narrator.narrate(
                pod, c.EventType.WARNING, c.Reason.CONFLICTING_MEMBERSHIP, conflict.message
            )

    def unknown_sub_groups(self, group: PodGroup, pods: list[dict[str, Any]]) -> None:
        """One Warning Event per pod whose sub-group label names no leaf of its group."""
        for pod in pods:
            uid = pod["metadata"].get("uid", "")
            if uid in self._warned_sub_groups:
                continue
            message = unknown_sub_group_message(pod, group.spec)
            if message is not None:
                self._warned_sub_groups.add(uid)
                self.narrator.narrate(pod, c.EventType.WARNING, c.Reason.MISSING_SUB_GROUP, message)

    def pod_gone(self, uid: str) -> None:
        """A pod was deleted: forget that it was warned."""
        self._warned_sub_groups.discard(uid)
        self._warned_missing.discard(uid)
        self._warned_conflicts.discard(uid)
