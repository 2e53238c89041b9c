"""Pod requests and node allocatable as kube-scheduler computes them."""

from __future__ import annotations

from podgroup_operator.scheduling.resources import (
    copies_that_fit,
    format_resources,
    node_allocatable,
    pod_requests,
    shortfall,
)
from tests.builders import container, node, pod


def test_containers_are_summed_and_every_pod_costs_one_pods_unit() -> None:
    raw = pod("p", containers=[container("a", cpu="500m", memory="1Gi"), container("b", cpu=1)])
    assert pod_requests(raw) == {"cpu": 1500, "memory": 1024**3 * 1000, "pods": 1000}


def test_init_container_larger_than_the_sum_sets_the_request() -> None:
    raw = pod(
        "p",
        containers=[container("a", cpu=1, memory="1Gi")],
        initContainers=[container("init", cpu=4), container("init2", memory="512Mi")],
    )
    requests = pod_requests(raw)
    assert requests["cpu"] == 4000  # max(1, 4)
    assert requests["memory"] == 1024**3 * 1000  # max(1Gi, 512Mi)


def test_sidecar_init_containers_add_to_the_main_containers() -> None:
    sidecar = {**container("proxy", cpu="500m"), "restartPolicy": "Always"}
    raw = pod(
        "p",
        containers=[container("a", cpu=1)],
        initContainers=[sidecar, container("late-init", cpu=2)],
    )
    # main + sidecar = 1.5; the init after the sidecar runs next to it: 2 + 0.5 = 2.5.
    assert pod_requests(raw)["cpu"] == 2500


def test_overhead_is_added_on_top() -> None:
    raw = pod("p", requests={"cpu": "1"}, overhead={"cpu": "250m", "memory": "120Mi"})
    requests = pod_requests(raw)
    assert requests["cpu"] == 1250
    assert requests["memory"] == 120 * 1024**2 * 1000


def test_extended_resources_are_requested_like_any_other() -> None:
    raw = pod("p", requests={"cpu": "2", "nvidia.com/gpu": "4", "ephemeral-storage": "10Gi"})
    requests = pod_requests(raw)
    assert requests["nvidia.com/gpu"] == 4000
    assert requests["ephemeral-storage"] == 10 * 1024**3 * 1000


def test_pod_without_requests_costs_only_one_pod() -> None:
    assert pod_requests(pod("p")) == {"pods": 1000}


def test_node_allocatable_falls_back_to_capacity() -> None:
    raw = node("n", cpu=8, extended={"nvidia.com/gpu": 8})
    assert node_allocatable(raw)["nvidia.com/gpu"] == 8000
    del raw["status"]["allocatable"]
    raw["status"]["capacity"]["cpu"] = "16"
    assert node_allocatable(raw)["cpu"] == 16000


def test_copies_that_fit_is_the_minimum_over_resources() -> None:
    free = {"cpu": 8000, "memory": 5000, "pods": 110_000}
    assert copies_that_fit((("cpu", 1000), ("memory", 2000)), free) == 2
    assert copies_that_fit((("cpu", 1000), ("nvidia.com/gpu", 1000)), free) == 0


def test_shortfall_and_format_name_the_gap() -> None:
    assert shortfall({"cpu": 8000, "memory": 1000}, {"cpu": 3000, "memory": 5000}) == {"cpu": 5000}
    text = format_resources({"nvidia.com/gpu": 8000, "cpu": 8000, "memory": 32 * 1024**3 * 1000})
    assert text == "{cpu: 8, memory: 32Gi, nvidia.com/gpu: 8}"


def test_format_names_at_most_the_resources_a_list_may_hold() -> None:
    """A PodGroup stored before the schema bounded its lists may hold thousands of names."""
    many = {f"example.com/r{i:05}": 1000 for i in range(10_000)}
    text = format_resources(many)
    assert text.startswith("{example.com/r00000: 1, example.com/r00001: 1, ")
    assert text.endswith("example.com/r00063: 1 and 9936 more}")
    assert format_resources(dict(list(many.items())[:64])).endswith("example.com/r00063: 1}")


def test_an_amount_too_large_to_count_says_so() -> None:
    """The apiserver stores `9Ei` of memory; counted in 64-bit milli-units as kube-scheduler
    does, it saturates, and a message must not show 2^63-1 milli-units as the request."""
    text = format_resources(pod_requests(pod("p", containers=[container("a", memory="9Ei")])))
    assert text == "{memory: more than 9223372036854775 (too large)}"
