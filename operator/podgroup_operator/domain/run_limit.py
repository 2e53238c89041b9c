"""A gang past its run-time limit is stopped whole (`spec.maxRunSeconds`, or what its members
declare: api/run_time.py).

The limit counts from `status.runningTime`, when the gang first became Running (or from its
last whole-gang restart, when later: `run_started`): it is in the status, so a restart of the
operator neither resets nor forgets it. Past it the gang is Failed
with reason RunTimeExceeded (a Warning Event says so) and its unterminated members are deleted
with UID preconditions (`restart.fail_gang`). The scheduler lets a gang with a limit backfill
nodes reserved for an older gang on the promise that it is done by then: the limit is enforced
so that the promise holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from podgroup_operator.api.models import PodGroup, PodGroupStatus
from podgroup_operator.api.run_time import declared_run_seconds
from podgroup_operator.constants import EventType, Phase, Reason
from podgroup_operator.domain.lifecycle import LifecycleEvent
from podgroup_operator.domain.membership import Pod
from podgroup_operator.domain.restart import Fail, fail_gang


def run_started(status: PodGroupStatus) -> datetime | None:
    """When the current incarnation's run began, as far as the status tells: `runningTime`, or
    the last whole-gang restart when that came later (`runningTime` keeps the first run; a
    restarted gang gets its whole limit again, counted from its restart)."""
    started, restarted = status.running_time, status.last_restart_time
    if started is None:
        return None
    return restarted if restarted is not None and restarted > started else started


@dataclass(frozen=True)
class RunsUntil:
    """The gang is within its limit: look again at `deadline`."""

    deadline: datetime


def plan_run_limit(group: PodGroup, pods: Sequence[Pod], now: datetime) -> Fail | RunsUntil | None:
    """Stop the gang (`Fail`), or when to look again (`RunsUntil`), or None: no limit, not
    Running yet, or finished."""
    phase = Phase(group.status.phase) if group.status.phase is not None else None
    started = run_started(group.status)
    if started is None or phase is None or phase.terminal:
        return None
    limit = declared_run_seconds(group.spec.max_run_seconds, pods)
    if limit is None:
        return None
    deadline = started + timedelta(seconds=limit)
    if now < deadline:
        return RunsUntil(deadline)
    message = (
        f"ran past its maxRunSeconds {limit} (Running since "
        f"{started.isoformat(timespec='seconds')}): stopped, its members deleted"
    )
    fail = fail_gang(group, pods, now, Reason.RUN_TIME_EXCEEDED, message)
    event = LifecycleEvent(type=EventType.WARNING, reason=Reason.RUN_TIME_EXCEEDED, message=message)
    return replace(fail, event=event)
