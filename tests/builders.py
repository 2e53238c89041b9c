"""Builders of raw API objects (the dicts the apiserver sends) for tests.

Every builder returns plain JSON-shaped dicts, so the same objects feed pure unit tests, the
in-memory fake, and `kubectl apply` on the real control plane.
"""

from __future__ import annotations

import itertools
from typing import Any

from podgroup_operator import constants as c

_uids = itertools.count(1)


def uid() -> str:
    return f"00000000-0000-0000-0000-{next(_uids):012d}"


def container(name: str = "main", **requests: str | int) -> dict[str, Any]:
    """A container; requests given as keyword arguments, e.g. cpu="500m", memory="1Gi".

    Extended resources with dots or slashes go through `requests={...}` in `pod()` instead.
    """
    body: dict[str, Any] = {"name": name, "image": "registry.local/sim:latest"}
    if requests:
        body["resources"] = {"requests": {k: str(v) for k, v in requests.items()}}
    return body


def pod(
    name: str,
    namespace: str = "default",
    *,
    group: str | None = None,
    group_annotation: str | None = None,
    requests: dict[str, str | int] | None = None,
    phase: str = c.PodPhase.PENDING,
    node: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    scheduler: str | None = None,
    deleting: bool = False,
    priority: int | None = None,
    created: str = "2026-01-01T00:00:00Z",
    **spec: Any,
) -> dict[str, Any]:
    """A pod; `group` sets the scheduler-plugins label, `group_annotation` Volcano's annotation."""
    labels = dict(labels or {})
    annotations = dict(annotations or {})
    if group is not None:
        labels[c.LABEL_POD_GROUP] = group
    if group_annotation is not None:
        annotations[c.ANNOTATION_GROUP_NAME] = group_annotation
    main: dict[str, Any] = {"name": "main", "image": "registry.local/sim:latest"}
    if requests:
        main["resources"] = {"requests": {k: str(v) for k, v in requests.items()}}
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid(),
            "labels": labels,
            "annotations": annotations,
            "creationTimestamp": created,
        },
        "spec": {"containers": [main], **spec},
        "status": {"phase": phase},
    }
    if node is not None:
        body["spec"]["nodeName"] = node
    if scheduler is not None:
        body["spec"]["schedulerName"] = scheduler
    if priority is not None:
        body["spec"]["priority"] = priority
    if deleting:
        body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    return body


def node(
    name: str,
    *,
    cpu: str | int = 8,
    memory: str = "32Gi",
    pods: int = 110,
    extended: dict[str, str | int] | None = None,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
) -> dict[str, Any]:
    """A Node with equal capacity and allocatable."""
    allocatable = {"cpu": str(cpu), "memory": memory, "pods": str(pods)}
    allocatable.update({k: str(v) for k, v in (extended or {}).items()})
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid(),
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
        },
        "spec": {"taints": list(taints or [])},
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }
    if unschedulable:
        body["spec"]["unschedulable"] = True
    return body


def podgroup(
    name: str,
    namespace: str = "default",
    *,
    min_member: int = 1,
    status: dict[str, Any] | None = None,
    created: str = "2026-01-01T00:00:00Z",
    generation: int = 1,
    **spec: Any,
) -> dict[str, Any]:
    """A PodGroup body; extra keyword arguments are spec fields by their API (camelCase) names."""
    body: dict[str, Any] = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid(),
            "generation": generation,
            "creationTimestamp": created,
        },
        "spec": {"minMember": min_member, **spec},
    }
    if status is not None:
        body["status"] = status
    return body


def replicaset(name: str, replicas: int, template: dict[str, Any]) -> dict[str, Any]:
    """A ReplicaSet selecting `app: <name>`; the template gets that label added."""
    metadata = template.get("metadata") or {}
    labels = {**(metadata.get("labels") or {}), "app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {**template, "metadata": {**metadata, "labels": labels}},
        },
    }


def privileged_pod(namespace: str = "default", name: str = "root") -> dict[str, Any]:
    """A pod no tenant should get the operator to create: privileged, in the host's PID space."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "hostPID": True,
            "containers": [{"name": "x", "image": "evil", "securityContext": {"privileged": True}}],
        },
    }
