"""The node filters kube-scheduler applies, as pure predicates over parsed pods and nodes.

A gang placement is only honest if every member would also pass kube-scheduler's own checks on
its node, so these follow the upstream plugins: NodeUnschedulable, TaintToleration (NoSchedule
and NoExecute must be tolerated, PreferNoSchedule is only a preference), NodeAffinity
(`nodeSelector` plus required node affinity), and readiness. Resource fit lives next to the
free-capacity bookkeeping in `snapshot.py` because it changes with every assumption.

Pod constraints are parsed once into hashable `Constraints`, so that pods stamped from one
template share a single parsed value, and a verdict computed for one node can be reused for
every node with identical labels, taints and conditions (see `NodeClass` in `snapshot_nodes.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
"""The taint kube-scheduler pretends a cordoned node has; tolerating it admits the pod."""
HOSTNAME_LABEL = "kubernetes.io/hostname"
"""Unique per node; left out of node classes so that pools of identical nodes share verdicts."""
NODE_NAME_FIELD = "metadata.name"
"""The only field `matchFields` may select on."""

ENFORCED_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
"""Taint effects that keep a pod off a node; PreferNoSchedule only lowers a score."""


class Exclusion(StrEnum):
    """Why a node cannot take a pod; the text is what a refusal message counts."""

    NOT_READY = "node(s) were not Ready"
    UNSCHEDULABLE = "node(s) were unschedulable"
    TAINT = "node(s) had untolerated taint"
    NODE_SELECTOR = "node(s) didn't match Pod's node selector"
    NODE_AFFINITY = "node(s) didn't match Pod's node affinity"
    INSUFFICIENT = "Insufficient"
    POD_AFFINITY = "node(s) didn't match pod affinity rules"
    POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
    EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
    SPREAD = "node(s) didn't match pod topology spread constraints"
    SPREAD_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
    PORTS = "node(s) didn't have free ports for the requested pod ports"
    VOLUME_NODE_AFFINITY = "node(s) had volume node affinity conflict"
    VOLUME_BINDING = "node(s) didn't find available persistent volumes to bind"
    VOLUME_ZONE = "node(s) had no available volume zone"
    VOLUME_LIMITS = "node(s) exceed max volume count"
    DISK_CONFLICT = "node(s) had no available disk"


class Rejection(NamedTuple):
    """A node's rejection: the filter that failed and, for taints/resources, which one."""

    exclusion: Exclusion
    detail: object = ""
    """Whatever names the failing part, written with str() only when a message says it (see
    `Parenthesized`); equal details are counted together."""

    def describe(self, count: int) -> str:
        """kube-scheduler's wording: `2 Insufficient cpu`, `3 node(s) were not Ready`."""
        if self.exclusion is Exclusion.INSUFFICIENT:
            return f"{count} Insufficient {self.detail}"
        if self.detail:
            return f"{count} {self.exclusion.value} {self.detail}"
        return f"{count} {self.exclusion.value}"


@dataclass(frozen=True, slots=True)
class Parenthesized:
    """A rejection's detail, `(value)` once written: the writing waits for a message.

    A gang's placement tries, for each member, the nodes its earlier members took before a free
    one, and discards those rejections: writing each out as it is made would cost most of the
    decision (docs/decisions/010-placement-keeps-what-a-shape-learnt.md)."""

    value: object

    def __str__(self) -> str:
        return f"({self.value})"


class Taint(NamedTuple):
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{{{self.key}{value}: {self.effect}}}"


class Toleration(NamedTuple):
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        """`v1.Toleration.ToleratesTaint`: effect, key (empty + Exists = any), then value."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        # Equal is the default operator; an empty key is only valid with Exists.
        return bool(self.key) and self.value == taint.value


@dataclass(frozen=True, slots=True)
class TolerationIndex:
    """Tolerations by key ("" for those of every key), so that a taint is checked against its
    own only: a pod may carry thousands of tolerations, and every node class's verdict would read
    them all for each taint (docs/decisions/010-placement-keeps-what-a-shape-learnt.md)."""

    by_key: Mapping[str, tuple[Toleration, ...]]

    @classmethod
    def of(cls, tolerations: Iterable[Toleration]) -> TolerationIndex:
        by_key: dict[str, list[Toleration]] = {}
        for toleration in tolerations:
            by_key.setdefault(toleration.key, []).append(toleration)
        return cls({key: tuple(group) for key, group in by_key.items()})

    def tolerates(self, taint: Taint) -> bool:
        """Some toleration covers the taint (`Toleration.tolerates`)."""
        by_key = self.by_key
        return any(t.tolerates(taint) for t in by_key.get(taint.key, ())) or any(
            t.tolerates(taint) for t in by_key.get("", ())
        )


class Requirement(NamedTuple):
    """One `matchExpressions`/`matchFields` entry: key, operator, values."""

    key: str
    operator: str
    values: tuple[str, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator in ("Gt", "Lt"):
            if not present or len(self.values) != 1:
                return False
            try:
                have, bound = int(labels[self.key]), int(self.values[0])
            except ValueError:
                return False
            return have > bound if self.operator == "Gt" else have < bound
        return False  # an unknown operator matches nothing, as upstream


class Term(NamedTuple):
    """A nodeSelectorTerm: its expressions and fields are ANDed."""

    expressions: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if not self.expressions and not self.fields:
            return False  # an empty term matches no objects
        if not all(req.matches(labels) for req in self.expressions):
            return False
        node_fields = {NODE_NAME_FIELD: name}
        return all(req.key == NODE_NAME_FIELD and req.matches(node_fields) for req in self.fields)


SCAN_TERMS = 8
"""Up to this many node selector terms are tried one by one; more go through a `TermIndex`."""


@dataclass(frozen=True, slots=True)
class TermIndex:
    """Node selector terms by what a node must have for each to match, so that a node is tried
    against the terms it might match only.

    A pod may list thousands of terms, required or preferred, and every node class's verdict
    would try them all (docs/decisions/010-placement-keeps-what-a-shape-learnt.md).

    Each term is filed once, under one requirement it cannot match without: an `In` under
    each of its values (a node has one value per key, so it meets the term once at most),
    an `Exists`, `Gt` or `Lt` under its key, a `metadata.name In` field under each name.
    Terms of only `NotIn` and `DoesNotExist` are tried on every node; terms that match no
    node (empty, or a field other than the name) are not filed. What `candidates` yields are
    positions in the terms the index was built from."""

    anywhere: tuple[int, ...]
    by_key: Mapping[str, tuple[tuple[int, ...], Mapping[str, tuple[int, ...]]]]
    """key -> (terms needing the key, terms needing the key at a given value)."""
    by_name: Mapping[str, tuple[int, ...]]

    @classmethod
    def of(cls, terms: Iterable[Term]) -> TermIndex:
        anywhere: list[int] = []
        present: dict[str, list[int]] = {}
        valued: dict[str, dict[str, list[int]]] = {}
        named: dict[str, list[int]] = {}
        for position, term in enumerate(terms):
            if not term.expressions and not term.fields:
                continue  # matches no node
            if any(req.key != NODE_NAME_FIELD for req in term.fields):
                continue  # matches no node: the name is the only field
            listed = [req for req in term.expressions if req.operator == "In"]
            needed = [req for req in term.expressions if req.operator in _NEEDS_KEY]
            names = [req for req in term.fields if req.operator == "In"]
            if listed:
                anchor = min(listed, key=lambda req: len(req.values))
                by_value = valued.setdefault(anchor.key, {})
                for value in dict.fromkeys(anchor.values):
                    by_value.setdefault(value, []).append(position)
            elif needed:
                present.setdefault(needed[0].key, []).append(position)
            elif names:
                for name in dict.fromkeys(min(names, key=lambda req: len(req.values)).values):
                    named.setdefault(name, []).append(position)
            else:
                anywhere.append(position)
        by_key = {
            key: (
                tuple(present.get(key, ())),
                {value: tuple(p) for value, p in valued.get(key, {}).items()},
            )
            for key in present.keys() | valued.keys()
        }
        return cls(tuple(anywhere), by_key, {name: tuple(p) for name, p in named.items()})

    def candidates(self, name: str, labels: Mapping[str, str]) -> Iterator[int]:
        """The positions of the terms the node might match, each once; the rest cannot."""
        yield from self.anywhere
        by_key = self.by_key
        if len(by_key) < len(labels):
            for key, (needing, by_value) in by_key.items():
                value = labels.get(key)
                if value is not None:
                    yield from needing
                    yield from by_value.get(value, ())
        else:
            for key, value in labels.items():
                entry = by_key.get(key)
                if entry is not None:
                    yield from entry[0]
                    yield from entry[1].get(value, ())
        yield from self.by_name.get(name, ())


_NEEDS_KEY = frozenset({"Exists", "Gt", "Lt"})


def any_term_matches(
    terms: tuple[Term, ...], index: TermIndex | None, name: str, labels: Mapping[str, str]
) -> bool:
    """Some term matches the node (`index` built from `terms`, or None to try each)."""
    if index is None:
        return any(term.matches(name, labels) for term in terms)
    return any(terms[i].matches(name, labels) for i in index.candidates(name, labels))


def term_index(terms: tuple[Term, ...] | None) -> TermIndex | None:
    """The index for `terms` when they are more than SCAN_TERMS, else None."""
    return TermIndex.of(terms) if terms is not None and len(terms) > SCAN_TERMS else None


@dataclass(frozen=True, slots=True)
class Constraints:
    """Where a pod may go, independent of free capacity; hashable so it can key caches.

    `terms is None` means no required node affinity; an empty tuple means an affinity that
    matches nothing (upstream treats a selector without terms that way).
    """

    node_selector: tuple[tuple[str, str], ...] = ()
    terms: tuple[Term, ...] | None = None
    tolerations: tuple[Toleration, ...] = ()
    covering: TolerationIndex = field(init=False, repr=False, compare=False, hash=False)
    matching: TermIndex | None = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "covering", TolerationIndex.of(self.tolerations))
        object.__setattr__(self, "matching", term_index(self.terms))

    def tolerates(self, taint: Taint) -> bool:
        return self.covering.tolerates(taint)

    def affinity_matches(self, name: str, labels: Mapping[str, str]) -> bool:
        """The required node affinity admits the node (True without one)."""
        terms = self.terms
        return terms is None or any_term_matches(terms, self.matching, name, labels)

    def untolerated(self, taints: Iterable[Taint]) -> Taint | None:
        """The first NoSchedule/NoExecute taint no toleration covers, or None."""
        for taint in taints:
            if taint.effect in ENFORCED_EFFECTS and not self.covering.tolerates(taint):
                return taint
        return None

    @property
    def uses_node_identity(self) -> bool:
        """True when the verdict depends on the node's name, so node classes cannot share it."""
        if any(key == HOSTNAME_LABEL for key, _ in self.node_selector):
            return True
        for term in self.terms or ():
            if term.fields or any(req.key == HOSTNAME_LABEL for req in term.expressions):
                return True
        return False


NO_CONSTRAINTS = Constraints()


def node_selector_terms(raw: Any) -> tuple[Term, ...]:
    """A raw `nodeSelectorTerms` list as the model. A pod's required node affinity and a
    PersistentVolume's `spec.nodeAffinity.required` share this type (core/v1 NodeSelector)."""
    return tuple(
        Term(_requirements(t.get("matchExpressions")), _requirements(t.get("matchFields")))
        for t in raw or ()
    )


def _requirements(raw: Any) -> tuple[Requirement, ...]:
    return tuple(
        Requirement(
            str(item.get("key", "")),
            str(item.get("operator", "")),
            tuple(str(v) for v in item.get("values") or ()),
        )
        for item in raw or ()
    )


def pod_constraints(pod: Mapping[str, Any]) -> Constraints:
    """Parse nodeSelector, required node affinity and tolerations of a raw pod."""
    spec = pod.get("spec") or {}
    selector = tuple(sorted((str(k), str(v)) for k, v in (spec.get("nodeSelector") or {}).items()))
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    terms: tuple[Term, ...] | None = None
    if required is not None:
        terms = node_selector_terms(required.get("nodeSelectorTerms"))
    tolerations = tuple(
        Toleration(
            str(t.get("key") or ""),
            str(t.get("operator") or "Equal"),
            str(t.get("value") or ""),
            str(t.get("effect") or ""),
        )
        for t in spec.get("tolerations") or ()
    )
    if not selector and terms is None and not tolerations:
        return NO_CONSTRAINTS
    return Constraints(selector, terms, tolerations)


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """The parts of a Node the static filters read; everything but the name can be shared."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    ready: bool


def node_taints(node: Mapping[str, Any]) -> tuple[Taint, ...]:
    return tuple(
        Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect", "")))
        for t in (node.get("spec") or {}).get("taints") or ()
    )


def node_ready(node: Mapping[str, Any]) -> bool:
    """A node without a Ready=True condition is not a place to put a gang member.

    kube-scheduler has no such filter: it leaves NotReady nodes to the `not-ready` and
    `unreachable` taints the node lifecycle controller adds, so a pod tolerating every taint
    (`operator: Exists`) can land there. We refuse the node whatever the tolerations say, and
    before the taint arrives: a member there never starts, and its whole gang waits on it."""
    for condition in (node.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def node_facts(node: Mapping[str, Any]) -> NodeFacts:
    meta = node.get("metadata") or {}
    return NodeFacts(
        name=str(meta.get("name", "")),
        labels=dict(meta.get("labels") or {}),
        taints=node_taints(node),
        unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
        ready=node_ready(node),
    )


_UNSCHEDULABLE_TAINT = Taint(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")


def check_node(constraints: Constraints, node: NodeFacts) -> Rejection | None:
    """None if the pod may go to the node as far as static filters go, else why not.

    Checked in kube-scheduler's plugin order so the first failure is the one it would report.
    """
    if not node.ready:
        return Rejection(Exclusion.NOT_READY)
    if node.unschedulable and not constraints.tolerates(_UNSCHEDULABLE_TAINT):
        return Rejection(Exclusion.UNSCHEDULABLE)
    taint = constraints.untolerated(node.taints)
    if taint is not None:
        return Rejection(Exclusion.TAINT, str(taint))
    labels = node.labels
    for key, value in constraints.node_selector:
        if labels.get(key) != value:
            return Rejection(Exclusion.NODE_SELECTOR)
    if not constraints.affinity_matches(node.name, labels):
        return Rejection(Exclusion.NODE_AFFINITY)
    return None


def matches_node_selection(constraints: Constraints, node: NodeFacts) -> bool:
    """nodeSelector and required node affinity only (topology spread's nodeAffinityPolicy)."""
    labels = node.labels
    for key, value in constraints.node_selector:
        if labels.get(key) != value:
            return False
    return constraints.affinity_matches(node.name, labels)


def insufficient(request: Iterable[tuple[str, int]], free: Mapping[str, int]) -> Rejection | None:
    """NodeResourcesFit: the first resource the node lacks for one pod (in `request` order)."""
    for name, amount in request:
        if amount > free.get(name, 0):
            return Rejection(Exclusion.INSUFFICIENT, name)
    return None
