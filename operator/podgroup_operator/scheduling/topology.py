"""Topology domains: the node sets a labelled fabric is cut into, and what a gang asks of them.

A level is a node label key (`example.com/rack`); a domain is one value of it. Labels need not
be unique across the fabric (rack `r1` may exist in every block), so a domain is named by its
`path`: the values of every coarser level of the chain down to its own, and two racks `r1` of
different blocks are two domains. Nodes lacking any label of the path are in no domain of that
level, so they are never candidates of a gang that asks for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from podgroup_operator.api.models import SubGroupPlacement, TopologyConstraint, TopologyPlacement
from podgroup_operator.scheduling.filters import HOSTNAME_LABEL
from podgroup_operator.scheduling.snapshot import Feasibility, NodeClass, NodeState, Snapshot

__all__ = [
    "Domain",
    "DomainNodes",
    "TopologyRequest",
    "domain_of",
    "domains_at",
    "level_name",
    "placed_in",
    "restrict",
    "topology_of",
    "topology_request",
]


@dataclass(frozen=True, slots=True)
class Domain:
    """One domain of one level: (label key, value) pairs from the coarsest level down."""

    path: tuple[tuple[str, str], ...]

    @property
    def level(self) -> str:
        return self.path[-1][0]

    @property
    def value(self) -> str:
        return self.path[-1][1]

    def holds(self, labels: Mapping[str, str]) -> bool:
        """True when a node with these labels lies in the domain."""
        return all(labels.get(key) == value for key, value in self.path)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """Where a gang must or would rather live, resolved against its Topology's levels.

    `chain` is every level that names a domain, coarse to fine (a domain's path runs along it);
    `levels` is the search: the preferred level first, then each coarser one, ending at the
    required level (or at the coarsest, and then the whole cluster, when none is required).
    `problem`, when set, says why the constraint cannot be resolved (a Topology that does not
    exist, a level it lacks): the gang waits with that message.
    """

    chain: tuple[str, ...]
    levels: tuple[str, ...]
    required: str | None
    topology: str | None = None
    problem: str | None = None

    @property
    def cluster_wide(self) -> bool:
        """With no required level, a gang that fits in no domain is placed cluster-wide."""
        return self.required is None


def topology_request(
    *,
    required: str | None,
    preferred: str | None,
    topology: str | None = None,
    topology_levels: Sequence[str] | None = None,
    above: Sequence[str] = (),
) -> TopologyRequest:
    """The request of a PodGroup's `spec.topologyConstraint`.

    With `topology`, `topology_levels` are that Topology's `spec.levels` (coarse to fine; None
    when it does not exist) and the search walks them from the preferred level up to the
    required one; without, the two levels given are the chain, the required one the coarser,
    under `above` (the chain of the domain it lies in: a sub-group's parent's), so that its
    domains are named by their path inside that one. A constraint that cannot be resolved
    gets a `problem` naming the field and the fix: admission refuses most, so this meets a
    Topology deleted or changed after its PodGroups were admitted, or one not created yet.
    """
    finest = preferred or required
    if finest is None:
        return _unresolved(
            required,
            topology,
            "spec.topologyConstraint: give requiredTopologyLevel or preferredTopologyLevel",
        )
    if topology is None:
        own = tuple(dict.fromkeys(level for level in (required, preferred) if level))
        chain = tuple(dict.fromkeys((*above, *own)))
        return TopologyRequest(chain, tuple(reversed(own)), required)
    if topology_levels is None:
        return _unresolved(
            required,
            topology,
            f"spec.topologyConstraint.topology: Topology {topology!r} does not exist; create it "
            "(kubectl get topologies lists those there are) or name another",
        )
    levels = list(topology_levels)
    named = (("requiredTopologyLevel", required), ("preferredTopologyLevel", preferred))
    for name, level in named:
        if level is not None and level not in levels:
            return _unresolved(
                required,
                topology,
                f"spec.topologyConstraint.{name}: {level!r} is not a level of Topology "
                f"{topology!r} (levels: {', '.join(levels)}); name one of them",
            )
    fine = levels.index(finest)
    coarse = levels.index(required) if required is not None else 0
    if coarse > fine:
        return _unresolved(
            required,
            topology,
            f"spec.topologyConstraint.preferredTopologyLevel: {preferred!r} is coarser than "
            f"requiredTopologyLevel {required!r} in Topology {topology!r}; prefer the required "
            "level or a finer one",
        )
    chain = tuple(levels[: fine + 1])
    return TopologyRequest(chain, tuple(reversed(levels[coarse : fine + 1])), required, topology)


def _unresolved(required: str | None, topology: str | None, problem: str) -> TopologyRequest:
    return TopologyRequest((), (), required, topology, problem)


def topology_of(
    constraint: TopologyConstraint | None,
    levels_of: Callable[[str], tuple[str, ...] | None],
    above: Sequence[str] = (),
) -> TopologyRequest | None:
    """A PodGroup's `spec.topologyConstraint` resolved against its Topology (`levels_of`, the
    levels of a Topology by name, None when there is none such), or None without one;
    `above` is the chain of the domain it lies in (`topology_request`)."""
    if constraint is None:
        return None
    name = constraint.topology
    return topology_request(
        required=constraint.required_topology_level,
        preferred=constraint.preferred_topology_level,
        topology=name,
        topology_levels=levels_of(name) if name is not None else None,
        above=above,
    )


def placed_in(
    domain: Domain | None, sub_domains: Sequence[tuple[str, Domain]] = ()
) -> TopologyPlacement | None:
    """`status.placement` of a gang placed in `domain` (its level and value) with its
    sub-groups in `sub_domains`; None when neither names a domain."""
    if domain is None and not sub_domains:
        return None
    return TopologyPlacement(
        level=None if domain is None else domain.level,
        domain=None if domain is None else domain.value,
        sub_groups=[
            SubGroupPlacement(name=name, level=where.level, domain=where.value)
            for name, where in sub_domains
        ]
        or None,
    )


def level_name(level: str) -> str:
    """`example.com/rack` -> `rack`: how messages name a level, the key following."""
    return level.rsplit("/", 1)[-1]


def _path_keys(request: TopologyRequest, level: str) -> tuple[str, ...]:
    return request.chain[: request.chain.index(level) + 1]


@dataclass(slots=True)
class DomainNodes:
    """The nodes of one domain that a gang may use: whole node classes (every level but a
    hostname one), or single nodes (a hostname level)."""

    classes: list[NodeClass] = field(default_factory=list)
    nodes: list[NodeState] = field(default_factory=list)

    def free(self, names: Iterable[str]) -> dict[str, int]:
        """The free amounts of `names` summed over the domain's usable nodes."""
        total = dict.fromkeys(names, 0)
        for node_class in self.classes:
            if node_class.facts.ready and not node_class.facts.unschedulable:
                for name in total:
                    total[name] += node_class.free.get(name, 0)
        for node in self.nodes:
            if node.usable:
                for name in total:
                    total[name] += node.free.get(name, 0)
        return total

    def node_states(self, snapshot: Snapshot) -> Iterator[NodeState]:
        nodes = snapshot.nodes
        for node_class in self.classes:
            for _, name in node_class.order:
                yield nodes[name]
        yield from self.nodes

    def __len__(self) -> int:
        return sum(len(c) for c in self.classes) + len(self.nodes)


def domains_at(
    snapshot: Snapshot,
    request: TopologyRequest,
    level: str,
    feasibilities: Sequence[Feasibility],
) -> dict[Domain, DomainNodes]:
    """The domains of `level` that hold a node passing the static filters of any of
    `feasibilities` (one per member shape), each with those nodes' classes.

    Node classes carry every label but the hostname, so domains of the coarser levels are
    unions of classes, found without looking at a node; only a hostname level looks at nodes
    one by one."""
    keys = _path_keys(request, level)
    by_class = tuple(key for key in keys if key != HOSTNAME_LABEL)
    per_node = HOSTNAME_LABEL in keys
    nodes = snapshot.nodes
    out: dict[Domain, DomainNodes] = {}
    classes_seen: set[int] = set()
    nodes_seen: set[str] = set()
    for feasibility in feasibilities:
        allowed = feasibility.allowed
        for node_class in feasibility.classes:
            labels = node_class.facts.labels
            if any(key not in labels for key in by_class):
                continue
            base = tuple((key, labels[key]) for key in by_class)
            if not per_node and allowed is None:
                if node_class.id not in classes_seen:
                    classes_seen.add(node_class.id)
                    out.setdefault(Domain(base), DomainNodes()).classes.append(node_class)
                continue
            for _, name in node_class.order:
                if (allowed is not None and name not in allowed) or name in nodes_seen:
                    continue
                nodes_seen.add(name)
                node = nodes[name]
                path = base
                if per_node:
                    host = node.facts.labels.get(HOSTNAME_LABEL)
                    if host is None:
                        continue
                    path = (*base, (HOSTNAME_LABEL, host))
                out.setdefault(Domain(path), DomainNodes()).nodes.append(node)
    return out


def restrict(snapshot: Snapshot, feasibility: Feasibility, domain: Domain) -> Feasibility:
    """`feasibility` narrowed to the nodes of `domain`: what every filter and walk then sees."""
    keys = [(key, value) for key, value in domain.path if key != HOSTNAME_LABEL]
    classes = tuple(
        c for c in feasibility.classes if all(c.facts.labels.get(k) == v for k, v in keys)
    )
    allowed = feasibility.allowed
    host = next((value for key, value in domain.path if key == HOSTNAME_LABEL), None)
    if host is not None:
        nodes = snapshot.nodes
        names = frozenset(
            name
            for c in classes
            for _, name in c.order
            if (allowed is None or name in allowed)
            and nodes[name].facts.labels.get(HOSTNAME_LABEL) == host
        )
        allowed = names
        classes = tuple(c for c in classes if any(name in names for _, name in c.order))
    return Feasibility(classes, allowed, feasibility.class_verdicts, feasibility.node_verdicts)


def domain_of(
    snapshot: Snapshot, request: TopologyRequest, level: str, uids: Iterator[str] | set[str]
) -> Domain | None:
    """The one domain of `level` holding every pod of `uids` the snapshot knows, or None when
    they are in several (or none is known, or a node lacks the level's labels)."""
    keys = _path_keys(request, level)
    found: Domain | None = None
    for uid in uids:
        entry = snapshot.pod(uid)
        if entry is None:
            continue
        node = snapshot.nodes.get(entry.node)
        if node is None:
            continue
        labels = node.facts.labels
        if any(key not in labels for key in keys):
            return None
        domain = Domain(tuple((key, labels[key]) for key in keys))
        if found is not None and domain != found:
            return None
        found = domain
    return found
