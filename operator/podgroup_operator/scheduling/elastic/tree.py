"""The quota tree: normalized ElasticQuota specs linked by their parents, with its problems.

`build_tree` never raises: a tree the cluster holds may be incoherent for a while (a parent not
created yet, children whose mins outgrow their parent's), and the scheduler must still decide.
Each incoherence becomes a problem (`path: what is wrong; the fix`) and a conservative reading:
a quota whose parent is missing, ambiguous or in a cycle is a root; a parent's guarantee covers
its children's, so what a child never lends its parent never lends either.

The top-level pool is `capacity` where the caller knows it (the cluster's allocatable), else the
sum of the roots' mins (scheduler-plugins' rule: total use never exceeds the total of min). A
resource no quota names in min or max is not governed by the tree at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from podgroup_operator.api.elastic_quota import Milli, QuotaKey, QuotaRef, QuotaSpec, pod_quota_ref
from podgroup_operator.api.quantity import format_milli


def add(a: Mapping[str, int], b: Mapping[str, int]) -> Milli:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) + amount
    return out


def sub(a: Mapping[str, int], b: Mapping[str, int]) -> Milli:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) - amount
    return out


def pos(a: Mapping[str, int]) -> Milli:
    """The positive part, resources at zero or below dropped."""
    return {name: amount for name, amount in a.items() if amount > 0}


def render(amounts: Mapping[str, int]) -> str:
    return ", ".join(f"{format_milli(v, k)} {k}" for k, v in sorted(amounts.items())) or "nothing"


@dataclass
class QuotaNode:
    """One quota in its tree: its spec, its parent and children, and its effective guarantee."""

    spec: QuotaSpec
    parent: QuotaKey | None = None
    children: list[QuotaKey] = field(default_factory=list)
    guarantee: Milli = field(default_factory=dict)
    """max(own guarantee, sum of the children's): never lent by this quota to its siblings."""

    @property
    def key(self) -> QuotaKey:
        return self.spec.key

    @property
    def min(self) -> Milli:
        return self.spec.min

    def max_of(self, resource: str) -> int | None:
        """The quota's max of a resource; None: unlimited."""
        return self.spec.max.get(resource)


def label(key: QuotaKey) -> str:
    return f"{key[0]}/{key[1]}"


@dataclass
class QuotaTree:
    """Quotas by key, roots in key order, children in key order (so every walk is deterministic)."""

    nodes: dict[QuotaKey, QuotaNode]
    roots: list[QuotaKey]
    capacity: Milli
    """The top-level pool every root shares."""
    governed: frozenset[str]
    """Resources some quota names in min or max; the others are not the tree's business."""
    problems: list[str]

    def path(self, key: QuotaKey) -> list[QuotaKey]:
        """The quota and its ancestors, itself first, its root last."""
        out = [key]
        parent = self.nodes[key].parent
        while parent is not None:
            out.append(parent)
            parent = self.nodes[parent].parent
        return out

    def siblings(self, key: QuotaKey) -> list[QuotaKey]:
        parent = self.nodes[key].parent
        level = self.roots if parent is None else self.nodes[parent].children
        return [other for other in level if other != key]

    def walk(self) -> Iterator[QuotaKey]:
        """Every quota, parents before their children."""
        stack = list(reversed(self.roots))
        while stack:
            key = stack.pop()
            yield key
            stack.extend(reversed(self.nodes[key].children))

    def governs(self, request: Mapping[str, int]) -> Milli:
        """The part of a request the tree governs."""
        return {name: amount for name, amount in request.items() if name in self.governed}

    def resolve(self, ref: QuotaRef, namespace: str) -> QuotaKey | None:
        """The quota a reference names from `namespace`: `namespace/name` exactly; a bare name in
        that namespace first, else the one quota of that name in the cluster (Koordinator's
        names are unique cluster-wide); None when there is none, or several."""
        if ref.namespace is not None:
            key = (ref.namespace, ref.name)
            return key if key in self.nodes else None
        if (namespace, ref.name) in self.nodes:
            return (namespace, ref.name)
        found = [key for key in self.nodes if key[1] == ref.name]
        return found[0] if len(found) == 1 else None

    def quota_of(self, namespace: str, labels: Mapping[str, str] | None) -> QuotaKey | None:
        """The quota a pod (or gang) is charged to: the one its label names, else the one quota of
        its namespace that may hold pods; None: no quota governs it (or the choice is unclear)."""
        return self.quota_for(namespace, pod_quota_ref(labels))

    def quota_for(self, namespace: str, ref: QuotaRef | None) -> QuotaKey | None:
        """The quota a pod of `namespace` naming `ref` is charged to (`member_quota_ref`): the
        one `ref` resolves to, else (`ref` None) its namespace's one quota that may hold pods."""
        if ref is not None:
            return self.resolve(ref, namespace)
        own = [
            key
            for key in self.nodes
            if key[0] == namespace and self.nodes[key].spec.is_parent is not True
        ]
        return own[0] if len(own) == 1 else None


def build_tree(specs: Iterable[QuotaSpec], capacity: Mapping[str, int] | None = None) -> QuotaTree:
    """The tree of these quotas; its `problems` list every incoherence, in a stable order."""
    nodes = {spec.key: QuotaNode(spec) for spec in sorted(specs, key=lambda s: s.key)}
    problems: list[str] = []
    bare: dict[str, list[QuotaKey]] = {}
    for key in nodes:
        bare.setdefault(key[1], []).append(key)
    for key, node in nodes.items():
        ref = node.spec.parent
        if ref is None:
            continue
        parent = _parent_key(ref, key, nodes, bare, problems)
        if parent is not None and nodes[parent].spec.is_parent is False:
            problems.append(
                f"{label(key)} spec.parent: {label(parent)} is marked not a parent "
                f"(is-parent: false); mark it a parent or name another"
            )
        node.parent = parent
    _break_cycles(nodes, problems)
    for key, node in nodes.items():
        if node.parent is not None:
            nodes[node.parent].children.append(key)
    roots = [key for key, node in nodes.items() if node.parent is None]
    for key in reversed(list(_top_down(nodes, roots))):
        _fit_children(nodes[key], nodes, problems)
    governed = frozenset(
        name for node in nodes.values() for name in (*node.spec.min, *node.spec.max)
    )
    pool = dict(capacity) if capacity is not None else {}
    if capacity is None:
        for key in roots:
            pool = add(pool, nodes[key].min)
    return QuotaTree(nodes, roots, pool, governed, problems)


def _parent_key(
    ref: QuotaRef,
    key: QuotaKey,
    nodes: Mapping[QuotaKey, QuotaNode],
    bare: Mapping[str, list[QuotaKey]],
    problems: list[str],
) -> QuotaKey | None:
    if ref.namespace is not None:
        found = [(ref.namespace, ref.name)] if (ref.namespace, ref.name) in nodes else []
    elif (key[0], ref.name) in nodes:
        found = [(key[0], ref.name)]
    else:
        found = bare.get(ref.name, [])
    if len(found) == 1:
        return found[0]
    if found:
        problems.append(
            f"{label(key)} spec.parent: {str(ref)!r} names {len(found)} quotas "
            f"({', '.join(map(label, found))}); write `namespace/name`. Read as a root meanwhile"
        )
    else:
        problems.append(
            f"{label(key)} spec.parent: no quota {str(ref)!r}; create it or fix the name. "
            "Read as a root meanwhile"
        )
    return None


def _break_cycles(nodes: Mapping[QuotaKey, QuotaNode], problems: list[str]) -> None:
    """A quota whose ancestry loops is read as a root (each quota in the loop), with a problem."""
    for key in nodes:
        seen = [key]
        parent = nodes[key].parent
        while parent is not None and parent not in seen:
            seen.append(parent)
            parent = nodes[parent].parent
        if parent is not None:
            cycle = seen[seen.index(parent) :]
            for member in cycle:
                nodes[member].parent = None
            problems.append(
                f"{label(key)} spec.parent: the parents loop ({' -> '.join(map(label, cycle))}"
                f" -> {label(parent)}); give one of them no parent. Read as roots meanwhile"
            )


def _top_down(nodes: Mapping[QuotaKey, QuotaNode], roots: list[QuotaKey]) -> Iterator[QuotaKey]:
    stack = list(reversed(roots))
    while stack:
        key = stack.pop()
        yield key
        stack.extend(reversed(nodes[key].children))


def _fit_children(
    node: QuotaNode, nodes: Mapping[QuotaKey, QuotaNode], problems: list[str]
) -> None:
    """Children bottom-up are done: the node's guarantee covers theirs; their mins and
    guarantees must fit in its min."""
    node.guarantee = dict(node.spec.guarantee)
    mins: Milli = {}
    kept: Milli = {}
    for child in node.children:
        mins = add(mins, nodes[child].min)
        kept = add(kept, nodes[child].guarantee)
    for name, amount in kept.items():
        node.guarantee[name] = max(node.guarantee.get(name, 0), amount)
    for what, total in (("min", mins), ("guarantee", kept)):
        over = pos(sub(total, node.min))
        if over:
            problems.append(
                f"{label(node.key)} spec.min: its children's {what}s add up to {render(total)}, "
                f"{render(over)} more than its min {render(node.min)}; raise its min or lower "
                f"theirs"
            )
