"""Node scores: which of the nodes that pass every filter a member should go to.

kube-scheduler sums plugin scores (each 0..100) times plugin weights. We keep its default weights
for the plugins we score, and our packing score in place of its spreading NodeResourcesFit:

| score | weight | 0..100 |
| --- | --- | --- |
| packing | 1 | how full the node is: 100 x (1 - free share of its scarcest resource) |
| preferred node affinity | 2 | 100 x weight of matching preferred terms / weight of all |
| PreferNoSchedule taints | 3 | 100 / (1 + untolerated PreferNoSchedule taints) |
| topology spread, ScheduleAnyway | 2 | see `spread.SpreadState.score` |
| preferred pod (anti-)affinity | 2 | see `interpod_score.PreferredScore.score` |
| image locality | 1 | see `image_score` |

Upstream normalises each plugin's raw scores over the nodes of one cycle (the best node gets
100). That needs every feasible node scored for every pod, which a 5,000-node gang decision
cannot afford; our scores are fixed-scale instead, so each ranks nodes the way the upstream plugin
does on its own, and nodes of one class share all but the packing score. Placement then walks
nodes in descending score and stops at the first one that passes (see `placement`). Ties go to
the node name, so decisions are deterministic.

Image locality is kube-scheduler's own formula, which is fixed-scale upstream too. It matters
more to a gang than to a lone pod: the gang starts when its slowest member has pulled its image.

Not scored: balanced allocation. It would rank nodes by how evenly their cpu and memory fill,
which works against packing (an empty node is perfectly balanced), and a per-node score of every
placement would cost the best-fit walk its shortcut.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from podgroup_operator.scheduling.filters import (
    HOSTNAME_LABEL,
    NodeFacts,
    Term,
    TermIndex,
    Toleration,
    TolerationIndex,
    node_selector_terms,
    pod_constraints,
    term_index,
)

MAX_SCORE = 100.0
"""The top of every score's 0..100 scale."""
WEIGHT_PACK = 1.0
WEIGHT_NODE_AFFINITY = 2.0
WEIGHT_TAINT = 3.0
WEIGHT_SPREAD = 2.0
WEIGHT_INTER_POD = 2.0
WEIGHT_IMAGE = 1.0
MIB = 1024 * 1024
IMAGE_MIN_BYTES = 23 * MIB
"""Image bytes a node must hold for the pod before its image score rises above 0 (upstream's
`minThreshold`)."""
IMAGE_MAX_BYTES_PER_CONTAINER = 1000 * MIB
"""Image bytes per container at which the image score reaches 100 (`maxContainerThreshold`)."""
PREFER_NO_SCHEDULE = "PreferNoSchedule"


@dataclass(frozen=True, slots=True)
class Preferences:
    """The static preferences of a pod: preferred node affinity terms and its tolerations."""

    terms: tuple[tuple[int, Term], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    covering: TolerationIndex = field(init=False, repr=False, compare=False, hash=False)
    matching: TermIndex | None = field(init=False, repr=False, compare=False, hash=False)
    total: int = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "covering", TolerationIndex.of(self.tolerations))
        object.__setattr__(self, "matching", term_index(tuple(term for _, term in self.terms)))
        object.__setattr__(self, "total", sum(weight for weight, _ in self.terms))

    @property
    def uses_node_identity(self) -> bool:
        """True when a preferred term names nodes (hostname or metadata.name): per-node scores."""
        return any(
            term.fields or any(r.key == HOSTNAME_LABEL for r in term.expressions)
            for _, term in self.terms
        )


NO_PREFERENCES = Preferences()


def pod_preferences(
    pod: Mapping[str, Any], tolerations: tuple[Toleration, ...] | None = None
) -> Preferences:
    """Preferred node affinity (weight, term) pairs and the tolerations of a raw pod
    (`tolerations` when the caller has parsed them already)."""
    spec = pod.get("spec") or {}
    preferred = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution"
    ) or ()
    if not preferred and not tolerations and not spec.get("tolerations"):
        return NO_PREFERENCES
    terms: list[tuple[int, Term]] = []
    for item in preferred:
        weight = int(item.get("weight") or 0)
        if weight > 0:
            (term,) = node_selector_terms([item.get("preference") or {}])
            terms.append((weight, term))
    if tolerations is None:
        tolerations = pod_constraints(
            {"spec": {"tolerations": spec.get("tolerations") or []}}
        ).tolerations
    if not terms and not tolerations:
        return NO_PREFERENCES
    return Preferences(tuple(terms), tolerations)


def node_affinity_score(preferences: Preferences, facts: NodeFacts) -> float:
    """0..100: the share of preferred-term weight the node matches."""
    terms = preferences.terms
    if not terms:
        return 0.0
    name, labels = facts.name, facts.labels
    index = preferences.matching
    positions = range(len(terms)) if index is None else index.candidates(name, labels)
    matched = 0
    for i in positions:
        weight, term = terms[i]
        if term.matches(name, labels):
            matched += weight
    return 100.0 * matched / preferences.total


def taint_score(preferences: Preferences, facts: NodeFacts) -> float:
    """0..100: 100 without untolerated PreferNoSchedule taints, less with each one."""
    count = 0
    for taint in facts.taints:
        if taint.effect == PREFER_NO_SCHEDULE and not preferences.covering.tolerates(taint):
            count += 1
    return 100.0 / (1 + count)


def static_score(preferences: Preferences, facts: NodeFacts) -> float:
    """The weighted scores that depend only on the node's labels and taints."""
    return WEIGHT_NODE_AFFINITY * node_affinity_score(
        preferences, facts
    ) + WEIGHT_TAINT * taint_score(preferences, facts)


def pack_score(free_share: float) -> float:
    """Weighted packing score of a node whose scarcest resource has `free_share` free."""
    return WEIGHT_PACK * 100.0 * (1.0 - free_share)


def image_name(image: str) -> str:
    """The name a node lists an image under, as kube-scheduler v1.20 looks it up: `:latest`
    added to a name without a tag. Nothing else is normalised upstream (`nginx` does not match
    `docker.io/library/nginx:latest`), so nothing else is here."""
    if image.rfind(":") <= image.rfind("/"):
        return image + ":latest"
    return image


def pod_images(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The image of each of the pod's containers (init containers do not count upstream)."""
    return tuple(
        image_name(str(container.get("image") or ""))
        for container in (pod.get("spec") or {}).get("containers") or ()
    )


def image_score(spread_bytes: int, containers: int) -> float:
    """Weighted 0..100 (kube-scheduler's ImageLocality): how much of the pod's images the node
    holds, each image's size scaled by the share of all nodes that hold it (`spread_bytes`:
    upstream keeps a pod off the few nodes that hold a rare image, the "node heating" it
    names), between IMAGE_MIN_BYTES and IMAGE_MAX_BYTES_PER_CONTAINER per container."""
    if containers <= 0:
        return 0.0
    most = IMAGE_MAX_BYTES_PER_CONTAINER * containers
    held = min(max(spread_bytes, IMAGE_MIN_BYTES), most)
    return WEIGHT_IMAGE * (100 * (held - IMAGE_MIN_BYTES) // (most - IMAGE_MIN_BYTES))
