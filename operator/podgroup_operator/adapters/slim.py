"""Slim copies of the objects the informers keep: only the fields some code of ours reads.

The informers hold every pod of the cluster for as long as the operator runs, and most of what
the API server sends of a pod nothing here reads (docs/decisions/003-slim-stores.md); client-go's
informers offer a transform function for the same reason (`SetTransform`).

What each kind keeps, and who reads it:

* Pods: every field a placement rule declares it reads (`scheduling/registry.py`, checked field
  by field by tests/unit/scheduling/test_sched_registry.py); identity and membership metadata
  (labels, annotations, owners, deletion) for the lifecycle, quota and scheduler; the
  scheduling fields of the spec (resources, ports, selectors, affinity, tolerations, spread,
  priority, overhead, the volumes that claim storage or name an in-tree disk; init containers
  with their restart policy; the scheduling gates, scheduling/gates.py; the run-time limit
  `activeDeadlineSeconds`, api/run_time.py); `status.phase`/`reason`
  for the lifecycle and restart policy; a pod not bound yet keeps its `PodScheduled` condition,
  so that a new leader does not write again on every waiting pod what an earlier one wrote
  there (controllers/podsignals.py). A *bare* pod (no controlling owner) keeps its whole spec and
  annotations: the restart policy recreates bare pods from their own body.
* What many pods hold alike is kept once (`SharedValues`): the pods of one template have equal
  containers, tolerations, labels and owner references, and every pod of a namespace mounts the
  same service account token volume.
* Nodes: labels, taints, unschedulable, allocatable/capacity, the Ready condition, and the
  names and size of each image its kubelet lists (at most 50 by default), each image kept once
  for all the nodes that list it alike.
* CSINodes: each driver's name and attach limit (`allocatable`).
* PodGroups and ResourceQuotas are small and read almost whole: only `managedFields` goes.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import JSON
from podgroup_operator.domain.restart import has_controller
from podgroup_operator.scheduling.volumes import volume_kind

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
POD_SCHEDULED = c.PodConditionType.POD_SCHEDULED.value

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
    "schedulingGates",
    "schedulingGroup",
    "activeDeadlineSeconds",
)
_CONTAINER_FIELDS = ("name", "image", "resources", "ports", "restartPolicy")
"""`restartPolicy: Always` makes an init container a sidecar, whose requests and host ports count
for the whole life of the pod (scheduling/resources.py, scheduling/podinfo.py); the image is
scored (scheduling/scores.py, `image_score`)."""
_POD_STATUS = ("phase", "reason", "message", "nominatedNodeName", "startTime")


SHARED_LIMIT = 4096
"""Distinct values `SharedValues` remembers before it starts over (see there)."""
SHARED_MAX_BYTES = 4096
"""Values longer than this as JSON are kept as they come: large values are seldom alike, and the
table must not hold big ones alive after their pods are gone."""


class SharedValues:
    """One object for values that many stored objects hold equal to each other.

    Each pod is parsed from its own event, so without this the pods of one ReplicaSet or Job
    would each hold their own copy of the same containers, tolerations, labels and owner
    references. Calling this on such a value returns the first equal one it was given, and the copy
    just parsed is freed. Values are compared by their JSON text, which is also the table's key (at
    most `SHARED_MAX_BYTES` each). Only JSON values may be given, and the objects returned are
    shared: the stores' objects are read, never changed in place.

    Bounded: after `limit` distinct values it forgets them all and starts over (what is shared
    stays shared), so owners that come and go for weeks cannot grow it without end; what it may
    hold after its pods are gone is at most `limit` values of `SHARED_MAX_BYTES` each. A value
    orjson cannot encode is returned as it is.

    Cost: it turns each value into JSON, which about doubles the time to slim a pod, for some
    kilobytes less memory per pod (docs/decisions/003-slim-stores.md).
    """

    def __init__(self, limit: int = SHARED_LIMIT) -> None:
        self.limit = limit
        self._values: dict[bytes, Any] = {}

    def __len__(self) -> int:
        return len(self._values)

    def __call__(self, value: Any) -> Any:
        """The shared value equal to `value` (a string: interned; other scalars: as given)."""
        cls = value.__class__
        if cls is str:  # exactly: a str subclass (an enum) cannot be interned
            return sys.intern(value)
        if (cls is dict or cls is list) and value:
            return self._shared(value)
        return value

    def fields(self, into: dict[str, Any], keys: Iterable[str] | None = None) -> None:
        """Share the values of `into` (those of `keys` only, if given), in place."""
        for key in into if keys is None else [k for k in keys if k in into]:
            into[key] = self(into[key])

    def _shared(self, value: dict[str, Any] | list[Any]) -> Any:
        try:
            text = orjson.dumps(value)
        except orjson.JSONEncodeError:
            return value
        if len(text) > SHARED_MAX_BYTES:
            return value
        known = self._values.get(text)
        if known is not None:
            return known
        if len(self._values) >= self.limit:
            self._values.clear()
        # A copy of the exact length: orjson's own answer keeps a 4 KiB buffer.
        self._values[memoryview(text).tobytes()] = value
        return value


def _pick(source: Mapping[str, Any] | None, keys: tuple[str, ...]) -> JSON:
    source = source or {}
    return {key: source[key] for key in keys if key in source}


def _slim_containers(containers: Any) -> list[JSON]:
    return [_pick(container, _CONTAINER_FIELDS) for container in containers or ()]


def _claim_volumes(volumes: Any) -> list[JSON]:
    """The volumes placement reads: claims and in-tree disks (`volumes.volume_kind`)."""
    return [v for v in volumes or () if volume_kind(v)]


_SHARED_METADATA = ("namespace", "labels", "annotations", "ownerReferences", "finalizers")
_SHARED_STATUS = ("phase", "conditions")
_CONDITION_FIELDS = ("type", "status", "reason", "message")


def slim_pod(pod: Mapping[str, Any], share: SharedValues | None = None) -> JSON:
    """The pod as the operator reads it (see the module docstring); with `share`, the values
    that pods commonly hold alike are `share`d."""
    metadata = _pick(pod.get("metadata"), _POD_METADATA)
    spec_in = pod.get("spec") or {}
    if has_controller(pod):
        annotations = metadata.get("annotations")
        if annotations and LAST_APPLIED in annotations:
            metadata["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
        spec = _pick(spec_in, _POD_SPEC_FOR_SCHEDULING)
        claims = _claim_volumes(spec.pop("volumes", None))
        if claims:
            spec["volumes"] = claims
        spec["containers"] = _slim_containers(spec_in.get("containers"))
        if spec_in.get("initContainers"):
            spec["initContainers"] = _slim_containers(spec_in.get("initContainers"))
    else:
        spec = dict(spec_in)
    status = _pick(pod.get("status"), _POD_STATUS)
    if not spec_in.get("nodeName"):
        scheduled = [
            _pick(condition, _CONDITION_FIELDS)
            for condition in (pod.get("status") or {}).get("conditions") or ()
            if condition.get("type") == POD_SCHEDULED
        ]
        if scheduled:
            status["conditions"] = scheduled
    if share is not None:
        share.fields(metadata, _SHARED_METADATA)
        share.fields(spec)
        share.fields(status, _SHARED_STATUS)
    return {
        "apiVersion": pod.get("apiVersion", "v1"),
        "kind": pod.get("kind", "Pod"),
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }


def slim_node(node: Mapping[str, Any], share: SharedValues | None = None) -> JSON:
    """The node as placement reads it: labels, taints, capacity, readiness, images; with
    `share`, each image entry is `share`d (a pool's nodes list the same images)."""
    status = node.get("status") or {}
    ready = [
        _pick(condition, ("type", "status"))
        for condition in status.get("conditions") or ()
        if condition.get("type") == "Ready"
    ]
    slim_status = {**_pick(status, ("allocatable", "capacity")), "conditions": ready}
    images = [_pick(image, ("names", "sizeBytes")) for image in status.get("images") or ()]
    if images:
        slim_status["images"] = images if share is None else [share(image) for image in images]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": _pick(node.get("metadata"), ("name", "uid", "resourceVersion", "labels")),
        "spec": _pick(node.get("spec"), ("taints", "unschedulable")),
        "status": slim_status,
    }


def slim_csi_node(body: Mapping[str, Any]) -> JSON:
    """A CSINode as attach limits read it: its drivers' names and limits."""
    drivers = [
        _pick(driver, ("name", "allocatable"))
        for driver in (body.get("spec") or {}).get("drivers") or ()
        if isinstance(driver, Mapping)
    ]
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": _pick(body.get("metadata"), ("name", "uid", "resourceVersion")),
        "spec": {"drivers": drivers},
    }


def without_managed_fields(body: Mapping[str, Any]) -> JSON:
    """PodGroups and ResourceQuotas: everything but `managedFields`."""
    metadata = {k: v for k, v in (body.get("metadata") or {}).items() if k != "managedFields"}
    return {**body, "metadata": metadata}
