"""The scheduler's picture of the cluster: nodes, what is bound to them, and what is left.

Gang placement is a what-if question ("would all of these fit at once?"), so it runs on a
snapshot that can be changed tentatively and changed back: `assume()` books pods onto nodes and
returns an undo callable, as Kueue's `SimulateWorkloadRemoval` returns a func that reverts it.
Committing is simply not calling the undo. The live scheduler keeps one snapshot current from
watch events, so every event (`add_pod`, `remove_pod`, `add_node`, ...) costs O(resources) plus
an O(log n) re-sort of one node, never a rebuild.

Every pod that holds a node counts, whoever scheduled it: a pod with `spec.nodeName` whose phase
is not Succeeded/Failed. Pods bound to a node the snapshot has not seen yet are remembered and
counted when the node arrives (watch streams do not order Node and Pod events).

Nodes with identical labels (ignoring the per-node hostname), taints, cordon flag and readiness
form a `NodeClass`; a static filter verdict computed for one member holds for all of them, and
each class keeps its nodes sorted fullest-first, which is the order best-fit packing walks.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from podgroup_operator.constants import PodPhase
from podgroup_operator.scheduling.filters import (
    HOSTNAME_LABEL,
    Constraints,
    NodeFacts,
    Taint,
    Verdict,
    check_node,
    node_facts,
)
from podgroup_operator.scheduling.resources import Resources, node_allocatable, pod_requests

Undo = Callable[[], None]
"""Reverts an assumption; calling it twice, or after the pods really bound, is harmless."""

_TERMINAL = (PodPhase.SUCCEEDED.value, PodPhase.FAILED.value)
_VERDICT_CACHE_LIMIT = 4096


def _noop() -> None:
    return None


NO_UNDO: Undo = _noop


def pod_uid(pod: Mapping[str, Any]) -> str:
    """The pod's UID, or namespace/name for hand-built pods without one."""
    meta = pod.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace', 'default')}/{meta.get('name', '')}")


def holds_node(pod: Mapping[str, Any]) -> bool:
    """True when the pod occupies capacity: bound to a node and not terminated."""
    node = (pod.get("spec") or {}).get("nodeName")
    phase = (pod.get("status") or {}).get("phase")
    return bool(node) and phase not in _TERMINAL


class ClassKey(NamedTuple):
    labels: tuple[tuple[str, str], ...]
    taints: tuple[Taint, ...]
    unschedulable: bool
    ready: bool


def _class_key(facts: NodeFacts) -> ClassKey:
    labels = tuple(sorted((k, v) for k, v in facts.labels.items() if k != HOSTNAME_LABEL))
    return ClassKey(labels, facts.taints, facts.unschedulable, facts.ready)


class NodeClass:
    """Nodes the static filters cannot tell apart; `order` is (score, name), fullest first."""

    __slots__ = ("facts", "id", "key", "order")

    def __init__(self, class_id: int, key: ClassKey, facts: NodeFacts) -> None:
        self.id = class_id
        self.key = key
        # A representative without a name: verdicts on it must not depend on identity.
        self.facts = NodeFacts("", dict(key.labels), key.taints, key.unschedulable, key.ready)
        self.order: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self.order)


class NodeState:
    """One node: allocatable, requested and free amounts (milli-units) and its sort score."""

    __slots__ = ("allocatable", "facts", "free", "name", "node_class", "pods", "requested", "score")

    def __init__(self, name: str, facts: NodeFacts, allocatable: Resources) -> None:
        self.name = name
        self.facts = facts
        self.allocatable = allocatable
        self.requested: Resources = {}
        self.free: Resources = dict(allocatable)
        self.pods: set[str] = set()
        self.score = 1.0
        self.node_class: NodeClass | None = None

    @property
    def usable(self) -> bool:
        """Counts toward the cluster's free capacity (minResources is checked against it)."""
        return self.facts.ready and not self.facts.unschedulable

    def compute_score(self) -> float:
        """Free share of the scarcest resource: 0.0 is full, 1.0 is empty; lower packs first."""
        score = 1.0
        free = self.free
        for name, amount in self.allocatable.items():
            share = free.get(name, 0) / amount
            score = min(score, share)
        return score


class Feasibility(NamedTuple):
    """Which nodes pass the static filters for one set of constraints.

    `classes` are the classes with candidates; `allowed` further restricts to named nodes when
    the constraints refer to node identity (hostname label or matchFields), else it is None.
    `class_verdicts` and `node_verdicts` keep the rejections so refusals can count them.
    """

    classes: tuple[NodeClass, ...]
    allowed: frozenset[str] | None
    class_verdicts: Mapping[int, Verdict | None]
    node_verdicts: Mapping[str, Verdict | None] | None


class Snapshot:
    """Nodes and bound pods, with free capacity kept current incrementally."""

    def __init__(self) -> None:
        self._nodes: dict[str, NodeState] = {}
        self._pods: dict[str, tuple[str, Resources]] = {}
        self._assumed: set[str] = set()
        self._orphans: dict[str, set[str]] = {}
        self._classes: dict[ClassKey, NodeClass] = {}
        self._classes_by_id: dict[int, NodeClass] = {}
        self._next_class_id = 0
        self._class_epoch = 0
        self._node_epoch = 0
        self._total_free: Resources = {}
        self._order: list[tuple[float, str]] = []
        """Every node as (score, name), fullest first; each class keeps its own slice too."""
        self._verdicts: dict[Constraints, tuple[int, dict[int, Verdict | None]]] = {}
        self._identity_verdicts: dict[Constraints, tuple[int, dict[str, Verdict | None]]] = {}

    @classmethod
    def build(
        cls, nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]
    ) -> Snapshot:
        """A snapshot of raw Node dicts and raw Pod dicts (bound pods count, others are ignored)."""
        snapshot = cls()
        for node in nodes:
            snapshot.add_node(node)
        for pod in pods:
            snapshot.add_pod(pod)
        return snapshot

    # --- queries ---------------------------------------------------------------------------------
    @property
    def nodes(self) -> Mapping[str, NodeState]:
        return self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def free(self, node: str) -> Resources:
        """A copy of the node's free amounts."""
        return dict(self._nodes[node].free)

    def total_free(self) -> Resources:
        """Free capacity summed over Ready, schedulable nodes."""
        return dict(self._total_free)

    def usable_nodes(self) -> int:
        return sum(1 for n in self._nodes.values() if n.usable)

    def pod_node(self, uid: str) -> str | None:
        entry = self._pods.get(uid)
        return entry[0] if entry else None

    def pod_request(self, uid: str) -> Resources | None:
        entry = self._pods.get(uid)
        return dict(entry[1]) if entry else None

    def is_assumed(self, uid: str) -> bool:
        return uid in self._assumed

    def state(self) -> tuple[tuple[str, tuple[tuple[str, int], ...], float], ...]:
        """Every node's free vector and score, for comparing snapshots (tests, debugging)."""
        return tuple(
            (name, tuple(sorted(node.free.items())), node.score)
            for name, node in sorted(self._nodes.items())
        )

    # --- node events -----------------------------------------------------------------------------
    def add_node(self, node: Mapping[str, Any]) -> None:
        """Add or replace a node from its raw dict; bound pods keep counting against it."""
        facts = node_facts(node)
        allocatable = node_allocatable(node)
        old = self._nodes.get(facts.name)
        if old is not None:
            self._update_node(old, facts, allocatable)
            return
        state = NodeState(facts.name, facts, allocatable)
        self._nodes[facts.name] = state
        for uid in self._orphans.pop(facts.name, ()):
            request = self._pods[uid][1]
            state.pods.add(uid)
            for name, amount in request.items():
                state.requested[name] = state.requested.get(name, 0) + amount
        state.free = {n: a - state.requested.get(n, 0) for n, a in allocatable.items()}
        state.score = state.compute_score()
        self._node_epoch += 1
        self._join_class(state)
        self._count_total(state, +1)

    update_node = add_node

    def remove_node(self, name: str) -> None:
        """Forget a node; its pods wait (uncounted) in case the node comes back."""
        state = self._nodes.pop(name, None)
        if state is None:
            return
        self._count_total(state, -1)
        self._leave_class(state)
        if state.pods:
            self._orphans.setdefault(name, set()).update(state.pods)
        self._node_epoch += 1

    def _update_node(self, state: NodeState, facts: NodeFacts, allocatable: Resources) -> None:
        self._count_total(state, -1)
        static_changed = facts != state.facts
        if static_changed:
            self._leave_class(state)
            self._node_epoch += 1
        else:
            self._unindex(state)
        state.facts = facts
        state.allocatable = allocatable
        state.free = {n: a - state.requested.get(n, 0) for n, a in allocatable.items()}
        state.score = state.compute_score()
        if static_changed:
            self._join_class(state)
        else:
            self._index(state)
        self._count_total(state, +1)

    # --- pod events ------------------------------------------------------------------------------
    def add_pod(self, pod: Mapping[str, Any]) -> None:
        """Add or replace a pod from its raw dict; unbound or finished pods are dropped.

        A pod that arrives bound replaces an assumption of the same UID, as kube-scheduler's
        cache confirms an assumed pod when the informer delivers it.
        """
        uid = pod_uid(pod)
        if uid in self._pods:
            self._forget(uid)
        if not holds_node(pod):
            return
        self._book(uid, str(pod["spec"]["nodeName"]), pod_requests(pod))

    update_pod = add_pod

    def remove_pod(self, pod: Mapping[str, Any] | str) -> None:
        """Release what a pod held; accepts the raw pod or its UID."""
        uid = pod if isinstance(pod, str) else pod_uid(pod)
        if uid in self._pods:
            self._forget(uid)

    def update(self, obj: Mapping[str, Any]) -> None:
        """Apply a raw Pod or Node by its `kind` (watch events carry it; list items may not)."""
        kind = obj.get("kind")
        if kind == "Pod":
            self.add_pod(obj)
        elif kind == "Node":
            self.add_node(obj)
        else:
            raise ValueError(
                f"cannot tell a Pod from a Node: kind is {kind!r}; call add_pod/add_node"
            )

    # --- assumptions -----------------------------------------------------------------------------
    def assume(self, bindings: Sequence[tuple[str, str, Resources]]) -> Undo:
        """Book (pod uid, node name, request) triples and return the callable that unbooks them.

        Pods on the same node are booked in one step, so a 1,000-pod gang re-sorts each node
        once. Unknown nodes (KeyError) and duplicate UIDs (ValueError) are refused before
        anything changes.
        """
        uids = [uid for uid, _, _ in bindings]
        if len(set(uids)) != len(uids):
            raise ValueError("a pod can be assumed onto one node only; got duplicate pod UIDs")
        missing = {node for _, node, _ in bindings if node not in self._nodes}
        if missing:
            raise KeyError(f"cannot assume pods onto unknown node(s) {sorted(missing)}")
        by_node: dict[str, list[tuple[str, Resources]]] = {}
        for uid, node, request in bindings:
            if uid in self._pods:
                self._forget(uid)
            by_node.setdefault(node, []).append((uid, request))
        booked: list[str] = []
        for node, pods in by_node.items():
            self._book_many(node, pods)
            booked.extend(uid for uid, _ in pods)
        self._assumed.update(booked)

        def undo() -> None:
            for uid in booked:
                if uid in self._assumed:
                    self._forget(uid)

        return undo

    # --- static filters --------------------------------------------------------------------------
    def feasibility(self, constraints: Constraints) -> Feasibility:
        """Static filter verdicts for `constraints`, cached per class until classes change."""
        verdicts = self._class_verdicts(constraints)
        if not constraints.uses_node_identity:
            classes = tuple(self._classes_by_id[cid] for cid, v in verdicts.items() if v is None)
            return Feasibility(classes, None, verdicts, None)
        node_verdicts = self._node_verdicts(constraints)
        allowed = frozenset(name for name, v in node_verdicts.items() if v is None)
        classes = tuple(
            c for c in self._classes_by_id.values() if any(name in allowed for _, name in c.order)
        )
        return Feasibility(classes, allowed, verdicts, node_verdicts)

    def exclusions(self, feasibility: Feasibility) -> Counter[Verdict]:
        """How many nodes each static filter rejected (for refusal messages)."""
        counts: Counter[Verdict] = Counter()
        if feasibility.node_verdicts is not None:
            for verdict in feasibility.node_verdicts.values():
                if verdict is not None:
                    counts[verdict] += 1
            return counts
        for cid, verdict in feasibility.class_verdicts.items():
            if verdict is not None and cid in self._classes_by_id:
                counts[verdict] += len(self._classes_by_id[cid])
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
        # Several classes: walk the global order and skip other classes' nodes; a membership
        # test per node is cheaper than merging the classes' lists.
        wanted = {c.id for c in feasibility.classes}
        for _, name in self._order:
            node = nodes[name]
            assert node.node_class is not None
            if node.node_class.id in wanted and (allowed is None or name in allowed):
                yield node

    def _class_verdicts(self, constraints: Constraints) -> dict[int, Verdict | None]:
        cached = self._verdicts.get(constraints)
        if cached is not None and cached[0] == self._class_epoch:
            return cached[1]
        verdicts: dict[int, Verdict | None] = {}
        previous = cached[1] if cached is not None else {}
        for cid, node_class in self._classes_by_id.items():
            verdicts[cid] = (
                previous[cid] if cid in previous else check_node(constraints, node_class.facts)
            )
        if len(self._verdicts) >= _VERDICT_CACHE_LIMIT:
            self._verdicts.clear()
        self._verdicts[constraints] = (self._class_epoch, verdicts)
        return verdicts

    def _node_verdicts(self, constraints: Constraints) -> dict[str, Verdict | None]:
        cached = self._identity_verdicts.get(constraints)
        if cached is not None and cached[0] == self._node_epoch:
            return cached[1]
        verdicts = {name: check_node(constraints, n.facts) for name, n in self._nodes.items()}
        if len(self._identity_verdicts) >= _VERDICT_CACHE_LIMIT:
            self._identity_verdicts.clear()
        self._identity_verdicts[constraints] = (self._node_epoch, verdicts)
        return verdicts

    # --- bookkeeping -----------------------------------------------------------------------------
    def _book(self, uid: str, node_name: str, request: Resources) -> None:
        self._pods[uid] = (node_name, request)
        state = self._nodes.get(node_name)
        if state is None:
            self._orphans.setdefault(node_name, set()).add(uid)
            return
        self._apply(state, [(uid, request)], +1)

    def _book_many(self, node_name: str, pods: list[tuple[str, Resources]]) -> None:
        for uid, request in pods:
            self._pods[uid] = (node_name, request)
        self._apply(self._nodes[node_name], pods, +1)

    def _forget(self, uid: str) -> None:
        node_name, request = self._pods.pop(uid)
        self._assumed.discard(uid)
        state = self._nodes.get(node_name)
        if state is None:
            orphans = self._orphans.get(node_name)
            if orphans is not None:
                orphans.discard(uid)
                if not orphans:
                    del self._orphans[node_name]
            return
        self._apply(state, [(uid, request)], -1)

    def _apply(self, state: NodeState, pods: list[tuple[str, Resources]], sign: int) -> None:
        """Add (+1) or remove (-1) pods' requests on a node, keeping totals and order current."""
        total: Resources = {}
        for uid, request in pods:
            if sign > 0:
                state.pods.add(uid)
            else:
                state.pods.discard(uid)
            for name, amount in request.items():
                total[name] = total.get(name, 0) + amount
        requested, free, allocatable = state.requested, state.free, state.allocatable
        usable = state.usable
        cluster = self._total_free
        for name, amount in total.items():
            delta = sign * amount
            left = requested.get(name, 0) + delta
            if left:
                requested[name] = left
            else:
                requested.pop(name, None)
            if name in allocatable:
                free[name] -= delta
                if usable:
                    cluster[name] = cluster.get(name, 0) - delta
        self._unindex(state)
        state.score = state.compute_score()
        self._index(state)

    def _count_total(self, state: NodeState, sign: int) -> None:
        if not state.usable:
            return
        cluster = self._total_free
        for name, amount in state.free.items():
            cluster[name] = cluster.get(name, 0) + sign * amount

    def _index(self, state: NodeState) -> None:
        assert state.node_class is not None
        entry = (state.score, state.name)
        insort(state.node_class.order, entry)
        insort(self._order, entry)

    def _unindex(self, state: NodeState) -> None:
        assert state.node_class is not None
        entry = (state.score, state.name)
        for order in (state.node_class.order, self._order):
            del order[bisect_left(order, entry)]

    def _join_class(self, state: NodeState) -> None:
        key = _class_key(state.facts)
        node_class = self._classes.get(key)
        if node_class is None:
            node_class = NodeClass(self._next_class_id, key, state.facts)
            self._next_class_id += 1
            self._classes[key] = node_class
            self._classes_by_id[node_class.id] = node_class
            self._class_epoch += 1
        state.node_class = node_class
        self._index(state)

    def _leave_class(self, state: NodeState) -> None:
        node_class = state.node_class
        assert node_class is not None
        self._unindex(state)
        state.node_class = None
        if not node_class.order:
            del self._classes[node_class.key]
            del self._classes_by_id[node_class.id]
            self._class_epoch += 1
