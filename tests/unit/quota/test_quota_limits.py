"""How ResourceQuota objects become the ledger's limits: key mapping, several quotas, scopes."""

from podgroup_operator.domain.quota import (
    Ledger,
    QuotaLimit,
    admit_group,
    quota_keys,
    resource_for_quota_key,
)
from tests.unit.quota.helpers import group, key, milli, pod, quota


def test_pod_resources_map_onto_their_quota_keys() -> None:
    assert quota_keys("cpu") == ("requests.cpu", "cpu")
    assert quota_keys("memory") == ("requests.memory", "memory")
    assert quota_keys("ephemeral-storage") == ("requests.ephemeral-storage", "ephemeral-storage")
    assert quota_keys("nvidia.com/gpu") == ("requests.nvidia.com/gpu",)
    assert quota_keys("hugepages-2Mi") == ("requests.hugepages-2Mi",)
    assert quota_keys("pods") == ("pods",)


def test_quota_keys_map_back_and_out_of_scope_keys_are_dropped() -> None:
    assert resource_for_quota_key("requests.cpu") == "cpu"
    assert resource_for_quota_key("cpu") == "cpu"
    assert resource_for_quota_key("requests.nvidia.com/gpu") == "nvidia.com/gpu"
    assert resource_for_quota_key("pods") == "pods"
    for ignored in ("limits.cpu", "count/pods", "services", "requests.storage", "secrets"):
        assert resource_for_quota_key(ignored) is None


def test_requests_cpu_and_bare_cpu_keys_limit_the_same_resource() -> None:
    with_prefix = QuotaLimit.from_object(
        quota("a", {"requests.cpu": "4", "requests.memory": "8Gi"})
    )
    bare = QuotaLimit.from_object(quota("b", {"cpu": "4000m", "memory": "8Gi"}))
    assert with_prefix is not None and bare is not None
    assert (
        with_prefix.hard == bare.hard == {"cpu": 4000, "memory": milli({"memory": "8Gi"})["memory"]}
    )


def test_one_quota_naming_both_keys_is_bound_by_the_smaller() -> None:
    limit = QuotaLimit.from_object(quota("compute", {"requests.cpu": "6", "cpu": "4"}))
    assert limit is not None
    assert limit.hard == {"cpu": 4000}


def test_limits_and_object_counts_are_ignored() -> None:
    limit = QuotaLimit.from_object(
        quota(
            "compute", {"limits.cpu": "1", "count/pods": "1", "requests.storage": "1Gi", "pods": 5}
        )
    )
    assert limit is not None
    assert limit.hard == {"pods": 5000}


def test_scoped_quotas_are_ignored() -> None:
    assert QuotaLimit.from_object(quota("be", {"pods": 1}, scopes=["BestEffort"])) is None
    selector = {
        "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]
    }
    assert QuotaLimit.from_object(quota("prio", {"cpu": 1}, scope_selector=selector)) is None
    ledger = Ledger.build(
        [quota("compute", {"cpu": 10}), quota("be", {"cpu": 1}, scopes=["NotBestEffort"])], [], []
    )
    assert ledger.hard("cpu") == (10000, "compute")


def test_the_smallest_of_several_quotas_is_the_limit_and_is_named() -> None:
    ledger = Ledger.build(
        [
            quota("team", {"requests.cpu": 10, "memory": "64Gi"}),
            quota("compute", {"cpu": 6}),
            quota("gpus", {"requests.nvidia.com/gpu": 2}),
        ],
        [],
        [],
    )
    assert ledger.hard("cpu") == (6000, "compute")
    assert ledger.hard("memory") == (milli({"memory": "64Gi"})["memory"], "team")
    assert ledger.hard("nvidia.com/gpu") == (2000, "gpus")
    assert ledger.tracked == {"cpu", "memory", "nvidia.com/gpu"}

    decision = admit_group(ledger, key("a"), milli({"cpu": 8}))
    assert not decision.allowed
    assert "quota 'compute' has cpu 6 free" in decision.errors[0]


def test_usage_is_recomputed_from_pods_not_read_from_status_used() -> None:
    # status.used counts members and non-members alike and lags behind; pods are the truth.
    stale = quota("compute", {"cpu": 10}, used={"cpu": 9})
    ledger = Ledger.build([stale], [], [pod("p1", {"cpu": 2})])
    assert ledger.free("cpu") == 8000


def test_untracked_resource_has_no_free_amount() -> None:
    ledger = Ledger.build([quota("compute", {"cpu": 1})], [group("a", {"memory": "1Gi"})], [])
    assert ledger.free("memory") is None
    assert ledger.hard("memory") is None
