"""Gang preemption: which lower-priority gangs to evict so that a waiting gang fits.

kube-scheduler preempts pod by pod: per node it removes every lower-priority pod, checks the
preemptor fits, gives back ("reprieves") what it can, and picks the cheapest node. A gang needs
room on many nodes at once, and its victims are gangs too: evicting part of a running gang
wastes the rest of it, so a victim gang is evicted whole (a pod outside any gang is a gang of
one). The exception is a gang whose restart policy repairs one sub-group alone (`repairs`):
evicting whole sub-groups is its cheapest repair, so it loses whole sub-groups only, while its
own minimum holds without them (`_Split`), and goes whole past that.
`plan_preemption` therefore works on whole gangs, as a what-if on the snapshot: it takes
victims out with `Snapshot.simulate_removal`, asks `try_place` whether the gang fits, and puts
everything back before returning. The snapshot is unchanged afterwards.

Rules:

- Only gangs whose every pod has a priority strictly below the preemptor's are victims; pods of
  other schedulers count by their `spec.priority` like ours. For a gang group the preemptor's
  priority is the lowest of its gangs'.
- A preemptor with `preemptionPolicy: Never` never preempts; a gang that fits already gets an
  empty plan (no victims) with its nominations.
- Pods already terminating are on their way out: they are removed in the what-if for free and
  never listed as victims (the plan says how many it waits for).
- PodDisruptionBudgets are honoured where possible: a victim pod matching a budget with no
  disruptions left is a violation, and plans with fewer violations are preferred.

Cheapest, in this order (kube-scheduler's candidate ordering, with the priority first because
a gang's victims span nodes): the lowest highest-victim priority, then the fewest PDB
violations, then the fewest victim pods per member the freed room holds. Finding the true
optimum is a set-cover problem; the planner is greedy over nodes, in that order:

1. Every node the gang may use (static filters) that could gain room for a member gets a lower
   bound of its key from the snapshot's per-node priority counts alone, without reading pods:
   (lowest lower-priority pod priority, 0, 1 / the most members it could gain, name).
2. Nodes are evaluated exactly in bound order: every lower-priority gang on the node is taken
   out, then the most expensive are given back while the node still gains what the gangs lack
   (upstream's reprieve, per candidate node, before nodes are compared: otherwise one pod of
   priority 100 among enough room held at priority 10 would make the node cost 100); the key is
   the victim gangs left (whole gangs, so their pods on other nodes count too), their PDB
   violations, and the members gained. Up to `WINDOW` (32) are evaluated before the cheapest
   evaluated node is freed (at once when it is cheaper than every remaining bound): its victim
   gangs are removed everywhere, and the nodes they touched are evaluated again, so a partly
   freed neighbour competes with its true cost.
3. When the room counted on usable nodes covers the gang, placement is tried for real (again
   each time the room doubles, so a failing estimate costs O(log n) attempts); the first
   success ends the search. When no node is left to free for room and the gang still does not
   fit, the lower-priority units that may shut room on the usable nodes that have it (by
   anti-affinity, host ports or volumes) are taken out and placement tried once more
   (`_free_blockers`).
4. Reprieve: victim gangs are given back, most expensive first, when the gang still fits
   without evicting them (upstream's reprieve step; for gangs without pod-to-pod constraints
   this is checked as arithmetic on the nodes of the placement found); the nominations come
   from a final placement attempt without the remaining victims.

The cost is one pass over the usable nodes' priority counts, a few dozen exact node evaluations,
and a few placement attempts; never a search over subsets of gangs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from podgroup_operator.api.keys import GroupKey
from podgroup_operator.api.models import PodGroupSpec
from podgroup_operator.scheduling.filters import UNSCHEDULABLE_TAINT_KEY, Taint, pod_constraints
from podgroup_operator.scheduling.gang import Binding, GangRequest, PreemptionPolicy
from podgroup_operator.scheduling.placement import FRAMEWORK, try_place
from podgroup_operator.scheduling.planner import Planner
from podgroup_operator.scheduling.resources import pod_requests
from podgroup_operator.scheduling.shapes import shape_groups
from podgroup_operator.scheduling.snapshot import Snapshot
from podgroup_operator.scheduling.topology import level_name
from podgroup_operator.scheduling.victims import (
    DisruptionBudget,
    PreemptionPlan,
    PreemptionRefusal,
    Victim,
    VictimGang,
    disruption_budget,
)

_MESSAGE_VICTIMS = 10
"""Victim gangs named in a message before "and N more"."""
CORDON_TAINT = Taint(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")
DOMAINS_PLANNED = 64
"""Domains of one topology level a plan is made for, most free first (`_plan_in_domains`)."""


def _label(gangs: Sequence[GangRequest]) -> str:
    return ", ".join(g.label for g in gangs)


def _message(
    gangs: Sequence[GangRequest], victims: Sequence[VictimGang], nominations: Sequence[Binding]
) -> str:
    pods = sum(len(v.pods) for v in victims)
    nodes = len({b.node for b in nominations})
    names = [f"{v.label} ({len(v.pods)} pod(s), priority {v.priority})" for v in victims]
    if len(names) > _MESSAGE_VICTIMS:
        names = [*names[:_MESSAGE_VICTIMS], f"and {len(names) - _MESSAGE_VICTIMS} more"]
    violations = sum(v.budget_violations for v in victims)
    if not victims:
        return f"{_label(gangs)} fits on {nodes} node(s) once terminating pods are gone"
    parts = sum(1 for v in victims if v.sub_group is not None)
    kinds = [f"{len(victims) - parts} lower-priority gang(s)"] if len(victims) > parts else []
    if parts:
        kinds.append(f"{parts} sub-group(s) of lower-priority gangs")
    text = (
        f"preempting {' and '.join(kinds)} ({pods} pod(s)) to place "
        f"{_label(gangs)} on {nodes} node(s): {', '.join(names)}"
    )
    if violations:
        text += f"; {violations} eviction(s) exceed a PodDisruptionBudget (no cheaper plan)"
    return text


def _may_fit_now(gangs: Sequence[GangRequest], snapshot: Snapshot) -> bool:
    """False when the cluster's free capacity cannot cover the smallest members needed, which
    spares a placement attempt that walks every node when the cluster is full."""
    need: dict[str, int] = {}
    for gang in gangs:
        count = 1 if gang.satisfied_before else gang.min_member - gang.already_bound
        if count <= 0 or not gang.pending:
            continue
        smallest: dict[str, int] = {}
        for index, pod in enumerate(gang.pending):
            request = pod_requests(pod)
            if index == 0:
                smallest = request
            else:
                smallest = {r: min(a, request.get(r, 0)) for r, a in smallest.items()}
        for resource, amount in smallest.items():
            need[resource] = need.get(resource, 0) + amount * count
    free = snapshot.total_free()
    return all(free.get(resource, 0) >= amount for resource, amount in need.items())


def _may_use_cordoned(gangs: Sequence[GangRequest]) -> bool:
    """Members tolerating the cordon taint may use room `total_free` does not count."""
    return any(
        t.tolerates(CORDON_TAINT)
        for g in gangs
        for p in g.pending
        for t in pod_constraints(p).tolerations
    )


def plan_preemption(
    gangs: GangRequest | Sequence[GangRequest],
    snapshot: Snapshot,
    budgets: Sequence[DisruptionBudget] = (),
    repairs: Mapping[GroupKey, PodGroupSpec] | None = None,
) -> PreemptionPlan | PreemptionRefusal:
    """Plan the cheapest whole-gang preemption that lets `gangs` (one gang, or a gang group
    that must fit together) reach minMember; the snapshot is left exactly as it was.

    `budgets` are the cluster's PodDisruptionBudgets (`disruption_budget(raw)` each). The
    snapshot must have been built with `gang_of`, or gangs could not be evicted whole.
    `repairs` holds the specs of the gangs whose restart policy repairs a sub-group alone
    (`domain.restart.repairs_sub_groups`): such a victim loses whole sub-groups only, while its
    own minimum holds without them; every other victim gang goes whole.
    Returns a `PreemptionPlan` (empty when the gangs fit without preemption) or a
    `PreemptionRefusal` when preemption is not allowed or cannot make room.
    """
    group = [gangs] if isinstance(gangs, GangRequest) else list(gangs)
    keys = tuple(g.key for g in group)
    if not group:
        raise ValueError("plan_preemption needs at least one gang")
    searching = [g for g in group if g.topology is not None and g.within is None]
    repairs = repairs or {}
    if searching and len(group) == 1:
        return _plan_in_domains(group[0], snapshot, budgets, repairs)
    if searching:
        return PreemptionRefusal(
            keys,
            f"{_label(searching)}: a gang group whose PodGroups have a topologyConstraint is "
            "not placed by preemption; it waits for room",
        )
    if snapshot.gang_of is None:
        raise ValueError(
            "plan_preemption needs a Snapshot built with gang_of (which gang a pod belongs "
            "to); without it a victim gang could be evicted in part"
        )
    may_fit = _may_use_cordoned(group) or _may_fit_now(group, snapshot)
    placed = try_place(group, snapshot) if may_fit else None
    if placed is not None:
        return PreemptionPlan(keys, (), placed, f"{_label(group)} fits without preemption")
    never = [g.label for g in group if g.preemption_policy is PreemptionPolicy.NEVER]
    if never:
        return PreemptionRefusal(keys, _never(", ".join(never)))
    for gang in group:
        if gang.satisfied_before:
            continue
        if len(gang.pending) + gang.already_bound < gang.min_member:
            return PreemptionRefusal(
                keys, f"{gang.label}: fewer member pods than minMember; preemption cannot help"
            )
        shapes = shape_groups(gang)
        usable = sum(count for shape, count in shapes if shape.unsupported is None)
        if usable + gang.already_bound < gang.min_member:
            problem = next(s.unsupported for s, _ in shapes if s.unsupported is not None)
            return PreemptionRefusal(keys, f"{gang.label}: preemption cannot help: {problem}")
    planner = Planner(group, snapshot, budgets, repairs)
    try:
        planner.prepare()
        found = planner.search()
        if found is None:
            return PreemptionRefusal(
                keys,
                f"{_label(group)}: evicting every gang of priority below {planner.priority} "
                f"from the {len(planner.feasible)} node(s) the gang may use would still not "
                "make room",
            )
        found = planner.reprieve(found)
        victims = planner.victims()
        used = {b.node for b in found}
        waiting = sum(1 for node in planner.leaving.values() if node in used)
        return PreemptionPlan(keys, victims, found, _message(group, victims, found), waiting)
    finally:
        planner.restore()


def _never(labels: str) -> str:
    return f"{labels}: preemptionPolicy is Never; waiting for room instead"


def _cost(plan: PreemptionPlan) -> tuple[int, int, int]:
    """The module docstring's "cheapest": highest victim priority, PDB violations, pods."""
    highest = max((v.priority for v in plan.victims), default=-(2**31))
    return highest, plan.budget_violations, len(plan.victim_pods)


def _plan_in_domains(
    gang: GangRequest,
    snapshot: Snapshot,
    budgets: Sequence[DisruptionBudget],
    repairs: Mapping[GroupKey, PodGroupSpec],
) -> PreemptionPlan | PreemptionRefusal:
    """Preemption for a gang with a topology constraint: a plan per domain the placement
    generator offers, level by level, and the cheapest plan of the first level that has one.

    Victims are only ever taken inside the one domain the gang would then fit in, so nothing is
    evicted where the gang still would not fit, and a required gang never evicts across its
    domains. With no required level the last round is the whole cluster, planned as usual.
    The domains are those the gang's placement generator offers (`FRAMEWORK.generator_for`),
    each planned as a gang placed anywhere inside it."""
    generator = FRAMEWORK.generator_for(gang)
    problem = generator.problem(gang)
    if problem is not None:
        return PreemptionRefusal((gang.key,), f"{gang.label}: {problem}")
    if gang.preemption_policy is PreemptionPolicy.NEVER:
        return PreemptionRefusal((gang.key,), _never(gang.label))
    judged = 0
    last = ""
    for round_ in generator.rounds(FRAMEWORK.view(gang, snapshot), snapshot):
        if round_.whole:
            return plan_preemption(replace(gang, topology=None), snapshot, budgets, repairs)
        candidates = sorted(
            round_.candidates,
            key=lambda c: (c.domain != round_.first, -len(c.nodes), str(c.domain)),
        )[:DOMAINS_PLANNED]
        best: tuple[tuple[int, int, int, str], PreemptionPlan] | None = None
        for candidate in candidates:
            judged += 1
            domain = candidate.domain
            assert domain is not None
            inside = replace(gang, within=domain, topology=None)
            outcome = plan_preemption(inside, snapshot, budgets, repairs)
            if isinstance(outcome, PreemptionRefusal):
                last = outcome.message
                continue
            if outcome.empty:
                return outcome
            key = (*_cost(outcome), domain.value)
            if best is None or key < best[0]:
                best = (key, outcome)
        if best is not None:
            plan = best[1]
            level = level_name(round_.level) if round_.level is not None else "domain"
            where = f"{level} {best[0][3]}"
            return replace(plan, message=f"{plan.message}, in {where}")
    return PreemptionRefusal(
        (gang.key,),
        f"{gang.label}: no domain would hold the gang even after preemption ({judged} "
        f"tried){'; last: ' + last if last else ''}",
    )


__all__ = [
    "DisruptionBudget",
    "PreemptionPlan",
    "PreemptionRefusal",
    "Victim",
    "VictimGang",
    "disruption_budget",
    "plan_preemption",
]
