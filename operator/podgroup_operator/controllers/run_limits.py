"""The run-time limit step of the status reconciler: a gang past its maxRunSeconds is stopped.

`domain.run_limit.plan_run_limit` decides; this step carries it out as the restart step carries
out a FailGang plan (controllers/restarts.py): the status written over the version read (phase
Failed, reason RunTimeExceeded), a Warning Event, the members deleted with UID preconditions.
Within the limit, the group is touched again at its deadline.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from podgroup_operator.adapters.kube import PODS, ApiError, KubeClient
from podgroup_operator.api.keys import GroupKey
from podgroup_operator.api.models import PodGroup
from podgroup_operator.controllers.clock import MonotonicClock
from podgroup_operator.controllers.narrator import Narrator
from podgroup_operator.controllers.restarts import RETRY_MARGIN_SECONDS, WriteStatus
from podgroup_operator.domain.run_limit import RunsUntil, plan_run_limit

logger = logging.getLogger(__name__)


class RunLimits:
    """Stops gangs past their run-time limit (see the module docstring)."""

    def __init__(
        self,
        kube: KubeClient,
        narrator: Narrator,
        monotonic: MonotonicClock,
        *,
        write_status: WriteStatus,
        touch: Callable[[GroupKey], None],
    ) -> None:
        self.kube = kube
        self.narrator = narrator
        self.monotonic = monotonic
        self.write_status = write_status
        self.touch = touch
        self._timers: dict[GroupKey, dt.datetime] = {}
        """The deadline each group is touched at (one timer per group and deadline)."""

    async def step(
        self,
        key: GroupKey,
        group: PodGroup,
        body: dict[str, Any],
        pods: list[dict[str, Any]],
        now: dt.datetime,
    ) -> bool:
        """Stop the gang if it is past its limit; True when it wrote status (the reconcile
        ends)."""
        plan = plan_run_limit(group, pods, now)
        if plan is None:
            self._timers.pop(key, None)
            return False
        if isinstance(plan, RunsUntil):
            if self._timers.get(key) != plan.deadline:
                self._timers[key] = plan.deadline
                delay = max(0.0, (plan.deadline - now).total_seconds()) + RETRY_MARGIN_SECONDS
                self.monotonic.call_later(delay, self.touch, key)
            return False
        self._timers.pop(key, None)
        updated = await self.write_status(key, body, plan.status_patch)
        if updated is None:
            return True  # someone wrote in between: decided again over the new version
        self.narrator.narrate(updated, plan.event.type, plan.event.reason, plan.event.message)
        logger.info("PodGroup %s/%s: %s", *key, plan.event.message)
        for member in plan.delete:
            try:
                await self.kube.delete(PODS, member.name, key[0], uid=member.uid)
            except ApiError as exc:
                if not (exc.not_found or exc.conflict):
                    raise
        return True

    def forget(self, key: GroupKey) -> None:
        self._timers.pop(key, None)
