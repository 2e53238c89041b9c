"""Sub-groups: the tree of a gang's `spec.subGroups`, with its members in their leaves.

The search that places the tree (each sub-group whole in one domain inside its parent's) is the
framework's member step, in scheduling/subgroup_search.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from podgroup_operator.api.keys import pod_uid
from podgroup_operator.api.models import (
    PodGroupSpec,
    SubGroup,
    TopologyPlacement,
    constraint_in_effect,
)
from podgroup_operator.api.subgroups import sub_group_of
from podgroup_operator.scheduling.gang import SubGroupNode, SubGroupTree
from podgroup_operator.scheduling.topology import topology_of

__all__ = ["sub_group_tree"]

Pod = Mapping[str, Any]


def sub_group_tree(
    spec: PodGroupSpec,
    pending: Sequence[Pod],
    bound: Sequence[Pod],
    levels_of: Callable[[str], tuple[str, ...] | None],
    placement: TopologyPlacement | None = None,
) -> SubGroupTree | None:
    """The tree of `spec.subGroups` with the group's pending and bound members in their leaves
    (a template leaf: one node per instance its members form), or None without sub-groups.
    Members whose label names no leaf count as members of no sub-group; `placement` is the
    group's `status.placement`, whose sub-group domains are tried first again.

    Each sub-group's constraint is read in the Topology it uses (`models.constraint_in_effect`:
    its own, else its ancestors', else the group's); one in no Topology has its levels under
    its ancestors' chain, so that its domains are named inside its parent's."""
    subs = spec.sub_groups or []
    if not subs:
        return None
    pending_of: dict[str, list[Pod]] = {}
    bound_of: dict[str, set[str]] = {}
    instances: dict[str, dict[str, None]] = {}
    loose: list[Pod] = []
    for pods, holding in ((pending, False), (bound, True)):
        for pod in pods:
            labels = (pod.get("metadata") or {}).get("labels") or {}
            member = sub_group_of(labels, subs)
            if member.leaf is None or member.name is None:
                if not holding:
                    loose.append(pod)
                continue
            if member.leaf.match_label_keys:
                instances.setdefault(member.leaf.name, {})[member.name] = None
            if holding:
                bound_of.setdefault(member.name, set()).add(pod_uid(pod))
            else:
                pending_of.setdefault(member.name, []).append(pod)
    children: dict[str | None, list[SubGroup]] = {}
    for sub in subs:
        children.setdefault(sub.parent, []).append(sub)
    placed = {p.name: (p.level, p.domain) for p in (placement and placement.sub_groups) or ()}
    by_name = {sub.name: sub for sub in subs}
    group = spec.topology_constraint

    def build(sub: SubGroup, above: tuple[str, ...]) -> list[SubGroupNode]:
        constraint = constraint_in_effect(sub, by_name, group)
        topology = topology_of(constraint, levels_of, above)
        names = list(instances.get(sub.name, {})) if sub.match_label_keys else [sub.name]
        chain = above if topology is None or topology.problem is not None else topology.chain
        kids = tuple(node for kid in children.get(sub.name, []) for node in build(kid, chain))
        least = sub.min_member
        if least is None:
            needs = sorted(kid.min_member for kid in kids)
            least = sum(needs[: sub.min_sub_group or len(needs)])
        return [
            SubGroupNode(
                name,
                least,
                sub.min_sub_group,
                topology,
                kids,
                tuple(pending_of.get(name, ())),
                frozenset(bound_of.get(name, ())),
                placed.get(name),
            )
            for name in names
        ]

    top = topology_of(group, levels_of)
    chain = () if top is None or top.problem is not None else top.chain
    roots = tuple(node for sub in children.get(None, []) for node in build(sub, chain))
    return SubGroupTree(roots, spec.min_sub_group, tuple(loose))
