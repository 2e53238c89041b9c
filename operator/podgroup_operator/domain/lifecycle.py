"""A PodGroup's status as a pure function of its spec, its member pods and its previous status.

The phase table lives here and nowhere else, so that the status reconciler
(controllers/status.py) only reads, calls `compute_status` and patches, and every transition
can be tested without a cluster. The function reads no clock (`now` is an argument), so it is
repeatable: fed its own result as `previous` it returns the same status, and `status_patch`
then returns None, so a quiet gang causes no writes and no flapping transition IDs or times.

How members count (user documentation):

* Members are the pods whose membership keys name this group in its namespace (see
  `membership`); other pods passed in are ignored, and a pod listed twice (same uid) counts once.
* A member is Succeeded or Failed by its pod phase, even while being deleted (its work is done).
* Otherwise a member with `metadata.deletionTimestamp` is *terminating* (`status.terminating`
  counts them). One whose pod phase is Running still counts as running until its pod is gone:
  its containers run out their grace period, and a gang going Pending or Unknown seconds before
  that would be a lie (Volcano keeps such a group Running too). Losing it, once the pod is gone,
  counts as a deletion (reason PodDeleted). The restart policy judges differently: for it the
  deletion itself is the break (`MemberCounts.live` leaves terminating members out).
* Otherwise it is Running by its pod phase, or else pending (phases Pending and Unknown: a pod
  on an unreachable node is not known to run).
* `running`, `succeeded` and `failed` count those states (`running` with the terminating members
  that still run); `scheduled` counts members bound to a node (`spec.nodeName`) that are pending,
  running (terminating or not) or succeeded, so running + succeeded never exceeds scheduled.

The phase table (minMember = m; "live" = running + succeeded):

* Finished: every member has terminated, at least m of them, and at least m succeeded.
* Failed:   every member has terminated, at least m of them, and fewer than m succeeded. Fewer
  than m terminated members are not a verdict yet: a controller may still replace them.
* Running:  live >= m (succeeded members count: part of the gang may finish early).
* Unknown:  the group was Running, a member failed or went away (live dropped), live < m and
  some member still runs; it stays Unknown while something runs and live < m.
* Pending:  anything else, including an Unknown or Running group with no running member left
  (all members gone, or only pending ones).
* Finished and Failed latch: once there, the phase, conditions and timestamps never change
  again, whatever pods appear; only the counters and observedGeneration keep being reported.

The Unschedulable condition: the lifecycle writes its own verdict where it has a rule, and
otherwise leaves the condition to the scheduler (reasons NotEnoughResources, ScheduleTimeout):

* Running: False, GangSchedulable. Finished: False, GangFinished.
* Unknown: True, PodFailed when a member failed since the last computation, PodDeleted when
  live dropped without a new failure; while nothing new is lost the reason stays.
* Failed: True, PodFailed.
* Pending with fewer than m members that can still run (pending, running or succeeded):
  True, NotEnoughTasks.
* Pending with enough members: a condition the scheduler wrote is kept as it is; a missing
  condition, or one the lifecycle wrote earlier, becomes False, EnoughTasks.
* A group whose spec does not validate has no phase to compute (`invalid_spec_status`): True,
  InvalidSpec, naming every field and the fix; the phase stays (Pending if it had none). Once
  the spec is fixed, the rules above replace it.

Timestamps: scheduleStartTime when first computed Pending; runningTime when first computed
Running (a quick job seen only as Finished has none); completionTime on entering Finished or
Failed; lastFailureTime whenever, while Running or Unknown, a member failed or live dropped, and
on entering Unknown.
"""

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import Enum
from typing import Any

from podgroup_operator.api.keys import GroupKey, pod_uid
from podgroup_operator.api.models import Condition, PodGroup, PodGroupStatus, SubGroupStatus
from podgroup_operator.constants import (
    ANNOTATION_GROUP_NAME,
    EVENT_MESSAGE_LIMIT,
    LABEL_POD_GROUP,
    ConditionStatus,
    ConditionType,
    EventType,
    Phase,
    PodPhase,
    PolicyAction,
    Reason,
)
from podgroup_operator.domain.conditions import find_condition, set_condition
from podgroup_operator.domain.membership import Pod, group_key_of
from podgroup_operator.domain.subgroups import sub_group_members

_LIFECYCLE_REASONS = frozenset(
    {
        Reason.NOT_ENOUGH_TASKS,
        Reason.ENOUGH_TASKS,
        Reason.POD_FAILED,
        Reason.POD_DELETED,
        Reason.GANG_SCHEDULABLE,
        Reason.GANG_FINISHED,
        Reason.INVALID_SPEC,
    }
)
"""Unschedulable reasons the lifecycle writes; any other reason belongs to the scheduler."""

_ACTIVE_WHOLE = (Phase.RUNNING, Phase.UNKNOWN)
"""Phases in which the gang has been whole, so that losing a member is a failure."""


class MemberState(Enum):
    """What a member pod contributes to the gang (see the module docstring)."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DELETING = "deleting"


# Pod phases only move forward and deletion is only ever added, so between two copies of the
# same pod the more advanced one is the newer observation.
_PROGRESS = {
    MemberState.PENDING: 0,
    MemberState.RUNNING: 1,
    MemberState.DELETING: 2,
    MemberState.SUCCEEDED: 3,
    MemberState.FAILED: 3,
}


def member_state(pod: Pod) -> MemberState:
    """The member's state: terminal pod phase first, then deletion, then running or pending."""
    phase = (pod.get("status") or {}).get("phase")
    if phase == PodPhase.SUCCEEDED:
        return MemberState.SUCCEEDED
    if phase == PodPhase.FAILED:
        return MemberState.FAILED
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return MemberState.DELETING
    if phase == PodPhase.RUNNING:
        return MemberState.RUNNING
    return MemberState.PENDING


def is_bound(pod: Pod) -> bool:
    """Whether the pod has been bound to a node."""
    return bool((pod.get("spec") or {}).get("nodeName"))


def members_of(group: GroupKey, pods: Iterable[Pod]) -> list[Pod]:
    """The pods that are members of the group, each once, in first-seen order.

    Of two copies of one pod (same uid, or same namespace/name without a uid) the more advanced
    is kept (see `_PROGRESS`, then bound over unbound), so the result does not depend on the
    order in which a cache happened to list them.
    """
    chosen: dict[str, Pod] = {}
    for pod in pods:
        if group_key_of(pod) != group:
            continue
        identity = pod_uid(pod)
        seen = chosen.get(identity)
        if seen is None or _advancement(pod) > _advancement(seen):
            chosen[identity] = pod
    return list(chosen.values())


def _advancement(pod: Pod) -> tuple[int, bool]:
    return (_PROGRESS[member_state(pod)], is_bound(pod))


@dataclass(frozen=True)
class MemberCounts:
    """How many members are in each state; `scheduled` counts bound, non-failed, live members."""

    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    deleting: int = 0
    deleting_running: int = 0
    """Of `deleting`, those whose pod phase is still Running (see `until_gone`)."""
    scheduled: int = 0

    @property
    def total(self) -> int:
        return self.pending + self.running + self.succeeded + self.failed + self.deleting

    @property
    def live(self) -> int:
        """Members counting toward minMember: running or already succeeded. Terminating members
        are out: the restart policy sees a deletion as a break at once."""
        return self.running + self.succeeded

    def until_gone(self) -> "MemberCounts":
        """The counts the phase table reads: a terminating member whose pod still runs counts as
        running until the pod is gone (the lifecycle reports a group by what runs)."""
        return replace(
            self,
            running=self.running + self.deleting_running,
            deleting=self.deleting - self.deleting_running,
            deleting_running=0,
        )

    @property
    def can_run(self) -> int:
        """Members that are, or may still become, live: pending, running or succeeded."""
        return self.pending + self.running + self.succeeded

    @property
    def terminated(self) -> int:
        return self.succeeded + self.failed

    @property
    def all_terminated(self) -> bool:
        """At least one member, and every member has succeeded or failed."""
        return self.total > 0 and self.terminated == self.total


def count_members(members: Iterable[Pod]) -> MemberCounts:
    """Count member pods (already filtered and deduplicated, see `members_of`) by state."""
    tally = dict.fromkeys(MemberState, 0)
    scheduled = deleting_running = 0
    for pod in members:
        state = member_state(pod)
        tally[state] += 1
        still_runs = (
            state is MemberState.DELETING
            and (pod.get("status") or {}).get("phase") == PodPhase.RUNNING
        )
        deleting_running += still_runs
        if is_bound(pod) and (
            still_runs or state in (MemberState.PENDING, MemberState.RUNNING, MemberState.SUCCEEDED)
        ):
            scheduled += 1
    return MemberCounts(
        pending=tally[MemberState.PENDING],
        running=tally[MemberState.RUNNING],
        succeeded=tally[MemberState.SUCCEEDED],
        failed=tally[MemberState.FAILED],
        deleting=tally[MemberState.DELETING],
        deleting_running=deleting_running,
        scheduled=scheduled,
    )


@dataclass(frozen=True)
class LifecycleEvent:
    """A Kubernetes Event the status reconciler posts on the PodGroup with the status."""

    type: EventType
    reason: Reason
    message: str


@dataclass(frozen=True)
class StatusResult:
    """The new status and the events describing how it got there."""

    status: PodGroupStatus
    events: tuple[LifecycleEvent, ...] = ()


@dataclass(frozen=True)
class _Loss:
    """What the gang lost since the previous computation, judged from counters alone.

    The previous status holds no pod identities, so a member that starts running while another
    disappears can hide the loss; the phase rules only need a loss that took the gang below
    minMember, and that one always shows as a drop of live members.
    """

    new_failures: int
    live_drop: int

    @property
    def any(self) -> bool:
        return self.new_failures > 0 or self.live_drop > 0


@dataclass(frozen=True)
class Outlook:
    """The phase `compute_status` gives a group, and the counts it reads, without building the
    status: what a caller needs to know whether the status would change phase (see
    `outlook`)."""

    phase: Phase
    counts: MemberCounts
    """The counts the phase table reads (`MemberCounts.until_gone`)."""


def outlook(group: PodGroup, member_pods: Iterable[Pod], previous: PodGroupStatus) -> Outlook:
    """The phase `compute_status(group, member_pods, previous, now)` reports, for any `now`.

    Apart, because the status reconciler runs for every burst of member events, and most runs, while
    a gang binds and starts, end by holding back a first `Pending` status (see
    controllers/status.py). Knowing the phase and counts is enough to decide that, at a fraction
    of the cost of conditions, transition IDs and a patch. `compute_status` calls this itself,
    so the two cannot disagree.
    """
    return _reckon(group, member_pods, previous)[0]


@dataclass(frozen=True)
class _Reckoning:
    members: list[Pod]
    all_counts: MemberCounts
    loss: _Loss
    before: Phase | None
    """The previous phase."""


def _reckon(
    group: PodGroup, member_pods: Iterable[Pod], previous: PodGroupStatus
) -> tuple[Outlook, _Reckoning]:
    members = members_of(group.key, member_pods)
    all_counts = count_members(members)
    counts = all_counts.until_gone()
    loss = _Loss(
        new_failures=max(0, counts.failed - previous.failed),
        live_drop=max(0, previous.running + previous.succeeded - counts.live),
    )
    before = Phase(previous.phase) if previous.phase is not None else None
    if before is not None and before.terminal:
        phase = before
    else:
        policy = group.spec.policy
        restart_decides = policy is not None and policy.action in (
            PolicyAction.RESTART_GANG,
            PolicyAction.FAIL_GANG,
        )
        phase = _next_phase(
            before, counts, group.spec.min_member, loss, restart_decides=restart_decides
        )
    return Outlook(phase, counts), _Reckoning(members, all_counts, loss, before)


def compute_status(
    group: PodGroup,
    member_pods: Iterable[Pod],
    previous: PodGroupStatus,
    now: datetime,
) -> StatusResult:
    """The group's status from its pods; `previous` is the status as last written.

    `member_pods` may contain other pods (they are filtered by membership) and duplicates.
    `now` must be timezone-aware; it is only written where something changed.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware, e.g. datetime.now(UTC)")
    min_member = group.spec.min_member
    seen, reckoning = _reckon(group, member_pods, previous)
    counts, all_counts, loss, phase = seen.counts, reckoning.all_counts, reckoning.loss, seen.phase
    reported = previous.model_copy(
        update={
            "running": counts.running,
            "terminating": all_counts.deleting,
            "succeeded": counts.succeeded,
            "failed": counts.failed,
            "scheduled": counts.scheduled,
            "observed_generation": group.metadata.generation,
            "occupied_by": _occupied_by(reckoning.members) or previous.occupied_by,
            **_sub_groups(group, reckoning.members),
        }
    )
    before = reckoning.before
    if before is not None and before.terminal:
        return StatusResult(reported)

    conditions = previous.conditions
    existing = find_condition(conditions, ConditionType.UNSCHEDULABLE)
    verdict = _unschedulable_verdict(phase, counts, min_member, loss, existing, group.metadata.name)
    if verdict is not None:
        status, reason, message = verdict
        conditions = set_condition(
            conditions,
            ConditionType.UNSCHEDULABLE,
            status,
            reason,
            message,
            now,
            id_seed=group.metadata.uid or "/".join(group.key),
        )

    new_status = reported.model_copy(
        update={
            "phase": phase,
            "conditions": conditions,
            **_timestamps(previous, before, phase, loss, now),
        }
    )
    events = () if phase is before else (_phase_event(before, phase, counts, min_member),)
    return StatusResult(new_status, events)


def _sub_groups(group: PodGroup, members: list[Pod]) -> dict[str, Any]:
    """`status.subGroups` and `subGroupsSatisfied`: each sub-group's members by state, and how
    many sub-groups have running and succeeded members reaching their minimum, of all."""
    parts = sub_group_members(group.spec, members)
    if not parts:
        return {"sub_groups": None, "sub_groups_satisfied": None}
    entries = []
    satisfied = 0
    for part in parts:
        least = part.least
        counts = count_members(part.pods).until_gone()
        entries.append(
            SubGroupStatus(
                name=part.name,
                min_member=least,
                running=counts.running,
                succeeded=counts.succeeded,
                failed=counts.failed,
            )
        )
        satisfied += counts.live >= least
    return {"sub_groups": entries, "sub_groups_satisfied": f"{satisfied}/{len(entries)}"}


def _next_phase(
    before: Phase | None,
    counts: MemberCounts,
    min_member: int,
    loss: _Loss,
    *,
    restart_decides: bool = False,
) -> Phase:
    """The phase table. Under a RestartGang/FailGang policy a gang whose members all failed is
    not latched Failed here: domain.restart decides between a restart and Failed."""
    if counts.all_terminated and counts.terminated >= min_member:
        if counts.succeeded >= min_member:
            return Phase.FINISHED
        return Phase.PENDING if restart_decides else Phase.FAILED
    if counts.live >= min_member:
        return Phase.RUNNING
    if counts.running > 0 and (before is Phase.UNKNOWN or (before is Phase.RUNNING and loss.any)):
        return Phase.UNKNOWN
    return Phase.PENDING


def _timestamps(
    previous: PodGroupStatus, before: Phase | None, phase: Phase, loss: _Loss, now: datetime
) -> dict[str, datetime | None]:
    """The phase timestamps: each first-time mark is set once; lastFailureTime marks a break.

    A break is the loss that takes a Running gang short of minMember; a spare member lost above
    minMember is not one, nor is a further loss of an already broken gang. The restart policy
    keys on this time: its backoff counts from the break (a gang that keeps losing members is
    not put off forever), and a gang whose owner quickly replaced the lost member is still
    restarted as a whole.
    """
    lost_while_whole = before is Phase.RUNNING and loss.any and phase is not Phase.RUNNING
    entered_unknown = phase is Phase.UNKNOWN and before is not Phase.UNKNOWN
    return {
        "schedule_start_time": previous.schedule_start_time
        or (now if phase is Phase.PENDING else None),
        "running_time": previous.running_time or (now if phase is Phase.RUNNING else None),
        # Terminal phases latch, so reaching one here is always the first time.
        "completion_time": now if phase.terminal else previous.completion_time,
        "last_failure_time": now
        if lost_while_whole or entered_unknown
        else previous.last_failure_time,
    }


def _unschedulable_verdict(
    phase: Phase,
    counts: MemberCounts,
    min_member: int,
    loss: _Loss,
    existing: Condition | None,
    name: str,
) -> tuple[ConditionStatus, Reason, str] | None:
    """(status, reason, message) the lifecycle wants, or None to keep the scheduler's verdict.

    A group with no member at all says how a pod becomes one: a pod with a key that is almost
    right (Volcano's annotation `scheduling.k8s.io/group-name` set as a label) is no member and
    is scheduled alone, and "0 member pods can run" named no cause."""
    live = f"{counts.live} of minMember {min_member} members running or succeeded"
    if phase is Phase.RUNNING:
        return ConditionStatus.FALSE, Reason.GANG_SCHEDULABLE, live
    if phase is Phase.FINISHED:
        return (
            ConditionStatus.FALSE,
            Reason.GANG_FINISHED,
            f"all members terminated; {counts.succeeded} succeeded, minMember {min_member}",
        )
    if phase is Phase.FAILED:
        return (
            ConditionStatus.TRUE,
            Reason.POD_FAILED,
            f"all members terminated; {counts.succeeded} succeeded and {counts.failed} failed, "
            f"short of minMember {min_member}",
        )
    if phase is Phase.UNKNOWN:
        reason = _loss_reason(counts, loss, existing)
        what = "a member failed" if reason is Reason.POD_FAILED else "a member went away"
        return ConditionStatus.TRUE, reason, f"{what}; {live}"
    if counts.can_run < min_member:
        how = (
            f"; a pod is a member when labelled {LABEL_POD_GROUP}={name} (or annotated "
            f"{ANNOTATION_GROUP_NAME}={name}) in the group's namespace"
            if not counts.total
            else ""
        )
        return (
            ConditionStatus.TRUE,
            Reason.NOT_ENOUGH_TASKS,
            f"{counts.can_run} member pods can run, fewer than minMember {min_member}"
            + _lost_members(counts)
            + how,
        )
    if existing is None or existing.reason in _LIFECYCLE_REASONS:
        return (
            ConditionStatus.FALSE,
            Reason.ENOUGH_TASKS,
            f"{counts.can_run} member pods for minMember {min_member}; "
            "waiting for them to be placed and to run",
        )
    return None


def _loss_reason(counts: MemberCounts, loss: _Loss, existing: Condition | None) -> Reason:
    """Why an Unknown gang is short: the newest loss, else the reason already given."""
    if loss.new_failures:
        return Reason.POD_FAILED
    if loss.live_drop:
        return Reason.POD_DELETED
    if existing is not None and existing.reason in (Reason.POD_FAILED, Reason.POD_DELETED):
        return Reason(existing.reason)
    return Reason.POD_FAILED if counts.failed else Reason.POD_DELETED


def _lost_members(counts: MemberCounts) -> str:
    details = []
    if counts.failed:
        details.append(f"{counts.failed} failed")
    if counts.deleting:
        details.append(f"{counts.deleting} being deleted")
    return f" ({', '.join(details)})" if details else ""


def _phase_event(
    before: Phase | None, after: Phase, counts: MemberCounts, min_member: int
) -> LifecycleEvent:
    warning = after in (Phase.UNKNOWN, Phase.FAILED) or (
        after is Phase.PENDING and before in _ACTIVE_WHOLE
    )
    summary = (
        f"{counts.running} running, {counts.succeeded} succeeded, {counts.failed} failed "
        f"of minMember {min_member}"
    )
    origin = before.value if before is not None else "new"
    return LifecycleEvent(
        type=EventType.WARNING if warning else EventType.NORMAL,
        reason=Reason.PHASE_CHANGED,
        message=f"{origin} -> {after.value}: {summary}",
    )


def _occupied_by(members: Iterable[Pod]) -> str | None:
    """The members' controllers as "Kind/name" (all owners when none is marked controller)."""
    owners: set[str] = set()
    for pod in members:
        refs: list[Mapping[str, Any]] = (pod.get("metadata") or {}).get("ownerReferences") or []
        controllers = [ref for ref in refs if ref.get("controller")] or refs
        owners.update(f"{ref.get('kind')}/{ref.get('name')}" for ref in controllers)
    return ",".join(sorted(owners)) or None


def invalid_spec_message(problems: Iterable[str]) -> str:
    """Every problem of a spec that does not validate, and what to do, cut to
    EVENT_MESSAGE_LIMIT characters (it is an Event's message too)."""
    text = (
        "the spec is not valid: "
        + "; ".join(problems)
        + ". Fix the PodGroup (kubectl edit); its members are not scheduled until then"
    )
    if len(text) <= EVENT_MESSAGE_LIMIT:
        return text
    return text[: EVENT_MESSAGE_LIMIT - 3] + "..."


def invalid_spec_status(
    previous: PodGroupStatus,
    problems: Iterable[str],
    now: datetime,
    *,
    generation: int | None,
    id_seed: str,
) -> PodGroupStatus:
    """The status of a group whose spec does not validate: Unschedulable True, InvalidSpec.

    Such a group (stored before the webhook ran, with it off, or under a CRD without the
    current bounds) has no phase anyone can compute, and its members wait; the condition says so
    where `kubectl get podgroups` shows it, unlike an Event, which the API server drops after an
    hour. The condition stays until the spec is fixed, when `compute_status`
    replaces it (InvalidSpec is a lifecycle reason). Its phase is kept, Pending if it had none;
    a finished group is left as it is.
    """
    phase = Phase(previous.phase) if previous.phase else None
    if phase is not None and phase.terminal:
        return previous
    conditions = set_condition(
        previous.conditions,
        ConditionType.UNSCHEDULABLE,
        ConditionStatus.TRUE,
        Reason.INVALID_SPEC,
        invalid_spec_message(problems),
        now,
        id_seed=id_seed,
    )
    return previous.model_copy(
        update={
            "phase": phase or Phase.PENDING,
            "conditions": conditions,
            "observed_generation": generation,
            "schedule_start_time": previous.schedule_start_time or now,
        }
    )


_UNREAD = object()
"""Stands for a stored value `previous` could not read: equal to nothing `new` holds."""


def status_patch(
    previous: PodGroupStatus, new: PodGroupStatus, rewrite: Collection[str] = ()
) -> dict[str, Any] | None:
    """The JSON merge-patch body `{"status": {...}}` turning `previous` into `new`, or None.

    Only changed fields are sent, by their API (camelCase) names; a field that disappeared is
    sent as null, which a merge patch reads as "remove". Lists (conditions) are sent whole, as
    merge patches replace lists. None means nothing changed: write nothing. `rewrite` names
    fields whose stored value `previous` read as absent (`models.salvage_status`): they are
    sent as `new` has them, or as null, whatever `previous` says.
    """
    old = previous.to_api()
    for key in rewrite:
        old[key] = _UNREAD
    diff = _merge_diff(old, new.to_api())
    return {"status": diff} if diff else None


def _merge_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    patch: dict[str, Any] = {key: None for key in sorted(old.keys() - new.keys())}
    for key, value in new.items():
        if key in old and old[key] == value:
            continue
        if isinstance(value, Mapping) and isinstance(old.get(key), Mapping):
            patch[key] = _merge_diff(old[key], value)
        else:
            patch[key] = value
    return patch
