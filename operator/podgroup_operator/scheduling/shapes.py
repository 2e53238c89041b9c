"""Member shapes: what decides where a member can go, parsed once per template.

Members are stamped from one template, so members with identical requests and constraints form
one `MemberShape`, parsed once (`group_by_shape`, keyed by `raw_shape_key` across gangs) and
placed together (scheduling/placement.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from podgroup_operator.scheduling.filters import Constraints, pod_constraints
from podgroup_operator.scheduling.gang import GangRequest
from podgroup_operator.scheduling.podinfo import (
    NO_INTER_POD,
    InterPodConstraints,
    inter_pod_constraints,
)
from podgroup_operator.scheduling.resources import PODS, Resources, format_resources, pod_requests
from podgroup_operator.scheduling.scores import (
    NO_PREFERENCES,
    Preferences,
    pod_images,
    pod_preferences,
)
from podgroup_operator.scheduling.selectors import UnsupportedConstraintError
from podgroup_operator.scheduling.snapshot import Feasibility, Snapshot
from podgroup_operator.scheduling.topology import restrict
from podgroup_operator.scheduling.volumes import volume_kind

__all__ = [
    "MemberShape",
    "ShapeGroup",
    "dominant_share",
    "group_by_shape",
    "member_shape",
    "raw_shape_key",
    "shape_feasibility",
    "shape_groups",
]


@dataclass(frozen=True, slots=True)
class MemberShape:
    """What decides where a member can go: request, static constraints, preferences, and the
    constraints that depend on other pods (`inter_pod`), or why the member cannot be placed."""

    request: tuple[tuple[str, int], ...]
    """(resource, milli-units) pairs, sorted, zero amounts dropped."""
    constraints: Constraints
    preferences: Preferences = NO_PREFERENCES
    inter_pod: InterPodConstraints = NO_INTER_POD
    """Shared by every pod of the shape, except `claims` and `disks`: claim names can differ
    per pod (an ephemeral volume's claim is named after its pod), and so can inline disks, so
    placement reads each pod's own."""
    unsupported: str | None = None
    """Set when the pod asks for something the scheduler cannot evaluate: the whole message."""
    images: tuple[str, ...] = ()
    """Each container's image, as nodes list it (`scores.pod_images`): the image score."""

    @property
    def resources(self) -> Resources:
        return dict(self.request)

    def describe(self) -> str:
        return format_resources(self.resources)


def member_shape(pod: Mapping[str, Any]) -> MemberShape:
    """Parse the parts of a raw pod that placement depends on."""
    request = tuple(sorted(pod_requests(pod).items()))
    constraints = pod_constraints(pod)
    preferences = pod_preferences(pod, constraints.tolerations)
    images = pod_images(pod)
    try:
        inter_pod = inter_pod_constraints(pod)
    except UnsupportedConstraintError as error:
        return MemberShape(
            request,
            constraints,
            preferences,
            NO_INTER_POD,
            f"{error}: not supported by podgroup-scheduler; remove it or use a scheduler that "
            "supports it",
            images,
        )
    return MemberShape(request, constraints, preferences, inter_pod, images=images)


def raw_shape_key(pod: Mapping[str, Any]) -> str:
    """A cheap text key over exactly the fields `member_shape` reads.

    Pods from one template repeat it verbatim, so one parse serves the whole gang. Differently
    ordered but equal dicts only cost an extra parse, never a wrong answer. The namespace is in
    because affinity terms default to it; the labels only when spread constraints may read them
    (`matchLabelKeys`), so per-pod labels such as an index do not split a gang into shapes.
    It covers every field a rule reads into the shape (`registry.Rule.reads`; checked by
    tests/unit/scheduling/test_sched_registry.py).
    """
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    spread = spec.get("topologySpreadConstraints")
    return repr(
        (
            [
                (c.get("resources"), c.get("ports"), c.get("image"))
                for c in spec.get("containers") or ()
            ],
            [
                (c.get("resources"), c.get("restartPolicy"), c.get("ports"))
                for c in spec.get("initContainers") or ()
            ],
            spec.get("overhead"),
            spec.get("nodeSelector"),
            spec.get("affinity"),
            spec.get("tolerations"),
            spread,
            [volume_kind(v).value for v in spec.get("volumes") or ()],
            meta.get("namespace"),
            meta.get("labels") if spread else None,
        )
    )


@dataclass
class ShapeGroup:
    shape: MemberShape
    pods: list[Mapping[str, Any]]
    placed: int = 0
    nodes: set[str] = field(default_factory=set)
    """Nodes the placed members went to."""
    feasibility: Feasibility | None = None
    blocked: Counter[str] = field(default_factory=Counter)
    """Pod-level problems (unsupported constraint, volumes) -> how many members they stop."""
    breakdown: str | None = None
    """Per-node reasons recorded when a member with pod-to-pod constraints found no node."""


_SHAPES: dict[str, MemberShape] = {}
"""Parsed shapes by raw key, shared across gangs: jobs stamp every gang from one template."""
_SHAPES_LIMIT = 4096


def group_by_shape(pods: Sequence[Mapping[str, Any]]) -> list[ShapeGroup]:
    by_raw = _SHAPES
    groups: dict[MemberShape, ShapeGroup] = {}
    for pod in pods:
        raw = raw_shape_key(pod)
        shape = by_raw.get(raw)
        if shape is None:
            if len(by_raw) >= _SHAPES_LIMIT:
                by_raw.clear()
            shape = by_raw[raw] = member_shape(pod)
        group = groups.get(shape)
        if group is None:
            group = groups[shape] = ShapeGroup(shape, [])
        group.pods.append(pod)
    return list(groups.values())


def dominant_share(shape: MemberShape, capacity: Mapping[str, int]) -> float:
    """The request's largest share of the cluster's free capacity; big shapes are placed first."""
    share = 0.0
    for name, amount in shape.request:
        if name == PODS:
            continue
        have = capacity.get(name, 0)
        share = max(share, amount / have if have > 0 else float("inf"))
    return share


def shape_groups(gang: GangRequest) -> list[tuple[MemberShape, int]]:
    """The gang's pending members as (shape, how many), for callers that reason about room."""
    return [(g.shape, len(g.pods)) for g in group_by_shape(gang.pending)]


def shape_feasibility(
    snapshot: Snapshot, constraints: Constraints, gang: GangRequest
) -> Feasibility:
    """The static filters' verdicts for one member shape, narrowed to `gang.within`."""
    feasibility = snapshot.classes.feasibility(constraints)
    return feasibility if gang.within is None else restrict(snapshot, feasibility, gang.within)
