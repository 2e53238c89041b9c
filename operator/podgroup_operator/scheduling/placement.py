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
of searching all nodes for every pod. Members that depend on other pods are placed one by one,
but keep what their shape learnt as they go (`interpod.MemberChecks`, and the nodes `_choose`
found lost, `_Lost`) instead of recounting it for each, which would make a gang's decision
quadratic in its size (docs/decisions/010-placement-keeps-what-a-shape-learnt.md).
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from podgroup_operator.api.keys import pod_uid
from podgroup_operator.api.limits import summarize
from podgroup_operator.constants import GangMode, Reason
from podgroup_operator.scheduling.filters import (
    Constraints,
    Rejection,
    insufficient,
    pod_constraints,
)
from podgroup_operator.scheduling.framework import GangView, place, smallest_request
from podgroup_operator.scheduling.gang import (
    Binding,
    GangGroupPlacement,
    GangRequest,
    Placement,
    Refusal,
)
from podgroup_operator.scheduling.interpod import (
    MemberCheck,
    MemberChecks,
    claims_problem,
    member_check,
)
from podgroup_operator.scheduling.podinfo import (
    NO_INTER_POD,
    InterPodConstraints,
    PodInfo,
    inter_pod_constraints,
    pod_claims,
    pod_priority,
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
from podgroup_operator.scheduling.scores import (
    NO_PREFERENCES,
    Preferences,
    image_score,
    pack_score,
    pod_images,
    pod_preferences,
    static_score,
)
from podgroup_operator.scheduling.selectors import UnsupportedConstraintError
from podgroup_operator.scheduling.snapshot import Feasibility, NodeState, Snapshot, Undo
from podgroup_operator.scheduling.subgroups import place_sub_groups
from podgroup_operator.scheduling.topology import restrict
from podgroup_operator.scheduling.volumes import VolumeClaim, pod_disks, volume_kind

__all__ = [
    "MemberShape",
    "feasible_nodes",
    "gang_view",
    "member_shape",
    "place_gang_group",
    "place_group",
    "place_members",
    "shape_feasibility",
    "shape_groups",
    "try_place",
]


@dataclass(frozen=True, slots=True)
class MemberShape:
    """What decides where a member can go: request, static constraints, preferences, and the
    constraints that depend on other pods (`inter_pod`), or why the member cannot be placed."""

    request: tuple[tuple[str, int], ...]
    """(resource, milli-units) pairs, sorted, zero amounts dropped."""
    constraints: Constraints
    preferences: Preferences = NO_PREFERENCES
    inter_pod: InterPodConstraints = NO_INTER_POD
    """Shared by every pod of the shape, except `claims` and `disks`: claim names can differ
    per pod (an ephemeral volume's claim is named after its pod), and so can inline disks, so
    placement reads each pod's own."""
    unsupported: str | None = None
    """Set when the pod asks for something the scheduler cannot evaluate: the whole message."""
    images: tuple[str, ...] = ()
    """Each container's image, as nodes list it (`scores.pod_images`): the image score."""

    @property
    def resources(self) -> Resources:
        return dict(self.request)

    def describe(self) -> str:
        return format_resources(self.resources)


def member_shape(pod: Mapping[str, Any]) -> MemberShape:
    """Parse the parts of a raw pod that placement depends on."""
    request = tuple(sorted(pod_requests(pod).items()))
    constraints = pod_constraints(pod)
    preferences = pod_preferences(pod, constraints.tolerations)
    images = pod_images(pod)
    try:
        inter_pod = inter_pod_constraints(pod)
    except UnsupportedConstraintError as error:
        return MemberShape(
            request,
            constraints,
            preferences,
            NO_INTER_POD,
            f"{error}: not supported by podgroup-scheduler; remove it or use a scheduler that "
            "supports it",
            images,
        )
    return MemberShape(request, constraints, preferences, inter_pod, images=images)


def _raw_shape_key(pod: Mapping[str, Any]) -> str:
    """A cheap text key over exactly the fields `member_shape` reads.

    Pods from one template repeat it verbatim, so one parse serves the whole gang. Differently
    ordered but equal dicts only cost an extra parse, never a wrong answer. The namespace is in
    because affinity terms default to it; the labels only when spread constraints may read them
    (`matchLabelKeys`), so per-pod labels such as an index do not split a gang into shapes.
    It covers every field a rule reads into the shape (`registry.Rule.reads`; checked by
    tests/unit/scheduling/test_sched_registry.py).
    """
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    spread = spec.get("topologySpreadConstraints")
    return repr(
        (
            [
                (c.get("resources"), c.get("ports"), c.get("image"))
                for c in spec.get("containers") or ()
            ],
            [
                (c.get("resources"), c.get("restartPolicy"), c.get("ports"))
                for c in spec.get("initContainers") or ()
            ],
            spec.get("overhead"),
            spec.get("nodeSelector"),
            spec.get("affinity"),
            spec.get("tolerations"),
            spread,
            [volume_kind(v).value for v in spec.get("volumes") or ()],
            meta.get("namespace"),
            meta.get("labels") if spread else None,
        )
    )


@dataclass
class _ShapeGroup:
    shape: MemberShape
    pods: list[Mapping[str, Any]]
    placed: int = 0
    nodes: set[str] = field(default_factory=set)
    """Nodes the placed members went to."""
    feasibility: Feasibility | None = None
    blocked: Counter[str] = field(default_factory=Counter)
    """Pod-level problems (unsupported constraint, volumes) -> how many members they stop."""
    breakdown: str | None = None
    """Per-node reasons recorded when a member with pod-to-pod constraints found no node."""


_SHAPES: dict[str, MemberShape] = {}
"""Parsed shapes by raw key, shared across gangs: jobs stamp every gang from one template."""
_SHAPES_LIMIT = 4096


def _group_by_shape(pods: Sequence[Mapping[str, Any]]) -> list[_ShapeGroup]:
    by_raw = _SHAPES
    groups: dict[MemberShape, _ShapeGroup] = {}
    for pod in pods:
        raw = _raw_shape_key(pod)
        shape = by_raw.get(raw)
        if shape is None:
            if len(by_raw) >= _SHAPES_LIMIT:
                by_raw.clear()
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


# --- node order ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Images:
    """The nodes that hold some of a shape's images, with their image score (`image_score`):
    all of them (`scores`), and grouped by score, best first (`groups`)."""

    scores: Mapping[str, float]
    groups: tuple[tuple[float, frozenset[str]], ...]


IMAGE_STREAMS = 4
"""Image score groups `_walk` merges as streams of the node order; past it, every feasible node
is scored and sorted (`_Bonus.by_node`). A pod of one container makes one group (the score of an
image is the same on every node that holds it); more groups need several containers."""


def _images(snapshot: Snapshot, images: tuple[str, ...]) -> _Images | None:
    """Image scores of the nodes for a shape's `images`; None when no node scores above 0, or
    every node scores the same (the order is then the packing order).

    Cached per image epoch (`ImageState.cached`): the scores do not depend on the pods that
    members are assumed onto, so every member and every gang of the shape share them."""
    if not any(snapshot.images.count(name) for name in images):
        return None  # most gangs of a cluster whose nodes list no image of theirs
    result: _Images | None = snapshot.images.cached(
        images, functools.partial(_image_scores, snapshot, images)
    )
    return result


def _image_scores(snapshot: Snapshot, images: tuple[str, ...]) -> _Images | None:
    """`_images`, computed."""
    total = len(snapshot.nodes)
    held: dict[str, int] = {}
    # Per container, as upstream (two containers of one image count it twice), but each image
    # once: a pod of thousands of containers of one image does not walk the nodes for each.
    for name, containers in Counter(images).items():
        nodes = snapshot.images.holders(name)  # none, at once, for an image no node lists
        # Upstream's scaledImageScore: the size, scaled by the share of nodes holding it.
        part = int(snapshot.images.size(name) * (len(nodes) / total)) * containers
        for node in nodes:
            held[node] = held.get(node, 0) + part
    scores: dict[str, float] = {}
    groups: dict[float, set[str]] = {}
    for node, spread_bytes in held.items():
        score = image_score(spread_bytes, len(images))
        if score > 0:
            scores[node] = score
            groups.setdefault(score, set()).add(node)
    if not groups or (len(groups) == 1 and len(scores) == total):
        return None
    ranked = tuple((score, frozenset(nodes)) for score, nodes in sorted(groups.items()))
    return _Images(scores, ranked[::-1])


@dataclass(frozen=True, slots=True)
class _Bonus:
    """Scores beyond packing: per class (None when equal everywhere), or per node; and the
    image score, when it is not in `by_node` already."""

    by_class: Mapping[int, float] | None = None
    by_node: Mapping[str, float] | None = None
    by_image: _Images | None = None


_NO_BONUS = _Bonus()


def _bonus(
    snapshot: Snapshot,
    feasibility: Feasibility,
    preferences: Preferences,
    check: MemberCheck | None,
    images: tuple[str, ...] = (),
) -> _Bonus:
    """Static scores (node affinity, taints), the class-level dynamic score (`MemberCheck.
    dynamic_score`) and the image score, weighted, for the classes the check may pass."""
    soft = check is not None and check.scored
    held = _images(snapshot, images) if images else None
    few = held is None or len(held.groups) <= IMAGE_STREAMS
    if not preferences.terms and not soft and not _has_prefer_taints(feasibility) and few:
        # Tolerations alone only matter against PreferNoSchedule taints.
        return _NO_BONUS if held is None else _Bonus(by_image=held)
    if preferences.uses_node_identity or not few:
        by_node = {}
        image_scores = held.scores if held is not None else {}
        for node in snapshot.classes.best_fit_order(feasibility):
            score = static_score(preferences, node.facts) + image_scores.get(node.name, 0.0)
            if check is not None and soft:
                score += check.dynamic_score(node.facts.labels, upper=True)
            by_node[node.name] = score
        return _Bonus(None, by_node)
    by_class = {}
    for node_class in feasibility.classes:
        if check is not None and not check.allows_class(node_class.facts.labels):
            # Its nodes fail the check anyway; scored, a zone affinity's own terms (which score
            # its members at hardPodAffinityWeight) would make every other zone score lower,
            # and the gang walk scored instead of packed.
            continue
        score = static_score(preferences, node_class.facts)
        if check is not None and soft:
            score += check.dynamic_score(node_class.facts.labels, upper=True)
        by_class[node_class.id] = score
    if len(set(by_class.values())) <= 1:
        return _NO_BONUS if held is None else _Bonus(by_image=held)
    return _Bonus(by_class, None, held)


def _has_prefer_taints(feasibility: Feasibility) -> bool:
    return any(t.effect == "PreferNoSchedule" for c in feasibility.classes for t in c.facts.taints)


def _walk(
    snapshot: Snapshot, feasibility: Feasibility, bonus: _Bonus
) -> Iterator[tuple[float, NodeState]]:
    """Feasible nodes with their score bound, best first (ties by name). Do not assume() while
    iterating. Without bonuses this is the snapshot's best-fit order.

    With image scores (and no per-node bonus), each group of nodes of one image score is a
    stream of the order without them, raised by that score, and the nodes holding none of the
    images another: merged, they are the order with the image score added, without scoring and
    sorting every node for each member."""
    held = bonus.by_image
    if held is None:
        yield from _scored_walk(snapshot, feasibility, bonus)
        return
    scores = held.scores

    def stream(extra: float, nodes: frozenset[str] | None) -> Iterator[tuple[float, NodeState]]:
        for score, node in _scored_walk(snapshot, feasibility, bonus):
            if node.name in nodes if nodes is not None else node.name not in scores:
                yield score + extra, node

    streams = [stream(extra, nodes) for extra, nodes in held.groups]
    streams.append(stream(0.0, None))
    yield from heapq.merge(*streams, key=lambda item: (-item[0], item[1].name))


def _scored_walk(
    snapshot: Snapshot, feasibility: Feasibility, bonus: _Bonus
) -> Iterator[tuple[float, NodeState]]:
    """`_walk` without the image score."""
    nodes = snapshot.nodes
    if bonus.by_node is not None:
        by_node = bonus.by_node
        ranked = sorted(
            (-(by_node[n.name] + pack_score(n.score)), n.name)
            for n in snapshot.classes.best_fit_order(feasibility)
        )
        for negative, name in ranked:
            yield -negative, nodes[name]
        return
    if bonus.by_class is None:
        for node in snapshot.classes.best_fit_order(feasibility):
            yield pack_score(node.score), node
        return
    allowed = feasibility.allowed
    by_class = bonus.by_class

    def ranked_class(cid: int, order: list[tuple[float, str]]) -> Iterator[tuple[float, str]]:
        extra = by_class[cid]
        for share, name in order:
            if allowed is None or name in allowed:
                yield -(extra + pack_score(share)), name

    streams = [ranked_class(c.id, c.order) for c in feasibility.classes if c.id in by_class]
    for negative, name in heapq.merge(*streams):
        yield -negative, nodes[name]


_NO_NAMES: frozenset[str] = frozenset()
UNLOST_ORDER_AFTER = 1.0
"""Lost nodes met by a shape's walks (each skip and each node found lost counts), per node in the
snapshot, after which the shape walks its own best-fit order without them (`_Lost.order`;
docs/decisions/010-placement-keeps-what-a-shape-learnt.md)."""


class _Lost:
    """The nodes that later members of one shape cannot use (see `_choose`), and, once the
    walks met enough of them (UNLOST_ORDER_AFTER), the shape's feasible nodes without them in
    best-fit order, or in the order of the shape's `static` bonus (`_bonus` without a check:
    preferred node affinity, PreferNoSchedule taints, images), which does not change as members
    are assumed.

    The order: the nodes earlier members took come first in best-fit order, and skipping them one
    by one for each member keeps the walk quadratic in the gang's size. Dropped from the shape's
    own copy of the order once, a lost node is never walked again; the copy is kept true as
    members are assumed (`assumed`), the only change to the snapshot while a shape is placed.
    Built only once the walks have met as many lost nodes as the snapshot has nodes
    (UNLOST_ORDER_AFTER): a copy costs a pass over every node, so it is paid for by the skipping
    it ends, never by a small gang (docs/decisions/010-placement-keeps-what-a-shape-learnt.md)."""

    def __init__(
        self, snapshot: Snapshot, feasibility: Feasibility, static: _Bonus | None = None
    ) -> None:
        self.names: set[str] = set()
        self.snapshot = snapshot
        self.feasibility = feasibility
        self.static = _NO_BONUS if static is None else static
        self.order: list[tuple[float, str]] | None = None
        """`key` of each node as `_walk` orders them, lost ones left out; None until built."""
        self._met = 0
        self._build_at = UNLOST_ORDER_AFTER * len(snapshot.nodes)

    def key(self, node: NodeState) -> tuple[float, str]:
        """Where `node` sorts in `order`: by its score as `_walk` computes it, best first."""
        bonus = self.static
        if bonus is _NO_BONUS:
            return node.score, node.name
        if bonus.by_node is not None:
            return -(bonus.by_node.get(node.name, 0.0) + pack_score(node.score)), node.name
        score = pack_score(node.score)
        if bonus.by_class is not None:
            cid = node.node_class.id if node.node_class is not None else -1
            score = bonus.by_class.get(cid, 0.0) + score
        if bonus.by_image is not None:
            score += bonus.by_image.scores.get(node.name, 0.0)
        return -score, node.name

    def add(self, name: str) -> None:
        """`name` was found lost."""
        self.names.add(name)
        self.met(1)

    def met(self, count: int) -> None:
        """Walks met `count` more lost nodes (found them so, or skipped them)."""
        self._met += count
        if self.order is None and self._met >= self._build_at:
            if self.static is _NO_BONUS:
                self.order = [
                    (node.score, node.name)
                    for node in self.snapshot.classes.best_fit_order(self.feasibility)
                    if node.name not in self.names
                ]
            else:
                self.order = [
                    (-score, node.name)
                    for score, node in _walk(self.snapshot, self.feasibility, self.static)
                    if node.name not in self.names
                ]

    def assumed(self, before: tuple[float, str], node: NodeState) -> None:
        """`node`, at `before` in the order, was just assumed: its place moves with its score."""
        order = self.order
        if order is None:
            return
        at = bisect_left(order, before)
        if at < len(order) and order[at] == before:
            del order[at]
            insort(order, self.key(node))

    def first_fit(
        self, request: tuple[tuple[str, int], ...], check: MemberCheck | None
    ) -> NodeState | None:
        """`_choose`'s walk over `order`, dropping the nodes it finds lost.

        The test of a node (room, then the check, then whether a refusal lasts) is written out
        here and in both of `_choose`'s walks, not shared: a call per node costs more
        (docs/decisions/010-placement-keeps-what-a-shape-learnt.md). The three are kept in step by
        `test_shape_shortcuts_decide_what_checking_every_member_afresh_decides`, which compares
        every placement and refusal with a plain walk that skips nothing."""
        order = self.order
        assert order is not None
        nodes, names = self.snapshot.nodes, self.names
        first, least = request[0]
        at = 0
        while at < len(order):
            name = order[at][1]
            if name not in names:
                node = nodes[name]
                free = node.free
                if free.get(first, 0) < least or not copies_that_fit(request, free):
                    names.add(name)
                elif check is None:
                    return node
                else:
                    rejection = check.verdict(node)
                    if rejection is None:
                        return node
                    if rejection.exclusion not in check.lasting:
                        at += 1
                        continue
                    names.add(name)
            del order[at]
        return None


def _choose(
    snapshot: Snapshot,
    feasibility: Feasibility,
    bonus: _Bonus,
    request: tuple[tuple[str, int], ...],
    check: MemberCheck | None,
    lost: _Lost | None = None,
) -> NodeState | None:
    """The best node for one member: the first that passes, unless hostname-keyed soft spread
    makes scores differ inside a class; then walk on while a better score is still possible.

    `lost` names nodes an earlier member of the same shape could not use for a lasting reason
    (too little room, or a rejection in its check's `lasting`): they are skipped, and the ones
    this member finds so are added: the nodes a shape's earlier members took come first in
    best-fit order, and each member would re-check every one of them (see `_Lost`)."""
    per_node = check is not None and check.soft_per_node
    scored = check is not None and check.scored
    first, least = request[0]
    if lost is not None and lost.order is not None and not scored:
        # Without a score that moves with the members (`MemberCheck.dynamic_score`), `bonus`
        # ranks the nodes the check may pass as the shape's static bonus does: `lost.order`.
        return lost.first_fit(request, check)
    gone = lost.names if lost is not None else _NO_NAMES
    if bonus is _NO_BONUS and not per_node:
        # Pure packing: the first node in best-fit order that passes is the answer. Full nodes
        # come first and most fail on the first resource, so that test is inlined.
        found: NodeState | None = None
        skipped = 0
        for node in snapshot.classes.best_fit_order(feasibility):
            if node.name in gone:
                skipped += 1
                continue
            free = node.free
            if free.get(first, 0) < least or not copies_that_fit(request, free):
                if lost is not None:
                    lost.add(node.name)
                continue
            if check is None:
                found = node
                break
            rejection = check.verdict(node)
            if rejection is None:
                found = node
                break
            if lost is not None and rejection.exclusion in check.lasting:
                lost.add(node.name)
        if lost is not None and skipped:
            lost.met(skipped)
        return found
    best: NodeState | None = None
    best_score = 0.0
    skipped = 0
    for upper, node in _walk(snapshot, feasibility, bonus):
        if best is not None and upper <= best_score:
            break
        if node.name in gone:
            skipped += 1
            continue
        free = node.free
        if free.get(first, 0) < least or not copies_that_fit(request, free):
            if lost is not None:
                lost.add(node.name)
            continue
        if check is not None:
            rejection = check.verdict(node)
            if rejection is not None:
                if lost is not None and rejection.exclusion in check.lasting:
                    lost.add(node.name)
                continue
        score = upper
        if per_node:
            assert check is not None
            labels = node.facts.labels
            score += check.dynamic_score(labels) - check.dynamic_score(labels, upper=True)
        if best is None or score > best_score:
            best, best_score = node, score
        if not per_node:
            break
    if lost is not None and skipped and not scored:  # a scored walk never uses lost.order
        lost.met(skipped)
    return best


# --- the attempt ---------------------------------------------------------------------------------
@dataclass
class _Attempt:
    """One try at placing a gang's members on a snapshot: what it booked, and how to undo it.

    It carries the gang and the snapshot so the placement steps it goes through book for that
    gang on that snapshot, and no other."""

    gang: GangRequest
    snapshot: Snapshot
    groups: list[_ShapeGroup]
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


def _place_in_bulk(
    attempt: _Attempt, group: _ShapeGroup, pods: Sequence[Mapping[str, Any]]
) -> None:
    """Members without pod-to-pod constraints: walk the nodes once, each taking what fits."""
    snapshot, gang = attempt.snapshot, attempt.gang
    assert group.feasibility is not None
    bonus = _bonus(snapshot, group.feasibility, group.shape.preferences, None, group.shape.images)
    request = group.shape.request
    remaining = len(pods)
    chosen: list[tuple[str, int]] = []
    nodes: Iterator[NodeState] = (
        snapshot.classes.best_fit_order(group.feasibility)
        if bonus is _NO_BONUS
        else (node for _, node in _walk(snapshot, group.feasibility, bonus))
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


def _place_one_by_one(
    attempt: _Attempt, group: _ShapeGroup, pods: Sequence[Mapping[str, Any]]
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
    static = _bonus(snapshot, group.feasibility, shape.preferences, None, shape.images)
    lost = _Lost(snapshot, group.feasibility, static)
    """Nodes no later member of this shape can use (see `_choose`)."""
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
        bonus = _bonus(snapshot, group.feasibility, shape.preferences, check, shape.images)
        node = _choose(snapshot, group.feasibility, bonus, shape.request, check, lost)
        if node is None:
            if group.breakdown is None:
                group.breakdown = _node_breakdown(group, snapshot, check)
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


def _attempt(groups: list[_ShapeGroup], snapshot: Snapshot, gang: GangRequest) -> _Attempt:
    """Book every member that fits, biggest shapes first, each shape filling nodes best-fit."""
    capacity = snapshot.total_free()
    groups = sorted(groups, key=lambda g: (-_dominant_share(g.shape, capacity), g.shape.request))
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
def _verdicts(
    snapshot: Snapshot,
    feasibility: Feasibility,
    request: Sequence[tuple[str, int]],
    check: MemberCheck | None,
) -> Iterator[tuple[NodeState, Rejection | None]]:
    """Each node that passes the static filters, with what else keeps the pod off it: room
    first, then the checks that depend on other pods (kube-scheduler's order of plugins)."""
    for node in snapshot.classes.best_fit_order(feasibility):
        verdict = insufficient(request, node.free)
        if verdict is None and check is not None:
            verdict = check.verdict(node)
        yield node, verdict


def _node_breakdown(
    group: _ShapeGroup, snapshot: Snapshot, check: MemberCheck | None = None
) -> str:
    """`0/10 nodes can take another: 3 Insufficient nvidia.com/gpu, 2 node(s) were not Ready`."""
    assert group.feasibility is not None
    counts: Counter[Rejection] = snapshot.classes.exclusions(group.feasibility)
    available = 0
    for _, verdict in _verdicts(snapshot, group.feasibility, group.shape.request, check):
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
            f"{wanted} x {group.shape.describe()}: {group.placed} fit on {len(group.nodes)} node(s)"
        )
        if group.blocked:
            line += ", " + "; ".join(
                f"{count} cannot be placed: {problem}"
                for problem, count in sorted(group.blocked.items())
            )
        short = wanted - group.placed - sum(group.blocked.values())
        if short > 0:
            breakdown = group.breakdown or _node_breakdown(group, snapshot)
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


def shape_groups(gang: GangRequest) -> list[tuple[MemberShape, int]]:
    """The gang's pending members as (shape, how many), for callers that reason about room."""
    return [(g.shape, len(g.pods)) for g in _group_by_shape(gang.pending)]


def try_place(gangs: Sequence[GangRequest], snapshot: Snapshot) -> tuple[Binding, ...] | None:
    """What-if: the bindings if every gang reaches minMember at once now, else None (a gang
    with sub-groups: each sub-group in a domain of its own, within `gang.within`).

    Nothing stays assumed and no message is built, so preemption planning can ask this many
    times cheaply. Gangs are placed in the order given, each seeing the previous ones assumed.
    """
    bindings: list[Binding] = []
    undos: list[Undo] = []
    try:
        for gang in gangs:
            if gang.sub_groups is not None:
                # Each sub-group in a domain of its own: the member step's search decides.
                strict = dataclasses.replace(gang, mode=GangMode.STRICT)
                outcome = place_sub_groups(strict, snapshot, place_members, gang_view)
                if isinstance(outcome, Refusal):
                    return None
                undos.append(outcome.undo)
                bindings.extend(outcome.bindings)
                continue
            attempt = _attempt(_group_by_shape(gang.pending), snapshot, gang)
            undos.append(attempt.undo)
            if not _enough(gang, len(attempt.bindings)):
                return None
            bindings.extend(attempt.bindings)
        return tuple(bindings)
    finally:
        for undo in reversed(undos):
            undo()


# --- public API ----------------------------------------------------------------------------------
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
        for node, verdict in _verdicts(snapshot, feasibility, shape.request, check)
        if verdict is None
    )


def shape_feasibility(
    snapshot: Snapshot, constraints: Constraints, gang: GangRequest
) -> Feasibility:
    """The static filters' verdicts for one member shape, narrowed to `gang.within`."""
    feasibility = snapshot.classes.feasibility(constraints)
    return feasibility if gang.within is None else restrict(snapshot, feasibility, gang.within)


def gang_view(gang: GangRequest, snapshot: Snapshot) -> GangView:
    """What the placement generators and scorers read of a gang (`framework.GangView`)."""
    shapes = [(shape, count) for shape, count in shape_groups(gang) if shape.unsupported is None]
    needed = 1 if gang.satisfied_before else max(gang.min_member - gang.already_bound, 1)
    wanted = f"{needed} x {shapes[0][0].describe()}" if len(shapes) == 1 else f"{needed} members"
    return GangView(
        gang,
        tuple(snapshot.classes.feasibility(shape.constraints) for shape, _ in shapes),
        smallest_request([shape.resources for shape, _ in shapes]),
        needed,
        wanted,
    )


def place_group(gang: GangRequest, snapshot: Snapshot) -> Placement | Refusal:
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
    - With `topology`, the members go into one domain of a level the placement generator offers
      (`framework.place`); `Placement.domain` names it.
    - With `sub_groups`, each sub-group goes into a domain of its own (`framework.SubGroupStep`);
      `Placement.sub_domains` names them.

    Returns a `Placement` (its members left assumed) or a `Refusal` whose message names what
    is short.
    """
    refusal = _prefilter(gang, snapshot)
    if refusal is not None:
        return refusal
    if (gang.topology is None and gang.sub_groups is None) or gang.within is not None:
        return place_members(gang, snapshot)
    if gang.topology is not None and gang.topology.problem is not None:
        return Refusal(gang.key, Reason.INVALID_TOPOLOGY, f"{gang.label}: {gang.topology.problem}")
    return place(gang_view(gang, snapshot), snapshot, place_members, gang_view)


def place_members(gang: GangRequest, snapshot: Snapshot) -> Placement | Refusal:
    """Place the members on the snapshot's nodes (within `gang.within`): the filters' step of
    `place_group`, with its all-or-nothing barrier and no PreFilter."""
    attempt = _attempt(_group_by_shape(gang.pending), snapshot, gang)
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
