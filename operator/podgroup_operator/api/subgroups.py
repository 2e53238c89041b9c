"""The sub-group tree of a PodGroup, built once for every reader: the status, the restart
policy, preemption and the scheduler.

Which sub-group a pod belongs to: a pod labelled `scheduling.x-k8s.io/sub-group: NAME` joins
the leaf NAME (a template leaf: its instance for the pod's values). A pod without the label
joins the first template leaf (one with `matchLabelKeys`) whose keys it carries every one of,
in the instance named `NAME-VALUES`. A pod with neither whose Volcano task label
`volcano.sh/task-spec` names a leaf joins it (a Volcano `minTaskMember` is one leaf per task,
domain/dialects.py). Any other pod is a member of the group outside every sub-group.

Each template instance is a sub-group of its own (`build_tree`): a parent without minMember
needs what its counted children need, summed over the instances its members form, and
minSubGroup counts instances. `least_members` is the one rule for a node's minimum
(docs/decisions/022-one-sub-group-tree.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from podgroup_operator.api.models import SubGroup, ancestors
from podgroup_operator.constants import LABEL_SUB_GROUP, LABEL_VOLCANO_TASK_SPEC

__all__ = [
    "Membership",
    "Tree",
    "TreeNode",
    "build_tree",
    "group_minimum_holds",
    "instance_name",
    "least_members",
    "leaves",
    "pod_labels",
    "spec_tree",
    "sub_group_of",
    "top_part",
]

M = TypeVar("M")


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
    return _member(labels, leaves(sub_groups))


def _member(labels: Mapping[str, str], by_leaf: Mapping[str, SubGroup]) -> Membership:
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
    task = labels.get(LABEL_VOLCANO_TASK_SPEC)
    if task is not None:
        leaf = by_leaf.get(task)
        if leaf is not None and not leaf.match_label_keys:
            return Membership(leaf, leaf.name)
    return OUTSIDE


def top_part(labels: Mapping[str, str], sub_groups: Sequence[SubGroup]) -> str | None:
    """The direct part of the group that a pod with these labels counts in: its leaf's top
    ancestor, or the leaf's own name (a template's instance) when the leaf is itself a direct
    part; None outside every sub-group. `minSubGroup` on the group counts these parts, as
    `build_tree`'s roots."""
    member = sub_group_of(labels, sub_groups)
    if member.leaf is None:
        return None
    above = list(ancestors(member.leaf, {sub.name: sub for sub in sub_groups}))
    return above[-1].name if above else member.name


def least_members(min_member: int | None, min_sub_group: int | None, needs: Iterable[int]) -> int:
    """The fewest members that satisfy a sub-group: its minMember, else what its counted
    children need (the `min_sub_group` smallest of their minimums, or all of them)."""
    if min_member is not None:
        return min_member
    ordered = sorted(needs)
    return sum(ordered[: min_sub_group or len(ordered)])


@dataclass(frozen=True, eq=False)
class TreeNode(Generic[M]):
    """One sub-group: a spec entry (`spec`), or one instance of a template leaf (`name` is
    then NAME-VALUES), with its minimum (`least_members` over `children`), its minSubGroup,
    and the members that joined it (a leaf's; a parent has none of its own, and its
    `subtree_members` are its children's)."""

    spec: SubGroup
    name: str
    min_member: int
    children: tuple[TreeNode[M], ...] = ()
    members: tuple[M, ...] = ()
    leaf: bool = True
    """The spec entry has no children (a parent whose template children formed no instance
    is still no leaf)."""

    @property
    def min_sub_group(self) -> int | None:
        return self.spec.min_sub_group

    @property
    def top(self) -> bool:
        """A direct part of the group."""
        return self.spec.parent is None

    def subtree_members(self) -> list[M]:
        return [*self.members, *(m for kid in self.children for m in kid.subtree_members())]


@dataclass(frozen=True)
class Tree(Generic[M]):
    """A group's sub-groups with its members in them: the direct parts (`roots`), the members
    in no sub-group (`loose`, a label naming no leaf included), and each spec entry's nodes
    (`by_spec`: one, or a template's instances in the order their members came)."""

    roots: tuple[TreeNode[M], ...]
    loose: tuple[M, ...]
    by_spec: Mapping[str, tuple[TreeNode[M], ...]]

    def nodes(self) -> Iterator[TreeNode[M]]:
        """Every node, each parent before its children."""
        stack = list(reversed(self.roots))
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))


def pod_labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    """A pod body's labels."""
    return (pod.get("metadata") or {}).get("labels") or {}


def build_tree(
    sub_groups: Sequence[SubGroup],
    members: Iterable[M],
    labels_of: Callable[[M], Mapping[str, str]],
) -> Tree[M]:
    """The tree of `sub_groups` with `members` in their leaves (`sub_group_of`): a template
    leaf has one node per instance its members form, in the order they first came; a parent
    one node, whose minimum sums its counted children's over those instances.

    Built down from the direct parts, so an entry in a cycle or under an unknown parent
    (refused by validation) is in no node."""
    by_leaf = leaves(sub_groups)
    own: dict[str, list[M]] = {}
    instances: dict[str, dict[str, None]] = {}
    loose: list[M] = []
    for member in members:
        place = _member(labels_of(member), by_leaf)
        if place.leaf is None or place.name is None:
            loose.append(member)
            continue
        own.setdefault(place.name, []).append(member)
        if place.leaf.match_label_keys:
            instances.setdefault(place.leaf.name, {})[place.name] = None
    return _grow(sub_groups, lambda sub: list(instances.get(sub.name, {})), own, tuple(loose))


def spec_tree(sub_groups: Sequence[SubGroup]) -> Tree[Any]:
    """The tree the spec alone sets, each template leaf standing for one instance named as
    itself: what the tree needs when each template forms one sub-group. Admission checks
    parents' minMember against it, since it cannot know how many instances will form."""
    return _grow(sub_groups, lambda sub: [sub.name], {}, ())


def _grow(
    sub_groups: Sequence[SubGroup],
    names_of: Callable[[SubGroup], list[str]],
    own: Mapping[str, list[M]],
    loose: tuple[M, ...],
) -> Tree[M]:
    children: dict[str | None, list[SubGroup]] = {}
    for sub in sub_groups:
        children.setdefault(sub.parent, []).append(sub)
    by_spec: dict[str, tuple[TreeNode[M], ...]] = {}

    def grow(sub: SubGroup) -> tuple[TreeNode[M], ...]:
        if sub.name in by_spec:
            return ()  # a repeated name (refused by validation): its first entry only
        by_spec[sub.name] = ()
        specs = children.get(sub.name, [])
        kids = tuple(node for kid in specs for node in grow(kid))
        least = least_members(sub.min_member, sub.min_sub_group, (k.min_member for k in kids))
        names = names_of(sub) if sub.match_label_keys else [sub.name]
        nodes = tuple(
            TreeNode(sub, name, least, kids, tuple(own.get(name, ())), not specs) for name in names
        )
        by_spec[sub.name] = nodes
        return nodes

    roots = tuple(node for sub in children.get(None, []) for node in grow(sub))
    return Tree(roots, loose, by_spec)


def group_minimum_holds(
    min_member: int, min_sub_group: int | None, *, live: int, parts: int, whole: int
) -> bool:
    """Whether a group's own minimum holds while some of its sub-groups are being repaired:
    `live` members count toward minMember, and `whole` of its `parts` direct parts (those
    holding no broken sub-group) toward minSubGroup, which means every part when unset.

    One rule for the restart policy (a broken sub-group is repaired alone only while this
    holds) and the preemption planner (a sub-group is taken alone only while it would)."""
    return live >= min_member and whole >= (min_sub_group or parts)
