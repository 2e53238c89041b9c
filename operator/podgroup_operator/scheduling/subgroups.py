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
    TopologyPlacement,
    constraint_in_effect,
)
from podgroup_operator.api.subgroups import TreeNode, build_tree, pod_labels
from podgroup_operator.scheduling.gang import SubGroupNode, SubGroupTree
from podgroup_operator.scheduling.topology import TopologyRequest, topology_of

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
    (`api.subgroups.build_tree`, the tree the status and the restart policy read: a template
    leaf has one node per instance its members form), or None without sub-groups.
    Members whose label names no leaf count as members of no sub-group; `placement` is the
    group's `status.placement`, whose sub-group domains are tried first again.

    Each sub-group's constraint is read in the Topology it uses (`models.constraint_in_effect`:
    its own, else its ancestors', else the group's); one in no Topology has its levels under
    its ancestors' chain, so that its domains are named inside its parent's."""
    subs = spec.sub_groups or []
    if not subs:
        return None
    held = {id(pod) for pod in bound}
    tree = build_tree(subs, [*pending, *bound], pod_labels)
    placed = {p.name: (p.level, p.domain) for p in (placement and placement.sub_groups) or ()}
    by_name = {sub.name: sub for sub in subs}
    group = spec.topology_constraint
    resolved: dict[str, tuple[TopologyRequest | None, tuple[str, ...]]] = {}

    def build(node: TreeNode[Pod], above: tuple[str, ...]) -> SubGroupNode:
        sub = node.spec
        found = resolved.get(sub.name)
        if found is None:  # once per spec entry: a template's instances share it
            topology = topology_of(constraint_in_effect(sub, by_name, group), levels_of, above)
            chain = above if topology is None or topology.problem is not None else topology.chain
            found = resolved[sub.name] = (topology, chain)
        topology, chain = found
        return SubGroupNode(
            node.name,
            node.min_member,
            sub.min_sub_group,
            topology,
            tuple(build(kid, chain) for kid in node.children),
            tuple(pod for pod in node.members if id(pod) not in held),
            frozenset(pod_uid(pod) for pod in node.members if id(pod) in held),
            placed.get(node.name),
        )

    top = topology_of(group, levels_of)
    chain = () if top is None or top.problem is not None else top.chain
    roots = tuple(build(node, chain) for node in tree.roots)
    loose = tuple(pod for pod in tree.loose if id(pod) not in held)
    return SubGroupTree(roots, spec.min_sub_group, loose)
