"""Ledger-specific checks of spec.totalResources: names a reservation can mean, minResources."""

from podgroup_operator.domain.quota import Ledger, validate_total_resources
from tests.unit.quota.helpers import quota


def test_native_extended_and_hugepage_names_are_valid() -> None:
    total: dict[str, str | int] = {
        "cpu": "4",
        "memory": "8Gi",
        "ephemeral-storage": "10Gi",
        "pods": 4,
        "hugepages-2Mi": "1Gi",
        "nvidia.com/gpu": 2,
    }
    assert validate_total_resources(total, None) == []


def test_unknown_names_are_errors_with_field_path_and_fix() -> None:
    errors = validate_total_resources({"cpu": 1, "gpu": 2, "cpus": 1}, None)
    assert errors == [
        "spec.totalResources.gpu: unknown resource 'gpu'; use cpu, memory, ephemeral-storage, "
        "pods, hugepages-<size> or a qualified extended resource such as 'nvidia.com/gpu'",
        "spec.totalResources.cpus: unknown resource 'cpus'; use cpu, memory, ephemeral-storage, "
        "pods, hugepages-<size> or a qualified extended resource such as 'nvidia.com/gpu'",
    ]


def test_quota_keys_instead_of_resource_names_are_errors_suggesting_the_name() -> None:
    errors = validate_total_resources(
        {"requests.cpu": 1, "limits.memory": "1Gi", "requests.nvidia.com/gpu": 1}, None
    )
    assert len(errors) == 3
    assert errors[0].startswith("spec.totalResources.requests.cpu: ")
    assert "write 'cpu' instead of 'requests.cpu'" in errors[0]
    assert "write 'memory' instead of 'limits.memory'" in errors[1]
    assert "write 'nvidia.com/gpu' instead of 'requests.nvidia.com/gpu'" in errors[2]


def test_a_name_some_quota_tracks_is_valid() -> None:
    ledger = Ledger.build([quota("odd", {"requests.licenses": 5})], [], [])
    assert validate_total_resources({"licenses": 1}, None, ledger.tracked) == []
    assert validate_total_resources({"licenses": 1}, None) != []


def test_malformed_and_negative_amounts_are_errors() -> None:
    errors = validate_total_resources({"cpu": "four", "memory": "-1Gi"}, None)
    assert len(errors) == 2
    assert errors[0].startswith("spec.totalResources.cpu: 'four' is not a Kubernetes quantity")
    assert errors[1] == (
        "spec.totalResources.memory: must be >= 0, got '-1Gi'; reserve a non-negative amount"
    )


def test_total_below_min_resources_is_an_error() -> None:
    errors = validate_total_resources({"cpu": "2"}, {"cpu": "3", "memory": "1Gi"})
    assert errors == [
        "spec.totalResources.cpu: 2 is below spec.minResources.cpu 3; raise totalResources "
        "or lower minResources",
        "spec.totalResources.memory: 0 is below spec.minResources.memory 1Gi; raise "
        "totalResources or lower minResources",
    ]
    assert validate_total_resources({"cpu": "3000m", "memory": "1Gi"}, {"cpu": 3}) == []


def test_malformed_amount_is_not_reported_twice_against_min_resources() -> None:
    errors = validate_total_resources({"cpu": "x"}, {"cpu": 1})
    assert len(errors) == 1
