"""What the scheduler reads from a pod beyond its request: labels, ports, pod-to-pod constraints.

Two views, because the two uses differ:

- `PodInfo` is what the snapshot keeps about every pod holding a node (bound or assumed): labels
  and namespace (others' affinity, spread and PodDisruptionBudgets select on them), host ports,
  required anti-affinity (kept to refuse newcomers: kube-scheduler's symmetry rule), the terms
  that score newcomers (its preferred pod affinity and anti-affinity, and its required affinity
  at HARD_POD_AFFINITY_WEIGHT: InterPodAffinity's symmetric part), priority and gang
  (preemption evicts whole gangs, lowest priority first). It is parsed leniently: a running
  pod cannot be refused, so an unreadable anti-affinity term is widened, never dropped; an
  unreadable scoring term is dropped (widened, it would pull or push pods it never named).
- `InterPodConstraints` is what a pod being placed asks for: required pod affinity and
  anti-affinity, topology spread, host ports and PersistentVolumeClaims. It is parsed strictly:
  anything the scheduler cannot evaluate raises `UnsupportedConstraintError` naming the field, so
  the pod is refused with that message instead of placed as if the constraint were not there.
  Preferred pod (anti-)affinity terms are scored, not filtered: one the scheduler cannot read
  (a `namespaceSelector` by label, `matchLabelKeys`) is left out of the score rather than
  refusing the pod, since a preference never makes a placement wrong.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from podgroup_operator.api.keys import GroupKey
from podgroup_operator.scheduling.resources import Resources
from podgroup_operator.scheduling.selectors import (
    AffinityTerm,
    LabelSelector,
    Requirement,
    UnsupportedConstraintError,
    WeightedTerm,
    parse_affinity_term,
    parse_selector,
)
from podgroup_operator.scheduling.volumes import Disk, pod_disks

GangOf = Callable[[Mapping[str, Any]], GroupKey | None]
"""Which gang a raw pod belongs to; the controller passes `domain.membership.group_key_of`."""

ANY_IP = "0.0.0.0"
TCP = "TCP"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"
HARD_POD_AFFINITY_WEIGHT = 1
"""What a running pod's required affinity term adds to the score of a newcomer it selects
(kube-scheduler's `hardPodAffinityWeight`, 1 by default)."""
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True, slots=True)
class HostPort:
    """A `hostPort` a container binds on its node: two pods cannot hold the same one."""

    ip: str
    protocol: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        """kube-scheduler's HostPortInfo rule: same protocol and port, and either IP is 0.0.0.0
        or both are the same IP."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.ip == other.ip or ANY_IP in (self.ip, other.ip)

    def __str__(self) -> str:
        return f"{self.ip}:{self.port}/{self.protocol}"


def port_conflict(wanted: Iterable[HostPort], used: Mapping[HostPort, int]) -> HostPort | None:
    """The first wanted port that one in use conflicts with (`HostPort.conflicts`), else None.

    By lookups, as kube-scheduler's HostPortInfo keeps them by IP: a pod may bind thousands of
    host ports, and comparing every pair costs seconds on one node
    (docs/decisions/010-placement-keeps-what-a-shape-learnt.md).
    """
    ips: set[str] | None = None
    for want in wanted:
        if want.ip == ANY_IP:
            if ips is None:
                ips = {have.ip for have in used}
            candidates: Iterable[str] = ips
        else:
            candidates = (want.ip, ANY_IP)
        for ip in candidates:
            if HostPort(ip, want.protocol, want.port) in used:
                return want
    return None


@dataclass(frozen=True, slots=True)
class PortWants:
    """A pod's host ports by protocol and number, to look a node's ports up in them: a node
    holding a few ports costs a few lookups, however many the pod wants
    (docs/decisions/010-placement-keeps-what-a-shape-learnt.md)."""

    ports: tuple[HostPort, ...]
    by_number: Mapping[tuple[str, int], tuple[tuple[int, HostPort], ...]]
    """(protocol, port) -> (position in `ports`, port) for each wanted one."""

    @classmethod
    def of(cls, ports: tuple[HostPort, ...]) -> PortWants:
        if not ports:
            return NO_PORT_WANTS
        by_number: dict[tuple[str, int], list[tuple[int, HostPort]]] = {}
        for position, port in enumerate(ports):
            by_number.setdefault((port.protocol, port.port), []).append((position, port))
        return cls(ports, {key: tuple(group) for key, group in by_number.items()})

    def conflict(self, used: Mapping[HostPort, int]) -> HostPort | None:
        """`port_conflict(self.ports, used)`, walking whichever side is smaller."""
        if len(used) >= len(self.ports):
            return port_conflict(self.ports, used)
        first: tuple[int, HostPort] | None = None
        for have in used:
            for position, want in self.by_number.get((have.protocol, have.port), ()):
                if want.conflicts(have) and (first is None or position < first[0]):
                    first = (position, want)
        return first[1] if first is not None else None


NO_PORT_WANTS = PortWants((), {})


def host_ports(pod: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """Host ports of the pod's containers and of its sidecars (init containers that keep
    running, `restartPolicy: Always`); a `hostPort` of 0 or absent binds nothing."""
    spec = pod.get("spec") or {}
    containers = list(spec.get("containers") or ())
    containers += [
        c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"
    ]
    ports: list[HostPort] = []
    for container in containers:
        for port in container.get("ports") or ():
            number = int(port.get("hostPort") or 0)
            if number > 0:
                ports.append(
                    HostPort(
                        str(port.get("hostIP") or ANY_IP),
                        str(port.get("protocol") or TCP),
                        number,
                    )
                )
    return tuple(ports)


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """One `topologySpreadConstraints` entry, with `matchLabelKeys` merged into the selector."""

    max_skew: int
    topology_key: str
    hard: bool
    """DoNotSchedule (a filter) rather than ScheduleAnyway (a score)."""
    selector: LabelSelector
    min_domains: int = 1
    honor_node_affinity: bool = True
    """nodeAffinityPolicy: Honor (default) counts only nodes the pod's node affinity accepts."""
    honor_taints: bool = False
    """nodeTaintsPolicy: Ignore (default) counts nodes whatever their taints."""

    def __str__(self) -> str:
        return f"maxSkew {self.max_skew} per {self.topology_key} of {self.selector}"


@dataclass(frozen=True, slots=True)
class InterPodConstraints:
    """Everything about a pod being placed that depends on other pods or on volumes."""

    affinity: tuple[AffinityTerm, ...] = ()
    anti_affinity: tuple[AffinityTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    ports: tuple[HostPort, ...] = ()
    claims: tuple[str, ...] = ()
    """Names of the PersistentVolumeClaims the pod mounts (in its namespace), ephemeral included."""
    disks: tuple[Disk, ...] = ()
    """The in-tree disks it mounts inline (EBS, GCE PD, Azure Disk, iSCSI, RBD)."""
    preferred: tuple[WeightedTerm, ...] = ()
    """Preferred pod affinity (weight > 0) and anti-affinity (weight < 0) terms: scored only."""

    @property
    def scoring(self) -> tuple[WeightedTerm, ...]:
        """What this pod, once placed, scores newcomers with (see `PodInfo.scoring`)."""
        hard = tuple(WeightedTerm(HARD_POD_AFFINITY_WEIGHT, t) for t in self.affinity)
        return hard + self.preferred

    @property
    def empty(self) -> bool:
        return not (
            self.affinity
            or self.anti_affinity
            or self.spread
            or self.ports
            or self.claims
            or self.disks
            or self.preferred
        )


NO_INTER_POD = InterPodConstraints()

_AFFINITY_FIELDS = frozenset({"nodeAffinity", "podAffinity", "podAntiAffinity"})
_POD_AFFINITY_FIELDS = frozenset({REQUIRED, PREFERRED})
_SPREAD_FIELDS = frozenset(
    {
        "maxSkew",
        "topologyKey",
        "whenUnsatisfiable",
        "labelSelector",
        "minDomains",
        "nodeAffinityPolicy",
        "nodeTaintsPolicy",
        "matchLabelKeys",
    }
)


def _terms(raw: Any, kind: str, namespace: str) -> tuple[AffinityTerm, ...]:
    if not raw:
        return ()
    path = f"spec.affinity.{kind}"
    if not isinstance(raw, Mapping):
        raise UnsupportedConstraintError(path, "must be an object")
    unknown = sorted(set(raw) - _POD_AFFINITY_FIELDS)
    if unknown:
        raise UnsupportedConstraintError(f"{path}.{unknown[0]}", "unknown field; remove it")
    return tuple(
        parse_affinity_term(term, namespace, f"{path}.{REQUIRED}[{i}]")
        for i, term in enumerate(raw.get(REQUIRED) or ())
    )


def _preferred(raw: Any, sign: int, namespace: str) -> list[WeightedTerm]:
    """`preferredDuringSchedulingIgnoredDuringExecution` terms with their weights times `sign`;
    a term that cannot be read (see the module docstring) or whose weight is not 1..100 is left
    out."""
    if not isinstance(raw, Mapping):
        return []
    terms: list[WeightedTerm] = []
    for i, item in enumerate(raw.get(PREFERRED) or ()):
        if not isinstance(item, Mapping):
            continue
        weight = item.get("weight")
        if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
            continue
        try:
            term = parse_affinity_term(item.get("podAffinityTerm"), namespace, f"[{i}]")
        except UnsupportedConstraintError:
            continue
        terms.append(WeightedTerm(sign * weight, term))
    return terms


def _spread(raw: Any, index: int, labels: Mapping[str, str]) -> SpreadConstraint:
    path = f"spec.topologySpreadConstraints[{index}]"
    if not isinstance(raw, Mapping):
        raise UnsupportedConstraintError(path, "must be an object")
    unknown = sorted(set(raw) - _SPREAD_FIELDS)
    if unknown:
        raise UnsupportedConstraintError(f"{path}.{unknown[0]}", "unknown field; remove it")
    try:
        max_skew = int(raw.get("maxSkew") or 0)
    except (TypeError, ValueError):
        max_skew = 0
    if max_skew < 1:
        raise UnsupportedConstraintError(f"{path}.maxSkew", "must be an integer >= 1")
    key = str(raw.get("topologyKey") or "")
    if not key:
        raise UnsupportedConstraintError(f"{path}.topologyKey", "a spread constraint needs a key")
    when = raw.get("whenUnsatisfiable")
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise UnsupportedConstraintError(
            f"{path}.whenUnsatisfiable",
            f"{when!r} is not one of {DO_NOT_SCHEDULE}, {SCHEDULE_ANYWAY}",
        )
    min_domains = raw.get("minDomains")
    if min_domains is not None and (
        when != DO_NOT_SCHEDULE or not isinstance(min_domains, int) or min_domains < 1
    ):
        raise UnsupportedConstraintError(
            f"{path}.minDomains", "must be an integer >= 1, with DoNotSchedule only"
        )
    policies = []
    for field, default in (("nodeAffinityPolicy", HONOR), ("nodeTaintsPolicy", IGNORE)):
        value = raw.get(field) or default
        if value not in (HONOR, IGNORE):
            raise UnsupportedConstraintError(f"{path}.{field}", f"{value!r} is not Honor or Ignore")
        policies.append(value == HONOR)
    selector = parse_selector(raw.get("labelSelector"), f"{path}.labelSelector")
    match_keys = raw.get("matchLabelKeys") or ()
    if match_keys:
        # kube-scheduler ANDs `key in (the pod's own value)` for each key the pod carries.
        extra = [Requirement(k, "In", frozenset({labels[k]})) for k in match_keys if k in labels]
        selector = selector.with_requirements(extra)
    return SpreadConstraint(
        max_skew, key, when == DO_NOT_SCHEDULE, selector, min_domains or 1, *policies
    )


def pod_claims(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """PVC names the pod mounts: `persistentVolumeClaim.claimName`, and `<pod>-<volume>` for
    generic ephemeral volumes (the claim the ephemeral-volume controller creates)."""
    spec = pod.get("spec") or {}
    name = str((pod.get("metadata") or {}).get("name") or "")
    claims: list[str] = []
    for volume in spec.get("volumes") or ():
        claim = volume.get("persistentVolumeClaim")
        if claim:
            claims.append(str(claim.get("claimName") or ""))
        elif volume.get("ephemeral"):
            claims.append(f"{name}-{volume.get('name', '')}")
    return tuple(dict.fromkeys(claims))  # a claim mounted twice is still one claim


def inter_pod_constraints(pod: Mapping[str, Any]) -> InterPodConstraints:
    """Parse a pod's pod-to-pod and volume constraints strictly (see the module docstring)."""
    spec = pod.get("spec") or {}
    affinity = spec.get("affinity") or {}
    if (
        not affinity.get("podAffinity")
        and not affinity.get("podAntiAffinity")
        and set(affinity) <= _AFFINITY_FIELDS
        and not spec.get("topologySpreadConstraints")
        and not spec.get("volumes")
        and not _has_ports(spec)
    ):
        return NO_INTER_POD  # the common case, without building anything
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    labels = meta.get("labels") or {}
    unknown = sorted(set(affinity) - _AFFINITY_FIELDS)
    if unknown:
        raise UnsupportedConstraintError(f"spec.affinity.{unknown[0]}", "unknown field; remove it")
    result = InterPodConstraints(
        affinity=_terms(affinity.get("podAffinity"), "podAffinity", namespace),
        anti_affinity=_terms(affinity.get("podAntiAffinity"), "podAntiAffinity", namespace),
        spread=tuple(
            _spread(raw, i, labels)
            for i, raw in enumerate(spec.get("topologySpreadConstraints") or ())
        ),
        ports=host_ports(pod),
        claims=pod_claims(pod),
        disks=pod_disks(pod),
        preferred=tuple(
            _preferred(affinity.get("podAffinity"), 1, namespace)
            + _preferred(affinity.get("podAntiAffinity"), -1, namespace)
        ),
    )
    return NO_INTER_POD if result.empty else result


def existing_scoring(pod: Mapping[str, Any]) -> tuple[WeightedTerm, ...]:
    """The terms with which a running pod scores newcomers: its required pod affinity at
    HARD_POD_AFFINITY_WEIGHT, its preferred affinity and anti-affinity at their weights. Read
    strictly, each unreadable term dropped (see the module docstring)."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    if not isinstance(affinity, Mapping):
        return ()
    seek = affinity.get("podAffinity") or {}
    shun = affinity.get("podAntiAffinity") or {}
    terms: list[WeightedTerm] = []
    if isinstance(seek, Mapping):
        for i, raw in enumerate(seek.get(REQUIRED) or ()):
            try:
                term = parse_affinity_term(raw, namespace, f"[{i}]")
            except UnsupportedConstraintError:
                continue
            terms.append(WeightedTerm(HARD_POD_AFFINITY_WEIGHT, term))
    terms += _preferred(seek, 1, namespace) + _preferred(shun, -1, namespace)
    return tuple(terms)


def existing_anti_affinity(pod: Mapping[str, Any]) -> tuple[AffinityTerm, ...]:
    """A running pod's required anti-affinity, leniently (widened where unreadable).

    A term that cannot be read at all (no topologyKey) is dropped: it cannot name a domain.
    """
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    anti = ((pod.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity") or {}
    terms: list[AffinityTerm] = []
    for i, raw in enumerate(anti.get(REQUIRED) or ()):
        try:
            terms.append(parse_affinity_term(raw, namespace, f"[{i}]", strict=False))
        except UnsupportedConstraintError:
            continue
    return tuple(terms)


@dataclass(frozen=True, slots=True)
class PodInfo:
    """The facts the snapshot keeps about one pod holding (or assumed onto) a node."""

    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str]
    request: Resources
    priority: int = 0
    ports: tuple[HostPort, ...] = ()
    anti_affinity: tuple[AffinityTerm, ...] = ()
    scoring: tuple[WeightedTerm, ...] = ()
    """The terms with which this pod scores newcomers they select (`existing_scoring`)."""
    gang: GroupKey | None = None
    """The pod's gang; None for a pod outside any gang (a gang of one when preempting)."""
    claims: tuple[str, ...] = ()
    """The PVCs it mounts (`pod_claims`): its volumes count against its node's attach limits."""
    disks: tuple[Disk, ...] = ()
    """The in-tree disks it mounts inline (`pod_disks`): they count against the node's limits,
    and keep conflicting mounts of the same disk off its node."""
    terminating: bool = False
    """Has a deletionTimestamp: still holds its room, but is on its way out."""
    unit: tuple[str, str, str] = ("", "", "")
    """What preemption evicts together: ("gang", namespace, name), else ("pod", namespace, uid).
    Filled in from `gang` when not given; stored because preemption reads it for every pod."""

    def __post_init__(self) -> None:
        if not self.unit[0]:
            unit = (
                ("gang", *self.gang) if self.gang is not None else ("pod", self.namespace, self.uid)
            )
            object.__setattr__(self, "unit", unit)


def pod_priority(pod: Mapping[str, Any]) -> int:
    """`spec.priority`, which the Priority admission plugin resolves from priorityClassName."""
    value = (pod.get("spec") or {}).get("priority")
    return int(value) if isinstance(value, int) else 0


TermsT = TypeVar("TermsT", tuple[AffinityTerm, ...], tuple[WeightedTerm, ...])


@functools.lru_cache(maxsize=4096)
def _interned(terms: TermsT) -> TermsT:
    """One shared copy of equal parsed terms: every pod of a Deployment or a gang carries the
    same terms (docs/decisions/010-placement-keeps-what-a-shape-learnt.md). Bounded, as a busy
    cluster keeps bringing terms with new selectors."""
    return terms


def pod_info(
    pod: Mapping[str, Any], uid: str, request: Resources, gang_of: GangOf | None = None
) -> PodInfo:
    """The snapshot's view of a raw pod (see `PodInfo`)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    affinity = spec.get("affinity")
    return PodInfo(
        uid=uid,
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        labels=dict(meta.get("labels") or {}),
        request=request,
        priority=pod_priority(pod),
        ports=host_ports(pod) if _has_ports(spec) else (),
        anti_affinity=_interned(existing_anti_affinity(pod)) if affinity else (),
        scoring=_interned(existing_scoring(pod)) if affinity else (),
        gang=gang_of(pod) if gang_of is not None else None,
        claims=pod_claims(pod) if spec.get("volumes") else (),
        disks=pod_disks(pod) if spec.get("volumes") else (),
        terminating=bool(meta.get("deletionTimestamp")),
    )


def _has_ports(spec: Mapping[str, Any]) -> bool:
    return any(c.get("ports") for c in spec.get("containers") or ()) or any(
        c.get("ports") for c in spec.get("initContainers") or ()
    )
