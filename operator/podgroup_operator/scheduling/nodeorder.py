"""Node order: which node a member of a shape goes to, and why a node refuses it.

For a shape the nodes are walked once in best-fit order (fullest first, ties by name), raised by
the scores beyond packing (`Bonus`: preferred node affinity, PreferNoSchedule taints, the image
score, pod-to-pod preferences), each member taking the first node that passes (`choose`). Nodes
an earlier member of the shape lost for good are skipped (`Lost`), so a gang's decision stays
linear in its size (docs/decisions/010-placement-keeps-what-a-shape-learnt.md).
"""

from __future__ import annotations

import functools
import heapq
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from podgroup_operator.scheduling.filters import Rejection, insufficient
from podgroup_operator.scheduling.interpod import MemberCheck
from podgroup_operator.scheduling.resources import copies_that_fit
from podgroup_operator.scheduling.scores import Preferences, image_score, pack_score, static_score
from podgroup_operator.scheduling.shapes import ShapeGroup
from podgroup_operator.scheduling.snapshot import Feasibility, NodeState, Snapshot

__all__ = [
    "IMAGE_STREAMS",
    "NO_BONUS",
    "UNLOST_ORDER_AFTER",
    "Bonus",
    "Images",
    "Lost",
    "choose",
    "held_images",
    "node_bonus",
    "node_breakdown",
    "verdicts",
    "walk",
]


@dataclass(frozen=True, slots=True)
class Images:
    """The nodes that hold some of a shape's images, with their image score (`image_score`):
    all of them (`scores`), and grouped by score, best first (`groups`)."""

    scores: Mapping[str, float]
    groups: tuple[tuple[float, frozenset[str]], ...]


IMAGE_STREAMS = 4
"""Image score groups `walk` merges as streams of the node order; past it, every feasible node
is scored and sorted (`Bonus.by_node`). A pod of one container makes one group (the score of an
image is the same on every node that holds it); more groups need several containers."""


def held_images(snapshot: Snapshot, images: tuple[str, ...]) -> Images | None:
    """Image scores of the nodes for a shape's `images`; None when no node scores above 0, or
    every node scores the same (the order is then the packing order).

    Cached per image epoch (`ImageState.cached`): the scores do not depend on the pods that
    members are assumed onto, so every member and every gang of the shape share them."""
    if not any(snapshot.images.count(name) for name in images):
        return None  # most gangs of a cluster whose nodes list no image of theirs
    result: Images | None = snapshot.images.cached(
        images, functools.partial(_scores_of_images, snapshot, images)
    )
    return result


def _scores_of_images(snapshot: Snapshot, images: tuple[str, ...]) -> Images | None:
    """`held_images`, computed."""
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
    return Images(scores, ranked[::-1])


@dataclass(frozen=True, slots=True)
class Bonus:
    """Scores beyond packing: per class (None when equal everywhere), or per node; and the
    image score, when it is not in `by_node` already."""

    by_class: Mapping[int, float] | None = None
    by_node: Mapping[str, float] | None = None
    by_image: Images | None = None


NO_BONUS = Bonus()


def node_bonus(
    snapshot: Snapshot,
    feasibility: Feasibility,
    preferences: Preferences,
    check: MemberCheck | None,
    images: tuple[str, ...] = (),
) -> Bonus:
    """Static scores (node affinity, taints), the class-level dynamic score (`MemberCheck.
    dynamic_score`) and the image score, weighted, for the classes the check may pass."""
    soft = check is not None and check.scored
    held = held_images(snapshot, images) if images else None
    few = held is None or len(held.groups) <= IMAGE_STREAMS
    if not preferences.terms and not soft and not _has_prefer_taints(feasibility) and few:
        # Tolerations alone only matter against PreferNoSchedule taints.
        return NO_BONUS if held is None else Bonus(by_image=held)
    if preferences.uses_node_identity or not few:
        by_node = {}
        image_scores = held.scores if held is not None else {}
        for node in snapshot.classes.best_fit_order(feasibility):
            score = static_score(preferences, node.facts) + image_scores.get(node.name, 0.0)
            if check is not None and soft:
                score += check.dynamic_score(node.facts.labels, upper=True)
            by_node[node.name] = score
        return Bonus(None, by_node)
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
        return NO_BONUS if held is None else Bonus(by_image=held)
    return Bonus(by_class, None, held)


def _has_prefer_taints(feasibility: Feasibility) -> bool:
    return any(t.effect == "PreferNoSchedule" for c in feasibility.classes for t in c.facts.taints)


def walk(
    snapshot: Snapshot, feasibility: Feasibility, bonus: Bonus
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
    snapshot: Snapshot, feasibility: Feasibility, bonus: Bonus
) -> Iterator[tuple[float, NodeState]]:
    """`walk` without the image score."""
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
snapshot, after which the shape walks its own best-fit order without them (`Lost.order`;
docs/decisions/010-placement-keeps-what-a-shape-learnt.md)."""


class Lost:
    """The nodes that later members of one shape cannot use (see `choose`), and, once the
    walks met enough of them (UNLOST_ORDER_AFTER), the shape's feasible nodes without them in
    best-fit order, or in the order of the shape's `static` bonus (`node_bonus` without a check:
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
        self, snapshot: Snapshot, feasibility: Feasibility, static: Bonus | None = None
    ) -> None:
        self.names: set[str] = set()
        self.snapshot = snapshot
        self.feasibility = feasibility
        self.static = NO_BONUS if static is None else static
        self.order: list[tuple[float, str]] | None = None
        """`key` of each node as `walk` orders them, lost ones left out; None until built."""
        self._met = 0
        self._build_at = UNLOST_ORDER_AFTER * len(snapshot.nodes)

    def key(self, node: NodeState) -> tuple[float, str]:
        """Where `node` sorts in `order`: by its score as `walk` computes it, best first."""
        bonus = self.static
        if bonus is NO_BONUS:
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
            if self.static is NO_BONUS:
                self.order = [
                    (node.score, node.name)
                    for node in self.snapshot.classes.best_fit_order(self.feasibility)
                    if node.name not in self.names
                ]
            else:
                self.order = [
                    (-score, node.name)
                    for score, node in walk(self.snapshot, self.feasibility, self.static)
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
        """`choose`'s walk over `order`, dropping the nodes it finds lost.

        The test of a node (room, then the check, then whether a refusal lasts) is written out
        here and in both of `choose`'s walks, not shared: a call per node costs more
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


def choose(  # noqa: PLR0915
    snapshot: Snapshot,
    feasibility: Feasibility,
    bonus: Bonus,
    request: tuple[tuple[str, int], ...],
    check: MemberCheck | None,
    lost: Lost | None = None,
) -> NodeState | None:
    """The best node for one member: the first that passes, unless hostname-keyed soft spread
    makes scores differ inside a class; then walk on while a better score is still possible.

    `lost` names nodes an earlier member of the same shape could not use for a lasting reason
    (too little room, or a rejection in its check's `lasting`): they are skipped, and the ones
    this member finds so are added: the nodes a shape's earlier members took come first in
    best-fit order, and each member would re-check every one of them (see `Lost`)."""
    per_node = check is not None and check.soft_per_node
    scored = check is not None and check.scored
    first, least = request[0]
    if lost is not None and lost.order is not None and not scored:
        # Without a score that moves with the members (`MemberCheck.dynamic_score`), `bonus`
        # ranks the nodes the check may pass as the shape's static bonus does: `lost.order`.
        return lost.first_fit(request, check)
    gone = lost.names if lost is not None else _NO_NAMES
    if bonus is NO_BONUS and not per_node:
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
    for upper, node in walk(snapshot, feasibility, bonus):
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


def verdicts(
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


def node_breakdown(group: ShapeGroup, snapshot: Snapshot, check: MemberCheck | None = None) -> str:
    """`0/10 nodes can take another: 3 Insufficient nvidia.com/gpu, 2 node(s) were not Ready`."""
    assert group.feasibility is not None
    counts: Counter[Rejection] = snapshot.classes.exclusions(group.feasibility)
    available = 0
    for _, verdict in verdicts(snapshot, group.feasibility, group.shape.request, check):
        if verdict is None:
            available += 1
        else:
            counts[verdict] += 1
    parts = [
        verdict.describe(n) for verdict, n in sorted(counts.items(), key=lambda kv: str(kv[0]))
    ]
    head = f"{available}/{len(snapshot)} nodes can take another"
    return head + (": " + ", ".join(parts) if parts else "")
