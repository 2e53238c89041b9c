"""The members of each sub-group, for `status.subGroups[]` (counted by domain/lifecycle.py)
and the restart policy (domain/restart.py).

Read off the one tree (`api.subgroups.build_tree`) the scheduler reads too: a leaf holds the
members that belong to it; a template leaf has one entry per instance its members form; a
parent holds its subtree's. Each entry carries the sub-group's minimum (a parent without
minMember: what its counted children need, over those instances).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from podgroup_operator.api.models import PodGroupSpec
from podgroup_operator.api.subgroups import build_tree, leaves, pod_labels, sub_group_of
from podgroup_operator.constants import LABEL_SUB_GROUP

__all__ = ["SubGroupMembers", "sub_group_members", "unknown_sub_group_message"]

Pod = Mapping[str, Any]


@dataclass(frozen=True)
class SubGroupMembers:
    """One sub-group's members: `least` is its minimum, `top` whether it is a direct part of
    the group, `leaf` whether it holds pods itself (no children)."""

    name: str
    least: int
    pods: list[Pod]
    top: bool
    leaf: bool


def sub_group_members(spec: PodGroupSpec, members: Iterable[Pod]) -> list[SubGroupMembers]:
    """Each sub-group's members, in spec order (a template's instances by name); empty
    without sub-groups."""
    subs = spec.sub_groups or []
    if not subs:
        return []
    tree = build_tree(subs, members, pod_labels)
    out: list[SubGroupMembers] = []
    for sub in subs:
        nodes = tree.by_spec.get(sub.name, ())
        if sub.match_label_keys:
            nodes = tuple(sorted(nodes, key=lambda node: node.name))
        out.extend(
            SubGroupMembers(node.name, node.min_member, node.subtree_members(), node.top, node.leaf)
            for node in nodes
        )
    return out


def unknown_sub_group_message(pod: Pod, spec: PodGroupSpec) -> str | None:
    """The Warning for a pod whose sub-group label names no leaf of its group's subGroups,
    naming the leaves there are and the fix; None for any other pod."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    member = sub_group_of(labels, spec.sub_groups or [])
    if member.unknown is None:
        return None
    names = ", ".join(leaves(spec.sub_groups or [])) or "none"
    return (
        f"label {LABEL_SUB_GROUP}: {member.unknown!r} is not a leaf sub-group of this pod's "
        f"PodGroup (leaves: {names}); fix the label or add the sub-group to spec.subGroups. "
        "The pod counts toward the group, in no sub-group."
    )
