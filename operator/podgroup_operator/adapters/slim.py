"""Slim copies of the objects the informers keep: only the fields some code of ours reads.

Why: the informers hold every pod of the cluster (10,000 to 150,000) for as long as the operator
runs. A pod as the apiserver sends it carries `managedFields`, a `last-applied-configuration`
annotation, container images, commands, env, probes and a full status, most of which nothing
here reads; keeping it whole costs several kilobytes a pod. client-go's informers offer a
transform function for the same reason (`SetTransform`); this module is ours.

What each kind keeps, and who reads it:

* Pods: identity and membership metadata (labels, annotations, owners, deletion) for the
  lifecycle, quota and scheduler; the scheduling fields of the spec (resources, ports,
  selectors, affinity, tolerations, spread, priority, overhead, volumes; init containers with
  their restart policy); `status.phase`/`reason` for the
  lifecycle and restart policy. A *bare* pod (no controlling owner) keeps its whole spec and
  annotations: the restart policy recreates bare pods from their own body.
* Nodes: labels, taints, unschedulable, allocatable/capacity and the Ready condition.
* PodGroups and ResourceQuotas are small and read almost whole: only `managedFields` goes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from podgroup_operator.adapters.kube import JSON
from podgroup_operator.domain.restart import has_controller

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

_POD_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generateName",
    "labels",
    "annotations",
    "ownerReferences",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "finalizers",
)
_POD_SPEC_FOR_SCHEDULING = (
    "nodeName",
    "schedulerName",
    "nodeSelector",
    "affinity",
    "tolerations",
    "topologySpreadConstraints",
    "priority",
    "priorityClassName",
    "preemptionPolicy",
    "overhead",
    "volumes",
    "hostNetwork",
    "runtimeClassName",
    "restartPolicy",
)
_CONTAINER_FIELDS = ("name", "resources", "ports", "restartPolicy")
"""`restartPolicy: Always` makes an init container a sidecar, whose requests and host ports count
for the whole life of the pod (scheduling/resources.py, scheduling/podinfo.py)."""
_POD_STATUS = ("phase", "reason", "message", "nominatedNodeName", "startTime")


def _pick(source: Mapping[str, Any] | None, keys: tuple[str, ...]) -> JSON:
    source = source or {}
    return {key: source[key] for key in keys if key in source}


def _slim_containers(containers: Any) -> list[JSON]:
    return [_pick(container, _CONTAINER_FIELDS) for container in containers or ()]


def slim_pod(pod: Mapping[str, Any]) -> JSON:
    """The pod as the operator reads it (see the module docstring)."""
    metadata = _pick(pod.get("metadata"), _POD_METADATA)
    spec_in = pod.get("spec") or {}
    if has_controller(pod):
        annotations = metadata.get("annotations")
        if annotations and LAST_APPLIED in annotations:
            metadata["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
        spec = _pick(spec_in, _POD_SPEC_FOR_SCHEDULING)
        spec["containers"] = _slim_containers(spec_in.get("containers"))
        if spec_in.get("initContainers"):
            spec["initContainers"] = _slim_containers(spec_in.get("initContainers"))
    else:
        spec = dict(spec_in)
    return {
        "apiVersion": pod.get("apiVersion", "v1"),
        "kind": pod.get("kind", "Pod"),
        "metadata": metadata,
        "spec": spec,
        "status": _pick(pod.get("status"), _POD_STATUS),
    }


def slim_node(node: Mapping[str, Any]) -> JSON:
    """The node as placement reads it: labels, taints, capacity, readiness."""
    status = node.get("status") or {}
    ready = [
        _pick(condition, ("type", "status"))
        for condition in status.get("conditions") or ()
        if condition.get("type") == "Ready"
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": _pick(node.get("metadata"), ("name", "uid", "resourceVersion", "labels")),
        "spec": _pick(node.get("spec"), ("taints", "unschedulable")),
        "status": {**_pick(status, ("allocatable", "capacity")), "conditions": ready},
    }


def without_managed_fields(body: Mapping[str, Any]) -> JSON:
    """PodGroups and ResourceQuotas: everything but `managedFields`."""
    metadata = {k: v for k, v in (body.get("metadata") or {}).items() if k != "managedFields"}
    return {**body, "metadata": metadata}
