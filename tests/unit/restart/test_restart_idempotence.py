"""A restart is started once: its status is written first, and every later plan, whatever the
handler managed to do before a crash, only carries on with it until it is complete."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from podgroup_operator.constants import Phase, PolicyAction
from podgroup_operator.domain.lifecycle import compute_status
from podgroup_operator.domain.restart import (
    Fail,
    Idle,
    Nothing,
    Restart,
    Resume,
    current_incarnation,
)
from tests.unit.restart.helpers import (
    NO_BACKOFF,
    World,
    apply_status_patch,
    at,
    gang,
    iso,
    member,
    members,
    owned,
    running_status,
)


def restarted_world(letters: str = "RRF") -> tuple[World, Restart]:
    world = World(gang(policy=NO_BACKOFF, status=running_status()), members(letters))
    plan = world.plan(at(100))
    assert isinstance(plan, Restart)
    return world, plan


def test_a_crash_after_the_status_patch_resumes_the_same_deletes_without_a_new_restart() -> None:
    world, restart = restarted_world()
    world.write_status(restart)  # ... and the operator dies before deleting anything

    resumed = world.plan(at(101))

    assert isinstance(resumed, Resume)
    assert resumed.delete == restart.delete
    assert resumed.recreate == ()
    assert resumed.status_patch is None
    assert world.restarts() == 1
    assert world.group.status.phase is Phase.PENDING


def test_a_restart_carried_out_step_by_step_completes_once() -> None:
    world, restart = restarted_world()
    world.carry_out(restart)
    assert world.restarts() == 1

    waiting = world.plan(at(101))
    assert waiting == Nothing(Idle.RESTART_IN_PROGRESS, "waiting for the old members to go")

    world.finish_deletions()  # the names are free now
    recreate = world.plan(at(102))
    assert isinstance(recreate, Resume)
    assert [body["metadata"]["name"] for body in recreate.recreate] == ["m0", "m1", "m2"]
    assert recreate.delete == ()
    assert recreate.status_patch is None

    world.carry_out(recreate)
    complete = world.plan(at(103))
    assert complete == Resume(
        delete=(),
        recreate=(),
        status_patch={
            "status": {
                "restartingUIDs": None,
                "restartPods": None,
                "restartPodsPacked": None,
                "restartPodsDigest": None,
            }
        },
    )

    world.carry_out(complete)
    assert world.plan(at(104)) == Nothing(
        Idle.NOT_TRIGGERED, "0 of minMember 3 members running or succeeded"
    )
    assert world.restarts() == 1
    assert sorted(p["metadata"]["name"] for p in world.pods) == ["m0", "m1", "m2"]
    assert all(p["status"]["phase"] == "Pending" for p in world.pods)
    assert all("nodeName" not in p["spec"] for p in world.pods)


def test_recreation_of_a_pod_that_already_exists_is_not_offered() -> None:
    """After a crash between the create and the status patch, the name is taken: no 2nd create."""
    world, restart = restarted_world()
    world.carry_out(restart)
    world.finish_deletions()
    recreate = world.plan(at(102))
    assert isinstance(recreate, Resume)
    world.create(recreate)  # created, then crash before anything else
    plan = world.plan(at(103))
    assert isinstance(plan, Resume)
    assert plan.recreate == ()


def test_the_restarted_gang_is_restarted_again_only_after_it_ran_and_failed_again() -> None:
    world, restart = restarted_world()
    world.carry_out(restart)
    world.finish_deletions()
    for _ in range(2):
        world.carry_out(world.plan(at(102)))

    world.run_all()
    world.set_phase(Phase.RUNNING)
    assert isinstance(world.plan(at(200)), Nothing)

    world.pods[1]["status"]["phase"] = "Failed"
    second = world.plan(at(300))
    assert isinstance(second, Restart)
    assert second.status_patch["status"]["restarts"] == 2
    assert "restart 2 of 3" in second.event.message


def test_owned_members_are_deleted_and_left_to_their_owner() -> None:
    pods = [owned(member(0, "R")), owned(member(1, "F")), owned(member(2, "R"))]
    world = World(gang(policy=NO_BACKOFF, status=running_status()), pods)
    restart = world.plan(at(100))
    assert isinstance(restart, Restart)
    assert restart.recreate == ()
    assert restart.status_patch["status"]["restartPods"] == []
    world.carry_out(restart)
    world.finish_deletions()

    complete = world.plan(at(101))
    assert isinstance(complete, Resume)
    assert complete.status_patch == {
        "status": {
            "restartingUIDs": None,
            "restartPods": None,
            "restartPodsPacked": None,
            "restartPodsDigest": None,
        }
    }


def test_members_of_the_old_incarnation_do_not_count_for_the_new_one() -> None:
    """The owner replaced a member before the old ones were gone: the replacement plus two
    old, still running members must not look like a whole gang, neither to the restart
    policy nor to the lifecycle fed with `current_incarnation`."""
    world, restart = restarted_world()
    world.write_status(restart)  # crash before the deletes: m0 and m1 still run
    replacement = member(3, "R")
    world.pods.append(replacement)

    plan = world.plan(at(101))
    assert isinstance(plan, Resume)
    assert [ref.name for ref in plan.delete] == ["m0", "m1", "m2"]

    current = current_incarnation(world.group.status, world.pods)
    assert current == [replacement]
    status = compute_status(world.group, current, world.group.status, at(101)).status
    assert status.phase is Phase.PENDING
    assert status.running == 1


def test_the_lifecycle_sees_no_failed_gang_while_the_old_members_die() -> None:
    """Killed members turn Failed; the lifecycle must not latch Failed while they die.

    Two guards, each enough alone: the handler counts the current incarnation only, and under a
    RestartGang/FailGang policy the lifecycle leaves the Failed verdict to domain.restart.
    """
    world, restart = restarted_world()
    world.carry_out(restart)  # each old member is now Failed and being deleted
    everyone = compute_status(world.group, world.pods, world.group.status, at(101)).status
    current = current_incarnation(world.group.status, world.pods)
    fresh = compute_status(world.group, current, world.group.status, at(101)).status
    assert everyone.phase is Phase.PENDING
    assert fresh.phase is Phase.PENDING


@given(
    letters=st.text(alphabet="PRSFEODU-", min_size=0, max_size=6),
    policy=st.sampled_from([PolicyAction.RESTART_GANG, PolicyAction.FAIL_GANG]),
    deleted=st.booleans(),
    gone=st.booleans(),
    later=st.integers(0, 10_000),
)
def test_after_the_restart_patch_no_plan_restarts_or_fails_again(
    letters: str, policy: PolicyAction, deleted: bool, gone: bool, later: int
) -> None:
    """Whatever the pods look like after the restart patch (none ran whole since), the plan
    never starts a second restart, and never fails the restarting gang, even if the policy was
    switched to FailGang meanwhile."""
    world, restart = restarted_world()
    world.write_status(restart)
    spec = world.group.spec
    switched = spec.model_copy(update={"policy": spec.policy.model_copy(update={"action": policy})})
    world.group = world.group.model_copy(update={"spec": switched})
    if deleted:
        world.delete(restart)
    if gone:
        world.finish_deletions()
    world.pods += [member(10 + i, letter) for i, letter in enumerate(letters) if letter != "-"]

    plan = world.plan(at(100 + later))

    assert not isinstance(plan, Restart | Fail)
    assert world.restarts() == 1


def test_applying_a_plan_twice_changes_nothing_more() -> None:
    """The Restart's status patch applied to an already patched status is a no-op."""
    world, restart = restarted_world()
    once = apply_status_patch(world.group, restart.status_patch)
    twice = apply_status_patch(once, restart.status_patch)
    assert once == twice
    assert twice.status.last_restart_time == at(100)
    assert iso(twice.status.last_restart_time) == restart.status_patch["status"]["lastRestartTime"]


def test_a_restart_in_progress_is_finished_even_if_the_policy_is_removed() -> None:
    world, restart = restarted_world()
    world.write_status(restart)
    world.group = world.group.model_copy(
        update={"spec": world.group.spec.model_copy(update={"policy": None})}
    )
    plan = world.plan(at(101))
    assert isinstance(plan, Resume)
    assert plan.delete == restart.delete
