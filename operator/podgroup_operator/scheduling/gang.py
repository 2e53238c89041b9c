"""What the scheduling core is asked (a `GangRequest` with its sub-group tree), what it answers
(a `Placement` or a `Refusal`), and what a request costs to decide.

Its own module because the queue (which orders requests), placement (which decides them),
preemption and the holds all read these types, and none of them should import another for
them. Requests hold pod dicts as the informers' stores keep them (slim copies with the fields the
scheduler reads), not parsed models: each decision parses what it reads, once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from podgroup_operator.api.keys import GroupKey
from podgroup_operator.constants import GangMode, Reason
from podgroup_operator.scheduling.podinfo import PREFERRED, REQUIRED
from podgroup_operator.scheduling.snapshot import NO_UNDO, Undo
from podgroup_operator.scheduling.topology import Domain, TopologyRequest
from podgroup_operator.scheduling.volumes import VolumeClaim, VolumeDecision


class PreemptionPolicy(StrEnum):
    """`PriorityClass.preemptionPolicy`: may this gang evict lower-priority gangs?"""

    PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
    NEVER = "Never"


@dataclass(frozen=True)
class SubGroupNode:
    """One sub-group of the tree: a leaf with its members, or a parent with its children.

    `min_member` is the least that satisfies it (a parent without one: what its counted
    children need); `min_sub_group` how many children must be satisfied (None: all)."""

    name: str
    min_member: int
    min_sub_group: int | None = None
    topology: TopologyRequest | None = None
    children: tuple[SubGroupNode, ...] = ()
    pending: tuple[Mapping[str, Any], ...] = ()
    bound: frozenset[str] = frozenset()
    placed: tuple[str, str] | None = None
    """(level, domain value) the sub-group was last placed in (`status.placement`): tried
    first, so replacements go back where the sub-group was."""

    def subtree_pending(self) -> list[Mapping[str, Any]]:
        return [*self.pending, *(p for c in self.children for p in c.subtree_pending())]

    def subtree_bound(self) -> frozenset[str]:
        return self.bound.union(*(c.subtree_bound() for c in self.children))


@dataclass(frozen=True)
class SubGroupTree:
    """A gang's sub-groups: the top ones, how many of them must be satisfied, and the members
    that belong to no sub-group (`loose`, placed within the gang's domain after the tree)."""

    roots: tuple[SubGroupNode, ...]
    min_sub_group: int | None = None
    loose: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class GangRequest:
    """One PodGroup waiting for placement, with its pending members.

    `already_bound` members (bound or running, placed in an earlier cycle or by anyone) count
    toward `min_member`. `bound_uids` names those of them the snapshot knows, so their requests
    can be counted back when `min_resources` is compared with the cluster's free capacity.
    `satisfied_before` is the "once satisfied" latch: a gang that has already run whole gets
    its replacements placed one by one, without the all-or-nothing barrier.
    """

    namespace: str
    name: str
    min_member: int
    pending: Sequence[Mapping[str, Any]] = ()
    uid: str = ""
    mode: GangMode = GangMode.STRICT
    already_bound: int = 0
    bound_uids: frozenset[str] = frozenset()
    satisfied_before: bool = False
    min_resources: Mapping[str, int] | None = None
    """Milli-units per resource, or None."""
    priority: int = 0
    """The members' `spec.priority` (resolved from their PriorityClass at admission)."""
    created: datetime | None = None
    last_failure: datetime | None = None
    claims: Mapping[tuple[str, str], VolumeClaim] = field(default_factory=dict)
    """The members' PersistentVolumeClaims by (namespace, name), each resolved with its
    StorageClass (`volumes.volume_claim`). A member mounting a claim missing here waits."""
    preemption_policy: PreemptionPolicy = PreemptionPolicy.PREEMPT_LOWER_PRIORITY
    """The members' `spec.preemptionPolicy`; Never means the gang waits instead of evicting."""
    topology: TopologyRequest | None = None
    """`spec.topologyConstraint`, resolved: the domains the placement generator searches."""
    within: Domain | None = None
    """The one domain this attempt may use (set by the placement generator), or anywhere."""
    sub_groups: SubGroupTree | None = None
    """`spec.subGroups` with the members in their leaves (`subgroups.sub_group_tree`)."""

    @property
    def key(self) -> GroupKey:
        return (self.namespace, self.name)

    @property
    def label(self) -> str:
        """`namespace/name`, as messages name a group."""
        return f"{self.namespace}/{self.name}"

    @property
    def partly_bound(self) -> bool:
        """Some members hold nodes while the gang is short of minMember (queue order)."""
        return 0 < self.already_bound < self.min_member


NODE_EXPRESSION_COST = 0.5
"""Microseconds a node-affinity expression may cost on each node (see `decision_cost`;
docs/decisions/008-worker-thread-decisions.md)."""
POD_TERM_COST = 1.0
"""Microseconds a pod term may cost for each placed pod (see `decision_cost`;
docs/decisions/008-worker-thread-decisions.md)."""
NODE_VALUE_COST = 0.01
"""Microseconds each value of a node-affinity expression may cost on each node: an `In` list is
searched (docs/decisions/008-worker-thread-decisions.md)."""
HOST_PORT_COST = 1.5
"""Microseconds a wanted host port may cost on each node: a lookup among the node's own
(docs/decisions/008-worker-thread-decisions.md)."""


def decision_cost(requests: Sequence[GangRequest], *, pods: int, nodes: int) -> float:
    """An upper bound, in microseconds, of what the requests' constraints add to a decision:
    their pod terms (`pod_terms`) walk the placed pods, their node-affinity expressions and
    the values these list (`node_affinity_size`) and host ports (`host_port_count`) the nodes.

    The cost of a decision grows with these, not only with the members; the scheduler decides a
    gang that may cost `DECIDE_IN_THREAD_COST_US` in its worker thread
    (docs/decisions/008-worker-thread-decisions.md).
    """
    pending = [pod for request in requests for pod in request.pending]
    constrained = [
        pod
        for pod in pending
        if (spec := pod.get("spec") or {}).get("affinity") or spec.get("topologySpreadConstraints")
    ]
    cost = host_port_count(pending) * nodes * HOST_PORT_COST
    if not constrained:
        return cost  # most gangs: nothing, a few microseconds for ten members
    expressions, values = node_affinity_size(constrained)
    return (
        cost
        + pod_terms(constrained) * pods * POD_TERM_COST
        + expressions * nodes * NODE_EXPRESSION_COST
        + values * nodes * NODE_VALUE_COST
    )


def host_port_count(pods: Iterable[Mapping[str, Any]]) -> int:
    """The container ports of `pods` that bind a host port, each containers list counted once
    (a template's members share theirs in the informers' stores)."""
    seen: set[int] = set()
    total = 0
    for pod in pods:
        spec = pod.get("spec") or {}
        for containers in _once([spec.get("containers"), spec.get("initContainers")], seen):
            for container in containers:
                total += sum(1 for port in container.get("ports") or () if port.get("hostPort"))
    return total


def _once(lists: Iterable[Any], seen: set[int]) -> Iterator[Any]:
    """The non-empty lists not seen yet (by identity: a template's members share theirs in
    the informers' stores, `adapters/slim.py`; lists not shared count for each member, which
    only errs towards the thread)."""
    for value in lists:
        if value and id(value) not in seen:
            seen.add(id(value))
            yield value


def pod_terms(pods: Iterable[Mapping[str, Any]]) -> int:
    """The pod affinity and anti-affinity terms (required and preferred) and topology spread
    constraints of `pods`, each list counted once."""
    seen: set[int] = set()
    total = 0
    for pod in pods:
        spec = pod.get("spec") or {}
        affinity = spec.get("affinity") or {}
        lists = [spec.get("topologySpreadConstraints")]
        for kind in ("podAffinity", "podAntiAffinity"):
            terms = affinity.get(kind) or {}
            lists.extend(terms.get(key) for key in (REQUIRED, PREFERRED))
        total += sum(len(terms) for terms in _once(lists, seen))
    return total


def node_affinity_size(pods: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """(expressions, values) of `pods`' node affinities: their `matchExpressions` and
    `matchFields`, required and preferred, and the values these list, each affinity counted
    once, in one walk."""
    seen: set[int] = set()
    expressions = values = 0
    for pod in pods:
        affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity")
        for node_affinity in _once([affinity], seen):
            required = node_affinity.get(REQUIRED) or {}
            preferred = node_affinity.get(PREFERRED) or ()
            terms = list(required.get("nodeSelectorTerms") or ())
            terms += [weighted.get("preference") or {} for weighted in preferred]
            for term in terms:
                for kind in ("matchExpressions", "matchFields"):
                    listed = term.get(kind) or ()
                    expressions += len(listed)
                    values += sum(len(e.get("values") or ()) for e in listed)
    return expressions, values


@dataclass(frozen=True)
class Binding:
    """One decision: this pod goes to this node."""

    namespace: str
    pod: str
    pod_uid: str
    node: str
    volumes: tuple[VolumeDecision, ...] = ()
    """What to do for the pod's unbound claims before binding it (see `VolumeDecision`)."""


@dataclass(frozen=True)
class Placement:
    """The gang fits: bind these pods. The snapshot already holds them as assumed, each until
    its bound pod arrives through the watch and replaces it.

    A pod whose bind fails is taken out of the snapshot alone (`Snapshot.remove_pod`, as the
    live scheduler's `Binder._unassume` does), so the members already bound keep their room.
    `undo` releases the whole placement at once, for a caller that binds none of it (`bench
    core`). `unplaced` names pending members beyond minMember that did not fit this time.
    """

    gang: GroupKey
    bindings: tuple[Binding, ...]
    unplaced: tuple[str, ...] = ()
    undo: Undo = field(default=NO_UNDO, compare=False, repr=False)
    domain: Domain | None = None
    """The topology domain the members were placed in (None: no topology constraint, or
    placed cluster-wide)."""
    sub_domains: tuple[tuple[str, Domain], ...] = ()
    """(sub-group, domain) of each sub-group placed under a topology constraint."""


@dataclass(frozen=True)
class Refusal:
    """The gang does not fit now; `message` says by how much, so a person can act on it.

    `partial` is only ever non-empty for NonStrict gangs: members that fit are kept assumed in
    the snapshot (bind them, and they count as `already_bound` next cycle); `undo` releases them.
    """

    gang: GroupKey
    reason: Reason
    message: str
    partial: tuple[Binding, ...] = ()
    undo: Undo = field(default=NO_UNDO, compare=False, repr=False)
    fit: int = 0
    """Members that did fit at the same time in the attempt refused."""


@dataclass(frozen=True)
class GangGroupPlacement:
    """Every PodGroup of a gang group fits; one placement each, undone together by `undo`."""

    placements: tuple[Placement, ...]
    undo: Undo = field(default=NO_UNDO, compare=False, repr=False)

    @property
    def bindings(self) -> tuple[Binding, ...]:
        return tuple(b for p in self.placements for b in p.bindings)
