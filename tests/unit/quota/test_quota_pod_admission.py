"""Admitting pods: members within their group's reservation, everyone else outside all of them."""

from podgroup_operator.domain.quota import admit_pod
from tests.unit.quota.helpers import group, key, ledger, milli, pod

# --- members of a reserving group -----------------------------------------------------------------


def test_member_within_the_reservation_is_admitted() -> None:
    state = ledger(
        {"cpu": 10},
        groups=[group("train-a", {"cpu": 4})],
        pods=[pod("m1", {"cpu": 2}, group="train-a")],
    )
    assert admit_pod(state, pod("m2", {"cpu": 2}, group="train-a")).allowed


def test_member_beyond_the_reservation_is_denied_with_totals() -> None:
    state = ledger(
        {"cpu": 10},
        groups=[group("train-a", {"cpu": 4})],
        pods=[pod("m1", {"cpu": 2}, group="train-a"), pod("m2", {"cpu": 1}, group="train-a")],
    )
    decision = admit_pod(state, pod("m3", {"cpu": 2}, group="train-a"))
    assert decision.errors == (
        "cpu: exceeds PodGroup train-a reservation: cpu 5 > 4 reserved (live members request 3, "
        "this pod 2); raise spec.totalResources.cpu of PodGroup train-a, lower the pod's cpu "
        "request, or wait for members to finish",
    )


def test_member_may_use_reserved_quota_that_nobody_else_may() -> None:
    state = ledger({"cpu": 4}, groups=[group("a", {"cpu": 4})])
    assert admit_pod(state, pod("m", {"cpu": 4}, group="a")).allowed
    assert not admit_pod(state, pod("x", {"cpu": 1})).allowed


def test_terminated_members_free_their_share_of_the_reservation() -> None:
    state = ledger(
        {"cpu": 10},
        groups=[group("a", {"cpu": 4})],
        pods=[pod("done", {"cpu": 3}, group="a", live=False), pod("m1", {"cpu": 1}, group="a")],
    )
    assert admit_pod(state, pod("m2", {"cpu": 3}, group="a")).allowed
    assert not admit_pod(state, pod("m2", {"cpu": "3001m"}, group="a")).allowed


def test_pod_count_is_capped_only_when_total_resources_names_pods() -> None:
    members = [pod(f"m{i}", {"cpu": "100m"}, group="a") for i in range(2)]
    counted = ledger({"cpu": 10}, groups=[group("a", {"cpu": 4, "pods": 2})], pods=members)
    decision = admit_pod(counted, pod("m9", {"cpu": "100m"}, group="a"))
    assert decision.errors[0].startswith(
        "pods: exceeds PodGroup a reservation: pods 3 > 2 reserved"
    )

    uncounted = ledger({"cpu": 10}, groups=[group("a", {"cpu": 4})], pods=members)
    assert admit_pod(uncounted, pod("m9", {"cpu": "100m"}, group="a")).allowed


def test_member_resources_outside_the_reservation_are_ordinary_usage() -> None:
    # Group a reserves cpu only; its members' memory competes with everyone's for free memory,
    # and may not eat into group b's memory reservation.
    state = ledger(
        {"cpu": 10, "memory": "8Gi"},
        groups=[group("a", {"cpu": 4}), group("b", {"memory": "6Gi"})],
    )
    assert admit_pod(state, pod("m", {"cpu": 1, "memory": "2Gi"}, group="a")).allowed
    decision = admit_pod(state, pod("m", {"cpu": 1, "memory": "3Gi"}, group="a"))
    assert len(decision.errors) == 1
    assert decision.errors[0].startswith(
        "memory: pod requests 3Gi but quota 'compute' has memory 2Gi"
    )


def test_every_exceeded_resource_is_named() -> None:
    state = ledger({"cpu": 10}, groups=[group("a", {"cpu": 1, "nvidia.com/gpu": 1})])
    decision = admit_pod(state, pod("m", {"cpu": 2, "nvidia.com/gpu": 2}, group="a"))
    assert [error.split(":")[0] for error in decision.errors] == ["cpu", "nvidia.com/gpu"]
    assert "nvidia.com/gpu 2 > 1 reserved" in decision.errors[1]


# --- pods outside any reservation -----------------------------------------------------------------


def test_non_member_eating_reserved_unused_quota_is_denied_naming_the_holders() -> None:
    state = ledger(
        {"requests.cpu": 10},
        groups=[group("a", {"cpu": 4}), group("b", {"cpu": 2})],
        pods=[pod("m", {"cpu": 1}, group="a"), pod("loose", {"cpu": 3})],
    )
    # 10 hard - 3 outside reservations - 6 reserved = 1 free.
    assert state.free("cpu") == 1000
    decision = admit_pod(state, pod("x", {"cpu": 2}))
    assert decision.errors == (
        "cpu: pod requests 2 but quota 'compute' has cpu 1 free outside reservations (10 hard) "
        "because PodGroup(s) a (4 reserved, 1 used), b (2 reserved, 0 used) hold it; wait for "
        "them to finish, lower the pod's cpu request, or raise requests.cpu/cpu in "
        "ResourceQuota 'compute'",
    )


def test_non_member_fitting_in_true_free_quota_is_admitted() -> None:
    state = ledger({"cpu": 10}, groups=[group("a", {"cpu": 4})], pods=[pod("loose", {"cpu": 3})])
    assert admit_pod(state, pod("x", {"cpu": 3})).allowed
    assert not admit_pod(state, pod("x", {"cpu": "3001m"})).allowed


def test_beyond_the_hard_limit_without_reservations_is_left_to_kubernetes() -> None:
    state = ledger({"cpu": 1})
    assert admit_pod(state, pod("x", {"cpu": 5})).allowed


def test_unreserved_resources_are_not_checked() -> None:
    state = ledger({"cpu": 4, "memory": "1Gi"}, groups=[group("a", {"cpu": 4})])
    assert admit_pod(state, pod("x", {"memory": "1Gi"})).allowed


def test_non_member_pod_count_is_protected_when_a_group_reserves_pods() -> None:
    state = ledger({"pods": 3}, groups=[group("a", {"pods": 2})], pods=[pod("loose")])
    decision = admit_pod(state, pod("x"))
    assert decision.errors[0].startswith("pods: pod requests 1 but quota 'compute' has pods 0 free")


def test_members_of_groups_without_total_resources_are_outside_reservations() -> None:
    state = ledger({"cpu": 4}, groups=[group("plain"), group("a", {"cpu": 3})])
    assert admit_pod(state, pod("m", {"cpu": 1}, group="plain")).allowed
    assert not admit_pod(state, pod("m", {"cpu": 2}, group="plain")).allowed


def test_pods_naming_a_missing_group_are_outside_reservations() -> None:
    state = ledger({"cpu": 4}, groups=[group("a", {"cpu": 3})])
    assert not admit_pod(state, pod("m", {"cpu": 2}, group="not-yet-created")).allowed


def test_terminated_pods_are_always_admitted() -> None:
    state = ledger({"cpu": 1}, groups=[group("a", {"cpu": 1})])
    assert admit_pod(state, pod("x", {"cpu": 8}, live=False)).allowed


def test_an_update_is_judged_in_place_of_the_old_version() -> None:
    state = ledger(
        {"cpu": 10}, groups=[group("a", {"cpu": 4})], pods=[pod("m1", {"cpu": 3}, group="a")]
    )
    assert admit_pod(state, pod("m1", {"cpu": 4}, group="a")).allowed
    assert not admit_pod(state, pod("m1", {"cpu": 5}, group="a")).allowed
    assert state.members_used(key("a")) == milli({"cpu": 3, "pods": 1})  # the ledger is untouched


# --- release --------------------------------------------------------------------------------------


def _running_group() -> tuple[list, list]:
    groups = [group("a", {"cpu": 6})]
    pods = [pod("m1", {"cpu": 2}, group="a"), pod("m2", {"cpu": 1}, group="a")]
    return groups, pods


def test_finished_or_failed_group_releases_its_unused_reservation() -> None:
    groups, pods = _running_group()
    state = ledger({"cpu": 10}, groups=groups, pods=pods)
    assert state.free("cpu") == 4000
    assert not admit_pod(state, pod("x", {"cpu": 5})).allowed
    state.release(key("a"))  # Finished or Failed: both arrive as an inactive group
    assert state.free("cpu") == 7000
    assert admit_pod(state, pod("x", {"cpu": 7})).allowed


def test_members_still_running_after_release_count_as_ordinary_usage() -> None:
    groups, pods = _running_group()
    state = ledger({"cpu": 10}, groups=groups, pods=pods)
    state.release(key("a"))
    state.add_reservation(group("b", {"cpu": 5}))
    # 10 hard - 3 still used by a's members - 5 reserved by b = 2 for anyone else, a's included.
    assert state.free("cpu") == 2000
    assert not admit_pod(state, pod("m3", {"cpu": 3}, group="a")).allowed
    assert admit_pod(state, pod("m3", {"cpu": 2}, group="a")).allowed


def test_deleted_group_members_count_as_ordinary_usage() -> None:
    groups, pods = _running_group()
    state = ledger({"cpu": 10}, groups=groups, pods=pods)
    state.remove_group(key("a"))
    assert state.free("cpu") == 7000
    assert state.group(key("a")) is None
    assert admit_pod(state, pod("m3", {"cpu": 7}, group="a")).allowed


def test_members_finishing_after_release_free_ordinary_quota() -> None:
    groups, pods = _running_group()
    state = ledger({"cpu": 10}, groups=groups, pods=pods)
    state.release(key("a"))
    state.add_pod(pod("m1", {"cpu": 2}, group="a", live=False))
    state.remove_pod("m2")
    assert state.free("cpu") == 10000
