"""set_condition: transition IDs and times move only on real transitions, and nothing mutates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from podgroup_operator.api.models import Condition
from podgroup_operator.constants import ConditionStatus, ConditionType, Reason
from podgroup_operator.domain.conditions import find_condition, set_condition

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=1)
UNSCHEDULABLE = ConditionType.UNSCHEDULABLE


def _set(
    conditions: list[Condition],
    status: ConditionStatus,
    reason: Reason,
    message: str = "m",
    *,
    now: datetime = T0,
    seed: str = "uid-1",
) -> list[Condition]:
    return set_condition(conditions, UNSCHEDULABLE, status, reason, message, now, id_seed=seed)


def _only(conditions: list[Condition]) -> Condition:
    condition = find_condition(conditions, UNSCHEDULABLE)
    assert condition is not None
    return condition


def test_a_new_condition_gets_the_time_and_an_id() -> None:
    added = _only(_set([], ConditionStatus.TRUE, Reason.NOT_ENOUGH_TASKS, "1 of 3"))
    assert added.status is ConditionStatus.TRUE
    assert (added.reason, added.message) == (Reason.NOT_ENOUGH_TASKS, "1 of 3")
    assert added.last_transition_time == T0
    assert added.transition_id


def test_setting_the_same_condition_again_changes_nothing() -> None:
    first = _set([], ConditionStatus.TRUE, Reason.NOT_ENOUGH_TASKS)
    again = _set(first, ConditionStatus.TRUE, Reason.NOT_ENOUGH_TASKS, now=T1)
    assert again == first
    assert again[0] is first[0]


def test_a_message_change_keeps_id_and_time() -> None:
    first = _only(_set([], ConditionStatus.TRUE, Reason.NOT_ENOUGH_TASKS, "1 of 3"))
    updated = _only(_set([first], ConditionStatus.TRUE, Reason.NOT_ENOUGH_TASKS, "2 of 3", now=T1))
    assert updated.message == "2 of 3"
    assert updated.transition_id == first.transition_id
    assert updated.last_transition_time == T0


def test_a_reason_change_is_a_new_transition_but_keeps_the_time_of_the_flip() -> None:
    first = _only(_set([], ConditionStatus.TRUE, Reason.NOT_ENOUGH_RESOURCES))
    updated = _only(_set([first], ConditionStatus.TRUE, Reason.NOT_ENOUGH_TASKS, now=T1))
    assert updated.reason == Reason.NOT_ENOUGH_TASKS
    assert updated.transition_id != first.transition_id
    assert updated.last_transition_time == T0


def test_a_status_flip_moves_time_and_id() -> None:
    first = _only(_set([], ConditionStatus.TRUE, Reason.NOT_ENOUGH_TASKS))
    flipped = _only(_set([first], ConditionStatus.FALSE, Reason.GANG_SCHEDULABLE, now=T1))
    assert flipped.status is ConditionStatus.FALSE
    assert flipped.last_transition_time == T1
    assert flipped.transition_id != first.transition_id


def test_flipping_back_at_the_same_instant_still_gets_a_fresh_id() -> None:
    """IDs chain the previous ID, so a frozen clock cannot make a transition look old."""
    first = _set([], ConditionStatus.TRUE, Reason.NOT_ENOUGH_TASKS)
    second = _set(first, ConditionStatus.FALSE, Reason.GANG_SCHEDULABLE)
    third = _set(second, ConditionStatus.TRUE, Reason.NOT_ENOUGH_TASKS)
    ids = {_only(step).transition_id for step in (first, second, third)}
    assert len(ids) == 3


def test_ids_are_deterministic_per_seed_and_differ_between_groups() -> None:
    one = _only(_set([], ConditionStatus.TRUE, Reason.NOT_ENOUGH_TASKS, seed="uid-1"))
    same = _only(_set([], ConditionStatus.TRUE, Reason.NOT_ENOUGH_TASKS, seed="uid-1"))
    other = _only(_set([], ConditionStatus.TRUE, Reason.NOT_ENOUGH_TASKS, seed="uid-2"))
    assert one.transition_id == same.transition_id
    assert one.transition_id != other.transition_id


def test_the_input_list_and_its_conditions_are_not_modified() -> None:
    scheduled = Condition(type=ConditionType.SCHEDULED, status=ConditionStatus.TRUE)
    original = Condition(
        type=UNSCHEDULABLE,
        status=ConditionStatus.TRUE,
        reason=Reason.NOT_ENOUGH_TASKS,
        message="old",
        transition_id="id-0",
        last_transition_time=T0,
    )
    conditions = [scheduled, original]
    snapshot = [cond.model_copy(deep=True) for cond in conditions]

    result = _set(conditions, ConditionStatus.FALSE, Reason.GANG_SCHEDULABLE, "new", now=T1)

    assert conditions == snapshot
    assert result is not conditions
    assert [cond.type for cond in result] == [ConditionType.SCHEDULED, UNSCHEDULABLE]
    assert result[0] is scheduled
    assert result[1].message == "new"


def test_a_new_type_is_appended_after_the_others() -> None:
    scheduled = Condition(type=ConditionType.SCHEDULED, status=ConditionStatus.TRUE)
    result = _set([scheduled], ConditionStatus.TRUE, Reason.NOT_ENOUGH_TASKS)
    assert [cond.type for cond in result] == [ConditionType.SCHEDULED, UNSCHEDULABLE]


def test_duplicate_entries_of_a_type_collapse_into_the_first() -> None:
    duplicate = Condition(type=UNSCHEDULABLE, status=ConditionStatus.TRUE, reason="A")
    result = _set([duplicate, duplicate], ConditionStatus.TRUE, Reason.NOT_ENOUGH_TASKS)
    assert len(result) == 1
    assert result[0].reason == Reason.NOT_ENOUGH_TASKS


def test_a_condition_written_without_a_time_gets_one_on_its_next_transition() -> None:
    untimed = Condition(type=UNSCHEDULABLE, status=ConditionStatus.TRUE, reason="Other")
    updated = _only(_set([untimed], ConditionStatus.TRUE, Reason.NOT_ENOUGH_TASKS, now=T1))
    assert updated.last_transition_time == T1


def test_conditions_read_back_from_the_api_compare_equal_to_enum_values() -> None:
    """Types and reasons come back from JSON as plain strings; they must not look changed."""
    written = _set([], ConditionStatus.TRUE, Reason.NOT_ENOUGH_TASKS)
    read_back = [Condition.model_validate(cond.to_api()) for cond in written]
    assert _set(read_back, ConditionStatus.TRUE, Reason.NOT_ENOUGH_TASKS, now=T1) == read_back
