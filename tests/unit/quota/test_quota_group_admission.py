"""Creating and changing a PodGroup's totalResources against the namespace's free quota."""

from podgroup_operator.domain.quota import (
    GroupReservation,
    Ledger,
    admit_group,
    admit_group_update,
)
from tests.unit.quota.helpers import group, key, ledger, milli, pod, quota


def test_create_fitting_in_free_quota_is_admitted() -> None:
    decision = admit_group(ledger({"cpu": 8, "memory": "16Gi"}), key("a"), milli({"cpu": 8}))
    assert decision.allowed
    assert decision.errors == ()


def test_create_without_total_resources_reserves_nothing_and_is_admitted() -> None:
    full = ledger({"cpu": 1}, pods=[pod("p", {"cpu": 1})])
    assert admit_group(full, key("a"), None).allowed
    assert admit_group(full, key("a"), {}).allowed


def test_create_denied_names_each_short_resource_and_amount() -> None:
    state = ledger(
        {"requests.cpu": 10, "requests.memory": "16Gi", "pods": 10},
        pods=[pod("p1", {"cpu": 8, "memory": "4Gi"})],
    )
    decision = admit_group(state, key("train-a"), milli({"cpu": 4, "memory": "20Gi", "pods": 2}))
    assert not decision.allowed
    assert len(decision.errors) == 2
    cpu, memory = decision.errors
    assert cpu.startswith(
        "spec.totalResources.cpu: quota 'compute' has cpu 2 free, PodGroup train-a needs 4: "
        "short 2 cpu;"
    )
    assert "lower spec.totalResources.cpu to at most 2" in cpu
    assert "raise requests.cpu/cpu (now 10) in ResourceQuota 'compute'" in cpu
    assert memory.startswith(
        "spec.totalResources.memory: quota 'compute' has memory 12Gi free, PodGroup train-a "
        "needs 20Gi: short 8Gi memory;"
    )


def test_create_denied_names_the_groups_holding_reservations() -> None:
    state = ledger(
        {"cpu": 10}, groups=[group("b", {"cpu": 6})], pods=[pod("m", {"cpu": 1}, group="b")]
    )
    decision = admit_group(state, key("a"), milli({"cpu": 5}))
    assert not decision.allowed
    assert "has cpu 4 free" in decision.errors[0]
    assert "short 1 cpu" in decision.errors[0]
    assert "wait for PodGroup(s) b (6 reserved, 1 used) to finish" in decision.errors[0]


def test_extended_resources_are_reserved_against_requests_prefixed_keys() -> None:
    state = ledger({"requests.nvidia.com/gpu": 4}, groups=[group("b", {"nvidia.com/gpu": 3})])
    assert admit_group(state, key("a"), milli({"nvidia.com/gpu": 1})).allowed
    decision = admit_group(state, key("a"), milli({"nvidia.com/gpu": 2}))
    assert decision.errors == (
        "spec.totalResources.nvidia.com/gpu: quota 'compute' has nvidia.com/gpu 1 free, "
        "PodGroup a needs 2: short 1 nvidia.com/gpu; lower spec.totalResources.nvidia.com/gpu "
        "to at most 1, or wait for PodGroup(s) b (3 reserved, 0 used) to finish and release "
        "their reservations, or raise requests.nvidia.com/gpu (now 4) in ResourceQuota 'compute'",
    )


def test_pod_count_is_reserved_against_the_pods_key() -> None:
    state = ledger({"pods": 5}, pods=[pod("p1"), pod("p2"), pod("done", live=False)])
    assert admit_group(state, key("a"), milli({"pods": 3})).allowed
    decision = admit_group(state, key("a"), milli({"pods": 4}))
    assert "quota 'compute' has pods 3 free, PodGroup a needs 4: short 1 pods" in decision.errors[0]


def test_members_usage_counts_inside_the_reservation_not_twice() -> None:
    # Two members exist before their PodGroup; reserving 4 cpu must not also count their 3.
    members = [pod("m1", {"cpu": 2}, group="a"), pod("m2", {"cpu": 1}, group="a")]
    state = ledger({"cpu": 5}, pods=[*members, pod("other", {"cpu": 1})])
    assert state.free("cpu") == 1000
    assert admit_group(state, key("a"), milli({"cpu": 4})).allowed
    assert not admit_group(state, key("a"), milli({"cpu": "4100m"})).allowed


def test_create_below_the_usage_of_existing_members_is_denied() -> None:
    state = ledger({"cpu": 10}, pods=[pod("m1", {"cpu": 3}, group="a")])
    decision = admit_group(state, key("a"), milli({"cpu": 2}))
    assert decision.errors == (
        "spec.totalResources.cpu: 2 is below the 3 cpu that live members of PodGroup a already "
        "request; keep spec.totalResources.cpu >= 3 or delete members first",
    )


def test_resource_no_quota_tracks_is_admitted_with_a_warning() -> None:
    decision = admit_group(ledger({"cpu": 4}), key("a"), milli({"cpu": 1, "example.com/fpga": 2}))
    assert decision.allowed
    assert len(decision.warnings) == 1
    assert decision.warnings[0].startswith("spec.totalResources.example.com/fpga: no ResourceQuota")


def test_fifty_sequential_admissions_of_one_cpu_against_ten_admit_exactly_ten() -> None:
    state = ledger({"requests.cpu": 10})
    admitted = []
    for index in range(50):
        name = f"g{index:02d}"
        decision = admit_group(state, key(name), milli({"cpu": 1}))
        if decision.allowed:
            state.add_reservation(group(name, {"cpu": 1}))
            admitted.append(name)
        else:
            assert "has cpu 0 free, PodGroup" in decision.errors[0]
    assert admitted == [f"g{index:02d}" for index in range(10)]
    assert state.free("cpu") == 0


def test_released_and_deleted_groups_free_their_reservation_for_new_groups() -> None:
    state = ledger({"cpu": 4}, groups=[group("done", {"cpu": 2}), group("gone", {"cpu": 2})])
    assert not admit_group(state, key("a"), milli({"cpu": 2})).allowed
    state.release(key("done"))
    assert admit_group(state, key("a"), milli({"cpu": 2})).allowed
    state.remove_group(key("gone"))
    assert admit_group(state, key("a"), milli({"cpu": 4})).allowed


def test_quota_over_its_hard_limit_reports_zero_free_and_the_overrun() -> None:
    state = ledger({"cpu": 2}, pods=[pod("p", {"cpu": 3})])
    decision = admit_group(state, key("a"), milli({"cpu": 1}))
    assert "has cpu 0 free (already 1 over), PodGroup a needs 1: short 2 cpu" in decision.errors[0]


# --- updates --------------------------------------------------------------------------------------


def test_increase_needs_only_the_delta_free() -> None:
    state = ledger({"cpu": 10}, groups=[group("a", {"cpu": 6}), group("b", {"cpu": 2})])
    assert admit_group_update(state, key("a"), milli({"cpu": 8})).allowed
    decision = admit_group_update(state, key("a"), milli({"cpu": 9}))
    assert decision.errors[0].startswith(
        "spec.totalResources.cpu: quota 'compute' has cpu 2 free, raising PodGroup a's "
        "reservation from 6 to 9 needs 3 more: short 1 cpu;"
    )
    assert "lower spec.totalResources.cpu to at most 8" in decision.errors[0]


def test_adding_a_new_resource_on_update_is_checked_like_a_create() -> None:
    state = ledger({"cpu": 10, "memory": "4Gi"}, groups=[group("a", {"cpu": 6})])
    assert admit_group_update(state, key("a"), milli({"cpu": 6, "memory": "4Gi"})).allowed
    decision = admit_group_update(state, key("a"), milli({"cpu": 6, "memory": "5Gi"}))
    assert decision.errors[0].startswith(
        "spec.totalResources.memory: quota 'compute' has memory 4Gi free, PodGroup a needs 5Gi"
    )


def test_adding_total_resources_to_a_group_without_them_is_checked_like_a_create() -> None:
    state = ledger({"cpu": 4}, groups=[group("a")], pods=[pod("m", {"cpu": 1}, group="a")])
    assert admit_group_update(state, key("a"), milli({"cpu": 4})).allowed
    assert not admit_group_update(state, key("a"), milli({"cpu": 5})).allowed


def test_decrease_below_live_member_usage_is_denied() -> None:
    state = ledger(
        {"cpu": 10},
        groups=[group("a", {"cpu": 6})],
        pods=[pod("m1", {"cpu": 2}, group="a"), pod("m2", {"cpu": 2}, group="a")],
    )
    assert admit_group_update(state, key("a"), milli({"cpu": 4})).allowed
    decision = admit_group_update(state, key("a"), milli({"cpu": 3}))
    assert decision.errors == (
        "spec.totalResources.cpu: 3 is below the 4 cpu that live members of PodGroup a already "
        "request; keep spec.totalResources.cpu >= 4 or delete members first",
    )


def test_decrease_ignores_terminated_members() -> None:
    state = ledger(
        {"cpu": 10},
        groups=[group("a", {"cpu": 6})],
        pods=[pod("m1", {"cpu": 4}, group="a", live=False), pod("m2", {"cpu": 1}, group="a")],
    )
    assert admit_group_update(state, key("a"), milli({"cpu": 1})).allowed


def test_unchanged_reservation_passes_even_after_the_quota_was_lowered() -> None:
    state = ledger({"cpu": 2}, groups=[group("a", {"cpu": 6})])
    assert admit_group_update(state, key("a"), milli({"cpu": 6})).allowed
    assert admit_group_update(state, key("a"), milli({"cpu": 5})).allowed
    assert not admit_group_update(state, key("a"), milli({"cpu": 7})).allowed


def test_unchanged_reservation_passes_even_when_members_exceed_it() -> None:
    # Members created before their group may exceed it; editing, say, minMember must still work.
    state = ledger(
        {"cpu": 10}, groups=[group("a", {"cpu": 1})], pods=[pod("m", {"cpu": 2}, group="a")]
    )
    assert admit_group_update(state, key("a"), milli({"cpu": 1})).allowed
    assert not admit_group_update(state, key("a"), milli({"cpu": "1500m"})).allowed


def test_removing_total_resources_always_passes() -> None:
    state = ledger({"cpu": 2}, groups=[group("a", {"cpu": 6})])
    assert admit_group_update(state, key("a"), None).allowed


def test_update_of_a_finished_group_reserves_nothing_and_warns() -> None:
    state = ledger({"cpu": 1}, groups=[group("a", {"cpu": 1}, active=False)])
    decision = admit_group_update(state, key("a"), milli({"cpu": 100}))
    assert decision.allowed
    assert "reservation was released" in decision.warnings[0]
    assert state.free("cpu") == 1000


def test_update_of_an_unknown_group_is_checked_like_a_create() -> None:
    state = ledger({"cpu": 1})
    assert not admit_group_update(state, key("new"), milli({"cpu": 2})).allowed


def test_several_quotas_each_bind_the_reservation() -> None:
    state = Ledger.build(
        [quota("cpu-only", {"cpu": 4}), quota("mixed", {"requests.cpu": 8, "memory": "1Gi"})],
        [GroupReservation(key=key("b"), total=milli({"cpu": 1, "memory": "512Mi"}))],
        [],
    )
    decision = admit_group(state, key("a"), milli({"cpu": 4, "memory": "1Gi"}))
    assert [error.split(":")[0] for error in decision.errors] == [
        "spec.totalResources.cpu",
        "spec.totalResources.memory",
    ]
    assert "quota 'cpu-only' has cpu 3 free" in decision.errors[0]
    assert "quota 'mixed' has memory 512Mi free" in decision.errors[1]
