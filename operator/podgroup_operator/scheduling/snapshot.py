"""The scheduler's picture of the cluster: nodes, what is bound to them, and what is left.

Gang placement is a what-if question ("would all of these fit at once?"), so it runs on a
snapshot that can be changed tentatively and changed back: `assume()` books pods onto nodes and
returns an undo callable, as Kueue's `SimulateWorkloadRemoval` returns a func that reverts it.
Committing is simply not calling the undo. The live scheduler keeps one snapshot current from
watch events, so every event (`add_pod`, `remove_pod`, `add_node`, ...) costs O(resources) plus
an O(log n) re-sort of one node, never a rebuild.

Every pod that holds a node counts, whoever scheduled it: a pod with `spec.nodeName` whose phase
is not Succeeded/Failed. Pods bound to a node the snapshot has not seen yet are remembered and
counted when the node arrives (watch streams do not order Node and Pod events).

Nodes with identical labels (ignoring the per-node hostname), taints, cordon flag and readiness
form a `NodeClass`; a static filter verdict computed for one member holds for all of them, and
each class keeps its nodes sorted fullest-first, which is the order best-fit packing walks.

Pod-to-pod constraints need more than free capacity, so every pod held (bound or assumed) is
kept as a `PodInfo` and indexed incrementally: by label and namespace (affinity, topology spread
and PodDisruptionBudgets select pods by label), by required anti-affinity term (a newcomer must
respect running pods' anti-affinity), by scoring term (running pods' preferences toward a
newcomer weigh on its score), by host port per node, and by gang (preemption evicts whole
gangs). Assumed gang members are indexed like bound pods, so a member placed earlier in
the same placement constrains the next, and an undo takes them out of every index again.
PersistentVolumes are kept too (`set_volume`), with the PVs promised to assumed pods, and what
attach limits need (`attachment`, `attach_limits`): each CSINode's limits, which PV names each
claim, and each claim's class provisioner; the in-tree disks pods mount inline are in their
`PodInfo` (`node_attachments`, `disk_conflict`). Each node's image names are kept for the image
score, with how many nodes list each name and its size; image scores are cached per image epoch,
so a node pulling an image leaves the node-epoch caches (verdicts, domains) alone.
"""

from __future__ import annotations

import heapq
import sys
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from podgroup_operator.api.keys import pod_uid
from podgroup_operator.constants import PodPhase
from podgroup_operator.scheduling.filters import (
    HOSTNAME_LABEL,
    Constraints,
    NodeFacts,
    Rejection,
    Taint,
    check_node,
    node_facts,
)
from podgroup_operator.scheduling.podinfo import GangOf, HostPort, PodInfo, pod_info
from podgroup_operator.scheduling.resources import Resources, node_allocatable, pod_requests
from podgroup_operator.scheduling.selectors import (
    EXISTS,
    AffinityTerm,
    LabelSelector,
    WeightedTerm,
)
from podgroup_operator.scheduling.volumes import (
    ATTACH_LIMIT_PREFIX,
    IN_TREE_LIMIT_KEYS,
    Attachment,
    Disk,
    PersistentVolume,
    VolumeDecision,
    claim_attachment,
    node_attach_limits,
)

Undo = Callable[[], None]
"""Reverts an assumption; calling it twice, or after the pods really bound, is harmless."""

_TERMINAL = (PodPhase.SUCCEEDED.value, PodPhase.FAILED.value)
_VERDICT_CACHE_LIMIT = 4096


def _noop() -> None:
    return None


IN_TREE_KEYS = frozenset(IN_TREE_LIMIT_KEYS.values())


def _limit_keys(allocatable: Mapping[str, int]) -> list[str]:
    """The attach limits a node's allocatable sets (`attachable-volumes-*`)."""
    return [name for name in allocatable if name.startswith(ATTACH_LIMIT_PREFIX)]


NO_UNDO: Undo = _noop


def node_images(node: Mapping[str, Any]) -> dict[str, int]:
    """Bytes, by each name under which the node's `status.images` lists an image."""
    images: dict[str, int] = {}
    for image in (node.get("status") or {}).get("images") or ():
        if not isinstance(image, Mapping):
            continue
        try:
            size = int(image.get("sizeBytes") or 0)
        except (TypeError, ValueError):
            size = 0
        for name in image.get("names") or ():
            if isinstance(name, str):
                images[sys.intern(name)] = max(size, 0)
    return images


def _memoized(
    cache: dict[Any, tuple[int, Any]], epoch: int, key: Any, compute: Callable[[], Any]
) -> Any:
    """`compute()` once per `epoch` for `key`, kept in `cache` (emptied past its limit)."""
    hit = cache.get(key)
    if hit is not None and hit[0] == epoch:
        return hit[1]
    if len(cache) >= _VERDICT_CACHE_LIMIT:
        cache.clear()
    value = compute()
    cache[key] = (epoch, value)
    return value


def holds_node(pod: Mapping[str, Any]) -> bool:
    """True when the pod occupies capacity: bound to a node and not terminated."""
    node = (pod.get("spec") or {}).get("nodeName")
    phase = (pod.get("status") or {}).get("phase")
    return bool(node) and phase not in _TERMINAL


class ClassKey(NamedTuple):
    labels: tuple[tuple[str, str], ...]
    taints: tuple[Taint, ...]
    unschedulable: bool
    ready: bool


def _class_key(facts: NodeFacts) -> ClassKey:
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
        """Every name its kubelet lists an image under (their sizes: `Snapshot.image_size`)."""

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


class Feasibility(NamedTuple):
    """Which nodes pass the static filters for one set of constraints.

    `classes` are the classes with candidates; `allowed` further restricts to named nodes when
    the constraints refer to node identity (hostname label or matchFields), else it is None.
    `class_verdicts` and `node_verdicts` keep the rejections so refusals can count them.
    """

    classes: tuple[NodeClass, ...]
    allowed: frozenset[str] | None
    class_verdicts: Mapping[int, Rejection | None]
    node_verdicts: Mapping[str, Rejection | None] | None


class PodEntry:
    """A pod holding room: its facts, its node and its volume decisions (assumed pods only)."""

    __slots__ = ("info", "node", "volumes")

    def __init__(self, info: PodInfo, node: str, volumes: tuple[VolumeDecision, ...] = ()) -> None:
        self.info = info
        self.node = node
        self.volumes = volumes


class _Selecting(Protocol):
    """A term a pod carries toward other pods: `AffinityTerm`, `WeightedTerm`."""

    def __hash__(self) -> int: ...
    @property
    def selector(self) -> LabelSelector: ...
    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool: ...


T = TypeVar("T", bound=_Selecting)


class _TermIndex(Generic[T]):
    """Terms carried by the pods holding nodes, each with {uid: node} of its carriers, found from
    the labels of a pod they may select: through their selector's anchor (its most selective
    `In` requirement), else checked for every pod ("loose")."""

    def __init__(self) -> None:
        self.carriers: dict[T, dict[str, str]] = {}
        self._anchored: dict[tuple[str, str], set[T]] = {}
        self._loose: set[T] = set()

    def add(self, term: T, uid: str, node: str) -> None:
        carriers = self.carriers.get(term)
        if carriers is None:
            carriers = self.carriers[term] = {}
            anchor = term.selector.anchor()
            if anchor is None:
                self._loose.add(term)
            else:
                for value in anchor.values:
                    self._anchored.setdefault((anchor.key, value), set()).add(term)
        carriers[uid] = node  # consumers skip nodes the snapshot does not know

    def remove(self, term: T, uid: str) -> None:
        carriers = self.carriers.get(term)
        if carriers is None:
            return
        carriers.pop(uid, None)
        if carriers:
            return
        del self.carriers[term]
        anchor = term.selector.anchor()
        if anchor is None:
            self._loose.discard(term)
            return
        for value in anchor.values:
            terms = self._anchored.get((anchor.key, value))
            if terms is not None:
                terms.discard(term)
                if not terms:
                    del self._anchored[(anchor.key, value)]

    def selecting(
        self, namespace: str, labels: Mapping[str, str]
    ) -> Iterator[tuple[T, Iterable[str]]]:
        """The terms that select a pod with `namespace` and `labels`, each with the nodes of
        the pods carrying it."""
        if not self.carriers:
            return
        terms: set[T] = set(self._loose)
        anchored = self._anchored
        for pair in labels.items():
            found = anchored.get(pair)
            if found:
                terms.update(found)
        for term in terms:
            if term.matches(namespace, labels):
                yield term, self.carriers[term].values()

    def state(self) -> tuple[Any, ...]:
        return tuple(sorted((str(t), tuple(sorted(c.items()))) for t, c in self.carriers.items()))


class Snapshot:
    """Nodes and bound pods, with free capacity and pod indexes kept current incrementally.

    `gang_of` says which gang a raw pod belongs to (the controller passes
    `domain.membership.group_key_of`); without it every pod is a gang of one, and
    `plan_preemption` refuses to run, since it could evict part of a gang.
    """

    def __init__(self, *, gang_of: GangOf | None = None, max_pd_volumes: int | None = None) -> None:
        self.gang_of = gang_of
        self.max_pd_volumes = max_pd_volumes
        """kube-scheduler's `KUBE_MAX_PD_VOLS`: every node's in-tree disk limit, where its
        allocatable sets none (`volumes.in_tree_limits`)."""
        self._nodes: dict[str, NodeState] = {}
        self._pods: dict[str, PodEntry] = {}
        self._assumed: set[str] = set()
        self._orphans: dict[str, set[str]] = {}
        self._classes: dict[ClassKey, NodeClass] = {}
        self._classes_by_id: dict[int, NodeClass] = {}
        self._next_class_id = 0
        self._class_epoch = 0
        self._node_epoch = 0
        self._total_free: Resources = {}
        self._order: list[tuple[float, str]] = []
        """Every node as (score, name), fullest first; each class keeps its own slice too."""
        self._verdicts: dict[Constraints, tuple[int, dict[int, Rejection | None]]] = {}
        self._identity_verdicts: dict[Constraints, tuple[int, dict[str, Rejection | None]]] = {}
        # Pod indexes (every pod in `_pods`, orphans included; queries skip unknown nodes).
        self._by_label: dict[str, dict[str, set[str]]] = {}
        self._by_namespace: dict[str, set[str]] = {}
        self._anti: _TermIndex[AffinityTerm] = _TermIndex()
        """Required anti-affinity terms of the pods holding nodes."""
        self._scoring: _TermIndex[WeightedTerm] = _TermIndex()
        """The terms with which the pods holding nodes score newcomers (`PodInfo.scoring`)."""
        self._units: dict[tuple[str, str, str], set[str]] = {}
        self._terminating: set[str] = set()
        # Volumes.
        self._volumes: dict[str, PersistentVolume] = {}
        self._volumes_by_class: dict[str, dict[str, PersistentVolume]] = {}
        self._pinned_volumes: dict[tuple[str, str], dict[str, PersistentVolume]] = {}
        """(storage class, hostname) -> local PVs tied to that one host."""
        self._volume_holders: dict[str, str] = {}
        """PV name -> UID of the assumed pod it is promised to."""
        self._claim_decisions: dict[tuple[str, str], VolumeDecision] = {}
        """(namespace, claim) -> what an assumed pod decided for it: a second member mounting
        the same claim must agree (same PV, or the node it is provisioned for)."""
        # Attach limits.
        self._csi_limits: dict[str, dict[str, int]] = {}
        """Node name -> its CSINode's limit per key (`volumes.csi_node_limits`)."""
        self._claim_volumes: dict[tuple[str, str], str] = {}
        """(namespace, claim) -> the PV whose claimRef names it."""
        self._claim_provisioners: dict[tuple[str, str], str] = {}
        """(namespace, claim) -> its class's provisioner, for claims with one."""
        self._class_keys: dict[str, Counter[str]] = {}
        """Storage class -> the limit keys its PVs count against, with how many PVs each."""
        self._limit_key_nodes: Counter[str] = Counter()
        """Limit key -> how many nodes set it (allocatable or CSINode); the in-tree types'
        limits, which every node has, are not counted (`may_limit`)."""
        self._attach_limits: dict[str, Mapping[str, int]] = {}
        """Node name -> `attach_limits`, kept until the node or its CSINode changes: read for
        every node a member with volumes visits."""
        self._cache: dict[Any, tuple[int, Any]] = {}
        """Derived values keyed by their inputs, tagged with `node_epoch` (see `cached`)."""
        # Images (kube-scheduler's ImageLocality score). Which nodes list an image is found by
        # a pass over the nodes (`image_holders`), not kept: a set of nodes per name costs far
        # more memory than the names (docs/decisions/010-placement-keeps-what-a-shape-learnt.md).
        self._image_counts: dict[str, int] = {}
        """Image name -> how many nodes list it."""
        self._image_sizes: dict[str, int] = {}
        """Image name -> its size, as the node that listed it last says."""
        self._image_epoch = 0
        """Bumped when a node comes, goes or lists other images: image scores cached before
        (`cached_images`) are stale. Apart from `node_epoch`, whose caches images do not touch."""
        self._image_cache: dict[Any, tuple[int, Any]] = {}

    @classmethod
    def build(
        cls,
        nodes: Iterable[Mapping[str, Any]],
        pods: Iterable[Mapping[str, Any]],
        *,
        gang_of: GangOf | None = None,
        max_pd_volumes: int | None = None,
    ) -> Snapshot:
        """A snapshot of raw Node dicts and raw Pod dicts (bound pods count, others are ignored)."""
        snapshot = cls(gang_of=gang_of, max_pd_volumes=max_pd_volumes)
        for node in nodes:
            snapshot.add_node(node)
        for pod in pods:
            snapshot.add_pod(pod)
        return snapshot

    # --- queries ---------------------------------------------------------------------------------
    @property
    def nodes(self) -> Mapping[str, NodeState]:
        return self._nodes

    @property
    def classes(self) -> Mapping[int, NodeClass]:
        return self._classes_by_id

    @property
    def node_epoch(self) -> int:
        """Changes whenever a node appears, goes, or changes labels, taints or conditions."""
        return self._node_epoch

    def __len__(self) -> int:
        return len(self._nodes)

    @property
    def pod_count(self) -> int:
        """Pods the snapshot holds (bound, assumed or nominated)."""
        return len(self._pods)

    def free(self, node: str) -> Resources:
        """A copy of the node's free amounts."""
        return dict(self._nodes[node].free)

    def total_free(self) -> Resources:
        """Free capacity summed over Ready, schedulable nodes."""
        return dict(self._total_free)

    def usable_nodes(self) -> int:
        return sum(1 for n in self._nodes.values() if n.usable)

    def pod_request(self, uid: str) -> Resources | None:
        entry = self._pods.get(uid)
        return dict(entry.info.request) if entry else None

    def pod(self, uid: str) -> PodEntry | None:
        return self._pods.get(uid)

    def is_assumed(self, uid: str) -> bool:
        return uid in self._assumed

    def state(self) -> tuple[tuple[str, tuple[tuple[str, int], ...], float], ...]:
        """Every node's free vector and score, for comparing snapshots (tests, debugging)."""
        return tuple(
            (name, tuple(sorted(node.free.items())), node.score)
            for name, node in sorted(self._nodes.items())
        )

    def index_state(self) -> tuple[Any, ...]:
        """Every pod index in a comparable form: what an undo must restore (tests, debugging)."""
        return (
            tuple(sorted((uid, e.node, e.volumes) for uid, e in self._pods.items())),
            tuple(sorted(self._assumed)),
            tuple(
                sorted(
                    (key, value, tuple(sorted(uids)))
                    for key, values in self._by_label.items()
                    for value, uids in values.items()
                )
            ),
            tuple(sorted((ns, tuple(sorted(u))) for ns, u in self._by_namespace.items())),
            self._anti.state(),
            self._scoring.state(),
            tuple(sorted((u, tuple(sorted(p))) for u, p in self._units.items())),
            tuple(sorted(self._volume_holders.items())),
            tuple(sorted((k, str(d)) for k, d in self._claim_decisions.items())),
            tuple(
                (
                    name,
                    tuple(sorted((str(p), n) for p, n in node.ports.items())),
                    tuple(sorted(node.priorities.items())),
                    tuple(sorted(node.pods)),
                )
                for name, node in sorted(self._nodes.items())
            ),
            tuple(sorted(self._terminating)),
        )

    def image_count(self, name: str) -> int:
        """How many nodes list image `name` (see `scores.image_name`)."""
        return self._image_counts.get(name, 0)

    def image_holders(self, name: str) -> list[str]:
        """The nodes that list image `name`: a pass over every node (see `_image_counts`)."""
        if not self._image_counts.get(name):
            return []
        return [state.name for state in self._nodes.values() if name in state.images]

    def image_size(self, name: str) -> int:
        return self._image_sizes.get(name, 0)

    def cached_images(self, key: Any, compute: Callable[[], Any]) -> Any:
        """`compute()` once per image epoch for `key` (the image scores of a shape)."""
        return _memoized(self._image_cache, self._image_epoch, key, compute)

    def cached(self, key: Any, compute: Callable[[], Any]) -> Any:
        """`compute()` once per node epoch for `key` (node-derived values: domains, scores)."""
        return _memoized(self._cache, self._node_epoch, key, compute)

    # --- pod index queries -----------------------------------------------------------------------
    def pods_matching(
        self, selector: LabelSelector, namespaces: frozenset[str] | None
    ) -> Iterator[PodEntry]:
        """Pods on known nodes in `namespaces` (None: all) whose labels `selector` selects.

        Candidates come from the label index through the selector's most selective `In`
        requirement (else an `Exists` key, else the namespaces), so a selector naming one gang
        costs the size of that gang, not of the cluster.
        """
        if selector.nothing:
            return
        candidates: Iterable[str]
        anchor = selector.anchor()
        if anchor is not None:
            values = self._by_label.get(anchor.key, {})
            if len(anchor.values) == 1:
                candidates = values.get(next(iter(anchor.values)), ())
            else:
                candidates = [u for v in anchor.values for u in values.get(v, ())]
        else:
            key = next((r.key for r in selector.requirements if r.operator == EXISTS), None)
            if key is not None:
                candidates = [u for us in self._by_label.get(key, {}).values() for u in us]
            elif namespaces is not None:
                candidates = [u for ns in namespaces for u in self._by_namespace.get(ns, ())]
            else:
                candidates = list(self._pods)
        pods, nodes = self._pods, self._nodes
        for uid in candidates:
            entry = pods[uid]
            info = entry.info
            if entry.node not in nodes:
                continue
            if namespaces is not None and info.namespace not in namespaces:
                continue
            if selector.matches(info.labels):
                yield entry

    @property
    def has_anti_affinity(self) -> bool:
        """True when some pod holding a node has required anti-affinity (symmetry applies)."""
        return bool(self._anti.carriers)

    def anti_affinity_against(
        self, namespace: str, labels: Mapping[str, str]
    ) -> Iterator[tuple[AffinityTerm, Iterable[str]]]:
        """Existing pods' anti-affinity terms that select a pod with `namespace` and `labels`,
        each with the nodes of the pods carrying it (kube-scheduler's symmetry rule)."""
        return self._anti.selecting(namespace, labels)

    @property
    def has_scoring(self) -> bool:
        """True when some pod holding a node scores the newcomers its terms select."""
        return bool(self._scoring.carriers)

    def scoring_toward(
        self, namespace: str, labels: Mapping[str, str]
    ) -> Iterator[tuple[WeightedTerm, Iterable[str]]]:
        """Existing pods' scoring terms (`PodInfo.scoring`) that select a pod with `namespace`
        and `labels`, each with the nodes of the pods carrying it (InterPodAffinity's
        symmetric part)."""
        return self._scoring.selecting(namespace, labels)

    def units(self) -> Mapping[tuple[str, str, str], set[str]]:
        """Gangs (or lone pods) as preemption sees them: unit key -> UIDs of its pods."""
        return self._units

    def terminating(self) -> frozenset[str]:
        """UIDs of pods holding room while being deleted."""
        return frozenset(self._terminating)

    def node_pods(self, name: str) -> list[PodInfo]:
        """The facts of every pod on a node (bound or assumed)."""
        pods = self._pods
        return [pods[uid].info for uid in self._nodes[name].pods]

    # --- volumes ---------------------------------------------------------------------------------
    @property
    def volumes(self) -> Mapping[str, PersistentVolume]:
        return self._volumes

    def set_volume(self, volume: PersistentVolume) -> None:
        """Add or replace a PersistentVolume (from its informer, via `volumes.persistent_volume`).

        A PV that now carries a claimRef is no longer offered to other claims; a promise made
        to an assumed pod is kept until that pod's assumption ends.
        """
        self.remove_volume(volume.name, keep_holder=True)
        self._volumes[volume.name] = volume
        if (attachment := volume.attachment) is not None:
            self._class_keys.setdefault(volume.storage_class, Counter())[attachment[1]] += 1
        if volume.claim is not None:
            self._claim_volumes[volume.claim] = volume.name
        host = volume.pinned_host
        if host is not None:
            self._pinned_volumes.setdefault((volume.storage_class, host), {})[volume.name] = volume
        else:
            self._volumes_by_class.setdefault(volume.storage_class, {})[volume.name] = volume

    def remove_volume(self, name: str, *, keep_holder: bool = False) -> None:
        volume = self._volumes.pop(name, None)
        if volume is None:
            return
        if (attachment := volume.attachment) is not None:
            keys = self._class_keys[volume.storage_class]
            keys[attachment[1]] -= 1
            if not keys[attachment[1]]:
                del keys[attachment[1]]
        if volume.claim is not None and self._claim_volumes.get(volume.claim) == name:
            del self._claim_volumes[volume.claim]
        host = volume.pinned_host
        if host is not None:
            self._pinned_volumes.get((volume.storage_class, host), {}).pop(name, None)
        else:
            self._volumes_by_class.get(volume.storage_class, {}).pop(name, None)
        if not keep_holder:
            self._volume_holders.pop(name, None)

    def volume_candidates(
        self, storage_classes: Iterable[str], hostname: str | None
    ) -> dict[str, list[PersistentVolume]]:
        """PVs of these classes that a node with this hostname might reach (unfiltered)."""
        out: dict[str, list[PersistentVolume]] = {}
        for klass in storage_classes:
            found = list(self._volumes_by_class.get(klass, {}).values())
            if hostname is not None:
                found.extend(self._pinned_volumes.get((klass, hostname), {}).values())
            out[klass] = found
        return out

    @property
    def volume_holders(self) -> Mapping[str, str]:
        return self._volume_holders

    @property
    def claim_decisions(self) -> Mapping[tuple[str, str], VolumeDecision]:
        return self._claim_decisions

    # --- attach limits ---------------------------------------------------------------------------
    def set_csi_limits(self, node: str, limits: Mapping[str, int]) -> None:
        """A CSINode's limits (`volumes.csi_node_limits`); empty forgets them."""
        self._attach_limits.pop(node, None)
        self._limit_key_nodes.subtract(self._csi_limits.get(node, {}).keys())
        self._limit_key_nodes.update(limits.keys())
        if limits:
            self._csi_limits[node] = dict(limits)
        else:
            self._csi_limits.pop(node, None)

    def set_claim_provisioner(self, key: tuple[str, str], provisioner: str) -> None:
        """The provisioner of a claim's class; empty forgets it (a claim deleted, or whose
        class has none)."""
        if provisioner:
            self._claim_provisioners[key] = provisioner
        else:
            self._claim_provisioners.pop(key, None)

    def may_limit(self, key: str) -> bool:
        """Some node limits volumes of this key (every node limits the in-tree types)."""
        return key in IN_TREE_KEYS or self._limit_key_nodes[key] > 0

    def class_limit_keys(self, storage_class: str) -> Iterable[str]:
        """The limit keys that PVs of this class count against (one per driver or type)."""
        return self._class_keys.get(storage_class, {}).keys()

    def attach_limits(self, node: NodeState) -> Mapping[str, int]:
        found = self._attach_limits.get(node.name)
        if found is None:
            found = self._attach_limits[node.name] = node_attach_limits(
                node.allocatable,
                self._csi_limits.get(node.name),
                node.facts.labels,
                self.max_pd_volumes,
            )
        return found

    def attachment(self, namespace: str, claim: str) -> Attachment | None:
        """What a claim counts against its node's attach limits: the CSI PV it is promised to
        (by an assumed pod's decision) or bound to, else one volume of its class's provisioner;
        None for a claim bound to a PV that is not CSI, or with no provisioner to count."""
        key = (namespace, claim)
        decision = self._claim_decisions.get(key)
        name = decision.volume if decision is not None else self._claim_volumes.get(key)
        if name is not None and (volume := self._volumes.get(name)) is not None:
            return volume.attachment
        if decision is not None and decision.volume is None:
            return claim_attachment(namespace, claim, decision.provisioner)
        return claim_attachment(namespace, claim, self._claim_provisioners.get(key, ""))

    def node_attachments(self, name: str) -> dict[str, str]:
        """Every volume the pods on a node (bound or assumed) attach: unique name -> limit key."""
        attached: dict[str, str] = {}
        pods = self._pods
        for uid in self._nodes[name].pods:
            info = pods[uid].info
            for claim in info.claims:
                found = self.attachment(info.namespace, claim)
                if found is not None:
                    attached[found[0]] = found[1]
            for disk in info.disks:
                found = disk.attachment
                if found is not None:
                    attached[found[0]] = found[1]
        return attached

    def disk_conflict(self, name: str, mine: Mapping[tuple[str, str], Sequence[Disk]]) -> bool:
        """True when a pod on the node (bound or assumed) mounts one of these inline disks
        (`mine`: by plugin and name, `DiskCounts.by_name`) in a way that excludes the other
        mount (`Disk.conflicts`). The cost is the node's disks, not the newcomer's."""
        pods = self._pods
        for uid in self._nodes[name].pods:
            for theirs in pods[uid].info.disks:
                for disk in mine.get((theirs.plugin, theirs.name), ()):
                    if disk.conflicts(theirs):
                        return True
        return False

    # --- node events -----------------------------------------------------------------------------
    def add_node(self, node: Mapping[str, Any]) -> None:
        """Add or replace a node from its raw dict; bound pods keep counting against it."""
        facts = node_facts(node)
        allocatable = node_allocatable(node)
        self._attach_limits.pop(facts.name, None)
        old = self._nodes.get(facts.name)
        if old is not None:
            self._limit_key_nodes.subtract(_limit_keys(old.allocatable))
        self._limit_key_nodes.update(_limit_keys(allocatable))
        images = node_images(node)
        if old is not None:
            self._set_images(old, images)
            self._update_node(old, facts, allocatable)
            return
        state = NodeState(facts.name, facts, allocatable)
        self._nodes[facts.name] = state
        self._set_images(state, images)
        self._image_epoch += 1  # every image's share of the nodes changed
        for uid in self._orphans.pop(facts.name, ()):
            info = self._pods[uid].info
            state.pods.add(uid)
            for name, amount in info.request.items():
                state.requested[name] = state.requested.get(name, 0) + amount
            for port in info.ports:
                state.ports[port] = state.ports.get(port, 0) + 1
            state.priorities[info.priority] = state.priorities.get(info.priority, 0) + 1
        state.free = {n: a - state.requested.get(n, 0) for n, a in allocatable.items()}
        state.score = state.compute_score()
        self._node_epoch += 1
        self._join_class(state)
        self._count_total(state, +1)

    update_node = add_node

    def remove_node(self, name: str) -> None:
        """Forget a node; its pods wait (uncounted) in case the node comes back."""
        state = self._nodes.pop(name, None)
        self._attach_limits.pop(name, None)
        if state is None:
            return
        self._limit_key_nodes.subtract(_limit_keys(state.allocatable))
        self._set_images(state, {})
        self._image_epoch += 1
        self._count_total(state, -1)
        self._leave_class(state)
        if state.pods:
            self._orphans.setdefault(name, set()).update(state.pods)
        self._node_epoch += 1

    def _set_images(self, state: NodeState, images: Mapping[str, int]) -> None:
        """Count the node under `images` (name -> bytes) instead of what it listed before."""
        counts, sizes = self._image_counts, self._image_sizes
        names = tuple(images)
        changed = names != state.images
        if changed:
            for name in state.images:
                left = counts.get(name, 0) - 1
                if left > 0:
                    counts[name] = left
                else:
                    counts.pop(name, None)
                    sizes.pop(name, None)
            for name in names:
                counts[name] = counts.get(name, 0) + 1
            state.images = names
        for name, size in images.items():
            if sizes.get(name) != size:
                sizes[name] = size
                changed = True
        if changed:
            self._image_epoch += 1

    def _update_node(self, state: NodeState, facts: NodeFacts, allocatable: Resources) -> None:
        self._count_total(state, -1)
        static_changed = facts != state.facts
        if static_changed:
            self._leave_class(state)
            self._node_epoch += 1
        else:
            self._unindex(state)
            assert state.node_class is not None
            state.node_class.count(state.free, -1)
        state.facts = facts
        state.allocatable = allocatable
        state.free = {n: a - state.requested.get(n, 0) for n, a in allocatable.items()}
        state.score = state.compute_score()
        if static_changed:
            self._join_class(state)
        else:
            assert state.node_class is not None
            state.node_class.count(state.free, +1)
            self._index(state)
        self._count_total(state, +1)

    # --- pod events ------------------------------------------------------------------------------
    def add_pod(self, pod: Mapping[str, Any]) -> None:
        """Add or replace a pod from its raw dict; unbound or finished pods are dropped.

        A pod that arrives bound replaces an assumption of the same UID, as kube-scheduler's
        cache confirms an assumed pod when the informer delivers it.
        """
        uid = pod_uid(pod)
        if uid in self._pods:
            self._forget(uid)
        if not holds_node(pod):
            return
        info = pod_info(pod, uid, pod_requests(pod), self.gang_of)
        self._book(PodEntry(info, str(pod["spec"]["nodeName"])))

    update_pod = add_pod

    def remove_pod(self, pod: Mapping[str, Any] | str) -> None:
        """Release what a pod held; accepts the raw pod or its UID."""
        uid = pod if isinstance(pod, str) else pod_uid(pod)
        if uid in self._pods:
            self._forget(uid)

    def update(self, obj: Mapping[str, Any]) -> None:
        """Apply a raw Pod or Node by its `kind` (watch events carry it; list items may not)."""
        kind = obj.get("kind")
        if kind == "Pod":
            self.add_pod(obj)
        elif kind == "Node":
            self.add_node(obj)
        else:
            raise ValueError(
                f"cannot tell a Pod from a Node: kind is {kind!r}; call add_pod/add_node"
            )

    # --- assumptions -----------------------------------------------------------------------------
    def hold(self, pods: Iterable[tuple[str, Mapping[str, Any]]]) -> Undo:
        """Book pending pods on the nodes named for them ((node, raw pod) pairs) until the
        returned undo: kube-scheduler's filters count the pods nominated to a node (preemption
        freed their room) as if they ran there. Pods the snapshot already holds and unknown
        nodes are skipped."""
        bindings: list[tuple[str, str, Resources]] = []
        infos: dict[str, PodInfo] = {}
        for node, pod in pods:
            uid = pod_uid(pod)
            if node not in self._nodes or uid in self._pods:
                continue
            request = pod_requests(pod)
            bindings.append((uid, node, request))
            infos[uid] = pod_info(pod, uid, request, self.gang_of)
        return self.assume(bindings, infos) if bindings else _noop

    def assume(
        self,
        bindings: Sequence[tuple[str, str, Resources]],
        infos: Mapping[str, PodInfo] | None = None,
        volumes: Mapping[str, Sequence[VolumeDecision]] | None = None,
    ) -> Undo:
        """Book (pod uid, node name, request) triples and return the callable that unbooks them.

        `infos` gives the pods' facts (labels, ports, anti-affinity, ...) so assumed pods
        constrain later ones exactly as bound pods do; without it the pod only takes room.
        `volumes` are the pods' volume decisions (PVs promised, claims decided). Pods on the
        same node are booked in one step, so a 1,000-pod gang re-sorts each node once. Unknown
        nodes (KeyError), duplicate UIDs and PVs already promised to another pod (ValueError)
        are refused before anything changes.
        """
        uids = [uid for uid, _, _ in bindings]
        if len(set(uids)) != len(uids):
            raise ValueError("a pod can be assumed onto one node only; got duplicate pod UIDs")
        missing = {node for _, node, _ in bindings if node not in self._nodes}
        if missing:
            raise KeyError(f"cannot assume pods onto unknown node(s) {sorted(missing)}")
        volumes = volumes or {}
        for uid, decisions in volumes.items():
            for decision in decisions:
                if decision.volume is None:
                    continue
                holder = self._volume_holders.get(decision.volume)
                if holder is not None and holder != uid:
                    raise ValueError(f"PV {decision.volume} is already promised to pod {holder}")
        infos = infos or {}
        by_node: dict[str, list[PodEntry]] = {}
        for uid, node, request in bindings:
            if uid in self._pods:
                self._forget(uid)
            info = infos.get(uid)
            if info is None:
                info = PodInfo(uid, "", uid, {}, request)
            elif info.request is not request and info.request != request:
                info = replace(info, request=request)
            entry = PodEntry(info, node, tuple(volumes.get(uid, ())))
            by_node.setdefault(node, []).append(entry)
        booked: list[str] = []
        for node, entries in by_node.items():
            self._book_many(node, entries)
            booked.extend(e.info.uid for e in entries)
        self._assumed.update(booked)

        def undo() -> None:
            gone = [uid for uid in booked if uid in self._assumed]
            self._forget_many(gone)

        return undo

    def simulate_removal(self, uids: Iterable[str]) -> Undo:
        """Take pods out as if evicted and return the callable that puts them back (what-if).

        Preemption planning asks "would the gang fit without these pods?" on the live snapshot;
        the undo restores every pod with its node, facts, promised PVs and assumed flag.
        """
        removed: list[tuple[PodEntry, bool]] = []
        for uid in dict.fromkeys(uids):
            entry = self._pods.get(uid)
            if entry is not None:
                removed.append((entry, uid in self._assumed))
        self._forget_many([entry.info.uid for entry, _ in removed])

        def undo() -> None:
            by_node: dict[str, list[PodEntry]] = {}
            for entry, assumed in removed:
                uid = entry.info.uid
                if uid in self._pods:
                    continue  # the pod came back through an event meanwhile; that one wins
                if entry.node in self._nodes:
                    by_node.setdefault(entry.node, []).append(entry)
                else:
                    self._book(entry)
                if assumed:
                    self._assumed.add(uid)
            for node, entries in by_node.items():
                self._book_many(node, entries)
            removed.clear()

        return undo

    # --- static filters --------------------------------------------------------------------------
    def feasibility(self, constraints: Constraints) -> Feasibility:
        """Static filter verdicts for `constraints`, cached per class until classes change."""
        verdicts = self._class_verdicts(constraints)
        if not constraints.uses_node_identity:
            classes = tuple(self._classes_by_id[cid] for cid, v in verdicts.items() if v is None)
            return Feasibility(classes, None, verdicts, None)
        node_verdicts = self._node_verdicts(constraints)
        allowed = frozenset(name for name, v in node_verdicts.items() if v is None)
        classes = tuple(
            c for c in self._classes_by_id.values() if any(name in allowed for _, name in c.order)
        )
        return Feasibility(classes, allowed, verdicts, node_verdicts)

    def every_node(self) -> Feasibility:
        """Every node, as if no filter rejected any (to count what a cluster has)."""
        return Feasibility(tuple(self._classes_by_id.values()), None, {}, None)

    def exclusions(self, feasibility: Feasibility) -> Counter[Rejection]:
        """How many nodes each static filter rejected (for refusal messages)."""
        counts: Counter[Rejection] = Counter()
        if feasibility.node_verdicts is not None:
            for verdict in feasibility.node_verdicts.values():
                if verdict is not None:
                    counts[verdict] += 1
            return counts
        for cid, verdict in feasibility.class_verdicts.items():
            if verdict is not None and cid in self._classes_by_id:
                counts[verdict] += len(self._classes_by_id[cid])
        return counts

    def best_fit_order(self, feasibility: Feasibility) -> Iterator[NodeState]:
        """Feasible nodes, fullest first, ties by name. Do not assume() while iterating."""
        nodes = self._nodes
        allowed = feasibility.allowed
        if len(feasibility.classes) == 1:
            for _, name in feasibility.classes[0].order:
                if allowed is None or name in allowed:
                    yield nodes[name]
            return
        # Several classes holding a small part of the cluster: merge their own orders.
        # Otherwise walk the global order and skip other classes' nodes; a membership test per
        # node is cheaper than merging when most nodes are wanted anyway.
        if sum(len(c) for c in feasibility.classes) * 4 < len(self._order):
            for _, name in heapq.merge(*(c.order for c in feasibility.classes)):
                if allowed is None or name in allowed:
                    yield nodes[name]
            return
        wanted = {c.id for c in feasibility.classes}
        for _, name in self._order:
            node = nodes[name]
            assert node.node_class is not None
            if node.node_class.id in wanted and (allowed is None or name in allowed):
                yield node

    def _class_verdicts(self, constraints: Constraints) -> dict[int, Rejection | None]:
        cached = self._verdicts.get(constraints)
        if cached is not None and cached[0] == self._class_epoch:
            return cached[1]
        verdicts: dict[int, Rejection | None] = {}
        previous = cached[1] if cached is not None else {}
        for cid, node_class in self._classes_by_id.items():
            verdicts[cid] = (
                previous[cid] if cid in previous else check_node(constraints, node_class.facts)
            )
        if len(self._verdicts) >= _VERDICT_CACHE_LIMIT:
            self._verdicts.clear()
        self._verdicts[constraints] = (self._class_epoch, verdicts)
        return verdicts

    def _node_verdicts(self, constraints: Constraints) -> dict[str, Rejection | None]:
        cached = self._identity_verdicts.get(constraints)
        if cached is not None and cached[0] == self._node_epoch:
            return cached[1]
        verdicts = {name: check_node(constraints, n.facts) for name, n in self._nodes.items()}
        if len(self._identity_verdicts) >= _VERDICT_CACHE_LIMIT:
            self._identity_verdicts.clear()
        self._identity_verdicts[constraints] = (self._node_epoch, verdicts)
        return verdicts

    # --- bookkeeping -----------------------------------------------------------------------------
    def _register(self, entry: PodEntry) -> None:
        """Put a pod into every pod index (resources and ports are per node, in `_apply`)."""
        info = entry.info
        uid = info.uid
        self._pods[uid] = entry
        by_label = self._by_label
        for key, value in info.labels.items():
            values = by_label.get(key)
            if values is None:
                values = by_label[key] = {}
            uids = values.get(value)
            if uids is None:
                values[value] = {uid}
            else:
                uids.add(uid)
        spaced = self._by_namespace.get(info.namespace)
        if spaced is None:
            self._by_namespace[info.namespace] = {uid}
        else:
            spaced.add(uid)
        for term in info.anti_affinity:
            self._anti.add(term, uid, entry.node)
        for weighted in info.scoring:
            self._scoring.add(weighted, uid, entry.node)
        if info.terminating:
            self._terminating.add(uid)
        unit = info.unit
        members = self._units.get(unit)
        if members is None:
            self._units[unit] = {uid}
        else:
            members.add(uid)
        for decision in entry.volumes:
            if decision.volume is not None:
                self._volume_holders[decision.volume] = uid
            self._claim_decisions.setdefault(decision.key, decision)

    def _unregister(self, uid: str) -> PodEntry:
        entry = self._pods.pop(uid)
        self._assumed.discard(uid)
        info = entry.info
        by_label = self._by_label
        for key, value in info.labels.items():
            values = by_label[key]
            uids = values[value]
            uids.discard(uid)
            if not uids:
                del values[value]
                if not values:
                    del by_label[key]
        spaced = self._by_namespace[info.namespace]
        spaced.discard(uid)
        if not spaced:
            del self._by_namespace[info.namespace]
        for term in info.anti_affinity:
            self._anti.remove(term, uid)
        for weighted in info.scoring:
            self._scoring.remove(weighted, uid)
        self._terminating.discard(uid)
        members = self._units[info.unit]
        members.discard(uid)
        if not members:
            del self._units[info.unit]
        for decision in entry.volumes:
            if decision.volume is not None and self._volume_holders.get(decision.volume) == uid:
                del self._volume_holders[decision.volume]
            if self._claim_decisions.get(decision.key) is decision:
                del self._claim_decisions[decision.key]
        return entry

    def _book(self, entry: PodEntry) -> None:
        self._register(entry)
        state = self._nodes.get(entry.node)
        if state is None:
            self._orphans.setdefault(entry.node, set()).add(entry.info.uid)
            return
        self._apply(state, [entry.info], +1)

    def _book_many(self, node_name: str, entries: list[PodEntry]) -> None:
        for entry in entries:
            self._register(entry)
        self._apply(self._nodes[node_name], [e.info for e in entries], +1)

    def _forget(self, uid: str) -> None:
        self._forget_many([uid])

    def _forget_many(self, uids: Sequence[str]) -> None:
        by_node: dict[str, list[PodInfo]] = {}
        for uid in uids:
            entry = self._unregister(uid)
            state = self._nodes.get(entry.node)
            if state is None:
                orphans = self._orphans.get(entry.node)
                if orphans is not None:
                    orphans.discard(uid)
                    if not orphans:
                        del self._orphans[entry.node]
                continue
            by_node.setdefault(entry.node, []).append(entry.info)
        for node_name, infos in by_node.items():
            self._apply(self._nodes[node_name], infos, -1)

    def _apply(self, state: NodeState, pods: list[PodInfo], sign: int) -> None:
        """Add (+1) or remove (-1) pods' requests on a node, keeping totals and order current."""
        total: Resources = {}
        priorities = state.priorities
        for info in pods:
            if sign > 0:
                state.pods.add(info.uid)
            else:
                state.pods.discard(info.uid)
            left = priorities.get(info.priority, 0) + sign
            if left > 0:
                priorities[info.priority] = left
            else:
                priorities.pop(info.priority, None)
            for name, amount in info.request.items():
                total[name] = total.get(name, 0) + amount
            if info.ports:
                ports = state.ports
                for port in info.ports:
                    left = ports.get(port, 0) + sign
                    if left > 0:
                        ports[port] = left
                    else:
                        ports.pop(port, None)
        requested, free, allocatable = state.requested, state.free, state.allocatable
        usable = state.usable
        cluster = self._total_free
        for name, amount in total.items():
            delta = sign * amount
            left = requested.get(name, 0) + delta
            if left:
                requested[name] = left
            else:
                requested.pop(name, None)
            if name in allocatable:
                free[name] -= delta
                if usable:
                    cluster[name] = cluster.get(name, 0) - delta
                node_class = state.node_class
                if node_class is not None:
                    node_class.free[name] = node_class.free.get(name, 0) - delta
        self._unindex(state)
        state.score = state.compute_score()
        self._index(state)

    def _count_total(self, state: NodeState, sign: int) -> None:
        if not state.usable:
            return
        cluster = self._total_free
        for name, amount in state.free.items():
            cluster[name] = cluster.get(name, 0) + sign * amount

    def _index(self, state: NodeState) -> None:
        assert state.node_class is not None
        entry = (state.score, state.name)
        insort(state.node_class.order, entry)
        insort(self._order, entry)

    def _unindex(self, state: NodeState) -> None:
        assert state.node_class is not None
        entry = (state.score, state.name)
        for order in (state.node_class.order, self._order):
            del order[bisect_left(order, entry)]

    def _join_class(self, state: NodeState) -> None:
        key = _class_key(state.facts)
        node_class = self._classes.get(key)
        if node_class is None:
            node_class = NodeClass(self._next_class_id, key, state.facts)
            self._next_class_id += 1
            self._classes[key] = node_class
            self._classes_by_id[node_class.id] = node_class
            self._class_epoch += 1
        state.node_class = node_class
        node_class.count(state.free, +1)
        self._index(state)

    def _leave_class(self, state: NodeState) -> None:
        node_class = state.node_class
        assert node_class is not None
        self._unindex(state)
        node_class.count(state.free, -1)
        state.node_class = None
        if not node_class.order:
            del self._classes[node_class.key]
            del self._classes_by_id[node_class.id]
            self._class_epoch += 1
