"""The snapshot's node classes: nodes the static filters cannot tell apart, with their free sums.

Nodes with identical labels (ignoring the per-node hostname), taints, cordon flag and readiness
form a `NodeClass`; a static filter verdict computed for one member holds for all of them, so
`feasibility` checks each class once and caches the verdicts until a class appears or goes.
Each class keeps its nodes sorted fullest-first, which is the order best-fit packing walks, and
`NodeClasses` keeps every node in that order too (`best_fit_order` merges or filters it).

The `Snapshot` owns one `NodeClasses` (`snapshot.classes`) and moves a node in or out of its
class whenever the node's facts or free amounts change; rules only read it.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from podgroup_operator.scheduling.filters import Constraints, Rejection, check_node
from podgroup_operator.scheduling.snapshot_nodes import (
    ClassKey,
    NodeClass,
    NodeState,
    class_key,
)

VERDICT_CACHE_LIMIT = 4096
"""Entries a verdict or derived-value cache keeps before it is emptied."""


def memoized(
    cache: dict[Any, tuple[int, Any]], epoch: int, key: Any, compute: Callable[[], Any]
) -> Any:
    """`compute()` once per `epoch` for `key`, kept in `cache` (emptied past its limit)."""
    hit = cache.get(key)
    if hit is not None and hit[0] == epoch:
        return hit[1]
    if len(cache) >= VERDICT_CACHE_LIMIT:
        cache.clear()
    value = compute()
    cache[key] = (epoch, value)
    return value


class Feasibility(NamedTuple):
    """Which nodes pass the static filters for one set of constraints.

    `classes` are the classes with candidates; `allowed` further restricts to named nodes when
    the constraints refer to node identity (hostname label or matchFields), else it is None.
    `class_verdicts` and `node_verdicts` keep the rejections so refusals can count them.
    """

    classes: tuple[NodeClass, ...]
    allowed: frozenset[str] | None
    class_verdicts: Mapping[int, Rejection | None]
    node_verdicts: Mapping[str, Rejection | None] | None


class NodeClasses:
    """The classes of the snapshot's nodes, by id (`by_id`), and every node's place in the
    fullest-first order; the static filters' verdicts on them, cached per epoch.

    `nodes` is the snapshot's own node store (read, never changed here)."""

    def __init__(self, nodes: Mapping[str, NodeState]) -> None:
        self._nodes = nodes
        self._by_key: dict[ClassKey, NodeClass] = {}
        self.by_id: dict[int, NodeClass] = {}
        """Every class with at least one node, by `NodeClass.id`."""
        self._next_id = 0
        self.epoch = 0
        """Changes whenever a class appears or goes: class verdicts cached before are stale."""
        self.node_epoch = 0
        """Changes whenever a node joins or leaves a class: it appeared, went, or changed
        labels, taints or conditions."""
        self._order: list[tuple[float, str]] = []
        """Every node as (score, name), fullest first; each class keeps its own slice too."""
        self._verdicts: dict[Constraints, tuple[int, dict[int, Rejection | None]]] = {}
        self._identity_verdicts: dict[Constraints, tuple[int, dict[str, Rejection | None]]] = {}

    def __len__(self) -> int:
        return len(self.by_id)

    # --- membership (the Snapshot calls these) ---------------------------------------------------
    def join(self, state: NodeState) -> None:
        """Put a node (its free amounts and score set) into the class of its facts."""
        key = class_key(state.facts)
        node_class = self._by_key.get(key)
        if node_class is None:
            node_class = NodeClass(self._next_id, key, state.facts)
            self._next_id += 1
            self._by_key[key] = node_class
            self.by_id[node_class.id] = node_class
            self.epoch += 1
        state.node_class = node_class
        node_class.count(state.free, +1)
        self.index(state)
        self.node_epoch += 1

    def leave(self, state: NodeState) -> None:
        """Take a node out of its class (before its facts change or it goes)."""
        node_class = state.node_class
        assert node_class is not None
        self.unindex(state)
        node_class.count(state.free, -1)
        state.node_class = None
        if not node_class.order:
            del self._by_key[node_class.key]
            del self.by_id[node_class.id]
            self.epoch += 1
        self.node_epoch += 1

    def index(self, state: NodeState) -> None:
        """Insert a node at its score in its class's order and in the global order."""
        assert state.node_class is not None
        entry = (state.score, state.name)
        insort(state.node_class.order, entry)
        insort(self._order, entry)

    def unindex(self, state: NodeState) -> None:
        """Take a node out of both orders, at the score it was inserted with."""
        assert state.node_class is not None
        entry = (state.score, state.name)
        for order in (state.node_class.order, self._order):
            del order[bisect_left(order, entry)]

    # --- static filters --------------------------------------------------------------------------
    def feasibility(self, constraints: Constraints) -> Feasibility:
        """Static filter verdicts for `constraints`, cached per class until classes change."""
        verdicts = self._class_verdicts(constraints)
        if not constraints.uses_node_identity:
            classes = tuple(self.by_id[cid] for cid, v in verdicts.items() if v is None)
            return Feasibility(classes, None, verdicts, None)
        node_verdicts = self._node_verdicts(constraints)
        allowed = frozenset(name for name, v in node_verdicts.items() if v is None)
        classes = tuple(
            c for c in self.by_id.values() if any(name in allowed for _, name in c.order)
        )
        return Feasibility(classes, allowed, verdicts, node_verdicts)

    def every_node(self) -> Feasibility:
        """Every node, as if no filter rejected any (to count what a cluster has)."""
        return Feasibility(tuple(self.by_id.values()), None, {}, None)

    def exclusions(self, feasibility: Feasibility) -> Counter[Rejection]:
        """How many nodes each static filter rejected (for refusal messages)."""
        counts: Counter[Rejection] = Counter()
        if feasibility.node_verdicts is not None:
            for verdict in feasibility.node_verdicts.values():
                if verdict is not None:
                    counts[verdict] += 1
            return counts
        for cid, verdict in feasibility.class_verdicts.items():
            if verdict is not None and cid in self.by_id:
                counts[verdict] += len(self.by_id[cid])
        return counts

    def best_fit_order(self, feasibility: Feasibility) -> Iterator[NodeState]:
        """Feasible nodes, fullest first, ties by name. Do not assume() while iterating."""
        nodes = self._nodes
        allowed = feasibility.allowed
        if len(feasibility.classes) == 1:
            for _, name in feasibility.classes[0].order:
                if allowed is None or name in allowed:
                    yield nodes[name]
            return
        # Several classes holding a small part of the cluster: merge their own orders.
        # Otherwise walk the global order and skip other classes' nodes; a membership test per
        # node is cheaper than merging when most nodes are wanted anyway.
        if sum(len(c) for c in feasibility.classes) * 4 < len(self._order):
            for _, name in heapq.merge(*(c.order for c in feasibility.classes)):
                if allowed is None or name in allowed:
                    yield nodes[name]
            return
        wanted = {c.id for c in feasibility.classes}
        for _, name in self._order:
            node = nodes[name]
            assert node.node_class is not None
            if node.node_class.id in wanted and (allowed is None or name in allowed):
                yield node

    def _class_verdicts(self, constraints: Constraints) -> dict[int, Rejection | None]:
        cached = self._verdicts.get(constraints)
        if cached is not None and cached[0] == self.epoch:
            return cached[1]
        verdicts: dict[int, Rejection | None] = {}
        previous = cached[1] if cached is not None else {}
        for cid, node_class in self.by_id.items():
            verdicts[cid] = (
                previous[cid] if cid in previous else check_node(constraints, node_class.facts)
            )
        if len(self._verdicts) >= VERDICT_CACHE_LIMIT:
            self._verdicts.clear()
        self._verdicts[constraints] = (self.epoch, verdicts)
        return verdicts

    def _node_verdicts(self, constraints: Constraints) -> dict[str, Rejection | None]:
        cached = self._identity_verdicts.get(constraints)
        if cached is not None and cached[0] == self.node_epoch:
            return cached[1]
        verdicts = {name: check_node(constraints, n.facts) for name, n in self._nodes.items()}
        if len(self._identity_verdicts) >= VERDICT_CACHE_LIMIT:
            self._identity_verdicts.clear()
        self._identity_verdicts[constraints] = (self.node_epoch, verdicts)
        return verdicts
