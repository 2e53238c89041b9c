"""Helpers for the scheduling-core tests: gang requests and independent over-commit checks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from podgroup_operator.constants import GangMode
from podgroup_operator.scheduling.gang import Binding, GangRequest
from podgroup_operator.scheduling.resources import node_allocatable, pod_requests
from tests.builders import pod

GPU = "nvidia.com/gpu"


def members(
    group: str, count: int, namespace: str = "default", **pod_kwargs: Any
) -> list[dict[str, Any]]:
    """`count` pending pods of one group, named group-0..group-(count-1)."""
    return [pod(f"{group}-{i}", namespace, group=group, **pod_kwargs) for i in range(count)]


def gang(
    name: str,
    pods: Sequence[Mapping[str, Any]],
    *,
    min_member: int | None = None,
    namespace: str = "default",
    mode: GangMode = GangMode.STRICT,
    **kwargs: Any,
) -> GangRequest:
    kwargs.setdefault("uid", f"uid-{namespace}-{name}")
    return GangRequest(
        namespace=namespace,
        name=name,
        min_member=len(pods) if min_member is None else min_member,
        pending=tuple(pods),
        mode=mode,
        **kwargs,
    )


def usage_by_node(
    bindings: Iterable[Binding], pods_by_uid: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, int]]:
    """Sum of requests per node, recomputed from the raw pods (not from the snapshot)."""
    usage: dict[str, dict[str, int]] = {}
    for binding in bindings:
        per_node = usage.setdefault(binding.node, {})
        for name, amount in pod_requests(pods_by_uid[binding.pod_uid]).items():
            per_node[name] = per_node.get(name, 0) + amount
    return usage


def overcommitted(
    usage: Mapping[str, Mapping[str, int]], nodes: Iterable[Mapping[str, Any]]
) -> list[str]:
    """Node/resource pairs whose summed requests exceed allocatable."""
    allocatable = {n["metadata"]["name"]: node_allocatable(n) for n in nodes}
    return [
        f"{node}/{name}"
        for node, per_node in usage.items()
        for name, amount in per_node.items()
        if amount > allocatable[node].get(name, 0)
    ]


def uid_of(raw: Mapping[str, Any]) -> str:
    return str(raw["metadata"]["uid"])


def pvc(name: str, size: str = "10Gi", klass: str = "local", **spec: Any) -> dict[str, Any]:
    """A PersistentVolumeClaim in `default`, ReadWriteOnce; extra keywords are spec fields."""
    return {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "storageClassName": klass,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
            **spec,
        },
    }
