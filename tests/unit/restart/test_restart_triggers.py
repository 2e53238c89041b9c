"""When the restart policy acts: a gang that ran whole, then fell below minMember."""

from __future__ import annotations

import pytest

from podgroup_operator.constants import EventType, Phase, Reason
from podgroup_operator.domain.restart import Fail, Idle, MemberRef, Nothing, Restart, Wait
from tests.unit.restart.helpers import (
    NO_BACKOFF,
    POLICY,
    apply_status_patch,
    at,
    gang,
    iso,
    member,
    members,
    plan_restart,
    running_status,
)


@pytest.mark.parametrize(
    ("letters", "named"),
    [
        ("RRF", "m2 failed"),
        ("RRE", "m2 failed (Evicted)"),
        ("RRO", "m2 failed (OutOfcpu)"),
        ("RRD", "m2 being deleted"),
        ("RR-", "2 of minMember 3"),
        ("RRU", "2 of minMember 3"),
        ("RRP", "2 of minMember 3"),
    ],
    ids=["failed", "evicted", "kubelet-rejected", "being-deleted", "gone", "node-lost", "pending"],
)
def test_a_running_gang_losing_a_member_is_restarted(letters: str, named: str) -> None:
    group = gang(policy=NO_BACKOFF, status=running_status())
    pods = members(letters)

    plan = plan_restart(group, pods, at(60))

    assert isinstance(plan, Restart)
    assert named in plan.event.message
    assert plan.event.type is EventType.WARNING
    assert plan.event.reason is Reason.GANG_RESTARTED
    assert "restart 1 of 3" in plan.event.message
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    assert set(plan.delete) == {
        MemberRef("default", p["metadata"]["name"], p["metadata"]["uid"]) for p in live
    }
    status = plan.status_patch["status"]
    assert status["phase"] == Phase.PENDING
    assert status["restarts"] == 1
    assert status["lastRestartTime"] == iso(at(60))
    assert status["restartingUIDs"] == sorted(p["metadata"]["uid"] for p in pods)


def test_every_member_is_deleted_even_the_terminated_ones() -> None:
    """A restart reruns the whole gang (Volcano's RestartJob retains no pod)."""
    pods = members("SRF")
    plan = plan_restart(gang(policy=NO_BACKOFF, status=running_status()), pods, at(5))
    assert isinstance(plan, Restart)
    assert [ref.name for ref in plan.delete] == ["m0", "m1", "m2"]


def test_an_unknown_gang_is_restarted() -> None:
    status = running_status(phase=Phase.UNKNOWN, lastFailureTime=iso(at(1)))
    plan = plan_restart(gang(policy=NO_BACKOFF, status=status), members("RRF"), at(2))
    assert isinstance(plan, Restart)


def test_a_gang_the_lifecycle_moved_to_pending_after_losing_everything_is_restarted() -> None:
    """All running members gone: the lifecycle writes Pending and a lastFailureTime."""
    status = running_status(phase=Phase.PENDING, running=0, lastFailureTime=iso(at(1)))
    plan = plan_restart(gang(policy=NO_BACKOFF, status=status), members("FF-"), at(2))
    assert isinstance(plan, Restart)


@pytest.mark.parametrize(
    "status",
    [
        {},
        {"phase": Phase.PENDING},
        {"phase": Phase.PENDING, "scheduleStartTime": iso(at(0))},
    ],
    ids=["never-computed", "pending", "pending-waiting"],
)
def test_a_gang_that_never_ran_is_not_restarted_while_nothing_failed(
    status: dict[str, str],
) -> None:
    """Members still pending, or gone before they ran (a deleted pending pod), are the
    owner's business: only a failure breaks a gang that never ran whole."""
    plan = plan_restart(gang(policy=NO_BACKOFF, status=status), members("RP-"), at(5))
    assert plan == Nothing(Idle.NOT_TRIGGERED, "1 of minMember 3 members running or succeeded")


@pytest.mark.parametrize(
    ("letters", "named"),
    [
        ("RRF", "m2 failed; 2 of minMember 3"),
        ("RRO", "m2 failed (OutOfcpu); 2 of minMember 3"),
        ("FFP", "m0 failed; m1 failed; 0 of minMember 3"),
        ("RRFP", "m2 failed; 2 of minMember 3"),
    ],
    ids=["crashed", "kubelet-rejected", "all-but-one-failed", "owner-replaced-it"],
)
def test_a_member_failing_before_the_gang_ran_whole_restarts_it(letters: str, named: str) -> None:
    """Never whole, it would never reach Running, and its running members would hold their
    nodes waiting for the failed one: a break as much as one after Running. A replacement
    from the owner (RRFP) does not mend it: the peers hold the broken incarnation's state."""
    plan = plan_restart(
        gang(policy=NO_BACKOFF, status={"phase": Phase.PENDING}), members(letters), at(5)
    )
    assert isinstance(plan, Restart)
    assert named in plan.event.message
    assert plan.status_patch["status"]["restarts"] == 1


def test_a_member_failing_before_the_gang_ran_whole_starts_the_backoff_clock() -> None:
    """With a backoff, the failure is written first (lastFailureTime), so the break stays
    recorded once the owner replaces the failed pod, and across an operator restart."""
    group = gang(status={"phase": Phase.PENDING})
    plan = plan_restart(group, members("RRF"), at(5))
    assert isinstance(plan, Wait)
    assert plan.until == at(15)
    assert plan.status_patch is not None
    assert plan.status_patch["status"]["lastFailureTime"] == iso(at(5))
    recorded = apply_status_patch(group, plan.status_patch)
    assert isinstance(plan_restart(recorded, members("RRP"), at(15)), Restart)


def test_a_spare_member_failing_before_the_gang_ran_whole_is_no_break() -> None:
    """minMember live members (the lifecycle will write Running): a failed spare is no break."""
    plan = plan_restart(gang(policy=NO_BACKOFF, status={}), members("RRRF"), at(5))
    assert isinstance(plan, Nothing)
    assert plan.why is Idle.NOT_TRIGGERED


def test_failing_before_whole_at_the_limit_fails_and_frees_the_running_members() -> None:
    status = {"phase": Phase.PENDING, "restarts": 3, "lastRestartTime": iso(at(1))}
    plan = plan_restart(gang(policy=NO_BACKOFF, status=status), members("RRF"), at(5))
    assert isinstance(plan, Fail)
    assert plan.status_patch["status"]["phase"] == Phase.FAILED
    assert [ref.name for ref in plan.delete] == ["m0", "m1"]


def test_a_gang_that_keeps_min_member_live_members_is_not_restarted() -> None:
    """Elastic gangs: losing a spare member above minMember is no failure of the gang."""
    status = running_status(running=4)
    plan = plan_restart(gang(policy=NO_BACKOFF, status=status), members("RRSF"), at(5))
    assert isinstance(plan, Nothing)
    assert plan.why is Idle.NOT_TRIGGERED


def test_the_restarted_gang_does_not_trigger_until_it_ran_whole_again() -> None:
    """runningTime stays from the first run; the restart's own Pending must not re-trigger."""
    status = running_status(
        phase=Phase.PENDING,
        restarts=1,
        lastFailureTime=iso(at(10)),
        lastRestartTime=iso(at(20)),
    )
    plan = plan_restart(gang(policy=NO_BACKOFF, status=status), members("PP-"), at(30))
    assert isinstance(plan, Nothing)
    assert plan.why is Idle.NOT_TRIGGERED


def test_other_groups_pods_and_duplicates_do_not_count() -> None:
    own = members("RRR")
    strangers = members("FFF", group="other")
    group = gang(policy=NO_BACKOFF, status=running_status())
    plan = plan_restart(group, own + strangers + own, at(5))
    assert isinstance(plan, Nothing)
    assert plan.why is Idle.NOT_TRIGGERED


@pytest.mark.parametrize(
    "policy",
    [None, {**POLICY, "action": "None"}],
    ids=["absent", "action-none"],
)
def test_without_a_policy_the_owner_handles_failures(policy: dict[str, object] | None) -> None:
    plan = plan_restart(gang(policy=policy, status=running_status()), members("RRF"), at(5))
    assert isinstance(plan, Nothing)
    assert plan.why is Idle.NO_POLICY


@pytest.mark.parametrize("phase", [Phase.FINISHED, Phase.FAILED])
def test_terminal_groups_are_left_alone(phase: Phase) -> None:
    status = running_status(phase=phase, completionTime=iso(at(3)))
    plan = plan_restart(gang(policy=NO_BACKOFF, status=status), members("RFF"), at(5))
    assert isinstance(plan, Nothing)
    assert plan.why is Idle.TERMINAL


def test_the_event_names_a_few_losses_and_counts_the_rest() -> None:
    pods = members("R" + "F" * 8)
    plan = plan_restart(gang(min_member=9, policy=NO_BACKOFF, status=running_status()), pods, at(1))
    assert isinstance(plan, Restart)
    assert "m1 failed; m2 failed" in plan.event.message
    assert "3 more" in plan.event.message
    assert "m8" not in plan.event.message


def test_now_must_be_timezone_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        plan_restart(gang(status=running_status()), [member(0, "R")], at(0).replace(tzinfo=None))
