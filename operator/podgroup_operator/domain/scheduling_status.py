"""What the gang scheduler's verdict does to a PodGroup's status, as a pure function.

The scheduler decides in memory and never writes status itself: it hands its latest verdict
per group to the status reconciler, which folds it in here after the lifecycle rules ran. One
writer per object means one PATCH per real change, and no two writers fighting over the
`conditions` list (a merge patch replaces lists whole).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from podgroup_operator.api.models import PodGroupStatus, TopologyPlacement
from podgroup_operator.constants import ConditionStatus, ConditionType, Phase, Reason
from podgroup_operator.domain.conditions import find_condition, set_condition

SCHEDULER_REASONS = frozenset(
    {
        Reason.NOT_ENOUGH_RESOURCES,
        Reason.SCHEDULE_TIMEOUT,
        Reason.SCHEDULING_FAILED,
        Reason.SCHEDULING_GATED,
        Reason.UNSUPPORTED_CONSTRAINT,
        Reason.VOLUME_BINDING_FAILED,
        Reason.INVALID_GANG_GROUP,
        Reason.INVALID_TOPOLOGY,
        Reason.WAITING_FOR_QUOTA,
    }
)
"""Unschedulable reasons the scheduler owns; the lifecycle keeps them while Pending. Every
reason the scheduler refuses with (`Verdict.reason`) but the lifecycle's NotEnoughTasks is
here: a reason left out reads as the lifecycle's, so no later verdict replaces it
(`apply_verdict`), a placement does not clear it, and a new leader does not resume its wait
(`wait_started`)."""


@dataclass(frozen=True)
class Verdict:
    """The scheduler's latest word on a group: refused (with reason and message) or placed."""

    placed: bool
    reason: Reason | None = None
    message: str = ""
    at: datetime | None = None
    """When a ScheduleTimeout verdict was given: the restart policy restarts a Strict gang held
    partly bound past it (domain/restart.py)."""
    placement: TopologyPlacement | None = None
    """With `placed`: the topology domain the members went to (None: no domain, cluster-wide).
    On a refusal: the placement of the verdict before it, carried by `next_verdict`."""


def next_verdict(previous: Verdict | None, verdict: Verdict) -> Verdict:
    """The verdict the status reconciler keeps when `verdict` follows `previous`.

    A refusal keeps the placement of the verdict before it: the members placed then still lie
    there. Why: the reconciler keeps one verdict per group, and a refusal that lands before
    the placement is written (of members that arrived after it, or replacements that do not
    fit, as the sub-group left out of a k-of-n gang) would otherwise lose `status.placement`
    for good."""
    if verdict.placed or verdict.placement is not None or previous is None:
        return verdict
    if previous.placement is None:
        return verdict
    return replace(verdict, placement=previous.placement)


def apply_verdict(
    status: PodGroupStatus,
    verdict: Verdict | None,
    min_member: int,
    now: datetime,
    *,
    id_seed: str,
) -> PodGroupStatus:
    """Fold the scheduler's verdict and the bound count into `status`.

    - Unschedulable: a refusal of a Pending group sets it True with the scheduler's reason and
      message (the actionable shortfall). A placement clears a scheduler-owned reason; the
      lifecycle's own reasons (NotEnoughTasks, PodFailed, ...) are left to the lifecycle.
    - Scheduled: True once at least minMember members are bound to nodes.
    - `placement`: a placement's topology domain, or none when it was placed without one; a
      refusal carrying the placement before it (`next_verdict`) keeps that one.
    Terminal groups are left as they are: a finished gang is never rescheduled.
    """
    phase = Phase(status.phase) if status.phase else None
    if phase is not None and phase.terminal:
        return status
    conditions = status.conditions
    current = find_condition(conditions, ConditionType.UNSCHEDULABLE)
    if verdict is not None and phase in (Phase.PENDING, None):
        if not verdict.placed and verdict.reason is not None:
            owned_by_lifecycle = (
                current is not None
                and current.status == ConditionStatus.TRUE
                and current.reason not in SCHEDULER_REASONS
            )
            if not owned_by_lifecycle:
                conditions = set_condition(
                    conditions,
                    ConditionType.UNSCHEDULABLE,
                    ConditionStatus.TRUE,
                    verdict.reason,
                    verdict.message,
                    now,
                    id_seed=id_seed,
                )
        elif verdict.placed and current is not None and current.reason in SCHEDULER_REASONS:
            conditions = set_condition(
                conditions,
                ConditionType.UNSCHEDULABLE,
                ConditionStatus.FALSE,
                Reason.GANG_SCHEDULED,
                "the gang was placed; members are starting",
                now,
                id_seed=id_seed,
            )
    whole = status.scheduled >= min_member
    scheduled = find_condition(conditions, ConditionType.SCHEDULED)
    if scheduled is not None or whole:
        conditions = set_condition(
            conditions,
            ConditionType.SCHEDULED,
            ConditionStatus.TRUE if whole else ConditionStatus.FALSE,
            Reason.GANG_SCHEDULED if whole else Reason.NOT_ENOUGH_TASKS,
            f"{status.scheduled} of minMember {min_member} members bound to nodes",
            now,
            id_seed=id_seed,
        )
    placement = status.placement
    if verdict is not None and (verdict.placed or verdict.placement is not None):
        placement = verdict.placement
    return status.model_copy(update={"conditions": conditions, "placement": placement})


@dataclass(frozen=True)
class Preempted:
    """The gang's pods were evicted by a higher-priority gang (the scheduler's fact)."""

    by: str
    """The preemptor, `namespace/name`."""
    message: str
    at: datetime
    """When the preemption was decided: the restart policy does not charge a restart for a
    break after it (see domain/restart.py)."""
    sub_groups: tuple[str, ...] = ()
    """The sub-groups taken, when the gang's policy repairs them alone (`scope: SubGroup`);
    empty: the whole gang was evicted."""


def apply_preempted(
    status: PodGroupStatus, fact: Preempted | None, now: datetime, *, id_seed: str
) -> PodGroupStatus:
    """Record who preempted the gang as a `Preempted=True` condition (left in place after: it
    explains why a gang that ran went back to Pending). Terminal groups are left alone."""
    phase = Phase(status.phase) if status.phase else None
    if fact is None or (phase is not None and phase.terminal):
        return status
    conditions = set_condition(
        status.conditions,
        ConditionType.PREEMPTED,
        ConditionStatus.TRUE,
        Reason.PREEMPTED,
        f"preempted by {fact.by}: {fact.message}",
        now,
        id_seed=id_seed,
    )
    return status.model_copy(update={"conditions": conditions})


def preempted_since(status: PodGroupStatus, fact: Preempted | None) -> datetime | None:
    """When the gang was last preempted: the scheduler's fact, or (after a failover, when that
    memory is gone) the `Preempted` condition's transition time."""
    if fact is not None:
        return fact.at
    condition = find_condition(status.conditions, ConditionType.PREEMPTED)
    if condition is None or condition.status != ConditionStatus.TRUE:
        return None
    return condition.last_transition_time


def wait_started(status: PodGroupStatus, now: datetime) -> datetime:
    """When the group's present wait for placement began, for a scheduler with no memory of it
    (a new leader after a failover): the Unschedulable condition's turn to True with one of the
    scheduler's reasons (a later reason, ScheduleTimeout, keeps that time), but not before the
    last restart, which starts a new wait; else `now`.

    The scheduler times the wait in memory; timed afresh by each new leader, a gang would wait a
    whole timeout more per failover (and a Strict gang held partly bound is restarted only once
    the timeout is seen, domain/restart.py). The condition
    turns True at the first refusal, a cycle after the wait began: at most that much late."""
    condition = find_condition(status.conditions, ConditionType.UNSCHEDULABLE)
    if (
        condition is None
        or condition.status != ConditionStatus.TRUE
        or condition.reason not in SCHEDULER_REASONS
        or condition.last_transition_time is None
    ):
        return now
    started = condition.last_transition_time
    if status.last_restart_time is not None and status.last_restart_time > started:
        started = status.last_restart_time
    return min(started, now)


def timed_out_since(verdict: Verdict | None) -> datetime | None:
    """When the scheduler gave up waiting for the gang (its latest verdict is ScheduleTimeout),
    else None. A new leader's scheduler gives that verdict again once its first refusal of the
    gang finds the wait, restored from the status (`wait_started`), past the timeout."""
    if verdict is None or verdict.placed or verdict.reason is not Reason.SCHEDULE_TIMEOUT:
        return None
    return verdict.at
