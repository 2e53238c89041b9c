"""The gang decision: place at least minMember members at once, or place nothing and say why.

A gang's members are useless alone (a distributed job blocks until every worker is up), so
binding some of them while the rest cannot run only wastes the nodes. `place_group`, the one
entry point that places a gang, therefore books members on a snapshot, and keeps the bookings
only if minMember of them (counting members already bound) fit at the same time; otherwise it
undoes them and returns a `Refusal` whose message names the shortfall in kube-scheduler's words.
It runs the placement framework (scheduling/framework.py) with the registry's generators and
member steps (`FRAMEWORK`); this module is the framework's filters' step (`_place_members`).

Speed comes from shape, not from tuning: members are stamped from one template, so members with
identical requests and constraints form one `MemberShape` (scheduling/shapes.py); static filters
are evaluated once per (shape, node class) and cached in the snapshot; and for a shape the nodes
are walked once in best-fit order (fullest first, ties by name), each taking `min(free //
request)` copies, instead of searching all nodes for every pod. Members that depend on other
pods are placed one by one, but keep what their shape learnt as they go (`interpod.MemberChecks`,
and the nodes `nodeorder.choose` found lost, `nodeorder.Lost`) instead of recounting it for
each, which would make a gang's decision quadratic in its size
(docs/decisions/010-placement-keeps-what-a-shape-learnt.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from podgroup_operator.api.keys import pod_uid
from podgroup_operator.api.limits import summarize
from podgroup_operator.constants import GangMode, Reason
from podgroup_operator.scheduling import registry
from podgroup_operator.scheduling.framework import Framework, ViewFacts, smallest_request
from podgroup_operator.scheduling.gang import (
    Binding,
    GangGroupPlacement,
    GangRequest,
    Placement,
    Refusal,
)
from podgroup_operator.scheduling.interpod import MemberChecks, claims_problem, member_check
from podgroup_operator.scheduling.nodeorder import (
    NO_BONUS,
    Lost,
    choose,
    node_bonus,
    node_breakdown,
    verdicts,
    walk,
)
from podgroup_operator.scheduling.podinfo import PodInfo, pod_claims, pod_priority
from podgroup_operator.scheduling.quota_admission import quota_refusal
from podgroup_operator.scheduling.resources import (
    Resources,
    add_resources,
    copies_that_fit,
    format_resources,
    shortfall,
)
from podgroup_operator.scheduling.shapes import (
    ShapeGroup,
    dominant_share,
    group_by_shape,
    member_shape,
    shape_feasibility,
    shape_groups,
)
from podgroup_operator.scheduling.snapshot import NodeState, Snapshot, Undo
from podgroup_operator.scheduling.volumes import VolumeClaim, pod_disks

__all__ = [
    "FRAMEWORK",
    "describe",
    "feasible_nodes",
    "place_gang_group",
    "place_group",
    "try_place",
]


# --- the attempt ---------------------------------------------------------------------------------
@dataclass
class _Attempt:
    """One try at placing a gang's members on a snapshot: what it booked, and how to undo it.

    It carries the gang and the snapshot so the placement steps it goes through book for that
    gang on that snapshot, and no other."""

    gang: GangRequest
    snapshot: Snapshot
    groups: list[ShapeGroup]
    bindings: list[Binding] = field(default_factory=list)
    unplaced: list[str] = field(default_factory=list)
    undos: list[Undo] = field(default_factory=list)

    def undo(self) -> None:
        for undo in reversed(self.undos):
            undo()

    def undo_callable(self) -> Undo:
        undos = list(self.undos)

        def undo() -> None:
            for step in reversed(undos):
                step()

        return undo


def _light_info(pod: Mapping[str, Any], uid: str, request: Resources, gang: GangRequest) -> PodInfo:
    """The facts of a member without pod-to-pod constraints (no ports, no anti-affinity)."""
    meta = pod.get("metadata") or {}
    return PodInfo(
        uid=uid,
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        labels=dict(meta.get("labels") or {}),  # a copy: the index must not see later edits
        request=request,
        priority=pod_priority(pod),
        gang=gang.key,
    )


def _binding(pod: Mapping[str, Any], uid: str, node: str, volumes: tuple[Any, ...] = ()) -> Binding:
    meta = pod.get("metadata") or {}
    return Binding(
        str(meta.get("namespace", "default")), str(meta.get("name", "")), uid, node, volumes
    )


def _place_in_bulk(attempt: _Attempt, group: ShapeGroup, pods: Sequence[Mapping[str, Any]]) -> None:
    """Members without pod-to-pod constraints: walk the nodes once, each taking what fits."""
    snapshot, gang = attempt.snapshot, attempt.gang
    assert group.feasibility is not None
    bonus = node_bonus(
        snapshot, group.feasibility, group.shape.preferences, None, group.shape.images
    )
    request = group.shape.request
    remaining = len(pods)
    chosen: list[tuple[str, int]] = []
    nodes: Iterator[NodeState] = (
        snapshot.classes.best_fit_order(group.feasibility)
        if bonus is NO_BONUS
        else (node for _, node in walk(snapshot, group.feasibility, bonus))
    )
    first, least = request[0]
    for node in nodes:
        if node.free.get(first, 0) < least:
            continue  # most full nodes fail on the first resource: skip the call
        copies = copies_that_fit(request, node.free)
        if copies:
            take = copies if copies < remaining else remaining
            chosen.append((node.name, take))
            remaining -= take
            if not remaining:
                break
    resources = group.shape.resources
    triples: list[tuple[str, str, Resources]] = []
    infos: dict[str, PodInfo] = {}
    left = iter(pods)
    for node_name, take in chosen:
        for _ in range(take):
            pod = next(left)
            uid = pod_uid(pod)
            attempt.bindings.append(_binding(pod, uid, node_name))
            triples.append((uid, node_name, resources))
            infos[uid] = _light_info(pod, uid, resources, gang)
    attempt.unplaced.extend(str((p.get("metadata") or {}).get("name", "")) for p in left)
    group.placed += len(triples)
    group.nodes.update(name for name, _ in chosen)
    if triples:
        attempt.undos.append(snapshot.assume(triples, infos))


def _place_one_by_one(  # noqa: PLR0915
    attempt: _Attempt, group: ShapeGroup, pods: Sequence[Mapping[str, Any]]
) -> None:
    """Members whose placement depends on other pods (their own constraints, or running pods'
    anti-affinity): each is checked against the snapshot as the previous ones left it."""
    snapshot, gang = attempt.snapshot, attempt.gang
    assert group.feasibility is not None
    shape = group.shape
    resources = shape.resources
    failed: set[tuple[tuple[str, str], ...]] = set()
    """Labels of members that found no node since the last assumption: a member with the same
    labels (and so the same checks) cannot do better, so it is not walked again."""
    static = node_bonus(snapshot, group.feasibility, shape.preferences, None, shape.images)
    lost = Lost(snapshot, group.feasibility, static)
    """Nodes no later member of this shape can use (see `choose`)."""
    checks: dict[str, MemberChecks] = {}
    """Per member namespace (a shape's members normally share one; nothing here assumes it),
    each told of every member assumed (see `MemberChecks`)."""
    for pod in pods:
        meta = pod.get("metadata") or {}
        name = str(meta.get("name", ""))
        namespace = str(meta.get("namespace") or "default")
        labels = meta.get("labels") or {}
        label_key = tuple(sorted(labels.items()))
        if label_key in failed and not shape.inter_pod.claims and not shape.inter_pod.disks:
            attempt.unplaced.append(name)
            continue
        claims: tuple[Any, ...] = ()
        if shape.inter_pod.claims:
            problem, claims = claims_problem(snapshot, namespace, pod_claims(pod), gang.claims)
            if problem is not None:
                group.blocked[problem] += 1
                attempt.unplaced.append(name)
                continue
        disks = pod_disks(pod) if shape.inter_pod.disks else ()
        checks_here = checks.get(namespace)
        if checks_here is None:
            checks_here = checks[namespace] = MemberChecks(
                snapshot, namespace, shape.inter_pod, shape.constraints
            )
        check = checks_here.check(labels, claims, disks)
        bonus = node_bonus(snapshot, group.feasibility, shape.preferences, check, shape.images)
        node = choose(snapshot, group.feasibility, bonus, shape.request, check, lost)
        if node is None:
            if group.breakdown is None:
                group.breakdown = node_breakdown(group, snapshot, check)
            attempt.unplaced.append(name)
            failed.add(label_key)
            continue
        failed.clear()
        uid = pod_uid(pod)
        decisions: tuple[Any, ...] = ()
        if check is not None and check.claims:
            _, decisions = check.volumes(node)
        info = dataclasses.replace(
            _light_info(pod, uid, resources, gang),
            ports=shape.inter_pod.ports,
            anti_affinity=shape.inter_pod.anti_affinity,
            scoring=shape.inter_pod.scoring,
            claims=tuple(claim.name for claim in claims),
            disks=disks,
        )
        promised = {uid: decisions} if decisions else None
        before = lost.key(node)
        attempt.undos.append(snapshot.assume([(uid, node.name, resources)], {uid: info}, promised))
        lost.assumed(before, node)
        for each in checks.values():
            each.assumed(node, labels, namespace)
        attempt.bindings.append(_binding(pod, uid, node.name, decisions))
        group.placed += 1
        group.nodes.add(node.name)


def _attempt(groups: list[ShapeGroup], snapshot: Snapshot, gang: GangRequest) -> _Attempt:
    """Book every member that fits, biggest shapes first, each shape filling nodes best-fit."""
    capacity = snapshot.total_free()
    groups = sorted(groups, key=lambda g: (-dominant_share(g.shape, capacity), g.shape.request))
    attempt = _Attempt(gang, snapshot, groups)
    for group in groups:
        shape = group.shape
        group.feasibility = shape_feasibility(snapshot, shape.constraints, gang)
        if shape.unsupported is not None:
            group.blocked[shape.unsupported] += len(group.pods)
            attempt.unplaced.extend(
                str((p.get("metadata") or {}).get("name", "")) for p in group.pods
            )
        elif shape.inter_pod.empty:
            # Running pods' anti-affinity may still select some members; those go one by one.
            # Members placed here carry no anti-affinity, so the split cannot change meanwhile.
            free: list[Mapping[str, Any]] = group.pods
            held: list[Mapping[str, Any]] = []
            if snapshot.pod_index.has_anti_affinity or snapshot.pod_index.has_scoring:
                # Running pods' terms that select a member (anti-affinity filters it, scoring
                # terms weigh on its nodes): it is placed with the checks, one by one.
                free = []
                for pod in group.pods:
                    meta = pod.get("metadata") or {}
                    namespace = str(meta.get("namespace") or "default")
                    labels = meta.get("labels") or {}
                    hit = next(
                        snapshot.pod_index.anti_affinity_against(namespace, labels), None
                    ) or next(snapshot.pod_index.scoring_toward(namespace, labels), None)
                    (free if hit is None else held).append(pod)
            if free:
                _place_in_bulk(attempt, group, free)
            if held:
                _place_one_by_one(attempt, group, held)
        else:
            _place_one_by_one(attempt, group, group.pods)
    return attempt


# --- messages ------------------------------------------------------------------------------------


def _shortfall_message(gang: GangRequest, attempt: _Attempt, snapshot: Snapshot) -> str:
    needed = gang.min_member - gang.already_bound
    placed = len(attempt.bindings)
    head = (
        f"{gang.label}: needs {needed} more member(s) at once "
        f"(minMember {gang.min_member}, {gang.already_bound} bound) but only {placed} fit"
    )
    parts = [head]
    for group in attempt.groups:
        wanted = len(group.pods)
        line = (
            f"{wanted} x {group.shape.describe()}: {group.placed} fit on {len(group.nodes)} node(s)"
        )
        if group.blocked:
            line += ", " + "; ".join(
                f"{count} cannot be placed: {problem}"
                for problem, count in sorted(group.blocked.items())
            )
        short = wanted - group.placed - sum(group.blocked.values())
        if short > 0:
            breakdown = group.breakdown or node_breakdown(group, snapshot)
            line += (
                f", short {short}: each needs a node with "
                f"{group.shape.describe()} free; {breakdown}"
            )
        parts.append(line)
    if len(snapshot) == 0:
        parts.append("the cluster has no nodes")
    return "; ".join(parts)


def _not_enough_tasks(gang: GangRequest) -> Refusal | None:
    have = len(gang.pending) + gang.already_bound
    if have >= gang.min_member:
        return None
    return Refusal(
        gang.key,
        Reason.NOT_ENOUGH_TASKS,
        f"{gang.label} has {have} member pod(s) ({len(gang.pending)} pending, "
        f"{gang.already_bound} bound) but minMember is {gang.min_member}; "
        f"short {gang.min_member - have} pod(s): create them or lower spec.minMember",
    )


def _min_resources_refusal(gang: GangRequest, snapshot: Snapshot) -> Refusal | None:
    if not gang.min_resources:
        return None
    free = snapshot.total_free()
    for uid in gang.bound_uids:
        held = snapshot.pod_request(uid)
        if held:
            # What the group's own bound members hold is available to the group.
            free = add_resources(free, held)
    short = shortfall(gang.min_resources, free)
    if not short:
        return None
    have = {name: max(free.get(name, 0), 0) for name in gang.min_resources}
    wanted = format_resources(dict(gang.min_resources), include_pods=True)
    return Refusal(
        gang.key,
        Reason.NOT_ENOUGH_RESOURCES,
        f"{gang.label}: minResources {wanted} exceed the free capacity "
        f"{format_resources(have, include_pods=True)} of {snapshot.usable_nodes()} schedulable "
        f"node(s); short {format_resources(short, include_pods=True)}: free capacity, add nodes "
        "or lower spec.minResources",
    )


def _prefilter(gang: GangRequest, snapshot: Snapshot) -> Refusal | None:
    """Refusals that need no placement attempt (scheduler-plugins' PreFilter)."""
    if gang.satisfied_before:
        return None
    return _not_enough_tasks(gang) or _min_resources_refusal(gang, snapshot)


def _enough(gang: GangRequest, placed: int) -> bool:
    if gang.satisfied_before:
        return placed > 0 or not gang.pending
    return placed + gang.already_bound >= gang.min_member


# --- the entry point -----------------------------------------------------------------------------
def place_group(
    gang: GangRequest, snapshot: Snapshot, *, what_if: bool = False
) -> Placement | Refusal:
    """Decide one gang against the snapshot; on success the placement is left assumed.

    - At least `min_member` members (counting `already_bound`) must fit at the same time, or
      nothing is placed. Members beyond that are placed as well when they fit.
    - Strict (default): a refusal leaves the snapshot exactly as it was.
    - NonStrict: a refusal keeps the members that did fit assumed (`Refusal.partial`) so the
      caller may hold them and count them next cycle. Two NonStrict gangs holding half a
      cluster each would wait for each other forever, which is why the caller releases the
      partial members after a cap or the timeout (scheduling/holds.py, `queue.decide_wait`).
    - Once satisfied (`satisfied_before`): members are replacements, placed one by one as they
      fit, with no barrier and no PreFilter.
    - The members go into one candidate of the gang's placement generator (with `topology`, a
      domain of a level, which `Placement.domain` names), inside `within` when it is set; with
      `sub_groups`, each sub-group into a domain of its own (the sub-group member step),
      which `Placement.sub_domains` names.
    - `what_if`: strict, no PreFilter, and a refusal says nothing (its message is empty), so
      that preemption may ask many times cheaply (`try_place`).
    - First of all, with an ElasticQuota tree on the snapshot, the gang must fit its quota
      whole (`quota_admission.quota_refusal`, what-ifs included): else a refusal with reason
      WaitingForQuota, and nothing placed.

    Returns a `Placement` (its members left assumed) or a `Refusal` whose message names what
    is short.
    """
    if snapshot.quotas.tree is not None:
        refused = quota_refusal(gang, snapshot, quiet=what_if)
        if refused is not None:
            return refused
    if what_if:
        strict = (
            gang
            if gang.mode is GangMode.STRICT
            else dataclasses.replace(gang, mode=GangMode.STRICT)
        )
        return _WHAT_IF.place(strict, snapshot)
    refusal = _prefilter(gang, snapshot)
    if refusal is not None:
        return refusal
    return FRAMEWORK.place(gang, snapshot)


def try_place(gangs: Sequence[GangRequest], snapshot: Snapshot) -> tuple[Binding, ...] | None:
    """What-if: the bindings if every gang reaches minMember at once now, else None
    (`place_group` with `what_if`, for each gang in the order given, each seeing the previous
    ones assumed). Nothing stays assumed."""
    bindings: list[Binding] = []
    undos: list[Undo] = []
    try:
        for gang in gangs:
            outcome = place_group(gang, snapshot, what_if=True)
            if isinstance(outcome, Refusal):
                return None
            undos.append(outcome.undo)
            bindings.extend(outcome.bindings)
        return tuple(bindings)
    finally:
        for undo in reversed(undos):
            undo()


def place_gang_group(
    gangs: Sequence[GangRequest], snapshot: Snapshot
) -> GangGroupPlacement | Refusal:
    """Place several PodGroups that must all fit before any of them binds.

    Each group keeps its own minMember barrier; the group of groups adds one more: if any
    refuses, every placement made for the others is undone and the refusal (prefixed with the
    whole group's names) is returned. NonStrict is ignored here: partial members of one group
    would hold room the others need, which is exactly what a gang group exists to prevent.

    The prefix names at most SUMMARY_NAMES groups and counts the rest: the message is published
    on every member group and logged for each (docs/decisions/013-bounded-log-lines.md).
    """
    prefix = f"gang group [{summarize(g.label for g in gangs)}]: "
    for gang in gangs:
        refusal = _prefilter(gang, snapshot)
        if refusal is not None:
            return dataclasses.replace(refusal, message=prefix + refusal.message)
    placements: list[Placement] = []
    for gang in gangs:
        strict = (
            gang
            if gang.mode is GangMode.STRICT
            else dataclasses.replace(gang, mode=GangMode.STRICT)
        )
        outcome = place_group(strict, snapshot)
        if isinstance(outcome, Refusal):
            for done in reversed(placements):
                done.undo()
            return dataclasses.replace(outcome, message=prefix + outcome.message)
        placements.append(outcome)

    def undo() -> None:
        for done in reversed(placements):
            done.undo()

    return GangGroupPlacement(tuple(placements), undo)


# --- the framework's steps -----------------------------------------------------------------------
def _place_members(gang: GangRequest, snapshot: Snapshot) -> Placement | Refusal:
    """The filters' step: place the members on the snapshot's nodes (within `gang.within`),
    with the all-or-nothing barrier and no PreFilter."""
    attempt = _attempt(group_by_shape(gang.pending), snapshot, gang)
    placed = len(attempt.bindings)
    if _enough(gang, placed):
        return Placement(
            gang.key, tuple(attempt.bindings), tuple(attempt.unplaced), attempt.undo_callable()
        )
    message = _shortfall_message(gang, attempt, snapshot)
    reason = (
        Reason.UNSUPPORTED_CONSTRAINT
        if any(g.shape.unsupported for g in attempt.groups)
        else Reason.NOT_ENOUGH_RESOURCES
    )
    if gang.mode is GangMode.NON_STRICT and attempt.bindings and not gang.satisfied_before:
        return Refusal(
            gang.key,
            reason,
            f"{message}; keeping {placed} member(s) placed (NonStrict)",
            tuple(attempt.bindings),
            attempt.undo_callable(),
            fit=placed,
        )
    attempt.undo()
    return Refusal(gang.key, reason, message, fit=placed)


def _place_members_quietly(gang: GangRequest, snapshot: Snapshot) -> Placement | Refusal:
    """`_place_members` for a what-if: strict, and a refusal without a message."""
    attempt = _attempt(group_by_shape(gang.pending), snapshot, gang)
    placed = len(attempt.bindings)
    if _enough(gang, placed):
        return Placement(gang.key, tuple(attempt.bindings), (), attempt.undo_callable())
    attempt.undo()
    return Refusal(gang.key, Reason.NOT_ENOUGH_RESOURCES, "", fit=placed)


def describe(gang: GangRequest, snapshot: Snapshot) -> ViewFacts:
    """What the placement generators and scorer read of a gang's members (`ViewFacts`)."""
    shapes = [(shape, count) for shape, count in shape_groups(gang) if shape.unsupported is None]
    needed = 1 if gang.satisfied_before else max(gang.min_member - gang.already_bound, 1)
    wanted = f"{needed} x {shapes[0][0].describe()}" if len(shapes) == 1 else f"{needed} members"
    return ViewFacts(
        tuple(snapshot.classes.feasibility(shape.constraints) for shape, _ in shapes),
        smallest_request([shape.resources for shape, _ in shapes]),
        needed,
        wanted,
    )


FRAMEWORK = Framework(_place_members, describe, registry.generator_for, registry.member_step_for)
"""The placement framework with the registry's generators and member steps (looked up at each
placement) and the filters' step: what `place_group` runs, and preemption asks for domains."""
_WHAT_IF = dataclasses.replace(FRAMEWORK, place_members=_place_members_quietly)


# --- what kube-scheduler's filters would pass ----------------------------------------------------
def feasible_nodes(
    pod: Mapping[str, Any],
    snapshot: Snapshot,
    claims: Mapping[tuple[str, str], VolumeClaim] | None = None,
) -> frozenset[str]:
    """Every node that could take this one pod now: what kube-scheduler's filters would pass.

    The same filters `place_group` walks, asked of every node instead of stopping at the first
    that fits; a pod no node can take (a constraint the scheduler cannot evaluate, a claim
    that is missing) gets none. `claims` are the known PVCs, as in `GangRequest.claims`. The
    differential test against kube-scheduler (tests/integration/test_kube_scheduler_agreement.py)
    asks this, since kube-scheduler's choice among feasible nodes is scored, not unique.
    """
    shape = member_shape(pod)
    if shape.unsupported is not None:
        return frozenset()
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    resolved: tuple[VolumeClaim, ...] = ()
    if shape.inter_pod.claims:
        problem, resolved = claims_problem(snapshot, namespace, pod_claims(pod), claims or {})
        if problem is not None:
            return frozenset()
    check = member_check(
        snapshot,
        namespace,
        meta.get("labels") or {},
        shape.inter_pod,
        shape.constraints,
        resolved,
        pod_disks(pod),
    )
    feasibility = snapshot.classes.feasibility(shape.constraints)
    return frozenset(
        node.name
        for node, verdict in verdicts(snapshot, feasibility, shape.request, check)
        if verdict is None
    )
