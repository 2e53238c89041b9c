"""Writing status: one event per phase transition, minimal patches, and silence when idle."""

from __future__ import annotations

import pytest

from podgroup_operator.api.models import Condition, PodGroupStatus, Reservation
from podgroup_operator.constants import EventType, Phase, Reason
from podgroup_operator.domain.lifecycle import compute_status, status_patch
from tests.unit.domain.lifecycle_helpers import T0, at, gang, members, story
from tests.unit.domain.phase_table import STORIES

NORMAL, WARNING = EventType.NORMAL, EventType.WARNING


@pytest.mark.parametrize(
    ("min_member", "steps"),
    [(min_member, [letters for letters, _ in steps]) for _, min_member, steps in STORIES],
    ids=[name for name, _, _ in STORIES],
)
def test_recomputing_any_state_changes_nothing_even_later(
    min_member: int, steps: list[str]
) -> None:
    group = gang(min_member)
    for result, letters in zip(story(group, steps), steps, strict=True):
        again = compute_status(group, members(letters), result.status, at(3600))
        assert again.status == result.status
        assert again.events == ()
        assert status_patch(result.status, again.status) is None


def test_recomputing_after_a_json_round_trip_changes_nothing() -> None:
    """The handler reads the previous status back from the apiserver, as JSON."""
    steps = ["PP", "PPP", "RRR", "RRF", "RRFR", "RR", "", "SSF", "RRR"]
    for result, letters in zip(story(gang(3), steps), steps, strict=True):
        read_back = PodGroupStatus.model_validate(result.status.to_api())
        again = compute_status(gang(3), members(letters), read_back, at(99))
        assert status_patch(read_back, again.status) is None
        assert again.events == ()


def test_the_first_patch_writes_what_the_lifecycle_decided() -> None:
    group = gang(3)
    result = compute_status(group, members("RP"), PodGroupStatus(), T0)
    patch = status_patch(PodGroupStatus(), result.status)
    assert patch is not None
    body = patch["status"]
    assert set(body) == {
        "phase",
        "conditions",
        "running",
        "scheduled",
        "observedGeneration",
        "scheduleStartTime",
    }
    assert body["phase"] == "Pending"
    assert body["running"] == 1
    assert body["scheduleStartTime"] == "2026-03-01T12:00:00Z"
    (condition,) = body["conditions"]
    assert set(condition) == {
        "type",
        "status",
        "transitionID",
        "lastTransitionTime",
        "reason",
        "message",
    }
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "Unschedulable",
        "True",
        "NotEnoughTasks",
    )


def test_a_patch_carries_only_what_changed() -> None:
    pending, running = story(gang(3), ["BBB", "RRR"])
    patch = status_patch(pending.status, running.status)
    assert patch is not None
    assert set(patch["status"]) == {"phase", "running", "runningTime", "conditions"}


def test_a_count_change_alone_patches_the_count_and_the_message_only() -> None:
    running, more = story(gang(3), ["RRRB", "RRRR"])
    patch = status_patch(running.status, more.status)
    assert patch is not None
    assert set(patch["status"]) == {"running", "conditions"}
    (condition,) = patch["status"]["conditions"]
    assert condition["message"] == "4 of minMember 3 members running or succeeded"


def test_a_cleared_field_is_patched_to_null_and_nested_objects_are_diffed() -> None:
    old = PodGroupStatus(
        occupied_by="Job/a", reservation=Reservation(reserved={"cpu": "4"}, used={"cpu": "1"})
    )
    new = PodGroupStatus(reservation=Reservation(reserved={"cpu": "4"}, used={"cpu": "2"}))
    assert status_patch(old, new) == {
        "status": {"occupiedBy": None, "reservation": {"used": {"cpu": "2"}}}
    }


def test_conditions_are_sent_whole_because_merge_patches_replace_lists() -> None:
    other = Condition(type="Other", status="True")
    old = PodGroupStatus(conditions=[other])
    new = compute_status(gang(3), [], old, T0).status
    patch = status_patch(old, new)
    assert patch is not None
    assert [c["type"] for c in patch["status"]["conditions"]] == ["Other", "Unschedulable"]


def test_equal_statuses_need_no_patch() -> None:
    assert status_patch(PodGroupStatus(), PodGroupStatus()) is None


def test_fields_stored_unreadable_are_sent_as_the_new_status_has_them_or_null() -> None:
    """`previous` read them as absent (models.salvage_status): equal absences must not hide
    that the stored value still has to go."""
    old = PodGroupStatus(running=2)
    new = PodGroupStatus(phase=Phase.PENDING, running=2)
    assert status_patch(old, old, rewrite={"reservation"}) == {"status": {"reservation": None}}
    assert status_patch(old, new, rewrite={"phase", "reservation"}) == {
        "status": {"phase": "Pending", "reservation": None}
    }
    assert status_patch(old, old) is None


# --- events ----------------------------------------------------------------------------------

EVENT_STORIES = [
    ("accepted", ["PP"], (NORMAL, "new -> Pending")),
    ("whole", ["PPP", "RRR"], (NORMAL, "Pending -> Running")),
    ("degraded by a failure", ["RRR", "RRF"], (WARNING, "Running -> Unknown")),
    ("degraded by a deletion", ["RRR", "RR"], (WARNING, "Running -> Unknown")),
    ("recovered", ["RRR", "RR", "RRR"], (NORMAL, "Unknown -> Running")),
    ("all gone after unknown", ["RRR", "RR", ""], (WARNING, "Unknown -> Pending")),
    ("all deleted while running", ["RRR", ""], (WARNING, "Running -> Pending")),
    ("finished", ["RRR", "SSS"], (NORMAL, "Running -> Finished")),
    ("quick job", ["PPP", "SSS"], (NORMAL, "Pending -> Finished")),
    ("failed", ["RRR", "SSF"], (WARNING, "Running -> Failed")),
]


@pytest.mark.parametrize(
    ("steps", "expected"),
    [(steps, expected) for _, steps, expected in EVENT_STORIES],
    ids=[name for name, _, _ in EVENT_STORIES],
)
def test_each_phase_transition_emits_one_event(
    steps: list[str], expected: tuple[EventType, str]
) -> None:
    (event,) = story(gang(3), steps)[-1].events
    assert event.type is expected[0]
    assert event.reason is Reason.PHASE_CHANGED
    assert event.message.startswith(expected[1] + ": ")


def test_the_event_message_gives_the_counts() -> None:
    (event,) = story(gang(3), ["RRR", "RSF"])[-1].events
    assert event.message == "Running -> Unknown: 1 running, 1 succeeded, 1 failed of minMember 3"


def test_no_event_without_a_phase_change() -> None:
    results = story(gang(3), ["P", "PP", "PPP", "RRRR", "RRR", "SSS", "SSSRRR"])
    assert [len(r.events) for r in results] == [1, 0, 0, 1, 0, 1, 0]
