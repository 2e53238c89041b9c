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

__all__ = ["Membership", "instance_name", "leaves", "sub_group_of"]


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
