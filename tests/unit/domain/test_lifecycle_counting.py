"""What counts as a member and how: counters, filtering, duplicates, terminating pods, times."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from podgroup_operator.api.models import PodGroup, PodGroupStatus, Reservation
from podgroup_operator.constants import Phase, PodPhase
from podgroup_operator.domain.lifecycle import (
    MemberCounts,
    compute_status,
    count_members,
    members_of,
)
from podgroup_operator.domain.restart import Restart
from tests.builders import pod, podgroup
from tests.unit.domain.lifecycle_helpers import T0, at, gang, members, story
from tests.unit.restart.helpers import plan_restart


def _counters(status: PodGroupStatus) -> tuple[int, int, int, int]:
    return (status.running, status.succeeded, status.failed, status.scheduled)


@pytest.mark.parametrize(
    ("letters", "running", "succeeded", "failed", "scheduled"),
    [
        ("", 0, 0, 0, 0),
        ("PPP", 0, 0, 0, 0),
        ("BBP", 0, 0, 0, 2),
        ("RRS", 2, 1, 0, 3),
        ("RSF", 1, 1, 1, 2),
        ("RRD", 3, 0, 0, 3),
        ("RU", 1, 0, 0, 2),
    ],
    ids=[
        "none",
        "unbound",
        "bound pending",
        "running and succeeded",
        "mixed",
        "terminating",
        "unknown pod phase",
    ],
)
def test_counters(letters: str, running: int, succeeded: int, failed: int, scheduled: int) -> None:
    status = compute_status(gang(), members(letters), PodGroupStatus(), T0).status
    assert _counters(status) == (running, succeeded, failed, scheduled)


def test_terminated_pods_count_by_phase_even_while_deleted() -> None:
    done = [
        pod("a", group="gang", phase=PodPhase.SUCCEEDED, node="n", deleting=True),
        pod("b", group="gang", phase=PodPhase.FAILED, node="n", deleting=True),
    ]
    assert count_members(done) == MemberCounts(succeeded=1, failed=1, scheduled=1)


def test_pods_of_other_groups_and_namespaces_are_ignored() -> None:
    strangers = [
        pod("x", group="other", phase=PodPhase.RUNNING),
        pod("y", "elsewhere", group="gang", phase=PodPhase.RUNNING),
        pod("z", phase=PodPhase.RUNNING),
    ]
    status = compute_status(gang(1), strangers, PodGroupStatus(), T0).status
    assert status.phase is Phase.PENDING
    assert _counters(status) == (0, 0, 0, 0)


def test_annotation_members_count_and_a_conflicting_label_takes_the_pod_away() -> None:
    pods = [
        pod("a", group_annotation="gang", phase=PodPhase.RUNNING),
        pod("b", group="gang", group_annotation="gang", phase=PodPhase.RUNNING),
        pod("c", group="other", group_annotation="gang", phase=PodPhase.RUNNING),
    ]
    assert [p["metadata"]["name"] for p in members_of(("default", "gang"), pods)] == ["a", "b"]
    assert compute_status(gang(3), pods, PodGroupStatus(), T0).status.running == 2


def _copies(*phases: str, deleting_last: bool = False) -> list[dict[str, Any]]:
    """Several observations of one pod (same uid)."""
    first = pod("dup", group="gang", node="n")
    copies = []
    for index, phase in enumerate(phases):
        copy = {**first, "status": {"phase": phase}, "metadata": dict(first["metadata"])}
        if deleting_last and index == len(phases) - 1:
            copy["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z"
        copies.append(copy)
    return copies


@pytest.mark.parametrize("order", [1, -1], ids=["oldest first", "newest first"])
def test_a_pod_listed_twice_counts_once_as_its_most_advanced_copy(order: int) -> None:
    copies = _copies(PodPhase.PENDING, PodPhase.RUNNING, PodPhase.SUCCEEDED)[::order]
    assert count_members(members_of(("default", "gang"), copies)) == MemberCounts(
        succeeded=1, scheduled=1
    )


def test_a_deleted_copy_wins_over_a_running_copy() -> None:
    copies = _copies(PodPhase.RUNNING, PodPhase.RUNNING, deleting_last=True)
    assert count_members(members_of(("default", "gang"), copies[::-1])) == MemberCounts(
        deleting=1, deleting_running=1, scheduled=1
    )


def test_duplicates_do_not_make_a_gang_whole() -> None:
    lone = pod("a", group="gang", phase=PodPhase.RUNNING)
    status = compute_status(gang(2), [lone, lone], PodGroupStatus(), T0).status
    assert status.running == 1
    assert status.phase is Phase.PENDING


def test_pods_without_uid_are_told_apart_by_name() -> None:
    pods = members("RR")
    for member in pods:
        del member["metadata"]["uid"]
    assert compute_status(gang(2), pods + pods, PodGroupStatus(), T0).status.running == 2


def test_observed_generation_comes_from_the_group() -> None:
    group = PodGroup.model_validate(podgroup("gang", min_member=1, generation=7))
    assert compute_status(group, [], PodGroupStatus(), T0).status.observed_generation == 7


def test_occupied_by_names_the_controllers_of_the_members() -> None:
    owned = members("RR")
    owned[0]["metadata"]["ownerReferences"] = [
        {"kind": "Job", "name": "train", "controller": True},
        {"kind": "Workflow", "name": "wf"},
    ]
    owned[1]["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "train", "controller": True}]
    previous = PodGroupStatus(occupied_by="Job/old")
    assert compute_status(gang(2), owned, previous, T0).status.occupied_by == "Job/train"
    assert compute_status(gang(2), members("RR"), previous, T0).status.occupied_by == "Job/old"


def test_fields_owned_by_other_controllers_are_kept() -> None:
    previous = PodGroupStatus(
        restarts=2, last_restart_time=T0, reservation=Reservation(reserved={"cpu": "4"})
    )
    status = compute_status(gang(), members("RRR"), previous, at(5)).status
    assert (status.restarts, status.last_restart_time) == (2, T0)
    assert status.reservation == previous.reservation


def test_now_must_be_timezone_aware() -> None:
    with pytest.raises(ValueError, match="timezone"):
        compute_status(gang(), [], PodGroupStatus(), datetime(2026, 1, 1))


def test_previous_status_is_not_modified() -> None:
    previous = story(gang(), ["RRR"])[-1].status
    snapshot = previous.model_copy(deep=True)
    compute_status(gang(), members("RRF"), previous, at(9))
    assert previous == snapshot


# --- timestamps ------------------------------------------------------------------------------


def test_schedule_start_and_running_times_are_the_first_occurrences() -> None:
    results = story(gang(), ["PPP", "BBB", "RRR", "RRF", "RRFR", "", "RRR"])
    times = [(r.status.schedule_start_time, r.status.running_time) for r in results]
    assert times == [
        (at(0), None),
        (at(0), None),
        (at(0), at(2)),
        (at(0), at(2)),
        (at(0), at(2)),
        (at(0), at(2)),
        (at(0), at(2)),
    ]


def test_a_group_first_seen_running_has_no_schedule_start_time() -> None:
    status = story(gang(), ["RRR"])[-1].status
    assert (status.schedule_start_time, status.running_time) == (None, at(0))


def test_a_quick_job_seen_only_finished_has_a_completion_but_no_running_time() -> None:
    status = story(gang(), ["PPP", "SSS"])[-1].status
    assert (status.running_time, status.completion_time) == (None, at(1))


@pytest.mark.parametrize("ending", ["SSS", "SSF"], ids=["finished", "failed"])
def test_completion_time_is_set_once_on_entering_a_terminal_phase(ending: str) -> None:
    results = story(gang(), ["RRR", ending, ending, "RRR"])
    assert [r.status.completion_time for r in results] == [None, at(1), at(1), at(1)]


def test_last_failure_time_marks_when_the_gang_breaks() -> None:
    results = story(gang(3), ["PPPPP", "RRRRR", "RRRRF", "RRRF", "RRRF", "RRFF", "RRRFF"])
    assert [r.status.last_failure_time for r in results] == [
        None,  # pending: nothing to lose yet
        None,
        None,  # a spare failed while running: the gang is still whole
        None,  # a spare was deleted while running: still whole
        None,  # nothing new
        at(5),  # down to Unknown: the gang broke
        at(5),  # recovered: the break stays recorded (the restart policy keys on it)
    ]


def test_failures_while_pending_are_not_failures_of_the_gang() -> None:
    results = story(gang(3), ["PPP", "FPP", "FFP"])
    assert [r.status.last_failure_time for r in results] == [None, None, None]


# --- terminating members (deletionTimestamp set, pod still present) ---------------------------


@pytest.mark.parametrize(
    ("letters", "running", "terminating", "phase"),
    [
        ("RRR", 3, 0, Phase.RUNNING),
        ("RRD", 3, 1, Phase.RUNNING),
        ("DDD", 3, 3, Phase.RUNNING),
        ("RR", 2, 0, Phase.UNKNOWN),
    ],
    ids=["whole", "one terminating", "all terminating", "terminated pod gone"],
)
def test_a_terminating_member_counts_as_running_until_its_pod_is_gone(
    letters: str, running: int, terminating: int, phase: Phase
) -> None:
    steps = story(gang(3), ["RRR", letters])
    assert (steps[-1].status.running, steps[-1].status.terminating) == (running, terminating)
    assert steps[-1].status.phase is phase


def test_a_pending_member_being_deleted_is_terminating_but_not_running() -> None:
    doomed = pod("a", group="gang", phase=PodPhase.PENDING, deleting=True)
    status = compute_status(gang(1), [doomed], PodGroupStatus(), T0).status
    assert (status.running, status.terminating, status.scheduled) == (0, 1, 0)
    assert status.phase is Phase.PENDING


def test_the_break_is_dated_when_the_terminating_pod_is_gone() -> None:
    _, terminating, gone = story(gang(3), ["RRR", "RRD", "RR"])
    assert terminating.status.last_failure_time is None
    assert not terminating.events  # no transition: still Running
    assert gone.status.last_failure_time == at(2)


def test_the_restart_policy_sees_the_deletion_as_a_break_while_the_status_says_running() -> None:
    running = story(gang(3), ["RRR"])[-1].status
    group = PodGroup.model_validate(
        podgroup("gang", min_member=3, policy={"action": "RestartGang", "backoffSeconds": 0})
    ).model_copy(update={"status": running})
    pods = members("RRD")

    assert compute_status(group, pods, running, at(1)).status.phase is Phase.RUNNING
    plan = plan_restart(group, pods, at(1))
    assert isinstance(plan, Restart), plan
    assert "m2 being deleted" in plan.event.message
