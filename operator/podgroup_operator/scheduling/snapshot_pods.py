"""The snapshot's pod indexes: which held pods a selector, a term or a gang finds, fast.

Pod-to-pod constraints need more than free capacity, so every pod the snapshot holds (bound or
assumed, orphans included) is indexed incrementally: by label and namespace (affinity, topology
spread and PodDisruptionBudgets select pods by label), by required anti-affinity term (a
newcomer must respect running pods' anti-affinity), by scoring term (running pods' preferences
toward a newcomer weigh on its score), by unit (preemption evicts whole gangs) and whether it is
terminating. Assumed gang members are indexed like bound pods, so a member placed earlier in the
same placement constrains the next, and an undo takes them out of every index again.

The `Snapshot` owns one `PodIndex` (`snapshot.pod_index`) and adds or removes each pod it books
or forgets; rules only read it. Queries skip pods on nodes the snapshot does not know.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

from podgroup_operator.scheduling.selectors import (
    EXISTS,
    AffinityTerm,
    LabelSelector,
    WeightedTerm,
)
from podgroup_operator.scheduling.snapshot_nodes import NodeState, PodEntry


class _Selecting(Protocol):
    """A term a pod carries toward other pods: `AffinityTerm`, `WeightedTerm`."""

    def __hash__(self) -> int: ...
    @property
    def selector(self) -> LabelSelector: ...
    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool: ...


T = TypeVar("T", bound=_Selecting)


class _TermIndex(Generic[T]):
    """Terms carried by the pods holding nodes, each with {uid: node} of its carriers, found from
    the labels of a pod they may select: through their selector's anchor (its most selective
    `In` requirement), else checked for every pod ("loose")."""

    def __init__(self) -> None:
        self.carriers: dict[T, dict[str, str]] = {}
        self._anchored: dict[tuple[str, str], set[T]] = {}
        self._loose: set[T] = set()

    def add(self, term: T, uid: str, node: str) -> None:
        carriers = self.carriers.get(term)
        if carriers is None:
            carriers = self.carriers[term] = {}
            anchor = term.selector.anchor()
            if anchor is None:
                self._loose.add(term)
            else:
                for value in anchor.values:
                    self._anchored.setdefault((anchor.key, value), set()).add(term)
        carriers[uid] = node  # consumers skip nodes the snapshot does not know

    def remove(self, term: T, uid: str) -> None:
        carriers = self.carriers.get(term)
        if carriers is None:
            return
        carriers.pop(uid, None)
        if carriers:
            return
        del self.carriers[term]
        anchor = term.selector.anchor()
        if anchor is None:
            self._loose.discard(term)
            return
        for value in anchor.values:
            terms = self._anchored.get((anchor.key, value))
            if terms is not None:
                terms.discard(term)
                if not terms:
                    del self._anchored[(anchor.key, value)]

    def selecting(
        self, namespace: str, labels: Mapping[str, str]
    ) -> Iterator[tuple[T, Iterable[str]]]:
        """The terms that select a pod with `namespace` and `labels`, each with the nodes of
        the pods carrying it."""
        if not self.carriers:
            return
        terms: set[T] = set(self._loose)
        anchored = self._anchored
        for pair in labels.items():
            found = anchored.get(pair)
            if found:
                terms.update(found)
        for term in terms:
            if term.matches(namespace, labels):
                yield term, self.carriers[term].values()

    def state(self) -> tuple[Any, ...]:
        return tuple(sorted((str(t), tuple(sorted(c.items()))) for t, c in self.carriers.items()))


class PodIndex:
    """Every held pod indexed by label, namespace, carried term, unit and termination.

    `pods` and `nodes` are the snapshot's own stores (read, never changed here): a pod is in
    `pods` exactly while it is indexed here."""

    def __init__(self, pods: Mapping[str, PodEntry], nodes: Mapping[str, NodeState]) -> None:
        self._pods = pods
        self._nodes = nodes
        self._by_label: dict[str, dict[str, set[str]]] = {}
        self._by_namespace: dict[str, set[str]] = {}
        self._anti: _TermIndex[AffinityTerm] = _TermIndex()
        """Required anti-affinity terms of the pods holding nodes."""
        self._scoring: _TermIndex[WeightedTerm] = _TermIndex()
        """The terms with which the pods holding nodes score newcomers (`PodInfo.scoring`)."""
        self._units: dict[tuple[str, str, str], set[str]] = {}
        self._terminating: set[str] = set()

    # --- bookkeeping (the Snapshot calls these) --------------------------------------------------
    def add(self, entries: Sequence[PodEntry]) -> None:
        """Index pods the snapshot has just stored."""
        by_label, by_namespace, units = self._by_label, self._by_namespace, self._units
        for entry in entries:
            info = entry.info
            uid = info.uid
            for key, value in info.labels.items():
                values = by_label.get(key)
                if values is None:
                    values = by_label[key] = {}
                uids = values.get(value)
                if uids is None:
                    values[value] = {uid}
                else:
                    uids.add(uid)
            spaced = by_namespace.get(info.namespace)
            if spaced is None:
                by_namespace[info.namespace] = {uid}
            else:
                spaced.add(uid)
            for term in info.anti_affinity:
                self._anti.add(term, uid, entry.node)
            for weighted in info.scoring:
                self._scoring.add(weighted, uid, entry.node)
            if info.terminating:
                self._terminating.add(uid)
            unit = info.unit
            members = units.get(unit)
            if members is None:
                units[unit] = {uid}
            else:
                members.add(uid)

    def remove(self, entries: Sequence[PodEntry]) -> None:
        """Take out of every index pods the snapshot has just dropped."""
        by_label, by_namespace, units = self._by_label, self._by_namespace, self._units
        for entry in entries:
            info = entry.info
            uid = info.uid
            for key, value in info.labels.items():
                values = by_label[key]
                uids = values[value]
                uids.discard(uid)
                if not uids:
                    del values[value]
                    if not values:
                        del by_label[key]
            spaced = by_namespace[info.namespace]
            spaced.discard(uid)
            if not spaced:
                del by_namespace[info.namespace]
            for term in info.anti_affinity:
                self._anti.remove(term, uid)
            for weighted in info.scoring:
                self._scoring.remove(weighted, uid)
            self._terminating.discard(uid)
            members = units[info.unit]
            members.discard(uid)
            if not members:
                del units[info.unit]

    def state(self) -> tuple[Any, ...]:
        """Every index in a comparable form (`Snapshot.index_state`)."""
        return (
            tuple(
                sorted(
                    (key, value, tuple(sorted(uids)))
                    for key, values in self._by_label.items()
                    for value, uids in values.items()
                )
            ),
            tuple(sorted((ns, tuple(sorted(u))) for ns, u in self._by_namespace.items())),
            self._anti.state(),
            self._scoring.state(),
            tuple(sorted((u, tuple(sorted(p))) for u, p in self._units.items())),
            tuple(sorted(self._terminating)),
        )

    # --- queries ---------------------------------------------------------------------------------
    def pods_matching(
        self, selector: LabelSelector, namespaces: frozenset[str] | None
    ) -> Iterator[PodEntry]:
        """Pods on known nodes in `namespaces` (None: all) whose labels `selector` selects.

        Candidates come from the label index through the selector's most selective `In`
        requirement (else an `Exists` key, else the namespaces), so a selector naming one gang
        costs the size of that gang, not of the cluster.
        """
        if selector.nothing:
            return
        candidates: Iterable[str]
        anchor = selector.anchor()
        if anchor is not None:
            values = self._by_label.get(anchor.key, {})
            if len(anchor.values) == 1:
                candidates = values.get(next(iter(anchor.values)), ())
            else:
                candidates = [u for v in anchor.values for u in values.get(v, ())]
        else:
            key = next((r.key for r in selector.requirements if r.operator == EXISTS), None)
            if key is not None:
                candidates = [u for us in self._by_label.get(key, {}).values() for u in us]
            elif namespaces is not None:
                candidates = [u for ns in namespaces for u in self._by_namespace.get(ns, ())]
            else:
                candidates = list(self._pods)
        pods, nodes = self._pods, self._nodes
        for uid in candidates:
            entry = pods[uid]
            info = entry.info
            if entry.node not in nodes:
                continue
            if namespaces is not None and info.namespace not in namespaces:
                continue
            if selector.matches(info.labels):
                yield entry

    @property
    def has_anti_affinity(self) -> bool:
        """True when some pod holding a node has required anti-affinity (symmetry applies)."""
        return bool(self._anti.carriers)

    def anti_affinity_against(
        self, namespace: str, labels: Mapping[str, str]
    ) -> Iterator[tuple[AffinityTerm, Iterable[str]]]:
        """Existing pods' anti-affinity terms that select a pod with `namespace` and `labels`,
        each with the nodes of the pods carrying it (kube-scheduler's symmetry rule)."""
        return self._anti.selecting(namespace, labels)

    @property
    def has_scoring(self) -> bool:
        """True when some pod holding a node scores the newcomers its terms select."""
        return bool(self._scoring.carriers)

    def scoring_toward(
        self, namespace: str, labels: Mapping[str, str]
    ) -> Iterator[tuple[WeightedTerm, Iterable[str]]]:
        """Existing pods' scoring terms (`PodInfo.scoring`) that select a pod with `namespace`
        and `labels`, each with the nodes of the pods carrying it (InterPodAffinity's
        symmetric part)."""
        return self._scoring.selecting(namespace, labels)

    def units(self) -> Mapping[tuple[str, str, str], set[str]]:
        """Gangs (or lone pods) as preemption sees them: unit key -> UIDs of its pods."""
        return self._units

    def terminating(self) -> frozenset[str]:
        """UIDs of pods holding room while being deleted."""
        return frozenset(self._terminating)
