"""The Unschedulable condition: the lifecycle's own verdicts, and the scheduler's kept intact."""

from __future__ import annotations

import pytest

from podgroup_operator.api.models import Condition, PodGroupStatus
from podgroup_operator.constants import (
    ANNOTATION_GROUP_NAME,
    EVENT_MESSAGE_LIMIT,
    LABEL_POD_GROUP,
    ConditionStatus,
    ConditionType,
    Phase,
    Reason,
)
from podgroup_operator.domain.lifecycle import (
    compute_status,
    invalid_spec_message,
    invalid_spec_status,
    status_patch,
)
from tests.unit.domain.lifecycle_helpers import T0, at, gang, members, story, unschedulable

TRUE, FALSE = ConditionStatus.TRUE, ConditionStatus.FALSE


@pytest.mark.parametrize(
    ("steps", "status", "reason"),
    [
        (["PP"], TRUE, Reason.NOT_ENOUGH_TASKS),
        ([""], TRUE, Reason.NOT_ENOUGH_TASKS),
        (["PPP"], FALSE, Reason.ENOUGH_TASKS),
        (["FPP"], TRUE, Reason.NOT_ENOUGH_TASKS),
        (["DPP"], FALSE, Reason.ENOUGH_TASKS),
        (["RRR"], FALSE, Reason.GANG_SCHEDULABLE),
        (["RRR", "RRF"], TRUE, Reason.POD_FAILED),
        (["RRR", "RR"], TRUE, Reason.POD_DELETED),
        (["RRR", "RRD"], FALSE, Reason.GANG_SCHEDULABLE),
        (["RRR", "RRD", "RR"], TRUE, Reason.POD_DELETED),
        (["RRR", "SSS"], FALSE, Reason.GANG_FINISHED),
        (["RRR", "SSF"], TRUE, Reason.POD_FAILED),
        (["RRR", "RR", ""], TRUE, Reason.NOT_ENOUGH_TASKS),
        (["RRR", "RR", "RRPPP"], TRUE, Reason.POD_DELETED),
        (["RRR", "RR", "PPP"], FALSE, Reason.ENOUGH_TASKS),
    ],
    ids=[
        "too few members",
        "no members",
        "enough members",
        "a failed member cannot run",
        "a terminating member still runs",
        "running",
        "unknown after a failure",
        "unknown after a deletion",
        "running while a pod terminates",
        "unknown once the terminating pod is gone",
        "finished",
        "failed",
        "all gone after unknown",
        "unknown keeps its reason",
        "replacements after unknown",
    ],
)
def test_the_lifecycle_verdict_per_situation(
    steps: list[str], status: ConditionStatus, reason: Reason
) -> None:
    condition = unschedulable(story(gang(3), steps)[-1].status)
    assert (condition.status, condition.reason) == (status, reason)


def test_messages_say_how_short_the_gang_is_and_why() -> None:
    condition = unschedulable(story(gang(4), ["FDP"])[-1].status)
    assert condition.message == "2 member pods can run, fewer than minMember 4 (1 failed)"


def test_a_group_without_any_member_says_how_a_pod_becomes_one() -> None:
    """A pod with a near miss (Volcano's annotation `scheduling.k8s.io/group-name` set as a
    label) is no member: the message must name the keys that count."""
    group = gang(2)
    condition = unschedulable(story(group, [""])[-1].status)
    name = group.metadata.name
    assert condition.message == (
        "0 member pods can run, fewer than minMember 2; a pod is a member when labelled "
        f"{LABEL_POD_GROUP}={name} (or annotated {ANNOTATION_GROUP_NAME}={name}) in the "
        "group's namespace"
    )
    # Once it has members, the message is about them again.
    assert "a pod is a member" not in unschedulable(story(group, ["P"])[-1].status).message


def test_an_unknown_gang_names_its_newest_loss_and_keeps_it_while_nothing_new_is_lost() -> None:
    results = story(gang(3), ["RRRR", "RRF", "RF", "RFF", "RFF", "RFFP"])
    assert [unschedulable(r.status).reason for r in results] == [
        Reason.GANG_SCHEDULABLE,
        Reason.POD_FAILED,  # two members lost, one of them failed: the failure is named
        Reason.POD_DELETED,  # one more went away without failing
        Reason.POD_FAILED,  # another failed
        Reason.POD_FAILED,  # nothing new
        Reason.POD_FAILED,  # a replacement arrived, still short
    ]
    assert [r.status.phase for r in results] == [Phase.RUNNING] + [Phase.UNKNOWN] * 5


def _scheduler_says(reason: Reason) -> PodGroupStatus:
    """A Pending status on which the scheduler has written its own verdict."""
    pending = story(gang(3), ["PPP"])[-1].status
    verdict = Condition(
        type=ConditionType.UNSCHEDULABLE,
        status=TRUE,
        reason=reason,
        message="0/5 nodes can hold the gang",
        transition_id="scheduler-1",
        last_transition_time=T0,
    )
    return pending.model_copy(update={"conditions": [verdict]})


@pytest.mark.parametrize("reason", [Reason.NOT_ENOUGH_RESOURCES, Reason.SCHEDULE_TIMEOUT])
def test_a_scheduler_verdict_survives_while_the_lifecycle_has_no_rule(reason: Reason) -> None:
    previous = _scheduler_says(reason)
    result = compute_status(gang(3), members("PPB"), previous, at(30))
    assert result.status.conditions == previous.conditions


def test_too_few_members_overrides_the_scheduler_but_keeps_the_time_of_the_flip() -> None:
    previous = _scheduler_says(Reason.NOT_ENOUGH_RESOURCES)
    condition = unschedulable(compute_status(gang(3), members("PP"), previous, at(30)).status)
    assert (condition.status, condition.reason) == (TRUE, Reason.NOT_ENOUGH_TASKS)
    assert condition.last_transition_time == T0
    assert condition.transition_id != "scheduler-1"


def test_a_whole_gang_overrides_the_scheduler() -> None:
    previous = _scheduler_says(Reason.SCHEDULE_TIMEOUT)
    condition = unschedulable(compute_status(gang(3), members("RRR"), previous, at(30)).status)
    assert (condition.status, condition.reason) == (FALSE, Reason.GANG_SCHEDULABLE)
    assert condition.last_transition_time == at(30)


def test_other_conditions_are_left_alone() -> None:
    scheduled = Condition(type=ConditionType.SCHEDULED, status=TRUE, reason=Reason.GANG_SCHEDULED)
    quota = Condition(type=ConditionType.QUOTA_RESERVED, status=TRUE, reason=Reason.QUOTA_RESERVED)
    previous = PodGroupStatus(conditions=[scheduled, quota])
    status = compute_status(gang(3), members("RRR"), previous, T0).status
    assert status.conditions[:2] == [scheduled, quota]
    assert [c.type for c in status.conditions] == [
        ConditionType.SCHEDULED,
        ConditionType.QUOTA_RESERVED,
        ConditionType.UNSCHEDULABLE,
    ]


def test_last_transition_time_moves_only_when_the_status_flips() -> None:
    steps = ["PP", "PPP", "RRP", "RRR", "RRRF", "RRF", "RF", "RFRR", "SFSS"]
    results = story(gang(3), steps)
    observed = [
        (unschedulable(r.status).status, unschedulable(r.status).last_transition_time)
        for r in results
    ]
    assert observed == [
        (TRUE, at(0)),  # NotEnoughTasks
        (FALSE, at(1)),  # EnoughTasks
        (FALSE, at(1)),  # still EnoughTasks, message only
        (FALSE, at(1)),  # GangSchedulable: new reason, same status
        (FALSE, at(1)),  # a spare failed
        (TRUE, at(5)),  # Unknown, PodDeleted
        (TRUE, at(5)),  # Unknown, PodDeleted again
        (FALSE, at(7)),  # recovered
        (FALSE, at(7)),  # finished
    ]


def test_transition_ids_change_with_status_or_reason_and_never_with_counts_alone() -> None:
    results = story(gang(3), ["P", "PP", "PPP", "PPPP", "RRRR", "RRRS", "RRSS"])
    ids = [unschedulable(r.status).transition_id for r in results]
    # NotEnoughTasks x2, EnoughTasks x2, GangSchedulable x3
    assert ids[0] == ids[1] != ids[2] == ids[3] != ids[4] == ids[5] == ids[6]
    assert len(set(ids)) == 3


def test_a_latched_group_never_touches_its_conditions_again() -> None:
    failed = story(gang(2), ["FF"])[-1].status
    later = compute_status(gang(2), members("RR"), failed, at(60)).status
    assert later.conditions == failed.conditions
    assert later.phase is Phase.FAILED


# --- a spec that does not validate ---------------------------------------------------------------
PROBLEMS = ["spec.minMember: must be >= 1", "spec.scheduleTimeoutSeconds: must be >= 1"]


def test_an_invalid_spec_is_said_as_unschedulable_and_a_new_group_is_pending() -> None:
    status = invalid_spec_status(PodGroupStatus(), PROBLEMS, at(1), generation=2, id_seed="u")

    assert status.phase == Phase.PENDING
    assert status.observed_generation == 2
    assert status.schedule_start_time == at(1)
    condition = unschedulable(status)
    assert (condition.status, condition.reason) == (TRUE, Reason.INVALID_SPEC)
    assert condition.message == (
        "the spec is not valid: spec.minMember: must be >= 1; spec.scheduleTimeoutSeconds: "
        "must be >= 1. Fix the PodGroup (kubectl edit); its members are not scheduled until then"
    )
    # Fed its own result, nothing changes: no write, no new transition.
    again = invalid_spec_status(status, PROBLEMS, at(9), generation=2, id_seed="u")
    assert status_patch(status, again) is None


def test_an_invalid_spec_keeps_a_phase_and_leaves_a_finished_group_alone() -> None:
    (running,) = story(gang(), ["RRR"])
    status = invalid_spec_status(running.status, PROBLEMS, at(5), generation=3, id_seed="u")
    assert status.phase == Phase.RUNNING
    assert unschedulable(status).reason == Reason.INVALID_SPEC

    finished = story(gang(), ["RRR", "SSS"])[-1].status
    assert invalid_spec_status(finished, PROBLEMS, at(5), generation=3, id_seed="u") is finished


def test_once_the_spec_is_fixed_the_lifecycle_replaces_the_invalid_spec_verdict() -> None:
    invalid = invalid_spec_status(PodGroupStatus(), PROBLEMS, at(1), generation=1, id_seed="u")
    fixed = compute_status(gang(min_member=3), members("PPP"), invalid, at(2)).status
    condition = unschedulable(fixed)
    assert (condition.status, condition.reason) == (FALSE, Reason.ENOUGH_TASKS)


def test_an_invalid_spec_message_is_bounded() -> None:
    message = invalid_spec_message([f"spec.gangGroup[{i}]: not namespace/name" for i in range(99)])
    assert len(message) == EVENT_MESSAGE_LIMIT
    assert message.endswith("...")
