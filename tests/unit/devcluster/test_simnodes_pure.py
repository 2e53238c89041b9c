"""The sim kubelet's pure parts: admission arithmetic and the `--pool` spec syntax.

Moved out of the cluster tier (tests/integration/test_simnodes.py), which keeps what needs the
control plane: no cluster is involved here.
"""

from __future__ import annotations

import pytest

from podgroup_operator.devcluster.simnodes import NodePool, admission_failure


def test_admission_failure_order_and_units() -> None:
    """The kubelet reports the first shortfall in kube-scheduler's order, memory in bytes."""
    gib = 2**30 * 1000
    allocatable = {"pods": 4000, "cpu": 2000, "memory": 4 * gib}
    assert admission_failure({"pods": 1000, "cpu": 1000}, {}, allocatable) is None
    reason, message = admission_failure(
        {"pods": 1000, "cpu": 3000, "memory": 8 * gib}, {"pods": 1000}, allocatable
    ) or ("", "")
    assert reason == "OutOfcpu"
    reason, message = admission_failure(
        {"pods": 1000, "memory": 8 * gib}, {"memory": gib}, allocatable
    ) or ("", "")
    assert reason == "OutOfmemory"
    assert message.endswith(f"requested: {8 * 2**30}, used: {2**30}, capacity: {4 * 2**30}")


def test_pool_spec_parsing() -> None:
    pool = NodePool.from_spec(
        "count=2,cpu=16,memory=64Gi,gpu=8,prefix=gpu,label=k=v,taint=k=v:NoSchedule,"
        "extended=example.com/fpga=1"
    )
    assert pool.count == 2 and pool.name_prefix == "gpu"
    assert pool.allocatable() == {
        "cpu": "16",
        "memory": "64Gi",
        "pods": "110",
        "nvidia.com/gpu": "8",
        "example.com/fpga": "1",
    }
    assert pool.labels == {"k": "v"}
    assert list(pool.taints) == [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    with pytest.raises(ValueError, match="unknown pool key"):
        NodePool.from_spec("count=1,colour=blue")
    with pytest.raises(ValueError, match="EFFECT"):
        NodePool.from_spec("taint=k=v:Sometimes")


def test_pool_images_are_listed_as_a_kubelet_lists_them() -> None:
    pool = NodePool.from_spec("count=1,image=trainer:v1=2Gi,image=registry:5000/base=100Mi")
    assert pool.image_list() == [
        {"names": ["trainer:v1"], "sizeBytes": 2 * 2**30},
        {"names": ["registry:5000/base"], "sizeBytes": 100 * 2**20},
    ]
    with pytest.raises(ValueError, match="image 'trainer:v1' must look like NAME=VALUE"):
        NodePool.from_spec("image=trainer:v1")
    with pytest.raises(ValueError):
        NodePool(images={"trainer:v1": "big"}).allocatable()
