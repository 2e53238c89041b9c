"""PodTopologySpread's counts: matching pods per topology domain, for one member at a time.

Domains are the values of the key on nodes that carry every constraint's key and pass the node
inclusion policies (nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore by default), whether
Ready or not, as upstream; matching pods (same namespace, not terminating) are counted per
domain; a node fails `DoNotSchedule` when count + self-match - global minimum exceeds maxSkew,
with the minimum taken as 0 while fewer than minDomains domains exist (`interpod.MemberCheck`
applies it). `SpreadCounts` counts once for a shape and is kept current as members are assumed;
`SpreadState` is one member's view of it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from podgroup_operator.scheduling.filters import (
    HOSTNAME_LABEL,
    Constraints,
    NodeFacts,
    matches_node_selection,
)
from podgroup_operator.scheduling.podinfo import SpreadConstraint
from podgroup_operator.scheduling.scores import MAX_SCORE
from podgroup_operator.scheduling.snapshot import NodeState, Snapshot


@dataclass(slots=True)
class SpreadState:
    """One spread constraint's counts for one member at one moment."""

    constraint: SpreadConstraint
    counts: dict[str, int]
    minimum: int
    self_match: int
    weight: float
    """Soft constraints: log(domains + 2), kube-scheduler's normalising weight per topology."""

    def score(self, value: str) -> float:
        """0..100: 100 in a domain at the minimum count, halving as the skew reaches maxSkew."""
        skew = max(0, self.counts.get(value, 0) - self.minimum)
        max_skew = self.constraint.max_skew
        return MAX_SCORE * max_skew / (max_skew + skew)


def _eligible(
    facts: NodeFacts, constraint: SpreadConstraint, keys: Sequence[str], node: Constraints
) -> bool:
    """Does this node's domain count for the constraint (keys present, inclusion policies)?

    A node that fails here adds none of its pods to any domain. kube-scheduler before v1.24
    counted the pods of every node whose domain existed, even one failing the pod's node
    affinity or lacking another constraint's key (kubernetes#106971, fixed by #107009); this is
    the fixed rule, and the only difference the test against v1.20.2 leaves out
    (tests/integration/test_kube_scheduler_agreement.py)."""
    labels = facts.labels
    for key in keys:
        if key not in labels:
            return False
    if constraint.honor_node_affinity and not matches_node_selection(node, facts):
        return False
    return not (constraint.honor_taints and node.untolerated(facts.taints) is not None)


@dataclass(slots=True, eq=False)
class Eligible:
    """The nodes whose domains count for spread constraints of one set of keys and policy."""

    per_node: bool
    """Eligibility is the node's own (`members` holds names), not its class's (class ids)."""
    members: frozenset[object]
    facts: tuple[NodeFacts, ...]
    """The eligible nodes' (or classes') facts."""
    _domains: dict[str, frozenset[str]] = field(default_factory=dict)

    def domains(self, key: str) -> frozenset[str]:
        """The values of `key` on the eligible nodes: the constraint's domains."""
        values = self._domains.get(key)
        if values is None:
            values = self._domains[key] = frozenset(facts.labels[key] for facts in self.facts)
        return values


def _eligible_nodes(
    snapshot: Snapshot, constraint: SpreadConstraint, keys: tuple[str, ...], node: Constraints
) -> Eligible:
    """The nodes `_eligible` admits for `keys` and the constraint's policy, per epoch.

    Eligibility depends on the keys and the policy, not on which constraint asks: see
    `spread_counts`."""

    def compute() -> Eligible:
        per_node = HOSTNAME_LABEL in keys or (
            constraint.honor_node_affinity and node.uses_node_identity
        )
        if per_node:
            nodes = [
                n for n in snapshot.nodes.values() if _eligible(n.facts, constraint, keys, node)
            ]
            return Eligible(True, frozenset(n.name for n in nodes), tuple(n.facts for n in nodes))
        classes = [
            c
            for c in snapshot.classes.by_id.values()
            if len(c) and _eligible(c.facts, constraint, keys, node)
        ]
        return Eligible(False, frozenset(c.id for c in classes), tuple(c.facts for c in classes))

    policy = (
        node if constraint.honor_node_affinity else None,
        node.tolerations if constraint.honor_taints else None,
    )
    result: Eligible = snapshot.cached(("spread-eligible", keys, policy), compute)
    return result


def spread_counts(
    snapshot: Snapshot,
    spread: Sequence[SpreadConstraint],
    node_constraints: Constraints,
    namespace: str,
) -> list[SpreadCounts]:
    """One `SpreadCounts` per constraint of a member.

    The constraints of one kind (hard or soft) and policy share their eligible nodes, looked up
    once here: a pod may carry thousands of constraints, and each would walk every node class
    for its domains (docs/decisions/010-placement-keeps-what-a-shape-learnt.md)."""
    hard_keys, soft_keys = spread_keys(spread)
    shared: dict[tuple[bool, bool, bool], Eligible] = {}
    counts = []
    for constraint in spread:
        kind = (constraint.hard, constraint.honor_node_affinity, constraint.honor_taints)
        eligible = shared.get(kind)
        if eligible is None:
            keys = hard_keys if constraint.hard else soft_keys
            eligible = shared[kind] = _eligible_nodes(snapshot, constraint, keys, node_constraints)
        counts.append(SpreadCounts(snapshot, constraint, eligible, namespace))
    return counts


class SpreadCounts:
    """One spread constraint's matching pods per domain, counted once for a namespace and then
    kept current as pods are assumed (`add`); `state(labels)` is a member's SpreadState."""

    def __init__(
        self,
        snapshot: Snapshot,
        constraint: SpreadConstraint,
        eligible: Eligible,
        namespace: str,
    ) -> None:
        self.constraint = constraint
        self.namespace = namespace
        self.eligible = eligible
        self.domains = eligible.domains(constraint.topology_key)
        self.counts: dict[str, int] = {}
        nodes = snapshot.nodes
        for entry in snapshot.pod_index.pods_matching(constraint.selector, frozenset({namespace})):
            if not entry.info.terminating:
                self._count(nodes[entry.node])

    def _count(self, state: NodeState) -> None:
        eligible = self.eligible
        if eligible.per_node:
            if state.name not in eligible.members:
                return
        else:
            node_class = state.node_class
            assert node_class is not None
            if node_class.id not in eligible.members:
                return
        value = state.facts.labels[self.constraint.topology_key]
        self.counts[value] = self.counts.get(value, 0) + 1

    def add(self, node: NodeState, namespace: str, labels: Mapping[str, str]) -> None:
        """A pod with `labels` in `namespace` was assumed on `node`: count it if it matches."""
        if namespace == self.namespace and self.constraint.selector.matches(labels):
            self._count(node)

    def state(self, labels: Mapping[str, str]) -> SpreadState:
        constraint, counts, domains = self.constraint, self.counts, self.domains
        if constraint.hard and len(domains) < constraint.min_domains:
            minimum = 0
        elif sum(1 for v in counts if v in domains) < len(domains):
            minimum = 0  # some domain holds no matching pod at all
        else:
            minimum = min((counts[v] for v in domains), default=0)
        return SpreadState(
            constraint,
            counts,
            minimum,
            1 if constraint.selector.matches(labels) else 0,
            math.log(len(domains) + 2),
        )


def spread_keys(
    spread: Sequence[SpreadConstraint],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The topology keys of the hard and of the soft constraints: a node counts for a
    constraint only if it carries every key of its kind (upstream's rule)."""
    hard = tuple(sorted({c.topology_key for c in spread if c.hard}))
    soft = tuple(sorted({c.topology_key for c in spread if not c.hard}))
    return hard, soft
