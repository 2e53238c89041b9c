"""The filters that depend on other pods: inter-pod affinity, topology spread, host ports, volumes.

kube-scheduler evaluates these in two steps (PreFilter over the whole cluster, then Filter per
node), and so does `member_check`: it reads the snapshot once for one member at one moment —
which domains hold pods its affinity wants or its anti-affinity shuns, which domains running
pods' anti-affinity closes to it, how many matching pods each spread domain has — and returns a
`MemberCheck` whose `verdict(node)` is a few dictionary lookups. Because assumed gang members are
in the snapshot like bound pods, checking member k after members 1..k-1 were assumed makes the
gang's own constraints hold between its members.

The rules follow the upstream plugins:

- InterPodAffinity: a required affinity term is met on a node whose topology domain (the value of
  its `topologyKey` label) holds a pod matching *all* the pod's affinity terms; the first pod of
  a group that matches its own terms may go anywhere the keys exist, when no such pod exists
  yet. An anti-affinity term fails on a node whose domain holds a matching pod. A running pod's
  required anti-affinity that selects the newcomer closes its domain to the newcomer (symmetry).
  Its score: see `interpod_score.py`.
- PodTopologySpread: see `spread.py` for the domains and counts; a node fails `DoNotSchedule`
  when count + self-match - global minimum exceeds maxSkew.
- NodePorts: a wanted host port conflicts with one in use on the node (same protocol and port,
  same IP or either 0.0.0.0).
- VolumeBinding: see `volumes.py`; the PVs and promises are the snapshot's (`snapshot.volumes`).
"""

from __future__ import annotations

from collections import ChainMap, Counter
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from podgroup_operator.scheduling.filters import (
    HOSTNAME_LABEL,
    Constraints,
    Exclusion,
    Parenthesized,
    Rejection,
)
from podgroup_operator.scheduling.interpod_score import PreferredCounts, PreferredScore
from podgroup_operator.scheduling.podinfo import (
    HostPort,
    InterPodConstraints,
    PortWants,
)
from podgroup_operator.scheduling.scores import MAX_SCORE, WEIGHT_INTER_POD, WEIGHT_SPREAD
from podgroup_operator.scheduling.selectors import AffinityTerm
from podgroup_operator.scheduling.snapshot import NodeState, PodEntry, Snapshot
from podgroup_operator.scheduling.snapshot_volumes import VolumeState
from podgroup_operator.scheduling.spread import SpreadCounts, SpreadState, spread_counts
from podgroup_operator.scheduling.volumes import (
    Attachment,
    Disk,
    DiskCounts,
    VolumeClaim,
    VolumeDecision,
    choose_volumes,
    claim_attachment,
    exceeds_attach_limits,
    pod_level_problem,
)

LASTING = frozenset({Exclusion.PORTS, Exclusion.POD_ANTI_AFFINITY})
"""Rejections that members of one shape placed one after another keep meeting on a node: the
ports in use and the domains the shape's own anti-affinity closes only grow as members are
assumed (so does the room they take). Spread and the anti-affinity of other pods (which depends
on each member's labels) may change either way; affinity too, until it is settled
(`LASTING_SETTLED`)."""
LASTING_SETTLED = LASTING | {Exclusion.POD_AFFINITY}
"""`LASTING` once some pod matches every required affinity term. From then on the first-pod
rule (any domain, for a pod matching its own terms while no pod does) never applies again, so
the domains that satisfy a term can only grow by a member placed in a domain outside them, which
the filter forbids: a node refused for affinity stays refused while the shape is placed. Before
then, a member whose labels do not match its terms is refused everywhere, and a later member
whose labels do may go anywhere (the property tests draw such gangs). Lasting, such refusals
spare members seeking each other's zone a walk of every node of the other zones."""


@dataclass(slots=True)
class MemberCheck:
    """Filters (and the spread score) for one pod, valid until the snapshot changes."""

    affinity: tuple[tuple[AffinityTerm, AbstractSet[str] | None], ...] = ()
    """Each required affinity term with the domains that satisfy it (None: any domain, the
    first-pod rule)."""
    anti_affinity: tuple[tuple[AffinityTerm, AbstractSet[str]], ...] = ()
    """Each required anti-affinity term with the domains it closes."""
    existing: tuple[tuple[AffinityTerm, AbstractSet[str]], ...] = ()
    """Running pods' anti-affinity terms selecting this pod, with the domains they close."""
    hard: tuple[SpreadState, ...] = ()
    soft: tuple[SpreadState, ...] = ()
    spread_keys: tuple[str, ...] = ()
    ports: tuple[HostPort, ...] = ()
    claims: tuple[VolumeClaim, ...] = ()
    claim_classes: tuple[str, ...] = ()
    disks: tuple[Disk, ...] = ()
    """The member's own inline in-tree disks (they differ from member to member)."""
    inline: DiskCounts = field(init=False, repr=False, compare=False)
    """`disks` counted once for every node the member visits (a pod may name thousands)."""
    wanted_ports: PortWants = field(init=False, repr=False, compare=False)
    """`ports` by protocol and number, for the same reason."""
    _limit_keys: frozenset[str] | None = field(default=None, init=False, repr=False, compare=False)
    """`limit_keys`, once asked."""
    volume_state: VolumeState | None = field(default=None, repr=False)
    """The snapshot's volumes, which `volumes` reads live."""
    lasting: frozenset[Exclusion] = LASTING
    """The exclusions this member's rejections share with the shape's later members:
    `nodeorder.choose` drops such nodes from their walks."""
    preferred: PreferredScore | None = None
    """Preferred pod (anti-)affinity's score; None when it scores every node alike."""

    def __post_init__(self) -> None:
        self.inline = DiskCounts.of(self.disks)
        self.wanted_ports = PortWants.of(self.ports)

    @property
    def scored(self) -> bool:
        """True when `dynamic_score` can differ between nodes."""
        return bool(self.soft) or self.preferred is not None

    @property
    def soft_per_node(self) -> bool:
        """True when the dynamic score differs between nodes of one class (hostname domains)."""
        return any(s.constraint.topology_key == HOSTNAME_LABEL for s in self.soft) or (
            self.preferred is not None and HOSTNAME_LABEL in self.preferred.sums
        )

    def allows_class(self, labels: Mapping[str, str]) -> bool:
        """False when a node with these class labels (no hostname) surely fails the affinity or
        anti-affinity filters here: a term's key missing, or its domain not wanted or closed.
        Hostname-keyed terms are left to `verdict`."""
        for term, allowed in self.affinity:
            key = term.topology_key
            if key == HOSTNAME_LABEL:
                continue
            value = labels.get(key)
            if value is None or (allowed is not None and value not in allowed):
                return False
        for pairs in (self.anti_affinity, self.existing):
            for term, closed in pairs:
                value = labels.get(term.topology_key)
                if value is not None and value in closed:
                    return False
        return True

    def dynamic_score(self, labels: Mapping[str, str], *, upper: bool = False) -> float:
        """The weighted scores that depend on other pods: soft spread and preferred pod
        (anti-)affinity. `upper` as in `spread_score`."""
        total = 0.0
        if self.soft:
            total += WEIGHT_SPREAD * self.spread_score(labels, upper=upper)
        if self.preferred is not None:
            total += WEIGHT_INTER_POD * self.preferred.score(labels, upper=upper)
        return total

    def verdict(self, node: NodeState) -> Rejection | None:
        """None when the node passes every filter here, else the first failure (upstream order:
        NodePorts, VolumeBinding, PodTopologySpread, InterPodAffinity)."""
        if self.ports and node.ports:
            taken = self.wanted_ports.conflict(node.ports)
            if taken is not None:
                return Rejection(Exclusion.PORTS, Parenthesized(taken))
        if self.claims or self.disks:
            verdict, _ = self.volumes(node)
            if verdict is not None:
                return verdict
        labels = node.facts.labels
        for state in self.hard:
            constraint = state.constraint
            value = labels.get(constraint.topology_key)
            if value is None:
                return Rejection(Exclusion.SPREAD_LABEL, Parenthesized(constraint.topology_key))
            if state.counts.get(value, 0) + state.self_match - state.minimum > constraint.max_skew:
                return Rejection(Exclusion.SPREAD, Parenthesized(constraint))
        for term, allowed in self.affinity:
            value = labels.get(term.topology_key)
            if value is None or (allowed is not None and value not in allowed):
                return Rejection(Exclusion.POD_AFFINITY, Parenthesized(term))
        for term, closed in self.anti_affinity:
            value = labels.get(term.topology_key)
            if value is not None and value in closed:
                return Rejection(Exclusion.POD_ANTI_AFFINITY, Parenthesized(term))
        for term, closed in self.existing:
            value = labels.get(term.topology_key)
            if value is not None and value in closed:
                return Rejection(Exclusion.EXISTING_ANTI_AFFINITY, Parenthesized(term))
        return None

    def volumes(self, node: NodeState) -> tuple[Rejection | None, tuple[VolumeDecision, ...]]:
        """The volume filters for the node (VolumeRestrictions on inline disks, VolumeBinding
        and VolumeZone, then attach limits) and, when they pass, what to do per claim.

        Attach limits come after the choice of volumes, unlike upstream's order, so that a
        claim not bound yet counts as the volume it would get on this node: the CSI PV chosen
        for it, else its class's provisioner. Upstream counts every claim not bound as its
        class's provisioner, so a static CSI PV of a class without one escaped its limit."""
        if not self.claims and not self.disks:
            return None, ()
        assert self.volume_state is not None
        state = self.volume_state
        inline = self.inline
        if inline.by_name and state.disk_conflict(node.name, inline.by_name):
            return Rejection(Exclusion.DISK_CONFLICT), ()
        decisions: tuple[VolumeDecision, ...] = ()
        if self.claims:
            labels = node.facts.labels
            candidates = state.candidates(self.claim_classes, labels.get(HOSTNAME_LABEL))
            rejection, decisions = choose_volumes(
                self.claims,
                node.name,
                labels,
                candidates,
                state.pvs,
                state.holders,
                state.claim_decisions,
            )
            if rejection is not None:
                return rejection, ()
        if not self.limit_keys():
            return None, decisions  # no node limits anything this member mounts
        limits = state.attach_limits(node)
        if not any(key in limits for key in self.limit_keys()):
            return None, decisions  # nothing this member mounts is limited here
        claimed = self._attaching(decisions) if self.claims else {}
        if claimed or inline.attaching:
            new: Mapping[str, str] = claimed
            counts: Mapping[str, int] | None = None
            if not claimed:
                new, counts = inline.attaching, inline.counts
            elif inline.attaching:
                new = ChainMap(claimed, inline.attaching)
                more = Counter(k for u, k in claimed.items() if u not in inline.attaching)
                counts = more + Counter(inline.counts)
            keys = counts if counts is not None else claimed.values()
            if any(key in limits for key in keys) and exceeds_attach_limits(
                new, state.node_attachments(node.name), limits, counts
            ):
                return Rejection(Exclusion.VOLUME_LIMITS), ()
        return None, decisions

    def limit_keys(self) -> frozenset[str]:
        """Every limit key this member's volumes may count against on some node: its disks',
        each claim's PV's (bound, or any of its class) and its provisioner's, of those some
        node limits. Asked first on each node, so that a member whose volumes no node limits
        (most claims are of drivers without limits) costs no count."""
        if self._limit_keys is None:
            assert self.volume_state is not None
            state = self.volume_state
            keys = set(self.inline.counts)
            for claim in self.claims:
                keys.update(state.class_limit_keys(claim.storage_class))
                decided = state.claim_decisions.get(claim.key)
                for name in (claim.volume, decided.volume if decided else None):
                    pv = state.pvs.get(name) if name else None
                    if pv is not None and (attachment := pv.attachment) is not None:
                        keys.add(attachment[1])
                for provisioner in (claim.provisioner, decided.provisioner if decided else ""):
                    found = claim_attachment(claim.namespace, claim.name, provisioner)
                    if found is not None:
                        keys.add(found[1])
            self._limit_keys = frozenset(k for k in keys if state.may_limit(k))
        return self._limit_keys

    def _attaching(self, decisions: Sequence[VolumeDecision]) -> dict[str, str]:
        """The volumes this member's claims bring to a node where these are its decisions."""
        assert self.volume_state is not None
        volumes = self.volume_state.pvs
        earlier = self.volume_state.claim_decisions
        mine = {d.key: d for d in decisions}
        new: dict[str, str] = {}
        for claim in self.claims:
            decision = mine.get(claim.key) or earlier.get(claim.key)
            name = claim.volume or (decision.volume if decision is not None else None)
            found: Attachment | None
            if name is not None and (pv := volumes.get(name)) is not None:
                found = pv.attachment
            else:
                provisioner = decision.provisioner if decision is not None else ""
                found = claim_attachment(
                    claim.namespace, claim.name, provisioner or claim.provisioner
                )
            if found is not None:
                new[found[0]] = found[1]
        return new

    def spread_score(self, labels: Mapping[str, str], *, upper: bool = False) -> float:
        """The soft-spread score (0..100) of a node with these labels; 0 when a key is missing.

        `upper=True` scores hostname domains as if they held the minimum count, which bounds the
        score of every node of a class from above (a scored walk stops early on it).
        """
        if not self.soft:
            return 0.0
        total = weights = 0.0
        for state in self.soft:
            weights += state.weight
            key = state.constraint.topology_key
            if upper and key == HOSTNAME_LABEL:
                total += state.weight * MAX_SCORE  # class facts carry no hostname
                continue
            value = labels.get(key)
            if value is None:
                return 0.0
            total += state.weight * state.score(value)
        return total / weights


def _matching_every(snapshot: Snapshot, terms: Sequence[AffinityTerm]) -> list[PodEntry]:
    """Pods on nodes that every term selects (required pod affinity wants all of them met)."""
    first, rest = terms[0], terms[1:]
    return [
        entry
        for entry in snapshot.pod_index.pods_matching(first.selector, first.namespaces)
        if all(t.matches(entry.info.namespace, entry.info.labels) for t in rest)
    ]


def _wanted_domains(
    snapshot: Snapshot, terms: Sequence[AffinityTerm], matched: Sequence[PodEntry]
) -> list[set[str]]:
    """Per affinity term, the domains (its topology key's values) of the `matched` pods."""
    nodes = snapshot.nodes
    return [
        {
            v
            for entry in matched
            if (v := nodes[entry.node].facts.labels.get(term.topology_key)) is not None
        }
        for term in terms
    ]


def _closed_by_others(
    snapshot: Snapshot, namespace: str, labels: Mapping[str, str]
) -> dict[AffinityTerm, set[str]]:
    """Placed pods' anti-affinity terms that select a pod with `namespace` and `labels`, each with
    the domains of the nodes of the pods carrying it (possibly none: a node without the key)."""
    closed: dict[AffinityTerm, set[str]] = {}
    if not snapshot.pod_index.has_anti_affinity:
        return closed
    nodes = snapshot.nodes
    for term, holders in snapshot.pod_index.anti_affinity_against(namespace, labels):
        domains = closed.setdefault(term, set())
        for name in holders:
            state = nodes.get(name)
            if state is not None:
                value = state.facts.labels.get(term.topology_key)
                if value is not None:
                    domains.add(value)
    return closed


def _closed_domains(snapshot: Snapshot, term: AffinityTerm) -> frozenset[str]:
    key = term.topology_key
    nodes = snapshot.nodes
    values = set()
    for entry in snapshot.pod_index.pods_matching(term.selector, term.namespaces):
        value = nodes[entry.node].facts.labels.get(key)
        if value is not None:
            values.add(value)
    return frozenset(values)


def member_check(
    snapshot: Snapshot,
    namespace: str,
    labels: Mapping[str, str],
    constraints: InterPodConstraints,
    node_constraints: Constraints,
    claims: Sequence[VolumeClaim] = (),
    disks: Sequence[Disk] = (),
) -> MemberCheck | None:
    """The dynamic filters of one pod against the snapshot as it is now; None if it has none.

    `claims` are the pod's PVCs already resolved and checked by `claims_problem`; `disks` its
    inline in-tree disks (`pod_disks`).
    """
    existing = [
        (term, frozenset(closed))
        for term, closed in _closed_by_others(snapshot, namespace, labels).items()
        if closed
    ]
    preferred = (
        PreferredCounts(snapshot, constraints.preferred, namespace, labels).score()
        if constraints.scoring or snapshot.pod_index.has_scoring
        else None
    )
    if constraints.empty and not existing and preferred is None:
        return None
    affinity: list[tuple[AffinityTerm, frozenset[str] | None]] = []
    lasting = LASTING
    if constraints.affinity:
        terms = constraints.affinity
        wanted = _wanted_domains(snapshot, terms, _matching_every(snapshot, terms))
        if not any(wanted) and all(t.matches(namespace, labels) for t in terms):
            affinity = [(t, None) for t in terms]
        else:
            affinity = [(t, frozenset(v)) for t, v in zip(terms, wanted, strict=True)]
        if any(wanted):
            lasting = LASTING_SETTLED
    anti = tuple(
        (term, closed_here)
        for term in constraints.anti_affinity
        if (closed_here := _closed_domains(snapshot, term))
    )
    hard: list[SpreadState] = []
    soft: list[SpreadState] = []
    if constraints.spread:
        for counting in spread_counts(snapshot, constraints.spread, node_constraints, namespace):
            (hard if counting.constraint.hard else soft).append(counting.state(labels))
    return MemberCheck(
        affinity=tuple(affinity),
        anti_affinity=anti,
        existing=tuple(sorted(existing, key=lambda pair: str(pair[0]))),  # stable messages
        hard=tuple(hard),
        soft=tuple(soft),
        spread_keys=tuple(sorted({c.topology_key for c in constraints.spread})),
        ports=constraints.ports,
        claims=tuple(claims),
        claim_classes=_claim_classes(claims),
        disks=tuple(disks),
        volume_state=snapshot.volumes,
        lasting=lasting,
        preferred=preferred,
    )


def _claim_classes(claims: Sequence[VolumeClaim]) -> tuple[str, ...]:
    """The StorageClasses of the claims not bound yet: whose static PVs a node may offer."""
    return tuple(sorted({c.storage_class for c in claims if c.volume is None}))


class MemberChecks:
    """The checks of one shape's members placed one after another, each after the previous one
    was assumed: `check(labels)` for the next member, `assumed(node, labels, namespace)` once it
    is booked.

    A member's anti-affinity closes the domains of every pod its terms select, every earlier
    member's terms may close domains to it, its affinity wants the domains of every pod matching
    its terms, and its spread counts every matching pod; recounted for each member, a gang's
    checks would be quadratic in its size
    (docs/decisions/010-placement-keeps-what-a-shape-learnt.md). So these domains and counts are
    counted once and then grow with each member assumed, which is what a recount would find: the
    snapshot changes by nothing else between members. Claims do not change that: a member's volumes
    are read live from the snapshot's PVs and promises (`MemberCheck.volumes`) and never enter the
    counts. Running pods' terms are counted afresh only for a member whose labels differ from the
    previous one's.
    """

    def __init__(
        self,
        snapshot: Snapshot,
        namespace: str,
        constraints: InterPodConstraints,
        node_constraints: Constraints,
    ) -> None:
        self.snapshot = snapshot
        self.namespace = namespace
        self.constraints = constraints
        self.node_constraints = node_constraints
        self.incremental = True
        """False checks each member afresh with `member_check`: the plain algorithm, which the
        property tests compare this with."""
        self._own: dict[AffinityTerm, set[str]] | None = None
        self._spread: list[SpreadCounts] = []
        self._wanted: list[set[str]] = []
        """Per required affinity term, the domains of pods matching every term."""
        self._any_wanted = False
        """Whether a pod matching every affinity term runs on a node with one of the terms'
        topology keys (else the first-pod rule may apply). A matching pod on a node without
        the keys counts for nothing, as upstream counts it (its `affinityCounts` record only
        the pairs a node has): counted, it kept a pod with affinity to its own kind off every
        node, where kube-scheduler placed it (tests/integration/
        test_kube_scheduler_agreement.py)."""
        self._existing: dict[AffinityTerm, set[str]] = {}
        self._existing_for: tuple[tuple[str, str], ...] | None = None
        self._existing_labels: Mapping[str, str] | None = None
        """The labels `_existing` was counted for (None: not yet counted)."""
        self._names: dict[AffinityTerm, str] = {}
        self._spread_keys = tuple(sorted({c.topology_key for c in constraints.spread}))
        self._preferred: PreferredCounts | None = None
        """InterPodAffinity's sums, counted for the labels `_existing` was counted for."""
        self._scored = False
        """Whether members are scored by pod terms: the shape's own, or running pods'."""

    def check(
        self,
        labels: Mapping[str, str],
        claims: Sequence[VolumeClaim] = (),
        disks: Sequence[Disk] = (),
    ) -> MemberCheck | None:
        """The next member's check, as `member_check` would return it now."""
        if not self.incremental:
            return member_check(
                self.snapshot,
                self.namespace,
                labels,
                self.constraints,
                self.node_constraints,
                claims,
                disks,
            )
        if self._own is None:
            self._own = {
                term: set(_closed_domains(self.snapshot, term))
                for term in self.constraints.anti_affinity
            }
            terms = self.constraints.affinity
            if terms:
                matched = _matching_every(self.snapshot, terms)
                self._wanted = _wanted_domains(self.snapshot, terms, matched)
                self._any_wanted = any(self._wanted)
            self._spread = spread_counts(
                self.snapshot, self.constraints.spread, self.node_constraints, self.namespace
            )
            # The shape's own scoring terms score its later members once one is assumed.
            self._scored = bool(self.constraints.scoring) or self.snapshot.pod_index.has_scoring
        key = tuple(sorted(labels.items()))
        if key != self._existing_for:
            self._existing = _closed_by_others(self.snapshot, self.namespace, labels)
            self._existing_for, self._existing_labels = key, dict(labels)
            if self._scored:
                self._preferred = PreferredCounts(
                    self.snapshot, self.constraints.preferred, self.namespace, labels
                )
        existing = [(term, closed) for term, closed in self._existing.items() if closed]
        preferred = self._preferred.score() if self._preferred is not None else None
        if self.constraints.empty and not existing and preferred is None:
            return None  # as `member_check`: nothing here depends on other pods
        existing.sort(key=lambda pair: self._name(pair[0]))  # member_check's order
        states = [counting.state(labels) for counting in self._spread]
        terms = self.constraints.affinity
        affinity: tuple[tuple[AffinityTerm, AbstractSet[str] | None], ...]
        if not self._any_wanted and all(t.matches(self.namespace, labels) for t in terms):
            affinity = tuple((term, None) for term in terms)  # the first pod of its kind
        else:
            affinity = tuple(zip(terms, self._wanted, strict=True))
        return MemberCheck(
            affinity=affinity,
            anti_affinity=tuple((term, closed) for term, closed in self._own.items() if closed),
            existing=tuple(existing),
            hard=tuple(state for state in states if state.constraint.hard),
            soft=tuple(state for state in states if not state.constraint.hard),
            spread_keys=self._spread_keys,
            ports=self.constraints.ports,
            claims=tuple(claims),
            claim_classes=_claim_classes(claims),
            disks=tuple(disks),
            volume_state=self.snapshot.volumes,
            lasting=LASTING_SETTLED if terms and self._any_wanted else LASTING,
            preferred=preferred,
        )

    def assumed(self, node: NodeState, labels: Mapping[str, str], namespace: str) -> None:
        """A member of this shape (`labels`, in `namespace`) was just assumed on `node`, and
        nothing else changed: it carries the shape's terms and may match them."""
        if not self.incremental or self._own is None:
            return
        for counting in self._spread:
            counting.add(node, namespace, labels)
        node_labels = node.facts.labels
        if self._preferred is not None:
            self._preferred.add(node_labels, namespace, labels, self.constraints.scoring)
        terms = self.constraints.affinity
        if terms and all(t.matches(namespace, labels) for t in terms):
            for term, wanted in zip(terms, self._wanted, strict=True):
                value = node_labels.get(term.topology_key)
                if value is not None:
                    wanted.add(value)  # it matches every term: its domains are wanted
                    self._any_wanted = True
        for term in self.constraints.anti_affinity:
            value = node_labels.get(term.topology_key)
            if value is None:
                continue
            if term.matches(namespace, labels):
                self._own[term].add(value)  # a pod the term selects now holds this domain
            if self._existing_labels is not None and term.matches(
                self.namespace, self._existing_labels
            ):
                # Its term selects the members `_existing` was counted for: closed to them.
                self._existing.setdefault(term, set()).add(value)

    def _name(self, term: AffinityTerm) -> str:
        name = self._names.get(term)
        if name is None:
            name = self._names[term] = str(term)
        return name


def claims_problem(
    snapshot: Snapshot,
    namespace: str,
    names: Sequence[str],
    known: Mapping[tuple[str, str], VolumeClaim],
) -> tuple[str | None, tuple[VolumeClaim, ...]]:
    """The pod-level volume refusal (or None) and the pod's resolved claims."""
    problem = pod_level_problem(names, namespace, known, snapshot.volumes.pvs)
    if problem is not None:
        return problem, ()
    return None, tuple(known[(namespace, name)] for name in names)
