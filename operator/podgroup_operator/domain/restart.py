"""The whole-gang restart policy (`spec.policy`) as a pure decision: what to delete, what to
recreate and what to write to the status, or why to do nothing yet.

A gang that loses a member while running is usually stuck (the survivors wait
forever on a peer that is gone), and restarting members one at a time does not help, because the
survivors hold state of the lost incarnation. The cure is Volcano's RestartJob: kill every member
and schedule the gang again as a whole. Doing that safely needs decisions that must survive an
operator crash at any point, so they are taken here, from the group's status as last written and
the pods as they are now, and nothing else: no clock (`now` is an argument), no memory between
calls, no I/O. The same inputs always give the same plan.

How the status reconciler's restart step (controllers/restarts.py) carries out a plan (the order
is what makes a crash harmless):

* `Nothing`: nothing to do.
* `Wait`: write `status_patch` if there is one (it starts the backoff clock), then come back at
  `until`.
* `Restart` / `Resume`: write `status_patch` first, with a resourceVersion precondition (on a
  conflict, re-read and plan again); emit `event`; delete each `(namespace, name, uid)` with a UID
  precondition (404 and 409 mean "already gone" and are success); create each body in `recreate`
  (409 AlreadyExists is success). A crash anywhere is resumed by the next plan: the status already
  says which members belong to the incarnation being restarted (`restartingUIDs`), so their
  deletes are repeated, and the bare pods to recreate (`restartPods`) are created once their names
  are free. A restart whose status patch is written is never started twice: the patch moves the
  group to Pending with `lastRestartTime = now`, and only a new incarnation that ran again and
  then failed (phase Running/Unknown, or lastFailureTime after lastRestartTime) triggers again.
* `Fail`: write `status_patch` (phase Failed, terminal), emit `event`, delete `delete`.
* `Refuse`: the recorded restart is not the operator's own record of this group
  (domain/restart_records.py: unsigned, changed, copied from another group, or naming a pod of
  another namespace): write `status_patch` (it clears the record), emit `event`; nothing is
  deleted or created from it. Every record the plan writes is signed with `record_key`, so a
  restart resumed after a crash verifies like one never interrupted.

The rules, in the words of the user documentation:

* Trigger: the group has been whole since its last restart (status phase Running or Unknown; or
  Pending with a `lastFailureTime` later than `lastRestartTime`, which the lifecycle writes when a
  whole gang loses members) and fewer than minMember members of the current incarnation are
  running or succeeded. Failed pods count as lost whatever their reason (a crash, `Evicted`, a
  kubelet rejection such as `OutOfcpu`), and so do pods being deleted or already gone.
* Trigger too: a gang that never ran whole, when a member of the current incarnation has failed
  and fewer than minMember are running or succeeded. It would never run whole, and the members
  that run would hold their nodes waiting for it.
* Trigger too: a Strict gang that never ran whole since its last restart and is held partly
  bound (fewer than minMember members bound, some of them pending or running on their nodes;
  succeeded ones hold nothing) when the scheduler gives up waiting for the rest
  (`scheduleTimeoutSeconds`; the status reconciler passes `timed_out_at`, the scheduler's fact,
  which must be newer than the last restart). Such members arrive bound by someone else,
  or from an operator killed between a gang's binds. What they hold is wasted while the rest
  waits, and two such gangs can hold each other off for ever: Kueue's waitForPodsReady evicts
  a workload for the same reason, and coscheduling's Permit timeout rejects the waiting pods.
  RestartGang restarts it at once, charged (the timeout was its wait, so no backoff follows);
  FailGang fails it. NonStrict gangs hold members on purpose and are left alone. After a
  failover the new leader times the wait from when the status says it began (the
  Unschedulable condition's turn to True: `scheduling_status.wait_started`), and says it
  timed out at its first refusal past that.
* No policy, or action None: nothing; the owner handles failures and the lifecycle reports Unknown.
* FailGang: Failed at once, reason GangFailed.
* RestartGang broken by a preemption (a higher-priority gang evicted it after its last restart;
  the status reconciler passes `preempted_at`): restarted at once and not charged: `restarts`,
  `maxRestarts` and the backoff are left alone, since the gang did nothing wrong. FailGang is
  not special-cased: a gang that asked to fail on any loss fails.
* RestartGang with `status.restarts >= maxRestarts`: Failed, reason RestartLimitExceeded.
* Failing deletes the members that have not terminated (they hold or wait for resources a dead
  gang cannot use) and keeps Succeeded and Failed pods, whose logs and exit codes explain the
  failure: Volcano's Abort/Terminate (`PodRetainPhaseSoft`).
* RestartGang within the limit: wait `min(backoffSeconds * 2**restarts, maxBackoffSeconds)` after
  `status.lastFailureTime` (the newest loss of this incarnation, so a gang still losing members
  is restarted once it has been quiet for the backoff), then delete every member, terminated or
  not (Volcano's RestartJob, `PodRetainPhaseNone`). If the status does not yet record the failure,
  the Wait plan writes `lastFailureTime = now` so that the clock survives an operator restart.
* Members with a controlling owner (ReplicaSet, Job, StatefulSet, a custom job) are recreated by
  it. Bare pods are recreated by the operator from their own body (`recreation_body`) once the
  old pod, which holds the name, is gone: every bare member the gang has, and every one it had
  that is gone whoever deleted it (a taint manager, an eviction, `kubectl delete`, the pod GC;
  the caller keeps their bodies from when it first saw them: `bare_members`, `lost_members`),
  up to the count of bare members it last ran with.
* RestartGang with `scope: SubGroup`, a group that ran whole since its last restart
  (`repairs_sub_groups`): a leaf sub-group that broke (a member failed, is being deleted or is
  gone, and fewer than its minMember run or succeeded) is restarted alone, after the same
  backoff and charged the same: its members deleted and bare ones recreated, the phase left to
  the lifecycle, an Event `SubGroupRestarted`. Broken by a preemption, which takes such a
  victim's sub-groups alone (scheduling/preemption.py), it is restarted at once and not
  charged, even at the limit. When the group's own minMember (over the other sub-groups'
  members) or minSubGroup (over the top sub-groups holding no broken one) does not hold
  (`api.subgroups.group_minimum_holds`), or the limit is reached, the rules above apply to the
  whole group.
* Terminal groups (Finished, Failed) are never touched. A restart in progress is finished even if
  the policy is removed meanwhile, since its bare pods are already deleted.

What the rest of the operator must hold to (the plan relies on it):

* The lifecycle counts `current_incarnation(status, pods)` only. Killed members turn Failed; if
  counted, a restarting gang would look Failed (and latch) or keep its old live count.
* With a RestartGang or FailGang policy, the lifecycle leaves the Failed verdict to this module
  (a gang whose members all failed is restarted, not latched Failed), and this plan is made on the
  status as last written, before `compute_status`, in the same per-group serialised reconcile.
* The caller keeps the body of each bare member from when it first sees it, for as long as the
  group has a RestartGang policy, and hands the plan those whose pods are gone (`lost`). A bare
  member created and deleted while no operator was watching cannot be recreated: nothing saw its
  body.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, NamedTuple

from podgroup_operator.api.backoff import Backoff
from podgroup_operator.api.keys import GroupKey, server_uid
from podgroup_operator.api.models import (
    PodGroup,
    PodGroupStatus,
    RestartPolicy,
    pack_pods,
    unpack_pods,
)
from podgroup_operator.api.subgroups import group_minimum_holds
from podgroup_operator.constants import (
    ConditionStatus,
    ConditionType,
    EventType,
    GangMode,
    Phase,
    PolicyAction,
    Reason,
    RestartScope,
)
from podgroup_operator.domain.conditions import set_condition
from podgroup_operator.domain.lifecycle import (
    LifecycleEvent,
    MemberCounts,
    MemberState,
    count_members,
    is_bound,
    member_state,
    members_of,
    status_patch,
)
from podgroup_operator.domain.membership import Pod
from podgroup_operator.domain.restart_records import (
    RESTART_PODS_DIGEST,
    RecordOwner,
    record_digest,
    record_problems,
)
from podgroup_operator.domain.subgroups import SubGroupMembers, sub_group_members

RESTARTING_UIDS = "restartingUIDs"
"""Status field: UIDs of the members of the incarnation being restarted."""
RESTART_PODS = "restartPods"
"""Status field: bodies of the bare members the restart recreates once their names are free."""
RESTART_PODS_PACKED = "restartPodsPacked"
"""Status field: the same bodies packed (`models.pack_pods`), when they are too many to write
plainly; at most one of the two is set."""
PLAIN_PODS_MAX_BYTES = 64 * 2**10
"""Bodies up to this much JSON are written plainly (`restartPods`), readable with kubectl."""
PACKED_PODS_MAX_CHARS = 512 * 2**10
"""The most packed bodies a restart writes: a status must fit in etcd's 1.5 MiB request with the
rest of the object. Bodies that pack to more than this fail the gang, naming the cause and the fix
(docs/decisions/014-restart-bodies-packed.md)."""

_DROPPED_METADATA = frozenset(
    {
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "generation",
        "generateName",
        "selfLink",
        "finalizers",
    }
)
"""Metadata the apiserver owns, or that belongs to the old object's life (its finalizers)."""
_DROPPED_SPEC = frozenset({"nodeName", "ephemeralContainers"})
"""The node assignment, and ephemeral containers, which the API refuses on create."""

_NAMED_LOSSES = 5
"""Lost members named in an Event message; the rest are counted."""


class MemberRef(NamedTuple):
    """A pod to delete, with the UID for the delete's precondition."""

    namespace: str
    name: str
    uid: str


class Idle(StrEnum):
    """Why a plan is `Nothing`."""

    NO_POLICY = "NoPolicy"
    """No `spec.policy`, or action None: the owner handles failures."""
    TERMINAL = "Terminal"
    """Finished or Failed: terminal phases latch."""
    NOT_TRIGGERED = "NotTriggered"
    """Nothing broke: the gang still has minMember live members, or it never ran whole since
    its last restart, none of its members failed and it is not held partly bound past its
    schedule timeout."""
    RESTART_IN_PROGRESS = "RestartInProgress"
    """A restart was started; its old members are still terminating."""


@dataclass(frozen=True)
class Nothing:
    why: Idle
    message: str


@dataclass(frozen=True)
class Wait:
    """The gang must be restarted, but not before `until` (backoff)."""

    until: datetime
    message: str
    status_patch: dict[str, Any] | None = None
    """Records `lastFailureTime` when the status did not hold this failure yet."""


@dataclass(frozen=True)
class Restart:
    """Start a whole-gang restart: write the status first, then delete and recreate."""

    delete: tuple[MemberRef, ...]
    recreate: tuple[dict[str, Any], ...]
    """Bare pods whose names are already free; usually empty, see `Resume`."""
    status_patch: dict[str, Any]
    event: LifecycleEvent


@dataclass(frozen=True)
class Resume:
    """Carry on with a restart already written to the status; no new restart, no Event."""

    delete: tuple[MemberRef, ...]
    recreate: tuple[dict[str, Any], ...]
    status_patch: dict[str, Any] | None = None
    """Clears the restart's progress fields once it is complete."""


@dataclass(frozen=True)
class Fail:
    """Give up: the group becomes Failed (terminal); unterminated members are deleted."""

    delete: tuple[MemberRef, ...]
    status_patch: dict[str, Any]
    event: LifecycleEvent


@dataclass(frozen=True)
class Refuse:
    """The restart recorded in the status is not to be acted on: clear it, say why."""

    status_patch: dict[str, Any]
    event: LifecycleEvent


RestartPlan = Nothing | Wait | Restart | Resume | Fail | Refuse


@dataclass(frozen=True)
class RestartProgress:
    """A restart written to the status whose deletes or recreations may not have happened yet."""

    uids: frozenset[str] = frozenset()
    pods: tuple[Mapping[str, Any], ...] = ()
    digest: str | None = None
    """The record's signature (`restartPodsDigest`), checked before the record is acted on."""

    @property
    def active(self) -> bool:
        return bool(self.uids or self.pods)


def restart_progress(status: PodGroupStatus) -> RestartProgress:
    """The restart in progress recorded in the status (`restartingUIDs`, `restartPods` or
    `restartPodsPacked`)."""
    pods = list(status.restart_pods)
    if status.restart_pods_packed:
        pods += unpack_pods(status.restart_pods_packed)
    return RestartProgress(
        frozenset(status.restarting_uids), tuple(pods), status.restart_pods_digest
    )


def record_owner(group: PodGroup) -> RecordOwner:
    """The identity a record of `group` is signed for."""
    namespace, name = group.key
    return RecordOwner(namespace, name, group.metadata.uid or "")


def _pods_record(
    group: PodGroup, record_key: bytes, uids: list[str], bodies: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The status fields recording `uids` and `bodies` (see PACKED_PODS_MAX_CHARS), signed
    (`restartPodsDigest`), or None when even packed the bodies are too large to write."""
    digest = record_digest(record_key, record_owner(group), uids, bodies)
    record: dict[str, Any] = {RESTARTING_UIDS: uids, RESTART_PODS_DIGEST: digest}
    if len(json.dumps(bodies, separators=(",", ":"))) <= PLAIN_PODS_MAX_BYTES:
        return {**record, RESTART_PODS: bodies, RESTART_PODS_PACKED: None}
    packed = pack_pods(bodies)
    if len(packed) > PACKED_PODS_MAX_CHARS:
        return None
    return {**record, RESTART_PODS: None, RESTART_PODS_PACKED: packed}


def _refused(group: PodGroup, record_key: bytes, progress: RestartProgress) -> Refuse | None:
    """A `Refuse` when the recorded restart is not the operator's own record of this group."""
    if not progress.active:
        return None
    problems = record_problems(
        record_key, record_owner(group), progress.uids, progress.pods, progress.digest
    )
    if not problems:
        return None
    return Refuse(
        status_patch=_clear_progress(),
        event=LifecycleEvent(
            type=EventType.WARNING,
            reason=Reason.RESTART_RECORD_REFUSED,
            message=f"restart record in the status ({_recorded(progress)}) refused: nothing "
            "is deleted or created from it, and it is cleared: " + "; ".join(problems),
        ),
    )


def _recorded(progress: RestartProgress) -> str:
    """What a record asks for, for an Event: its pods by namespace/name, and its UIDs' count."""
    names = []
    for body in progress.pods[:_NAMED_LOSSES]:
        metadata = body.get("metadata")
        metadata = metadata if isinstance(metadata, Mapping) else {}
        names.append(f"{metadata.get('namespace') or '?'}/{metadata.get('name') or '?'}")
    if len(progress.pods) > _NAMED_LOSSES:
        names.append(f"{len(progress.pods) - _NAMED_LOSSES} more")
    pods = ", ".join(names) or "none"
    return f"pods to create: {pods}; members to delete: {len(progress.uids)}"


def current_incarnation(status: PodGroupStatus, pods: Iterable[Pod]) -> list[Pod]:
    """The pods without the members of the incarnation being restarted.

    The lifecycle must count these only: the old members turn Failed while they are killed, and
    counted they would make the restarted gang look failed (or give it back its old live count).
    """
    old = restart_progress(status).uids
    return [pod for pod in pods if server_uid(pod) not in old]


def backoff_delay(policy: RestartPolicy, restarts: int) -> timedelta:
    """`min(backoffSeconds * 2**restarts, maxBackoffSeconds)`: the wait before the next restart.

    Both are clamped to one year (MAX_SECONDS) first: a policy stored before the CRD had bounds
    (`maxBackoffSeconds: 1000000000000`) once made `now + delay` overflow on every reconcile.
    """
    backoff = Backoff(
        initial_seconds=policy.backoff_seconds, max_seconds=policy.max_backoff_seconds
    )
    return backoff.delay(max(0, restarts) + 1)


def plan_restart(
    group: PodGroup,
    member_pods: Iterable[Pod],
    now: datetime,
    *,
    record_key: bytes,
    preempted_at: datetime | None = None,
    timed_out_at: datetime | None = None,
    lost: Sequence[Pod] = (),
    ran_with: int | None = None,
) -> RestartPlan:
    """What the restart policy does now; see the module docstring for the rules.

    `group.status` is the status as last written; `member_pods` may hold other pods (filtered by
    membership) and duplicates. `now` must be timezone-aware. `preempted_at` is when a
    higher-priority gang last preempted this one: a RestartGang break after it (and after the
    last restart) is the preemption's doing, not the gang's, so the gang is restarted at once
    and not charged (`restarts` and the limit untouched, no backoff). `timed_out_at` is when
    the scheduler gave up waiting for the gang's placement (its ScheduleTimeout verdict), None
    while it has not: a Strict gang held partly bound then is restarted (or failed) at once.
    `lost` are bodies of bare members whose pods are gone (`lost_members`): a restart recreates
    them with the rest, up to `ran_with` bare members in all (every one when None).
    `record_key` signs the records the plan writes and checks the one it reads: a record that
    fails the check gives `Refuse`, whatever else holds.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware, e.g. datetime.now(UTC)")
    status = group.status
    phase = Phase(status.phase) if status.phase is not None else None
    if phase is not None and phase.terminal:
        return Nothing(Idle.TERMINAL, f"the group is {phase.value}; terminal phases latch")

    progress = restart_progress(status)
    refused = _refused(group, record_key, progress)
    if refused is not None:
        return refused
    pods = list(member_pods)
    members = members_of(group.key, pods)
    counts = count_members(m for m in members if server_uid(m) not in progress.uids)
    min_member = group.spec.min_member
    policy = group.spec.policy
    acting = policy is not None and policy.action is not PolicyAction.NONE
    # A break recorded since the last restart triggers even if the owner already replaced the
    # lost member: the survivors hold state of the broken incarnation (Volcano's RestartJob).
    broke = counts.live < min_member or _failure_since_restart(status) is not None
    triggered = (_whole_since_restart(status, phase) and broke) or (
        not progress.active and _failed_before_whole(counts, min_member)
    )
    held = (
        not triggered
        and not progress.active
        and not _whole_since_restart(status, phase)
        and _held_past_timeout(group, counts, timed_out_at)
    )

    restart = functools.partial(_restart, record_key=record_key, lost=lost, ran_with=ran_with)
    resume = _resume(pods, members, progress)
    restarted = status.last_restart_time
    preempted = preempted_at is not None and (restarted is None or preempted_at > restarted)
    if repairs_sub_groups(group):
        current = [m for m in members if server_uid(m) not in progress.uids]
        broken = _broken_sub_groups(group, current, counts, lost)
        if broken is None:
            triggered = True  # the group's own minimum broke: the whole-group rules below
        elif broken:
            assert policy is not None
            if preempted or status.restarts < policy.max_restarts:
                repair = _sub_group_repair(
                    group, pods, broken, lost, now, record_key, charged=not preempted
                )
                if repair is not None:
                    return repair
            # The limit reached, or too many bare members to record: the whole-group rules.
            triggered = True
    if policy is None or not acting or not (triggered or held):
        if resume is not None:
            return resume
        if progress.active:
            return Nothing(Idle.RESTART_IN_PROGRESS, "waiting for the old members to go")
        if not acting:
            return Nothing(Idle.NO_POLICY, "no restart policy; the owner handles failures")
        return Nothing(Idle.NOT_TRIGGERED, _live(counts, min_member))

    cause = (
        _held_cause(members, progress, counts, min_member)
        if held
        else _cause(members, progress, counts, min_member, lost)
    )
    if policy.action is PolicyAction.RESTART_GANG and preempted:
        return restart(
            group, pods, members, progress, now, f"preempted, not counted: {cause}", charged=False
        )
    if policy.action is PolicyAction.FAIL_GANG:
        return _fail(group, members, progress, now, Reason.GANG_FAILED, f"FailGang: {cause}")
    if status.restarts >= policy.max_restarts:
        return _fail(
            group,
            members,
            progress,
            now,
            Reason.RESTART_LIMIT_EXCEEDED,
            f"{status.restarts} of maxRestarts {policy.max_restarts} restarts used: {cause}",
        )
    number = f"restart {status.restarts + 1} of {policy.max_restarts}"
    if held:
        return restart(group, pods, members, progress, now, f"{number}: {cause}")
    wait = _backoff(status, policy, now, number, cause)
    if wait is not None:
        # The chores of an earlier restart go first; the Restart below includes them.
        return resume or wait
    return restart(group, pods, members, progress, now, f"{number}: {cause}")


def _backoff(
    status: PodGroupStatus, policy: RestartPolicy, now: datetime, number: str, cause: str
) -> Wait | None:
    """The Wait before the next restart (see the module docstring), or None when it is due."""
    delay = backoff_delay(policy, status.restarts)
    failed_at = _failure_since_restart(status)
    if failed_at is None and delay:
        return Wait(
            until=now + delay,
            message=f"{number} in {_seconds(delay)}s: {cause}",
            status_patch=status_patch(status, status.model_copy(update={"last_failure_time": now})),
        )
    if failed_at is not None and now < failed_at + delay:
        return Wait(
            until=failed_at + delay,
            message=f"{number} at {(failed_at + delay).isoformat()}, "
            f"{_seconds(delay)}s after the failure at {failed_at.isoformat()}: {cause}",
        )
    return None


def _broken_sub_groups(
    group: PodGroup, current: Sequence[Pod], counts: MemberCounts, lost: Sequence[Pod]
) -> list[SubGroupMembers] | None:
    """`spec.policy.scope: SubGroup`: the broken leaf sub-groups (a member failed, is being
    deleted or is gone (`lost`), and fewer than its minimum run or succeeded), each with its
    present members and its lost ones; or None when the group's own minimum does not hold
    without them (`group_minimum_holds`): its minMember over the other members, or its
    minSubGroup over the top sub-groups holding none of them."""
    spec = group.spec
    gone = {id(pod) for pod in lost}
    parts = sub_group_members(spec, [*current, *lost])
    live = {
        part.name: count_members(p for p in part.pods if id(p) not in gone).live for part in parts
    }
    broken = [
        part
        for part in parts
        if part.leaf
        and live[part.name] < part.least
        and any(
            id(p) in gone or member_state(p) in (MemberState.FAILED, MemberState.DELETING)
            for p in part.pods
        )
    ]
    names = {part.name for part in broken}
    top = [part for part in parts if part.top]
    hit = {id(pod) for part in broken for pod in part.pods}
    whole = [part for part in top if not any(id(pod) in hit for pod in part.pods)]
    others = counts.live - sum(live[name] for name in names)
    if not group_minimum_holds(
        spec.min_member, spec.min_sub_group, live=others, parts=len(top), whole=len(whole)
    ):
        return None
    return broken


def repairs_sub_groups(group: PodGroup) -> bool:
    """Whether a break of one leaf sub-group is repaired alone now: a RestartGang policy of
    `scope: SubGroup` over `spec.subGroups`, no restart in progress, and a group that ran whole
    since its last restart (as the whole-group trigger asks). The preemption planner takes
    such a victim's sub-groups alone; any other victim gang goes whole."""
    policy = group.spec.policy
    status = group.status
    phase = Phase(status.phase) if status.phase is not None else None
    return (
        policy is not None
        and policy.action is PolicyAction.RESTART_GANG
        and policy.scope is RestartScope.SUB_GROUP
        and bool(group.spec.sub_groups)
        and not restart_progress(status).active
        and _whole_since_restart(status, phase)
    )


def _sub_group_repair(
    group: PodGroup,
    pods: Sequence[Pod],
    broken: Sequence[SubGroupMembers],
    gone: Sequence[Pod],
    now: datetime,
    record_key: bytes,
    *,
    charged: bool,
) -> Wait | Restart | None:
    """Restart the broken sub-groups alone (the phase left to the lifecycle): their present
    members deleted, bare ones (and bare ones gone) recreated; after the backoff and counted as
    a restart when `charged`, at once and uncounted after a preemption. None when their bare
    members are too many to record."""
    status = group.status
    policy = group.spec.policy
    assert policy is not None
    names = ", ".join(part.name for part in broken)
    missing = {id(pod) for pod in gone}
    members = [pod for part in broken for pod in part.pods]
    present = [pod for pod in members if id(pod) not in missing]
    lost = [pod for pod in members if id(pod) in missing]
    cause = f"sub-group {names}: " + _cause(
        present, RestartProgress(), count_members(present), sum(p.least for p in broken), lost
    )
    if charged:
        number = f"restart {status.restarts + 1} of {policy.max_restarts}"
        wait = _backoff(status, policy, now, number, cause)
        if wait is not None:
            return wait
    else:
        number = "preempted, not counted"
    bodies = {_name_key(pod): recreation_body(pod) for pod in members if not has_controller(pod)}
    uids = sorted({uid for pod in present if (uid := server_uid(pod))})
    record = _pods_record(group, record_key, uids, [bodies[key] for key in sorted(bodies)])
    if record is None:
        return None
    new_status = status.model_copy(
        update={
            "restarts": status.restarts + 1 if charged else status.restarts,
            "last_restart_time": now,
        }
    )
    patch = status_patch(status, new_status) or {"status": {}}
    patch["status"].update(record)
    delete = tuple(_ref(pod) for pod in present if server_uid(pod) and not _deleting(pod))
    taken = {_name_key(pod) for pod in pods}
    event = LifecycleEvent(
        type=EventType.WARNING,
        reason=Reason.SUB_GROUP_RESTARTED,
        message=f"{number}: {cause}; restarting it alone: deleting {len(delete)} members, "
        f"recreating {len(bodies)} bare pods; the other sub-groups keep running",
    )
    return Restart(
        delete=delete,
        recreate=tuple(bodies[key] for key in sorted(bodies) if key not in taken),
        status_patch=patch,
        event=event,
    )


def recreation_body(pod: Pod) -> dict[str, Any]:
    """A fresh pod to create in place of a bare member: same name, labels, annotations and spec.

    Dropped: what the apiserver assigns (uid, resourceVersion, timestamps, managedFields...), the
    old object's finalizers, the status, and `spec.nodeName`, so the pod is scheduled anew; its
    `schedulerName` stays, so the gang scheduler places it with the rest of the gang.
    """
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    return {
        "apiVersion": pod.get("apiVersion", "v1"),
        "kind": pod.get("kind", "Pod"),
        "metadata": {
            key: copy.deepcopy(value)
            for key, value in metadata.items()
            if key not in _DROPPED_METADATA
        },
        "spec": {
            key: copy.deepcopy(value) for key, value in spec.items() if key not in _DROPPED_SPEC
        },
    }


def bare_members(group: GroupKey, pods: Iterable[Pod]) -> dict[str, Pod]:
    """The group's members with no controlling owner, by name: the bodies to keep so that a
    restart can recreate them once they are gone (`lost_members`)."""
    return {_name_key(pod)[1]: pod for pod in members_of(group, pods) if not has_controller(pod)}


def lost_members(known: Mapping[str, Pod], pods: Iterable[Pod]) -> list[Pod]:
    """The kept bodies (`bare_members`, by name) of members whose name no pod holds now, by
    name: gone, whoever deleted them."""
    taken = {_name_key(pod)[1] for pod in pods}
    return [known[name] for name in sorted(known) if name not in taken]


def has_controller(pod: Pod) -> bool:
    """Whether an owner (ReplicaSet, Job, StatefulSet, a custom job) recreates this pod."""
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("controller") for ref in refs)


def _whole_since_restart(status: PodGroupStatus, phase: Phase | None) -> bool:
    """Whether the current incarnation has run as a whole gang, judged from the status alone.

    `runningTime` cannot tell: it is set once, so after a restart it would re-trigger the
    restarting (Pending) gang. Running/Unknown are only ever written by the lifecycle for a gang
    that ran, and the restart writes Pending; a whole gang that lost every running member goes
    Pending too, but with a lastFailureTime newer than the last restart.
    """
    if phase in (Phase.RUNNING, Phase.UNKNOWN):
        return True
    return phase is Phase.PENDING and _failure_since_restart(status) is not None


def _failed_before_whole(counts: MemberCounts, min_member: int) -> bool:
    """Whether the current incarnation broke before it ever ran whole: a member failed while
    fewer than minMember are live.

    This triggers too because such a gang never reaches Running: a rule waiting for a whole
    gang to break would never fire, and its peers would run on, waiting for the failed one and
    holding their nodes for ever (a bare member is never replaced; an owner's replacement joins a
    gang whose peers hold the broken incarnation's state). Volcano's PodFailed policy acts whether
    or not the job ever ran whole. The old incarnation's members are left out (`restartingUIDs`),
    and a new member failing while a restart is still in progress is judged once the restart is
    complete, so a restart whose status is written is never started twice."""
    return counts.failed > 0 and counts.live < min_member


def held_partly(group: PodGroup, counts: MemberCounts) -> int:
    """How many members of a Strict gang hold nodes (pending or running on them) while fewer
    than minMember are bound; 0 when it is not so held. Succeeded members are bound but hold
    nothing (a restart would run them again).

    One definition for the restart plan (`timed_out_at`) and for the scheduler, which leaves
    such a gang to the plan after its timeout and says so in its ScheduleTimeout message."""
    if (group.spec.mode or GangMode.STRICT) is not GangMode.STRICT:
        return 0
    holding = counts.scheduled - counts.succeeded
    return holding if counts.scheduled < group.spec.min_member else 0


def _held_past_timeout(
    group: PodGroup, counts: MemberCounts, timed_out_at: datetime | None
) -> bool:
    """Whether a Strict gang holds nodes with fewer than minMember members bound after the
    scheduler gave up waiting for the rest, since its last restart (see the module docstring).

    The caller checks the rest: no restart in progress, and not whole since the last restart
    (a whole gang that breaks is the first trigger's)."""
    if timed_out_at is None:
        return False
    restarted = group.status.last_restart_time
    if restarted is not None and timed_out_at <= restarted:
        return False  # the timeout of an incarnation already restarted
    return held_partly(group, counts) > 0


def _failure_since_restart(status: PodGroupStatus) -> datetime | None:
    failed = status.last_failure_time
    restarted = status.last_restart_time
    if failed is None or (restarted is not None and failed <= restarted):
        return None
    return failed


def _resume(
    pods: Sequence[Pod], members: Sequence[Pod], progress: RestartProgress
) -> Resume | None:
    """The outstanding work of the restart in progress, or None when there is none."""
    if not progress.active:
        return None
    old = [pod for pod in members if server_uid(pod) in progress.uids]
    delete = tuple(_ref(pod) for pod in old if not _deleting(pod))
    taken = {_name_key(pod) for pod in pods}
    recreate = tuple(
        recreation_body(body) for body in progress.pods if _name_key(body) not in taken
    )
    done = not old and not recreate
    patch = _clear_progress() if done else None
    if not delete and not recreate and patch is None:
        return None
    return Resume(delete=delete, recreate=recreate, status_patch=patch)


def _restart(
    group: PodGroup,
    pods: Sequence[Pod],
    members: Sequence[Pod],
    progress: RestartProgress,
    now: datetime,
    cause: str,
    *,
    record_key: bytes,
    charged: bool = True,
    lost: Sequence[Pod] = (),
    ran_with: int | None = None,
) -> Restart | Fail:
    status = group.status
    # Every member goes, the old incarnation's stragglers included; each bare one is recreated,
    # and a recreation still owed by an earlier restart is kept unless a member now holds its name.
    bodies = {_name_key(body): recreation_body(body) for body in progress.pods}
    bodies.update(
        {_name_key(pod): recreation_body(pod) for pod in members if not has_controller(pod)}
    )
    # Bare members gone before this restart come back too, up to the count the gang ran with.
    for pod in lost:
        if ran_with is not None and len(bodies) >= ran_with:
            break
        bodies.setdefault(_name_key(pod), recreation_body(pod))
    taken = {_name_key(pod) for pod in pods}
    uids = sorted({uid for pod in members if (uid := server_uid(pod))})
    new_status = status.model_copy(
        update={
            "phase": Phase.PENDING,
            "restarts": status.restarts + 1 if charged else status.restarts,
            "last_restart_time": now,
        }
    )
    record = _pods_record(group, record_key, uids, [bodies[key] for key in sorted(bodies)])
    if record is None:
        return _fail(
            group,
            members,
            progress,
            now,
            Reason.GANG_FAILED,
            f"{cause}; not restarted: the bodies of its {len(bodies)} bare members pack to more "
            f"than {PACKED_PODS_MAX_CHARS // 1024} KiB, more than the status can record to "
            "recreate them; give the members a controller (a Job, a ReplicaSet or your own) "
            "that recreates them",
        )
    patch = status_patch(status, new_status) or {"status": {}}
    patch["status"].update(record)
    delete = tuple(_ref(pod) for pod in members if server_uid(pod) and not _deleting(pod))
    event = LifecycleEvent(
        type=EventType.WARNING,
        reason=Reason.GANG_RESTARTED,
        message=f"{cause}; deleting {len(delete)} members, recreating {len(bodies)} bare pods",
    )
    return Restart(
        delete=delete,
        recreate=tuple(bodies[key] for key in sorted(bodies) if key not in taken),
        status_patch=patch,
        event=event,
    )


def fail_gang(
    group: PodGroup, member_pods: Iterable[Pod], now: datetime, reason: Reason, message: str
) -> Fail:
    """Stop the gang whole, whatever its policy: Failed (terminal), its unterminated members of
    the current incarnation deleted, an Event with `reason` (a restart in progress is cleared).
    For rules outside the restart policy, such as the run-time limit (domain/run_limit.py)."""
    members = current_incarnation(group.status, member_pods)
    return _fail(group, members, restart_progress(group.status), now, reason, message)


def _fail(
    group: PodGroup,
    members: Sequence[Pod],
    progress: RestartProgress,
    now: datetime,
    reason: Reason,
    message: str,
) -> Fail:
    status = group.status
    conditions = set_condition(
        status.conditions,
        ConditionType.UNSCHEDULABLE,
        ConditionStatus.TRUE,
        reason,
        message,
        now,
        id_seed=group.metadata.uid or "/".join(group.key),
    )
    new_status = status.model_copy(
        update={"phase": Phase.FAILED, "completion_time": now, "conditions": conditions}
    )
    patch = status_patch(status, new_status) or {"status": {}}
    if progress.active:
        patch["status"].update(_clear_progress()["status"])
    delete = tuple(
        _ref(pod)
        for pod in members
        if server_uid(pod) and member_state(pod) in (MemberState.PENDING, MemberState.RUNNING)
    )
    event = LifecycleEvent(type=EventType.WARNING, reason=reason, message=message)
    return Fail(delete=delete, status_patch=patch, event=event)


def _clear_progress() -> dict[str, Any]:
    return {
        "status": {
            RESTARTING_UIDS: None,
            RESTART_PODS: None,
            RESTART_PODS_PACKED: None,
            RESTART_PODS_DIGEST: None,
        }
    }


def _cause(
    members: Sequence[Pod],
    progress: RestartProgress,
    counts: MemberCounts,
    min_member: int,
    lost: Sequence[Pod] = (),
) -> str:
    """The lost members by name and why, then the live count, for Events and messages."""
    losses = [f"{_name_key(pod)[1]} gone" for pod in lost]
    for pod in sorted(members, key=lambda p: (p.get("metadata") or {}).get("name", "")):
        if server_uid(pod) in progress.uids:
            continue
        name = (pod.get("metadata") or {}).get("name", "?")
        state = member_state(pod)
        if state is MemberState.FAILED:
            why = (pod.get("status") or {}).get("reason")
            losses.append(f"{name} failed ({why})" if why else f"{name} failed")
        elif state is MemberState.DELETING:
            losses.append(f"{name} being deleted")
    named = losses[:_NAMED_LOSSES]
    if len(losses) > _NAMED_LOSSES:
        named.append(f"{len(losses) - _NAMED_LOSSES} more")
    return "; ".join([*named, _live(counts, min_member)])


def _held_cause(
    members: Sequence[Pod], progress: RestartProgress, counts: MemberCounts, min_member: int
) -> str:
    """Which members hold nodes while the gang waits past its schedule timeout."""
    holding = sorted(
        f"{(pod.get('metadata') or {}).get('name', '?')} on {(pod.get('spec') or {})['nodeName']}"
        for pod in members
        if server_uid(pod) not in progress.uids
        and is_bound(pod)
        and member_state(pod) in (MemberState.PENDING, MemberState.RUNNING)
    )
    named = holding[:_NAMED_LOSSES]
    if len(holding) > _NAMED_LOSSES:
        named.append(f"{len(holding) - _NAMED_LOSSES} more")
    return (
        f"not placed whole within its schedule timeout while {len(holding)} of minMember "
        f"{min_member} members hold nodes ({', '.join(named)})"
    )


def _live(counts: MemberCounts, min_member: int) -> str:
    return f"{counts.live} of minMember {min_member} members running or succeeded"


def _seconds(delay: timedelta) -> int:
    return int(delay.total_seconds())


def _deleting(pod: Pod) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _name_key(pod: Mapping[str, Any]) -> tuple[str, str]:
    metadata = pod.get("metadata") or {}
    return (metadata.get("namespace", "default"), metadata.get("name", ""))


def _ref(pod: Pod) -> MemberRef:
    namespace, name = _name_key(pod)
    return MemberRef(namespace, name, server_uid(pod) or "")
