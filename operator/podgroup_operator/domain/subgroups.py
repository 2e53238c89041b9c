"""The members of each sub-group, for `status.subGroups[]` (counted by domain/lifecycle.py).

A leaf holds the members that belong to it (`api.subgroups.sub_group_of`); a template leaf
has one entry per instance its members form; a parent holds its subtree's. Each entry carries
the sub-group's minimum (a parent without minMember: what its counted children need).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from podgroup_operator.api.models import PodGroupSpec, SubGroup, least_members
from podgroup_operator.api.subgroups import leaves, sub_group_of
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
    by_name: dict[str, list[Pod]] = {}
    instances: dict[str, dict[str, None]] = {}
    for pod in members:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        member = sub_group_of(labels, subs)
        if member.leaf is None or member.name is None:
            continue
        by_name.setdefault(member.name, []).append(pod)
        if member.leaf.match_label_keys:
            instances.setdefault(member.leaf.name, {})[member.name] = None
    children: dict[str | None, list[SubGroup]] = {}
    for sub in subs:
        children.setdefault(sub.parent, []).append(sub)

    def names(sub: SubGroup) -> list[str]:
        return sorted(instances.get(sub.name, {})) if sub.match_label_keys else [sub.name]

    def pods_of(sub: SubGroup) -> list[Pod]:
        own = [pod for name in names(sub) for pod in by_name.get(name, [])]
        return own + [pod for kid in children.get(sub.name, []) for pod in pods_of(kid)]

    out: list[SubGroupMembers] = []
    for sub in subs:
        least = least_members(sub, children)
        leaf = sub.name not in children
        for name in names(sub):
            pods = by_name.get(name, []) if sub.match_label_keys else pods_of(sub)
            out.append(SubGroupMembers(name, least, pods, sub.parent is None, leaf))
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
