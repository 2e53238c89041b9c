"""The gang decision: place at least minMember members at once, or place nothing and say why.

A gang's members are useless alone (a distributed job blocks until every worker is up), so
binding some of them while the rest cannot run only wastes the nodes. `place_group` therefore
books members on a snapshot, and keeps the bookings only if minMember of them (counting members
already bound) fit at the same time; otherwise it undoes them and returns a `Refusal` whose
message names the shortfall in kube-scheduler's words.

Speed comes from shape, not from tuning: members are stamped from one template, so members with
identical requests and constraints form one `MemberShape`; static filters are evaluated once per
(shape, node class) and cached in the snapshot; and for a shape the nodes are walked once in
best-fit order (fullest first, ties by name), each taking `min(free // request)` copies, instead
of searching all nodes for every pod.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from podgroup_operator.api.limits import summarize
from podgroup_operator.constants import GangMode, Reason
from podgroup_operator.scheduling.filters import (
    Constraints,
    Verdict,
    insufficient,
    pod_constraints,
)
from podgroup_operator.scheduling.gang import (
    Binding,
    GangGroupPlacement,
    GangRequest,
    Placement,
    Refusal,
)
from podgroup_operator.scheduling.resources import (
    PODS,
    Resources,
    add_resources,
    copies_that_fit,
    format_resources,
    pod_requests,
    shortfall,
)
from podgroup_operator.scheduling.snapshot import Feasibility, Snapshot, Undo, pod_uid

__all__ = [
    "MemberShape",
    "member_shape",
    "place_gang_group",
    "place_group",
]


@dataclass(frozen=True, slots=True)
class MemberShape:
    """What decides where a member can go: its request and its static constraints."""

    request: tuple[tuple[str, int], ...]
    """(resource, milli-units) pairs, sorted, zero amounts dropped."""
    constraints: Constraints

    @property
    def resources(self) -> Resources:
        return dict(self.request)

    def describe(self) -> str:
        return format_resources(self.resources)


def member_shape(pod: Mapping[str, Any]) -> MemberShape:
    """Parse the parts of a raw pod that placement depends on."""
    return MemberShape(tuple(sorted(pod_requests(pod).items())), pod_constraints(pod))


def _raw_shape_key(pod: Mapping[str, Any]) -> str:
    """A cheap text key over exactly the fields `member_shape` reads.

    Pods from one template repeat it verbatim, so one parse serves the whole gang. Differently
    ordered but equal dicts only cost an extra parse, never a wrong answer.
    """
    spec = pod.get("spec") or {}
    return repr(
        (
            [c.get("resources") for c in spec.get("containers") or ()],
            [
                (c.get("resources"), c.get("restartPolicy"))
                for c in spec.get("initContainers") or ()
            ],
            spec.get("overhead"),
            spec.get("nodeSelector"),
            spec.get("affinity"),
            spec.get("tolerations"),
        )
    )


@dataclass
class _ShapeGroup:
    shape: MemberShape
    pods: list[Mapping[str, Any]]
    placed: int = 0
    nodes_used: int = 0
    feasibility: Feasibility | None = None


def _group_by_shape(pods: Sequence[Mapping[str, Any]]) -> list[_ShapeGroup]:
    by_raw: dict[str, MemberShape] = {}
    groups: dict[MemberShape, _ShapeGroup] = {}
    for pod in pods:
        raw = _raw_shape_key(pod)
        shape = by_raw.get(raw)
        if shape is None:
            shape = by_raw[raw] = member_shape(pod)
        group = groups.get(shape)
        if group is None:
            group = groups[shape] = _ShapeGroup(shape, [])
        group.pods.append(pod)
    return list(groups.values())


def _dominant_share(shape: MemberShape, capacity: Mapping[str, int]) -> float:
    """The request's largest share of the cluster's free capacity; big shapes are placed first."""
    share = 0.0
    for name, amount in shape.request:
        if name == PODS:
            continue
        have = capacity.get(name, 0)
        share = max(share, amount / have if have > 0 else float("inf"))
    return share


# --- the attempt ---------------------------------------------------------------------------------
@dataclass
class _Attempt:
    groups: list[_ShapeGroup]
    bindings: list[Binding]
    unplaced: list[str]
    undos: list[Undo]

    def undo(self) -> None:
        for undo in reversed(self.undos):
            undo()

    def undo_callable(self) -> Undo:
        undos = list(self.undos)

        def undo() -> None:
            for step in reversed(undos):
                step()

        return undo


def _attempt(groups: list[_ShapeGroup], snapshot: Snapshot) -> _Attempt:
    """Book every member that fits, biggest shapes first, each shape filling nodes best-fit."""
    capacity = snapshot.total_free()
    groups = sorted(groups, key=lambda g: (-_dominant_share(g.shape, capacity), g.shape.request))
    attempt = _Attempt(groups, [], [], [])
    for group in groups:
        feasibility = snapshot.feasibility(group.shape.constraints)
        group.feasibility = feasibility
        request = group.shape.request
        remaining = len(group.pods)
        chosen: list[tuple[str, int]] = []
        for node in snapshot.best_fit_order(feasibility):
            copies = copies_that_fit(request, node.free)
            if copies:
                take = copies if copies < remaining else remaining
                chosen.append((node.name, take))
                remaining -= take
                if not remaining:
                    break
        resources = group.shape.resources
        triples: list[tuple[str, str, Resources]] = []
        pods = iter(group.pods)
        for node_name, take in chosen:
            for _ in range(take):
                pod = next(pods)
                uid = pod_uid(pod)
                meta = pod.get("metadata") or {}
                attempt.bindings.append(
                    Binding(
                        str(meta.get("namespace", "default")),
                        str(meta.get("name", "")),
                        uid,
                        node_name,
                    )
                )
                triples.append((uid, node_name, resources))
        attempt.unplaced.extend(str((p.get("metadata") or {}).get("name", "")) for p in pods)
        group.placed = len(triples)
        group.nodes_used = len(chosen)
        if triples:
            attempt.undos.append(snapshot.assume(triples))
    return attempt


# --- messages ------------------------------------------------------------------------------------
def _node_breakdown(group: _ShapeGroup, snapshot: Snapshot) -> str:
    """`0/10 nodes can take another: 3 Insufficient nvidia.com/gpu, 2 node(s) were not Ready`."""
    assert group.feasibility is not None
    counts: Counter[Verdict] = snapshot.exclusions(group.feasibility)
    request = group.shape.request
    available = 0
    for node in snapshot.best_fit_order(group.feasibility):
        verdict = insufficient(request, node.free)
        if verdict is None:
            available += 1
        else:
            counts[verdict] += 1
    parts = [
        verdict.describe(n) for verdict, n in sorted(counts.items(), key=lambda kv: str(kv[0]))
    ]
    head = f"{available}/{len(snapshot)} nodes can take another"
    return head + (": " + ", ".join(parts) if parts else "")


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
            f"{wanted} x {group.shape.describe()}: {group.placed} fit on {group.nodes_used} node(s)"
        )
        if group.placed < wanted:
            line += (
                f", short {wanted - group.placed}: each needs a node with "
                f"{group.shape.describe()} free; {_node_breakdown(group, snapshot)}"
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


# --- public API ----------------------------------------------------------------------------------
def place_group(gang: GangRequest, snapshot: Snapshot) -> Placement | Refusal:
    """Decide one gang against the snapshot; on success the placement is left assumed.

    - At least `min_member` members (counting `already_bound`) must fit at the same time, or
      nothing is placed. Members beyond that are placed as well when they fit.
    - Strict (default): a refusal leaves the snapshot exactly as it was.
    - NonStrict: a refusal keeps the members that did fit assumed (`Refusal.partial`) so the
      caller may bind them and count them as bound next cycle. This can deadlock: two NonStrict
      gangs holding half a cluster each wait for each other forever, which is why the timeout
      (see `queue.decide_wait`) must eventually release the partial members.
    - Once satisfied (`satisfied_before`): members are replacements, placed one by one as they
      fit, with no barrier and no PreFilter.

    Returns a `Placement` (bind its bindings, call `undo` if binding fails) or a `Refusal`
    whose message names what is short.
    """
    refusal = _prefilter(gang, snapshot)
    if refusal is not None:
        return refusal
    attempt = _attempt(_group_by_shape(gang.pending), snapshot)
    placed = len(attempt.bindings)
    enough = placed + gang.already_bound >= gang.min_member
    if gang.satisfied_before:
        enough = placed > 0 or not gang.pending
    if enough:
        return Placement(
            gang.key, tuple(attempt.bindings), tuple(attempt.unplaced), attempt.undo_callable()
        )
    message = _shortfall_message(gang, attempt, snapshot)
    if gang.mode is GangMode.NON_STRICT and attempt.bindings and not gang.satisfied_before:
        return Refusal(
            gang.key,
            Reason.NOT_ENOUGH_RESOURCES,
            f"{message}; keeping {placed} member(s) placed (NonStrict)",
            tuple(attempt.bindings),
            attempt.undo_callable(),
        )
    attempt.undo()
    return Refusal(gang.key, Reason.NOT_ENOUGH_RESOURCES, message)


def place_gang_group(
    gangs: Sequence[GangRequest], snapshot: Snapshot
) -> GangGroupPlacement | Refusal:
    """Place several PodGroups that must all fit before any of them binds.

    Each group keeps its own minMember barrier; the group of groups adds one more: if any
    refuses, every placement made for the others is undone and the refusal (prefixed with the
    whole group's names) is returned. NonStrict is ignored here: partial members of one group
    would hold room the others need, which is exactly what a gang group exists to prevent.

    The prefix names at most SUMMARY_NAMES groups and counts the rest: the message is published
    on every member group and logged for each, so naming all of a 1,000-group gang group once
    wrote 10 MB of log per cycle.
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
