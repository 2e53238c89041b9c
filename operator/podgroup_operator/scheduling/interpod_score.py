"""InterPodAffinity's score: preferred pod (anti-)affinity, summed per topology domain.

Each preferred affinity term adds its weight, and each preferred anti-affinity term takes it
away, for every pod it selects, in that pod's domain; so do running pods' preferred terms (and
their required affinity, at hardPodAffinityWeight 1) that select the newcomer, in their own
domain. A node scores the sum over its domains, scaled to 0..100 between the lowest and highest
sums a node could have (upstream scales between the lowest and highest node of the cycle: the
order of the nodes is the same).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from podgroup_operator.scheduling.filters import HOSTNAME_LABEL
from podgroup_operator.scheduling.scores import MAX_SCORE
from podgroup_operator.scheduling.selectors import WeightedTerm
from podgroup_operator.scheduling.snapshot import Snapshot


class PreferredCounts:
    """InterPodAffinity's sums for one member (`namespace`, `labels`), per topology domain: the
    member's own preferred terms' signed weights for every pod each selects, and every running
    pod's scoring terms (`PodInfo.scoring`) that select the member, in that pod's domain (the
    symmetric part). Counted once for a shape and kept current as members are assumed (`add`),
    as `spread.SpreadCounts` is; counted afresh for a member whose labels differ. `score()` is a
    member's view of them.

    Each key's lowest and highest sums (clamped to 0, as upstream's scaling starts from 0) are
    kept as sums change, and recounted only when the extreme itself moves back: `score()` is
    asked for each member, and recounting every domain each time would make a gang's scoring
    quadratic in its size."""

    def __init__(
        self,
        snapshot: Snapshot,
        terms: Sequence[WeightedTerm],
        namespace: str,
        labels: Mapping[str, str],
    ) -> None:
        self.terms = tuple(terms)
        self.namespace = namespace
        self.labels = dict(labels)
        self.sums: dict[str, dict[str, int]] = {}
        self._low: dict[str, int] = {}
        self._high: dict[str, int] = {}
        self._stale: set[str] = set()
        nodes = snapshot.nodes
        for weighted in self.terms:
            key = weighted.topology_key
            by_value = self.sums.setdefault(key, {})
            for entry in snapshot.pod_index.pods_matching(
                weighted.selector, weighted.term.namespaces
            ):
                value = nodes[entry.node].facts.labels.get(key)
                if value is not None:
                    by_value[value] = by_value.get(value, 0) + weighted.weight
        if snapshot.pod_index.has_scoring:
            for weighted, carriers in snapshot.pod_index.scoring_toward(namespace, labels):
                key = weighted.topology_key
                by_value = self.sums.setdefault(key, {})
                for name in carriers:
                    state = nodes.get(name)
                    value = state.facts.labels.get(key) if state is not None else None
                    if value is not None:
                        by_value[value] = by_value.get(value, 0) + weighted.weight
        self._stale.update(self.sums)

    def add(
        self,
        node_labels: Mapping[str, str],
        namespace: str,
        labels: Mapping[str, str],
        scoring: Sequence[WeightedTerm],
    ) -> None:
        """A pod with `labels` in `namespace`, carrying the `scoring` terms, was assumed on a
        node with `node_labels`."""
        for weighted in self.terms:
            if weighted.matches(namespace, labels):
                self._bump(weighted, node_labels)
        for weighted in scoring:
            if weighted.matches(self.namespace, self.labels):
                self._bump(weighted, node_labels)

    def _bump(self, weighted: WeightedTerm, node_labels: Mapping[str, str]) -> None:
        key = weighted.topology_key
        value = node_labels.get(key)
        if value is None:
            return
        by_value = self.sums.get(key)
        if by_value is None:
            by_value = self.sums[key] = {}
            self._stale.add(key)
        old = by_value.get(value, 0)
        new = by_value[value] = old + weighted.weight
        if key in self._stale:
            return
        high, low = self._high[key], self._low[key]
        if new > high:
            self._high[key] = new
        elif old == high > 0 and new < old:
            self._stale.add(key)  # the highest domain went down: recount
        if new < low:
            self._low[key] = new
        elif old == low < 0 and new > old:
            self._stale.add(key)

    def score(self) -> PreferredScore | None:
        """The scores as they are now (valid until the next `add`); None when every node would
        score alike."""
        for key in self._stale:
            values = self.sums[key].values()
            self._low[key] = min((0, *values))
            self._high[key] = max((0, *values))
        self._stale.clear()
        low, high = sum(self._low.values()), sum(self._high.values())
        if low == high:
            return None
        return PreferredScore(self.sums, low, high, self._high.get(HOSTNAME_LABEL, 0))


@dataclass(frozen=True, slots=True)
class PreferredScore:
    """One member's preferred pod (anti-)affinity score: see the module docstring."""

    sums: Mapping[str, Mapping[str, int]]
    low: int
    """The lowest sum a node could have: every key's most negative domain (or 0)."""
    high: int
    host_high: int
    """The highest sum of a hostname domain (or 0): a class's bound, as classes carry no
    hostname."""

    def score(self, labels: Mapping[str, str], *, upper: bool = False) -> float:
        """0..100 for a node with these labels; `upper` bounds a class's nodes from above."""
        raw = 0
        for key, by_value in self.sums.items():
            if upper and key == HOSTNAME_LABEL:
                raw += self.host_high
                continue
            value = labels.get(key)
            if value is not None:
                raw += by_value.get(value, 0)
        return MAX_SCORE * (raw - self.low) / (self.high - self.low)
