"""How the gang scheduler's verdict lands in a PodGroup's status."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from podgroup_operator.api.models import (
    Condition,
    PodGroupStatus,
    SubGroupPlacement,
    TopologyPlacement,
)
from podgroup_operator.constants import ConditionStatus, ConditionType, Phase, Reason
from podgroup_operator.domain.conditions import find_condition
from podgroup_operator.domain.scheduling_status import (
    Verdict,
    apply_verdict,
    next_verdict,
    wait_started,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
REFUSED = Verdict(placed=False, reason=Reason.NOT_ENOUGH_RESOURCES, message="short 1 node")


def unschedulable(status: PodGroupStatus) -> Condition | None:
    return find_condition(status.conditions, ConditionType.UNSCHEDULABLE)


def test_a_refusal_of_a_pending_gang_says_what_is_short() -> None:
    status = apply_verdict(PodGroupStatus(phase=Phase.PENDING), REFUSED, 3, NOW, id_seed="g")
    cond = unschedulable(status)
    assert cond is not None and cond.status == ConditionStatus.TRUE
    assert cond.reason == Reason.NOT_ENOUGH_RESOURCES and cond.message == "short 1 node"


def test_the_lifecycles_own_reason_is_not_overwritten() -> None:
    tasks = Condition(
        type=ConditionType.UNSCHEDULABLE,
        status=ConditionStatus.TRUE,
        reason=Reason.NOT_ENOUGH_TASKS,
        message="1 of 3",
    )
    previous = PodGroupStatus(phase=Phase.PENDING, conditions=[tasks])
    status = apply_verdict(previous, REFUSED, 3, NOW, id_seed="g")
    assert unschedulable(status) == tasks


def test_a_placement_clears_the_schedulers_reason_and_scheduled_follows_the_bound_count() -> None:
    refused = apply_verdict(PodGroupStatus(phase=Phase.PENDING), REFUSED, 3, NOW, id_seed="g")
    placed = refused.model_copy(update={"scheduled": 3})
    status = apply_verdict(placed, Verdict(placed=True), 3, NOW, id_seed="g")
    cond = unschedulable(status)
    assert cond is not None and cond.status == ConditionStatus.FALSE
    assert cond.reason == Reason.GANG_SCHEDULED
    scheduled = find_condition(status.conditions, ConditionType.SCHEDULED)
    assert scheduled is not None and scheduled.status == ConditionStatus.TRUE


def test_terminal_groups_are_left_alone() -> None:
    finished = PodGroupStatus(phase=Phase.FINISHED)
    assert apply_verdict(finished, REFUSED, 3, NOW, id_seed="g") == finished


def test_no_scheduled_condition_before_anything_is_bound() -> None:
    status = apply_verdict(PodGroupStatus(phase=Phase.PENDING), None, 3, NOW, id_seed="g")
    assert find_condition(status.conditions, ConditionType.SCHEDULED) is None


def test_an_unsupported_constraint_is_the_schedulers_reason_replaced_and_cleared_by_it() -> None:
    """Fixing the pods' constraint must let the next verdict (refusal or placement) through."""
    odd = Verdict(placed=False, reason=Reason.UNSUPPORTED_CONSTRAINT, message="spec.x: bad")
    refused = apply_verdict(PodGroupStatus(phase=Phase.PENDING), odd, 3, NOW, id_seed="g")
    cond = unschedulable(refused)
    assert cond is not None and cond.reason == Reason.UNSUPPORTED_CONSTRAINT
    short = unschedulable(apply_verdict(refused, REFUSED, 3, NOW, id_seed="g"))
    assert short is not None and short.reason == Reason.NOT_ENOUGH_RESOURCES
    placed = unschedulable(apply_verdict(refused, Verdict(placed=True), 3, NOW, id_seed="g"))
    assert placed is not None and placed.status == ConditionStatus.FALSE


def test_a_quota_refusal_is_the_schedulers_replaced_by_its_next_verdict_and_cleared() -> None:
    """WaitingForQuota is the scheduler's reason: a later refusal (a new leader's, with another
    message) replaces it, and a placement clears it."""
    earlier = Verdict(placed=False, reason=Reason.WAITING_FOR_QUOTA, message="reclaiming: a1")
    refused = apply_verdict(PodGroupStatus(phase=Phase.PENDING), earlier, 1, NOW, id_seed="g")
    later = Verdict(placed=False, reason=Reason.WAITING_FOR_QUOTA, message="no reclaim: a1 is")
    again = unschedulable(apply_verdict(refused, later, 1, NOW, id_seed="g"))
    assert again is not None
    assert (again.status, again.reason, again.message) == (
        ConditionStatus.TRUE,
        Reason.WAITING_FOR_QUOTA,
        "no reclaim: a1 is",
    )
    short = unschedulable(apply_verdict(refused, REFUSED, 1, NOW, id_seed="g"))
    assert short is not None and short.reason == Reason.NOT_ENOUGH_RESOURCES
    placed = unschedulable(apply_verdict(refused, Verdict(placed=True), 1, NOW, id_seed="g"))
    assert placed is not None
    assert (placed.status, placed.reason) == (ConditionStatus.FALSE, Reason.GANG_SCHEDULED)


def _refused(at: datetime, reason: Reason = Reason.NOT_ENOUGH_RESOURCES, **status: object) -> Any:
    cond = Condition(
        type=ConditionType.UNSCHEDULABLE,
        status=ConditionStatus.TRUE,
        reason=reason,
        last_transition_time=at,
    )
    return PodGroupStatus(phase=Phase.PENDING, conditions=[cond], **status)


def test_a_wait_resumes_from_the_scheduler_refusal_that_began_it() -> None:
    began = NOW - timedelta(seconds=40)
    assert wait_started(_refused(began), NOW) == began
    # A timeout keeps the time the condition turned True.
    assert wait_started(_refused(began, Reason.SCHEDULE_TIMEOUT), NOW) == began
    # A wait for quota is a wait for placement too.
    assert wait_started(_refused(began, Reason.WAITING_FOR_QUOTA), NOW) == began
    # A restart since then began a new wait.
    restarted = NOW - timedelta(seconds=10)
    assert wait_started(_refused(began, last_restart_time=restarted), NOW) == restarted
    # Never in the future (clocks of replicas differ).
    assert wait_started(_refused(NOW + timedelta(seconds=5)), NOW) == NOW


def test_no_scheduler_refusal_on_record_means_the_wait_begins_now() -> None:
    assert wait_started(PodGroupStatus(phase=Phase.PENDING), NOW) == NOW
    lifecycle = _refused(NOW - timedelta(seconds=40), Reason.NOT_ENOUGH_TASKS)
    assert wait_started(lifecycle, NOW) == NOW
    cleared = _refused(NOW - timedelta(seconds=40))
    cleared.conditions[0].status = ConditionStatus.FALSE
    assert wait_started(cleared, NOW) == NOW


def test_a_placement_writes_its_topology_domain_and_a_later_one_without_clears_it() -> None:
    where = TopologyPlacement(level="example.com/rack", domain="r2")
    placed = Verdict(placed=True, placement=where)
    status = apply_verdict(PodGroupStatus(phase=Phase.PENDING), placed, 3, NOW, id_seed="g")
    assert status.placement == where
    running = status.model_copy(update={"phase": Phase.RUNNING})
    assert apply_verdict(running, REFUSED, 3, NOW, id_seed="g").placement == where
    assert apply_verdict(running, Verdict(placed=True), 3, NOW, id_seed="g").placement is None


RACKS = TopologyPlacement(
    sub_groups=[SubGroupPlacement(name="s0", level="example.com/rack", domain="r0")]
)


def test_a_refusal_after_a_placement_keeps_where_the_members_went() -> None:
    """The reconciler keeps one verdict: a refusal that follows a placement not yet written
    (of members that came after it) must not lose `status.placement`."""
    kept = next_verdict(Verdict(placed=True, placement=RACKS), REFUSED)
    assert kept.placement == RACKS
    assert (kept.placed, kept.reason, kept.message) == (False, REFUSED.reason, REFUSED.message)
    status = apply_verdict(PodGroupStatus(phase=Phase.RUNNING), kept, 2, NOW, id_seed="g")
    assert status.placement == RACKS
    # ...and the next refusal keeps it still.
    assert next_verdict(kept, REFUSED).placement == RACKS


def test_a_new_placement_replaces_the_kept_one_and_nothing_invents_one() -> None:
    elsewhere = TopologyPlacement(level="example.com/rack", domain="r9")
    assert next_verdict(REFUSED, REFUSED) == REFUSED
    assert next_verdict(None, REFUSED) == REFUSED
    assert next_verdict(Verdict(placed=True, placement=RACKS), Verdict(placed=True)) == Verdict(
        placed=True
    )
    placed = Verdict(placed=True, placement=elsewhere)
    assert next_verdict(REFUSED, placed) == placed
    stored = PodGroupStatus(phase=Phase.PENDING, placement=RACKS)
    # A refusal carrying nothing leaves the stored placement as it is.
    assert apply_verdict(stored, REFUSED, 2, NOW, id_seed="g").placement == RACKS
