"""Quota reclaim: which borrowing gangs to evict so that a gang of a quota below its min fits.

A gang refused by its ElasticQuota (or for room, while others borrow) whose quota is below its
min takes back what other quotas borrowed: `plan_reclaim` chooses the victims by simulating the
gang's own placement, quota admission included, on what they free (`Snapshot.simulate_removal`
and `placement.try_place`, whose quota step sees the victims' use released, since the snapshot
charges quota use from the pods it holds). The answer has the shape of priority preemption's
(`victims.PreemptionPlan`), so the same `Preemptor` evicts (UID preconditions), nominates and
holds the room. The snapshot is unchanged afterwards.

Rules:

- Victims are whole gangs (a pod outside any gang is a gang of one), or whole leaf sub-groups
  of a gang whose restart policy repairs a sub-group alone (`repairs`, as for preemption),
  while that gang's own minimum holds without them (`api.subgroups.group_minimum_holds`).
- Only gangs charged to quotas that `elastic.reclaim.reclaim_targets` names (quotas holding more
  than their min, outside the reclaimer's path); the takes together must pass
  `elastic.reclaim.reclaim_problems` (never below a victim quota's min or guarantee, never past
  the reclaimer's min, and the no-loop invariant), checked at each step and on the final set.
- A gang younger than its quota's `minRunSeconds` (`ran_seconds`, the caller's clock) is spared.

Search: candidates cheapest first (lowest priority, then youngest, then smallest); each is
added while the takes stay allowed, until the gang fits (`try_place`); then every victim not
needed is given back, largest first (reprieve). A second pass always follows, the candidates
ordered by how closely each fits what is still short, and the plan evicting less is kept: the
first pass alone, cheapest first, evicted up to a fifth more than needed where whole gangs
could free exactly the need (bench core --scenario reclaim).

Bound: the plan's evicted resources are at most `OVER_EVICTION` (1.25) times the gang's charge
(per governed resource it asks) whenever one of the two passes finds such a set; otherwise the
smaller of the two minimal sets (no victim can be given back) is kept and its message states
the ratio. The takes never exceed what the reclaimer's min promises either, so a gang larger
than the reclaimer's unused min is never a victim.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from podgroup_operator.api.elastic_quota import Milli, QuotaKey
from podgroup_operator.api.keys import GroupKey
from podgroup_operator.api.models import PodGroupSpec
from podgroup_operator.api.subgroups import group_minimum_holds, sub_group_of, top_part
from podgroup_operator.scheduling.elastic.reclaim import (
    old_enough,
    reclaim_problems,
    reclaim_targets,
)
from podgroup_operator.scheduling.elastic.tree import QuotaTree, label, render
from podgroup_operator.scheduling.elastic.usage import QuotaUsage
from podgroup_operator.scheduling.gang import Binding, GangRequest
from podgroup_operator.scheduling.placement import try_place
from podgroup_operator.scheduling.quota_admission import gang_charge, gang_quota
from podgroup_operator.scheduling.snapshot import Snapshot, Undo
from podgroup_operator.scheduling.victims import (
    PreemptionPlan,
    PreemptionRefusal,
    Victim,
    VictimGang,
)

OVER_EVICTION = Fraction(5, 4)
"""Evicted resources at most this many times the reclaimer's charge, where the cluster allows."""
CANDIDATES = 256
"""Victim units a plan considers at most (cheapest first): a bound on the work of one plan."""

RanSeconds = Callable[[GroupKey], float]
"""How long a gang (namespace, name) has run, in seconds of the caller's clock."""


@dataclass
class _Candidate:
    gang: GroupKey
    quota: QuotaKey
    uids: tuple[str, ...]
    priority: int
    ran: float
    request: Milli
    """Its pods' requests, the resources the quota tree governs only."""
    sub_group: str | None = None
    victims: tuple[Victim, ...] = ()
    lone: bool = False
    """A pod outside any gang: `gang` is (namespace, its UID)."""
    size: int = field(init=False)

    def __post_init__(self) -> None:
        self.size = sum(self.request.values())


def _frozen(usage: QuotaUsage) -> QuotaUsage:
    """A copy of the use that later changes of the snapshot leave as it is (inner lists are
    replaced, never changed, by `QuotaUsage.bind` and `release`)."""
    return QuotaUsage(usage.tree, dict(usage.used), dict(usage.own), dict(usage.members))


def _candidates(
    snapshot: Snapshot,
    tree: QuotaTree,
    targets: Mapping[QuotaKey, Milli],
    repairs: Mapping[GroupKey, PodGroupSpec],
    ran_seconds: RanSeconds,
    own: GroupKey,
) -> tuple[list[_Candidate], int]:
    """Every victim unit of the target quotas, and how many gangs were spared as too young."""
    quotas = snapshot.quotas
    by_gang: dict[GroupKey, list[str]] = {}
    quota_of_gang: dict[GroupKey, QuotaKey] = {}
    lone: set[GroupKey] = set()
    for unit, unit_uids in snapshot.pod_index.units().items():
        gang: GroupKey = (unit[1], unit[2])
        if unit[0] != "gang":
            lone.add(gang)  # (namespace, pod uid): a gang of one
        for uid in unit_uids:
            entry = snapshot.pod(uid)
            if entry is None or entry.info.terminating or snapshot.is_assumed(uid):
                continue
            quota = quotas.pod_quota(entry.info)
            if quota is None or quota not in targets:
                continue
            by_gang.setdefault(gang, []).append(uid)
            quota_of_gang[gang] = quota
    out: list[_Candidate] = []
    young = 0
    for gang, uids in by_gang.items():
        if gang == own:
            continue
        quota = quota_of_gang[gang]
        if gang in lone:
            entry = snapshot.pod(uids[0])
            assert entry is not None
            ran = ran_seconds((gang[0], entry.info.name))
            out.append(_candidate(snapshot, tree, gang, quota, uids, ran, None, lone=True))
            continue
        ran = ran_seconds(gang)
        if not old_enough(tree, quota, ran):
            young += 1
            continue
        leaves = _leaves(snapshot, repairs.get(gang), uids)
        units: list[tuple[str | None, tuple[str, ...]]] = [(None, tuple(uids))]
        if leaves:
            units = [(name, tuple(members)) for name, members in sorted(leaves.items())] + units
        for sub_group, members in units:
            out.append(_candidate(snapshot, tree, gang, quota, members, ran, sub_group))
    return out, young


def _leaves(
    snapshot: Snapshot, spec: PodGroupSpec | None, uids: Sequence[str]
) -> dict[str, list[str]]:
    """Leaf sub-group -> its pods, for a gang repaired by sub-group (else empty)."""
    if spec is None or not spec.sub_groups:
        return {}
    leaves: dict[str, list[str]] = {}
    for uid in uids:
        entry = snapshot.pod(uid)
        if entry is None:
            continue
        name = sub_group_of(entry.info.labels, spec.sub_groups).name
        if name is not None:
            leaves.setdefault(name, []).append(uid)
    return leaves


def _candidate(
    snapshot: Snapshot,
    tree: QuotaTree,
    gang: GroupKey,
    quota: QuotaKey,
    uids: Sequence[str],
    ran: float,
    sub_group: str | None,
    *,
    lone: bool = False,
) -> _Candidate:
    request: Milli = {}
    priority = -(2**31)
    victims = []
    for uid in uids:
        entry = snapshot.pod(uid)
        assert entry is not None
        priority = max(priority, entry.info.priority)
        for name, amount in tree.governs(entry.info.request).items():
            request[name] = request.get(name, 0) + amount
        victims.append(Victim(entry.info.namespace, entry.info.name, uid, entry.node))
    return _Candidate(
        gang, quota, tuple(uids), priority, ran, request, sub_group, tuple(victims), lone
    )


def _may_take_leaf(
    spec: PodGroupSpec, snapshot: Snapshot, gang_uids: Sequence[str], taken: set[str]
) -> bool:
    """Whether the gang's own minimum holds without the leaf sub-groups `taken`."""
    subs = spec.sub_groups or []
    tops: set[str] = {s.name for s in subs if s.parent is None and not s.match_label_keys}
    lost_tops: set[str] = set()
    live = 0
    for uid in gang_uids:
        entry = snapshot.pod(uid)
        if entry is None:
            continue
        labels = entry.info.labels
        part = top_part(labels, subs)
        if part is not None:
            tops.add(part)
        if sub_group_of(labels, subs).name in taken:
            if part is not None:
                lost_tops.add(part)
            continue
        live += 1
    return group_minimum_holds(
        spec.min_member,
        spec.min_sub_group,
        live=live,
        parts=len(tops),
        whole=len(tops) - len(lost_tops),
    )


class _Search:
    """One pass: victims added in a given order until the gang fits, then reprieved."""

    def __init__(
        self,
        gang: GangRequest,
        snapshot: Snapshot,
        tree: QuotaTree,
        base: QuotaUsage,
        quota: QuotaKey,
        repairs: Mapping[GroupKey, PodGroupSpec],
    ) -> None:
        self.gang = gang
        self.snapshot = snapshot
        self.tree = tree
        self.base = base
        self.quota = quota
        self.repairs = repairs
        self.chosen: list[_Candidate] = []
        self.undos: dict[int, Undo] = {}

    def takes(self, chosen: Sequence[_Candidate]) -> dict[QuotaKey, Milli]:
        out: dict[QuotaKey, Milli] = {}
        for c in chosen:
            total = out.setdefault(c.quota, {})
            for name, amount in c.request.items():
                total[name] = total.get(name, 0) + amount
        return out

    def allowed(self, chosen: Sequence[_Candidate]) -> bool:
        return not reclaim_problems(self.tree, self.base, self.quota, self.takes(chosen))

    def conflicts(self, candidate: _Candidate) -> bool:
        """Taken already (its gang whole, or the same sub-group), or a sub-group its gang's
        minimum no longer allows."""
        for c in self.chosen:
            if c.gang != candidate.gang:
                continue
            if c.sub_group is None or candidate.sub_group is None:
                return True
            if c.sub_group == candidate.sub_group:
                return True
        if candidate.sub_group is None:
            return False
        spec = self.repairs[candidate.gang]
        taken = {c.sub_group for c in self.chosen if c.gang == candidate.gang and c.sub_group}
        taken.add(candidate.sub_group)
        uids = [u for u in self.snapshot.pod_index.units().get(("gang", *candidate.gang), ())]
        return not _may_take_leaf(spec, self.snapshot, uids, taken)

    def remove(self, candidate: _Candidate) -> None:
        self.undos[id(candidate)] = self.snapshot.simulate_removal(candidate.uids)
        self.chosen.append(candidate)

    def give_back(self, candidate: _Candidate) -> None:
        self.undos.pop(id(candidate))()
        self.chosen.remove(candidate)

    def fits(self) -> tuple[Binding, ...] | None:
        return try_place([self.gang], self.snapshot)

    def run(self, order: Sequence[_Candidate]) -> tuple[Binding, ...] | None:
        """Add victims in `order` until the gang fits, then reprieve; None: it never fits."""
        placed = None
        for candidate in order:
            if self.conflicts(candidate) or not self.allowed([*self.chosen, candidate]):
                continue
            self.remove(candidate)
            placed = self.fits()
            if placed is not None:
                break
        if placed is None:
            return None
        for candidate in sorted(self.chosen, key=lambda c: (-c.size, c.gang, c.sub_group or "")):
            self.give_back(candidate)
            again = self.fits()
            if again is not None:
                placed = again
            else:
                self.remove(candidate)
        return placed

    def restore(self) -> None:
        for candidate in reversed(list(self.chosen)):
            self.give_back(candidate)


def _ratio(evicted: Milli, charge: Milli) -> Fraction:
    """Evicted over charged, the largest over the resources the gang asks."""
    worst = Fraction(0)
    for name, amount in charge.items():
        if amount > 0:
            worst = max(worst, Fraction(evicted.get(name, 0), amount))
    return worst


def preemption_quota_problems(
    gang: GangRequest, snapshot: Snapshot, victims: Sequence[VictimGang]
) -> list[str]:
    """Why a priority preemption plan would break another quota's min (empty: it does not).

    Priority preemption stays inside a quota (Kueue's `withinClusterQueue`, KAI's preemption
    within a queue): a victim of another quota may go only while that quota keeps at least its
    min of each resource taken; taking within a quota's min across quotas is reclaim's job,
    which has its own rules."""
    quotas = snapshot.quotas
    tree, usage = quotas.tree, quotas.usage
    if tree is None or usage is None:
        return []
    own = gang_quota(gang, snapshot)
    own_path = set(tree.path(own)) if own is not None else set()
    taken: dict[QuotaKey, Milli] = {}
    for victim in victims:
        for pod in victim.pods:
            entry = snapshot.pod(pod.uid)
            if entry is None:
                continue
            quota = quotas.pod_quota(entry.info)
            if quota is None or quota in own_path or (own is not None and own in tree.path(quota)):
                continue
            total = taken.setdefault(quota, {})
            for name, amount in tree.governs(entry.info.request).items():
                total[name] = total.get(name, 0) + amount
    problems = []
    for quota, amounts in sorted(taken.items()):
        used = usage.of_quota(quota)
        low = tree.nodes[quota].min
        short = {
            name: low.get(name, 0) - (used.get(name, 0) - amount)
            for name, amount in amounts.items()
            if used.get(name, 0) - amount < low.get(name, 0)
        }
        if short:
            problems.append(f"it would take quota {label(quota)} below its min by {render(short)}")
    return problems


def may_reclaim(gang: GangRequest, snapshot: Snapshot) -> bool:
    """Whether a gang refused for room may reclaim instead of preempting: its quota is below
    its min for the gang's charge and some other quota holds more than its min
    (`reclaim_targets`); the nodes, not the quota, are what refused it while others borrow."""
    quotas = snapshot.quotas
    tree, usage = quotas.tree, quotas.usage
    quota = gang_quota(gang, snapshot)
    if tree is None or usage is None or quota is None:
        return False
    return bool(reclaim_targets(tree, usage, quota, gang_charge(gang, snapshot)))


def plan_reclaim(
    gang: GangRequest,
    snapshot: Snapshot,
    ran_seconds: RanSeconds,
    repairs: Mapping[GroupKey, PodGroupSpec] | None = None,
) -> PreemptionPlan | PreemptionRefusal:
    """The victims whose eviction lets `gang` fit, taken from quotas that borrowed (see the
    module docstring), or why there are none. The snapshot is left as it was."""
    keys = (gang.key,)
    quotas = snapshot.quotas
    tree, usage = quotas.tree, quotas.usage
    quota = gang_quota(gang, snapshot)
    if tree is None or usage is None or quota is None:
        return PreemptionRefusal(
            keys, f"{gang.label}: no ElasticQuota governs it; nothing to reclaim"
        )
    charge = tree.governs(gang_charge(gang, snapshot))
    targets = reclaim_targets(tree, usage, quota, charge)
    if not targets:
        return PreemptionRefusal(
            keys,
            f"no reclaim: quota {label(quota)} is not below its min for this gang, or no other "
            "quota holds more than its min",
        )
    repairs = repairs or {}
    candidates, young = _candidates(snapshot, tree, targets, repairs, ran_seconds, gang.key)
    spared = f"; {young} gang(s) spared: younger than their quota's minRunSeconds" if young else ""
    if not candidates:
        return PreemptionRefusal(keys, f"no reclaim: no gang may be taken back now{spared}")
    candidates = sorted(
        candidates, key=lambda c: (c.priority, c.ran, c.size, c.gang, c.sub_group or "")
    )[:CANDIDATES]
    base = _frozen(usage)
    candidates = [
        c for c in candidates if not reclaim_problems(tree, base, quota, {c.quota: c.request})
    ]
    if not candidates:
        return PreemptionRefusal(
            keys,
            "no reclaim: taking back any gang would leave its quota below its min or "
            f"guarantee, or give {label(quota)} more than its min promises{spared}",
        )
    plans: list[tuple[tuple[_Candidate, ...], tuple[Binding, ...]]] = []
    for order in (candidates, _closest_first(candidates, charge)):
        search = _Search(gang, snapshot, tree, base, quota, repairs)
        try:
            placed = search.run(order)
            if placed is not None and search.allowed(search.chosen):
                plans.append((tuple(search.chosen), placed))
        finally:
            search.restore()
    if not plans:
        return PreemptionRefusal(
            keys,
            f"no reclaim: taking back every gang {label(quota)} may reclaim would still not "
            f"let {gang.label} fit{spared}",
        )
    chosen, placed = min(
        plans,
        key=lambda p: (_ratio(_evicted(p[0]), charge) > OVER_EVICTION, sum(c.size for c in p[0])),
    )
    victims = tuple(
        VictimGang(None if c.lone else c.gang, c.priority, c.victims, sub_group=c.sub_group)
        for c in chosen
    )
    evicted = _evicted(chosen)
    ratio = _ratio(evicted, charge)
    names = ", ".join(
        f"{v.label} ({len(v.pods)} pod(s), quota {label(c.quota)})"
        for v, c in zip(victims, chosen, strict=True)
    )
    message = (
        f"reclaiming for quota {label(quota)} (below its min): evicting {names}, "
        f"{render(evicted)} for a charge of {render(charge)}"
    )
    if ratio > OVER_EVICTION:
        message += f" ({float(ratio):.2f}x: no smaller set of whole gangs frees enough)"
    return PreemptionPlan(keys, victims, placed, message + spared, reclaim_for=label(quota))


def _evicted(chosen: Sequence[_Candidate]) -> Milli:
    total: Milli = {}
    for c in chosen:
        for name, amount in c.request.items():
            total[name] = total.get(name, 0) + amount
    return total


def _closest_first(candidates: Sequence[_Candidate], charge: Milli) -> list[_Candidate]:
    """Candidates by how closely each alone covers the charge: those within it, largest
    first, then the rest, smallest first."""
    need = sum(charge.values())
    within = sorted((c for c in candidates if c.size <= need), key=lambda c: -c.size)
    beyond = sorted((c for c in candidates if c.size > need), key=lambda c: c.size)
    return [*within, *beyond]
