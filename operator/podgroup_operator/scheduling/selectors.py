"""Label selectors and pod-affinity terms, parsed once into hashable values.

Inter-pod affinity, topology spread and PodDisruptionBudgets all select pods by label, the way
`metav1.LabelSelectorAsSelector` does: `matchLabels` and `matchExpressions` are ANDed, an empty
selector (`{}`) selects everything, and a missing one (`null`) selects nothing. Parsed selectors
are frozen so that pods stamped from one template share a single value and it can key caches.

A selector the scheduler cannot evaluate must never be guessed at: an incoming pod whose
selector uses an unknown operator is refused with `UnsupportedConstraintError`, naming the field. An
*existing* pod's term only ever keeps others away (its required anti-affinity), so
there the parser can afford to widen an unreadable part into "selects everything", which keeps
more pods away than needed but never places a pod where the owner said it must not go.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"
SELECTOR_OPERATORS = frozenset({IN, NOT_IN, EXISTS, DOES_NOT_EXIST})
"""The operators of a label selector (node selectors also have Gt/Lt; label selectors do not)."""


class UnsupportedConstraintError(ValueError):
    """A scheduling constraint this scheduler cannot evaluate; the pod is refused, not guessed.

    `path` is the field path inside the pod (`spec.affinity.podAntiAffinity...[0].matchLabelKeys`)
    so the message tells the owner exactly what to change.
    """

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `key op values` requirement of a label selector."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == IN:
            value = labels.get(self.key)
            return value is not None and value in self.values
        if op == NOT_IN:
            value = labels.get(self.key)
            return value is None or value not in self.values
        if op == EXISTS:
            return self.key in labels
        return self.key not in labels  # DoesNotExist; others are refused when parsing

    def __str__(self) -> str:
        if self.operator == EXISTS:
            return self.key
        if self.operator == DOES_NOT_EXIST:
            return f"!{self.key}"
        if self.operator == IN and len(self.values) == 1:
            return f"{self.key}={next(iter(self.values))}"
        values = ",".join(sorted(self.values))
        word = "in" if self.operator == IN else "notin"
        return f"{self.key} {word} ({values})"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """ANDed requirements; `nothing` is the null selector, which matches no object."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        # A plain loop: this runs for every candidate pod of every check, and beats all().
        for requirement in self.requirements:  # noqa: SIM110
            if not requirement.matches(labels):
                return False
        return True

    def anchor(self) -> Requirement | None:
        """The `In` requirement with the fewest values, to look candidates up in a label index.

        A selector without one (only NotIn/Exists/DoesNotExist, or empty) has no anchor and its
        candidates are every pod of the namespaces concerned.
        """
        best: Requirement | None = None
        for requirement in self.requirements:
            if requirement.operator == IN and (
                best is None or len(requirement.values) < len(best.values)
            ):
                best = requirement
        return best

    def with_requirements(self, extra: Iterable[Requirement]) -> LabelSelector:
        """This selector ANDed with more requirements (used for `matchLabelKeys`)."""
        merged = tuple(sorted({*self.requirements, *extra}, key=_requirement_order))
        return LabelSelector(merged, self.nothing)

    def __str__(self) -> str:
        if self.nothing:
            return "<nothing>"
        if not self.requirements:
            return "<everything>"
        return ",".join(str(r) for r in self.requirements)


EVERYTHING = LabelSelector()
NOTHING = LabelSelector((), nothing=True)


def _requirement_order(requirement: Requirement) -> tuple[str, str, tuple[str, ...]]:
    return (requirement.key, requirement.operator, tuple(sorted(requirement.values)))


def parse_selector(raw: Any, path: str, *, strict: bool = True) -> LabelSelector:
    """A raw `metav1.LabelSelector` (or None) as a `LabelSelector`.

    strict: an unknown operator or malformed requirement raises `UnsupportedConstraintError` naming
    `path`; lenient: the unreadable requirement is dropped, which widens the selection.
    """
    if raw is None:
        return NOTHING
    if not isinstance(raw, Mapping):
        raise UnsupportedConstraintError(path, f"a label selector must be an object, got {raw!r}")
    requirements: list[Requirement] = []
    for key, value in (raw.get("matchLabels") or {}).items():
        requirements.append(Requirement(str(key), IN, frozenset({str(value)})))
    for index, item in enumerate(raw.get("matchExpressions") or ()):
        where = f"{path}.matchExpressions[{index}]"
        try:
            requirements.append(_parse_requirement(item, where))
        except UnsupportedConstraintError:
            if strict:
                raise
    unknown = sorted(set(raw) - {"matchLabels", "matchExpressions"})
    if unknown and strict:
        raise UnsupportedConstraintError(
            f"{path}.{unknown[0]}", "unknown label selector field; remove it"
        )
    if not requirements:
        return EVERYTHING
    return LabelSelector(tuple(sorted(set(requirements), key=_requirement_order)))


def _parse_requirement(item: Any, path: str) -> Requirement:
    if not isinstance(item, Mapping):
        raise UnsupportedConstraintError(
            path, f"a selector requirement must be an object: {item!r}"
        )
    key = str(item.get("key") or "")
    operator = str(item.get("operator") or "")
    values = frozenset(str(v) for v in item.get("values") or ())
    if not key:
        raise UnsupportedConstraintError(f"{path}.key", "a selector requirement needs a key")
    if operator not in SELECTOR_OPERATORS:
        raise UnsupportedConstraintError(
            f"{path}.operator",
            f"unknown operator {operator!r}; a label selector supports "
            f"{', '.join(sorted(SELECTOR_OPERATORS))}",
        )
    if operator in (IN, NOT_IN) and not values:
        raise UnsupportedConstraintError(f"{path}.values", f"operator {operator} needs values")
    if operator in (EXISTS, DOES_NOT_EXIST) and values:
        raise UnsupportedConstraintError(f"{path}.values", f"operator {operator} takes no values")
    return Requirement(key, operator, values)


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A required pod (anti-)affinity term with its namespaces resolved.

    `namespaces is None` means every namespace (an empty `namespaceSelector: {}`); otherwise it is
    the set the term applies to, defaulting to the namespace of the pod that owns the term.
    """

    selector: LabelSelector
    namespaces: frozenset[str] | None
    topology_key: str

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Does a pod in `namespace` with `labels` fall under this term?"""
        if self.namespaces is not None and namespace not in self.namespaces:
            return False
        return self.selector.matches(labels)

    def __str__(self) -> str:
        where = "all namespaces" if self.namespaces is None else ",".join(sorted(self.namespaces))
        return f"{self.selector} in {where} per {self.topology_key}"


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    """A pod (anti-)affinity term that scores rather than filters: preferred affinity with its
    weight, preferred anti-affinity with its weight negated, and (for running pods, toward a
    newcomer) required affinity at kube-scheduler's hardPodAffinityWeight."""

    weight: int
    term: AffinityTerm

    @property
    def selector(self) -> LabelSelector:
        return self.term.selector

    @property
    def topology_key(self) -> str:
        return self.term.topology_key

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        return self.term.matches(namespace, labels)

    def __str__(self) -> str:
        return f"{self.weight:+d} {self.term}"


_TERM_FIELDS = frozenset({"labelSelector", "namespaces", "topologyKey", "namespaceSelector"})


def parse_affinity_term(
    raw: Any, owner_namespace: str, path: str, *, strict: bool = True
) -> AffinityTerm:
    """A raw `PodAffinityTerm` owned by a pod in `owner_namespace`.

    Strict (the pod being placed): `matchLabelKeys`, `mismatchLabelKeys`, a `namespaceSelector`
    with requirements (it would need namespace labels) and unknown fields are refused. Lenient (a
    pod already running, for its anti-affinity against newcomers): those parts are widened to
    "everything", so the term keeps newcomers away from at least every domain it really covers.
    """
    if not isinstance(raw, Mapping):
        raise UnsupportedConstraintError(path, f"a pod affinity term must be an object: {raw!r}")
    topology_key = str(raw.get("topologyKey") or "")
    if not topology_key:
        raise UnsupportedConstraintError(
            f"{path}.topologyKey", "a required term needs a topologyKey"
        )
    selector = parse_selector(raw.get("labelSelector"), f"{path}.labelSelector", strict=strict)
    namespaces: frozenset[str] | None = frozenset(str(n) for n in raw.get("namespaces") or ())
    namespace_selector = raw.get("namespaceSelector")
    if namespace_selector is not None:
        if not isinstance(namespace_selector, Mapping):
            raise UnsupportedConstraintError(f"{path}.namespaceSelector", "must be an object")
        if namespace_selector.get("matchLabels") or namespace_selector.get("matchExpressions"):
            if strict:
                raise UnsupportedConstraintError(
                    f"{path}.namespaceSelector",
                    "selecting namespaces by label is not supported by podgroup-scheduler; "
                    "list them in `namespaces` instead",
                )
            namespaces = None
        else:
            namespaces = None  # `{}` selects every namespace
    elif not namespaces:
        namespaces = frozenset({owner_namespace})
    if strict:
        for field in ("matchLabelKeys", "mismatchLabelKeys"):
            if raw.get(field):
                raise UnsupportedConstraintError(
                    f"{path}.{field}",
                    "not supported by podgroup-scheduler; spell the labels out in labelSelector",
                )
        unknown = sorted(set(raw) - _TERM_FIELDS - {"matchLabelKeys", "mismatchLabelKeys"})
        if unknown:
            raise UnsupportedConstraintError(f"{path}.{unknown[0]}", "unknown field; remove it")
    # Lenient: `matchLabelKeys`/`mismatchLabelKeys` only narrow a term, so without them it
    # covers more pods than the owner meant, never fewer.
    return AffinityTerm(selector, namespaces, topology_key)
