"""Embedding PodGroups in your own controller: the public API for controller authors.

A controller that runs its own kind of job (a training job CRD, an MPI job, ...) gets gang
scheduling by creating one PodGroup per job and marking the job's pods as its members. This
module builds those bodies and reads the PodGroup's status back as typed models. It is pure:
plain dicts in, plain dicts out, no Kubernetes client, no Kopf, no clock; send the bodies with
whatever client your controller already uses.

The whole recipe::

    from podgroup_operator.api import embed

    # 1. One PodGroup per job, owned by the job: deleting the job deletes the group (GC).
    group = embed.podgroup_for(job, min_member=4, total_resources={"cpu": "16"})
    create(group)                                   # POST .../podgroups, 409 is fine

    # 2. Each pod: owned by the job too, and a member of the group, placed by the gang
    #    scheduler (`spec.schedulerName: podgroup-scheduler`).
    pod = embed.as_member(
        {"metadata": {"name": f"{name}-{i}", "ownerReferences": [embed.owner_reference(job)]},
         "spec": template_spec},
        group["metadata"]["name"],
    )
    create(pod)

    # 3. Watch the PodGroup and react to its status.
    status = embed.read_status(podgroup_body)
    if embed.is_broken(status):                     # phase Unknown: the gang lost a member
        ...                                         # e.g. replace the failed pods
    why = embed.condition(status, embed.ConditionType.UNSCHEDULABLE)

Failures are yours or the operator's, never both: leave `policy` unset (the default) and the
operator only reports — a Running gang that loses a member goes to phase Unknown and stays
there until your controller acts (replaces the pods, or gives up). Set a `RestartPolicy` and
the operator restarts the whole gang itself; then do not recreate pods yourself.

Every builder validates what it is given (the same pydantic models as the CRD and the webhook)
and raises `ValueError` naming what is wrong, so a bad job fails in your controller with a clear
message rather than as a 422 from the apiserver. Inputs are never mutated.
"""

import copy
import re
from collections.abc import Mapping
from typing import Any

from podgroup_operator.api.models import (
    Condition,
    PodGroupSpec,
    PodGroupStatus,
    RestartPolicy,
    salvage_status,
)
from podgroup_operator.constants import (
    ANNOTATION_GROUP_NAME,
    API_VERSION,
    GROUP,
    KIND,
    LABEL_POD_GROUP,
    PLURAL,
    SCHEDULER_NAME,
    VERSION,
    ConditionType,
    Phase,
    PolicyAction,
)

__all__ = [
    "API_VERSION",
    "GROUP",
    "KIND",
    "LABEL_POD_GROUP",
    "PLURAL",
    "SCHEDULER_NAME",
    "VERSION",
    "Condition",
    "ConditionType",
    "Phase",
    "PodGroupStatus",
    "PolicyAction",
    "RestartPolicy",
    "as_member",
    "condition",
    "is_broken",
    "member_selector",
    "owner_reference",
    "podgroup_for",
    "read_status",
]

_GROUP_NAME = re.compile(r"^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$")
_GROUP_NAME_MAX = 63
"""A member names its group in a label value, which Kubernetes caps at 63 characters."""

ResourceAmounts = Mapping[str, str | int]
"""Resource name -> quantity, e.g. {"cpu": "16", "nvidia.com/gpu": 8}."""


def owner_reference(owner: Mapping[str, Any], *, controller: bool = True) -> dict[str, Any]:
    """An ownerReference to `owner` (a whole object as read from the API: your job).

    With the defaults (`controller` and `blockOwnerDeletion` true) the garbage collector deletes
    the dependent when the owner is deleted, and a foreground deletion of the owner waits for it.
    """
    metadata = owner.get("metadata") or {}
    missing = [
        path
        for path, value in (
            ("apiVersion", owner.get("apiVersion")),
            ("kind", owner.get("kind")),
            ("metadata.name", metadata.get("name")),
            ("metadata.uid", metadata.get("uid")),
        )
        if not value
    ]
    if missing:
        raise ValueError(
            f"owner lacks {', '.join(missing)}; pass the object as read from the API "
            "(the uid exists only once the owner is created)"
        )
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": metadata["name"],
        "uid": metadata["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def _check_group_name(name: str) -> str:
    if not (isinstance(name, str) and len(name) <= _GROUP_NAME_MAX and _GROUP_NAME.match(name)):
        raise ValueError(
            f"PodGroup name {name!r} must be at most {_GROUP_NAME_MAX} lowercase letters, digits, "
            "'-' or '.', starting and ending with a letter or digit (members name it in a label)"
        )
    return name


def podgroup_for(
    owner: Mapping[str, Any],
    *,
    min_member: int,
    name: str | None = None,
    min_resources: ResourceAmounts | None = None,
    total_resources: ResourceAmounts | None = None,
    schedule_timeout_seconds: int | None = None,
    policy: RestartPolicy | Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The body of a PodGroup for the job `owner`, owned by it, in the owner's namespace.

    `name` defaults to the owner's name. `min_member` pods must run at the same time for the
    gang to run; `min_resources` keeps it from being attempted while the cluster lacks room;
    `total_resources` reserves quota for the whole gang (namespaces that opted in);
    `policy` hands failure handling to the operator (leave it None to handle failures yourself).
    Raises ValueError (a pydantic ValidationError, listing every bad field) on invalid input.
    """
    reference = owner_reference(owner)
    metadata: dict[str, Any] = {
        "name": _check_group_name(name if name is not None else reference["name"]),
        "ownerReferences": [reference],
    }
    namespace = (owner.get("metadata") or {}).get("namespace")
    if namespace:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = dict(labels)
    spec = PodGroupSpec.model_validate(
        {
            "min_member": min_member,
            "min_resources": dict(min_resources) if min_resources is not None else None,
            "total_resources": dict(total_resources) if total_resources is not None else None,
            "schedule_timeout_seconds": schedule_timeout_seconds,
            "policy": dict(policy) if isinstance(policy, Mapping) else policy,
        }
    )
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec.to_api()}


def as_member(
    pod: Mapping[str, Any], group: str, *, route_to_gang_scheduler: bool = True
) -> dict[str, Any]:
    """A copy of the pod body, made a member of PodGroup `group` (same namespace as the pod).

    Sets the label `scheduling.x-k8s.io/pod-group` and, unless `route_to_gang_scheduler` is
    False, `spec.schedulerName: podgroup-scheduler` so the gang is placed all at once.
    Raises ValueError if the pod already names a different group.
    """
    _check_group_name(group)
    member = copy.deepcopy(dict(pod))
    metadata = member["metadata"] = dict(member.get("metadata") or {})
    labels = metadata["labels"] = dict(metadata.get("labels") or {})
    annotations = metadata.get("annotations") or {}
    for key, value in (
        (LABEL_POD_GROUP, labels.get(LABEL_POD_GROUP)),
        (ANNOTATION_GROUP_NAME, annotations.get(ANNOTATION_GROUP_NAME)),
    ):
        if value and value != group:
            raise ValueError(f"pod already names PodGroup {value!r} by {key}, not {group!r}")
    labels[LABEL_POD_GROUP] = group
    if route_to_gang_scheduler:
        member["spec"] = {**(member.get("spec") or {}), "schedulerName": SCHEDULER_NAME}
    return member


def member_selector(group: str) -> str:
    """The label selector of the members made by `as_member`, for listing or watching them."""
    return f"{LABEL_POD_GROUP}={_check_group_name(group)}"


def _plain(value: Any) -> Any:
    """Nested mappings (e.g. Kopf's read-only body views) as plain dicts and lists."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def read_status(podgroup: Mapping[str, Any]) -> PodGroupStatus:
    """The typed status of a PodGroup body; an object the operator has not seen yet reads as
    an empty status (phase None, counters 0). Unknown fields written by others are ignored, and
    a field this model cannot read (a scheduler-plugins phase such as `Scheduling`, a value
    another writer left) reads as absent, as the operator reads it until it rewrites it."""
    return salvage_status(_plain(podgroup.get("status") or {}))[0]


def condition(status: PodGroupStatus, condition_type: ConditionType | str) -> Condition | None:
    """The status's condition of this type (e.g. ConditionType.UNSCHEDULABLE), or None."""
    return next((cond for cond in status.conditions if cond.type == condition_type), None)


def is_broken(status: PodGroupStatus) -> bool:
    """True in phase Unknown: the gang ran whole, lost a member (failed or deleted) and is now
    below minMember while other members still run. Without a policy, acting is up to you."""
    return status.phase == Phase.UNKNOWN
