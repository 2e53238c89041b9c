"""What a gang refused for room still lacks after what fits is placed: the pod sets to provision.

A gang that does not fit asks cluster-autoscaler for nodes through one ProvisioningRequest
(controllers/provisioning.py). It asks only for the members that do not fit on the nodes there
are: those are placed here on the snapshot (as a NonStrict gang keeps the members that fit),
the rest are counted, grouped by their template (what the autoscaler simulates: requests,
nodeSelector, affinity, tolerations), and the snapshot is left exactly as it was.

A gang with a topologyConstraint or sub-groups asks for all its pending members: room that
fits some of them elsewhere may be in another domain (docs/decisions/025-gang-aware-autoscaling.md).
Pure: no client, no clock.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from podgroup_operator.api.keys import pod_uid
from podgroup_operator.constants import PROVISIONING_MAX_POD_SETS, GangMode
from podgroup_operator.scheduling.gang import GangRequest, Placement
from podgroup_operator.scheduling.placement import FRAMEWORK
from podgroup_operator.scheduling.snapshot import Snapshot

__all__ = ["PodSet", "pod_sets", "still_missing", "template_spec"]

_CONTAINER_FIELDS = ("name", "image", "resources")
_SPEC_FIELDS = ("nodeSelector", "affinity", "tolerations", "priorityClassName")


@dataclass(frozen=True)
class PodSet:
    """Members alike for the autoscaler: one PodTemplate and its count."""

    spec: Mapping[str, Any]
    """The template's pod spec (`template_spec`)."""
    count: int
    key: str
    """`spec` as canonical JSON: members with equal keys share the pod set."""


def _containers(containers: Any) -> list[dict[str, Any]]:
    return [
        {name: container[name] for name in _CONTAINER_FIELDS if name in container}
        for container in containers or ()
    ]


def template_spec(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod spec a PodTemplate carries for this member: its containers' names, images and
    resources, and what decides where it may run (nodeSelector, affinity, tolerations,
    priorityClassName). What the autoscaler needs to choose a node group, nothing the node
    would only need to run it."""
    spec = pod.get("spec") or {}
    template: dict[str, Any] = {"containers": _containers(spec.get("containers"))}
    if spec.get("initContainers"):
        template["initContainers"] = _containers(spec.get("initContainers"))
    for name in _SPEC_FIELDS:
        if spec.get(name):
            template[name] = spec[name]
    return template


def pod_sets(pods: Sequence[Mapping[str, Any]]) -> tuple[PodSet, ...]:
    """`pods` grouped by template, in the order each template first appears. More distinct
    templates than a request may hold (PROVISIONING_MAX_POD_SETS) raise ValueError."""
    counts: dict[str, int] = {}
    specs: dict[str, dict[str, Any]] = {}
    for pod in pods:
        spec = template_spec(pod)
        key = json.dumps(spec, sort_keys=True, separators=(",", ":"))
        counts[key] = counts.get(key, 0) + 1
        specs.setdefault(key, spec)
    if len(counts) > PROVISIONING_MAX_POD_SETS:
        raise ValueError(
            f"the members left have {len(counts)} distinct templates; a ProvisioningRequest "
            f"holds at most {PROVISIONING_MAX_POD_SETS} pod sets"
        )
    return tuple(PodSet(specs[key], count, key) for key, count in counts.items())


def still_missing(gang: GangRequest, snapshot: Snapshot) -> tuple[PodSet, ...]:
    """The pod sets of the pending members that do not fit on the snapshot's nodes once every
    member that fits is placed; empty when the gang fits whole. The snapshot is left as it was.

    A gang with a topologyConstraint or sub-groups counts all its pending members (see the
    module docstring)."""
    if gang.topology is not None or gang.sub_groups is not None:
        return pod_sets(gang.pending)
    trial = dataclasses.replace(gang, mode=GangMode.NON_STRICT, satisfied_before=False)
    outcome = FRAMEWORK.place(trial, snapshot)
    outcome.undo()
    if isinstance(outcome, Placement):
        return ()
    placed = {binding.pod_uid for binding in outcome.partial}
    return pod_sets([pod for pod in gang.pending if pod_uid(pod) not in placed])
