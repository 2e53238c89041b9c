"""Which sub-group of its PodGroup a pod belongs to: read by the scheduler and the status alike.

A pod labelled `scheduling.x-k8s.io/sub-group: NAME` joins the leaf NAME (a template leaf: its
instance for the pod's values). A pod without the label joins the first template leaf (one with
`matchLabelKeys`) whose keys it carries every one of, in the instance named `NAME-VALUES`. Any
other pod is a member of the group outside every sub-group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from podgroup_operator.api.models import SubGroup
from podgroup_operator.constants import LABEL_SUB_GROUP

__all__ = [
    "Membership",
    "group_minimum_holds",
    "instance_name",
    "leaves",
    "sub_group_of",
    "top_part",
]


@dataclass(frozen=True)
class Membership:
    """A pod's place in the tree: the leaf it joins (its spec entry) and the sub-group's name
    (the leaf's, or a template's instance), or `unknown`: the label names no leaf."""

    leaf: SubGroup | None
    name: str | None
    unknown: str | None = None


OUTSIDE = Membership(None, None)


def leaves(sub_groups: Sequence[SubGroup]) -> dict[str, SubGroup]:
    """The leaves by name: the sub-groups no other names as parent."""
    parents = {sub.parent for sub in sub_groups}
    return {sub.name: sub for sub in sub_groups if sub.name not in parents}


def instance_name(template: SubGroup, labels: Mapping[str, str]) -> str | None:
    """`NAME-VALUES` of a template for a pod's labels, or None when a key is missing."""
    keys = template.match_label_keys or ()
    if any(key not in labels for key in keys):
        return None
    return "-".join([template.name, *(labels[key] for key in keys)])


def sub_group_of(labels: Mapping[str, str], sub_groups: Sequence[SubGroup]) -> Membership:
    """Where a pod with these labels belongs among `sub_groups` (see the module docstring)."""
    if not sub_groups:
        return OUTSIDE
    by_leaf = leaves(sub_groups)
    named = labels.get(LABEL_SUB_GROUP)
    if named is not None:
        leaf = by_leaf.get(named)
        if leaf is None:
            return Membership(None, None, named)
        if leaf.match_label_keys:
            return Membership(leaf, instance_name(leaf, labels) or leaf.name)
        return Membership(leaf, leaf.name)
    for leaf in by_leaf.values():
        if leaf.match_label_keys:
            name = instance_name(leaf, labels)
            if name is not None:
                return Membership(leaf, name)
    return OUTSIDE


def top_part(labels: Mapping[str, str], sub_groups: Sequence[SubGroup]) -> str | None:
    """The direct part of the group that a pod with these labels counts in: its leaf's top
    ancestor, or the leaf's own name (a template's instance) when the leaf is itself a direct
    part; None outside every sub-group. `minSubGroup` on the group counts these parts."""
    member = sub_group_of(labels, sub_groups)
    if member.leaf is None:
        return None
    parents = {sub.name: sub.parent for sub in sub_groups}
    name = member.leaf.name
    if parents.get(name) is None:
        return member.name
    seen: set[str] = set()
    while (parent := parents.get(name)) is not None and name not in seen:
        seen.add(name)
        name = parent
    return name


def group_minimum_holds(
    min_member: int, min_sub_group: int | None, *, live: int, parts: int, whole: int
) -> bool:
    """Whether a group's own minimum holds while some of its sub-groups are being repaired:
    `live` members count toward minMember, and `whole` of its `parts` direct parts (those
    holding no broken sub-group) toward minSubGroup, which means every part when unset.

    One rule for the restart policy (a broken sub-group is repaired alone only while this
    holds) and the preemption planner (a sub-group is taken alone only while it would)."""
    return live >= min_member and whole >= (min_sub_group or parts)
