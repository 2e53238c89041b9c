"""`bench core --scenario reclaim` (KAI PR #1565's shape): the plan frees what the reclaimer needs
with whole gangs, within 1.25x wherever whole gangs allow it."""

from __future__ import annotations

from podgroup_operator.bench.reclaim import (
    ASK_PODS,
    NODE_GPUS,
    NODES,
    borrowed_cluster,
    run_reclaim,
    whole_node_best,
)


def test_the_borrowed_cluster_is_full() -> None:
    """Team B holds every GPU of every node, so nothing fits without a reclaim."""
    pods = borrowed_cluster(0)
    used: dict[str, int] = {}
    for pod in pods:
        gpus = int(pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
        used[pod["spec"]["nodeName"]] = used.get(pod["spec"]["nodeName"], 0) + gpus
    assert len(used) == NODES and set(used.values()) == {NODE_GPUS}


def test_whole_node_best_is_the_least_sum_reaching_the_ask() -> None:
    pods = [
        {"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": group}}}
        for group, size in (("big-0", 4), ("big-1", 12), ("small-2", 3))
        for _ in range(size)
    ]
    assert whole_node_best(pods) == 12 / ASK_PODS


def test_every_plan_frees_the_need_within_the_bound_or_what_whole_gangs_allow() -> None:
    result = run_reclaim(4)
    ratios = result["evicted_over_requested"]
    for evicted, whole in zip(ratios["each"], ratios["whole_node_gangs_alone_each"], strict=True):
        assert evicted >= 1.0  # the 48 GPUs are freed
        assert evicted <= max(result["bound"], whole)
