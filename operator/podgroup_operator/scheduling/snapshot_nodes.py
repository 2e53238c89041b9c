"""The records a `Snapshot` keeps: a node (`NodeState`), a class of nodes (`NodeClass`), a pod
holding room (`PodEntry`).

They are plain slotted records read on every placement's hot loops; the snapshot and its
concerns (`snapshot_classes`, `snapshot_pods`, `snapshot_volumes`, `snapshot_images`) change
them, rules only read them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from podgroup_operator.scheduling.filters import HOSTNAME_LABEL, NodeFacts, Taint
from podgroup_operator.scheduling.podinfo import HostPort, PodInfo
from podgroup_operator.scheduling.resources import Resources
from podgroup_operator.scheduling.volumes import VolumeDecision


class ClassKey(NamedTuple):
    """What the static filters read of a node, hostname aside: equal keys, one class."""

    labels: tuple[tuple[str, str], ...]
    taints: tuple[Taint, ...]
    unschedulable: bool
    ready: bool


def class_key(facts: NodeFacts) -> ClassKey:
    """The class of a node with these facts (its hostname label left out)."""
    labels = tuple(sorted((k, v) for k, v in facts.labels.items() if k != HOSTNAME_LABEL))
    return ClassKey(labels, facts.taints, facts.unschedulable, facts.ready)


class NodeClass:
    """Nodes the static filters cannot tell apart; `order` is (score, name), fullest first, and
    `free` their free amounts summed (a topology domain is a union of classes)."""

    __slots__ = ("facts", "free", "id", "key", "order")

    def __init__(self, class_id: int, key: ClassKey, facts: NodeFacts) -> None:
        self.id = class_id
        self.key = key
        # A representative without a name: verdicts on it must not depend on identity.
        self.facts = NodeFacts("", dict(key.labels), key.taints, key.unschedulable, key.ready)
        self.order: list[tuple[float, str]] = []
        self.free: Resources = {}

    def __len__(self) -> int:
        return len(self.order)

    def count(self, free: Mapping[str, int], sign: int) -> None:
        """Add (+1) or take away (-1) one member node's free amounts."""
        total = self.free
        for name, amount in free.items():
            total[name] = total.get(name, 0) + sign * amount


class NodeState:
    """One node: allocatable, requested and free amounts (milli-units) and its sort score."""

    __slots__ = (
        "allocatable",
        "facts",
        "free",
        "images",
        "name",
        "node_class",
        "pods",
        "ports",
        "priorities",
        "requested",
        "score",
    )

    def __init__(self, name: str, facts: NodeFacts, allocatable: Resources) -> None:
        self.name = name
        self.facts = facts
        self.allocatable = allocatable
        self.requested: Resources = {}
        self.free: Resources = dict(allocatable)
        self.pods: set[str] = set()
        self.ports: dict[HostPort, int] = {}
        """Host ports bound by pods on the node, with how many pods hold each."""
        self.priorities: dict[int, int] = {}
        """Pod priority -> how many pods on the node have it (preemption's cheap bound)."""
        self.score = 1.0
        self.node_class: NodeClass | None = None
        self.images: tuple[str, ...] = ()
        """Every name its kubelet lists an image under (their sizes: `ImageState.size`)."""

    @property
    def usable(self) -> bool:
        """Counts toward the cluster's free capacity (minResources is checked against it)."""
        return self.facts.ready and not self.facts.unschedulable

    def compute_score(self) -> float:
        """Free share of the scarcest resource: 0.0 is full, 1.0 is empty; lower packs first."""
        score = 1.0
        free = self.free
        for name, amount in self.allocatable.items():
            share = free.get(name, 0) / amount
            score = min(score, share)
        return score


class PodEntry:
    """A pod holding room: its facts, its node and its volume decisions (assumed pods only)."""

    __slots__ = ("info", "node", "volumes")

    def __init__(self, info: PodInfo, node: str, volumes: tuple[VolumeDecision, ...] = ()) -> None:
        self.info = info
        self.node = node
        self.volumes = volumes
