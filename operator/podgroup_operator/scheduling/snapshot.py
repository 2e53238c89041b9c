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

The `Snapshot` is the node and pod store and the undo; what rules read beside free capacity is
split by concern, as Kueue splits its TAS cache into `tas_*` files, each owned by the snapshot:

- `snapshot.classes` (`snapshot_classes.NodeClasses`): node classes, their free sums, the
  fullest-first orders and the static filters' verdicts (`feasibility`, `best_fit_order`);
- `snapshot.pod_index` (`snapshot_pods.PodIndex`): held pods by label, namespace, carried
  term, unit (inter-pod affinity, spread, preemption);
- `snapshot.volumes` (`snapshot_volumes.VolumeState`): PVs, the promises of assumed pods,
  attach limits;
- `snapshot.images` (`snapshot_images.ImageState`): image names, counts, sizes;
- `snapshot.quotas` (`snapshot_quotas.QuotaState`): the ElasticQuota tree and what each quota
  uses, charged from the pods held (nothing per pod while no tree is set).

Every change goes through the snapshot (`add_node`, `add_pod`, `assume`, `hold`,
`simulate_removal` and their undos), which keeps every concern consistent with the store; the
concerns' own setters are for objects only they know (PVs, CSINodes, claims).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from podgroup_operator.api.keys import pod_uid
from podgroup_operator.constants import PodPhase
from podgroup_operator.scheduling.filters import NodeFacts, node_facts
from podgroup_operator.scheduling.podinfo import GangOf, PodInfo, pod_info
from podgroup_operator.scheduling.resources import Resources, node_allocatable, pod_requests
from podgroup_operator.scheduling.snapshot_classes import Feasibility, NodeClasses, memoized
from podgroup_operator.scheduling.snapshot_images import ImageState, node_images
from podgroup_operator.scheduling.snapshot_nodes import NodeClass, NodeState, PodEntry
from podgroup_operator.scheduling.snapshot_pods import PodIndex
from podgroup_operator.scheduling.snapshot_quotas import QuotaState
from podgroup_operator.scheduling.snapshot_volumes import VolumeState
from podgroup_operator.scheduling.volumes import VolumeDecision

__all__ = [
    "NO_UNDO",
    "Feasibility",
    "NodeClass",
    "NodeState",
    "PodEntry",
    "Snapshot",
    "Undo",
    "holds_node",
    "pod_uid",
]

Undo = Callable[[], None]
"""Reverts an assumption; calling it twice, or after the pods really bound, is harmless."""

_TERMINAL = (PodPhase.SUCCEEDED.value, PodPhase.FAILED.value)


def _noop() -> None:
    return None


NO_UNDO: Undo = _noop


def holds_node(pod: Mapping[str, Any]) -> bool:
    """True when the pod occupies capacity: bound to a node and not terminated."""
    node = (pod.get("spec") or {}).get("nodeName")
    phase = (pod.get("status") or {}).get("phase")
    return bool(node) and phase not in _TERMINAL


class Snapshot:
    """Nodes and bound pods, with free capacity and the concerns' indexes kept current
    incrementally.

    `gang_of` says which gang a raw pod belongs to (the controller passes
    `domain.membership.group_key_of`); without it every pod is a gang of one, and
    `plan_preemption` refuses to run, since it could evict part of a gang.
    `max_pd_volumes` is kube-scheduler's `KUBE_MAX_PD_VOLS` (`VolumeState.max_pd_volumes`).
    """

    def __init__(self, *, gang_of: GangOf | None = None, max_pd_volumes: int | None = None) -> None:
        self.gang_of = gang_of
        self._nodes: dict[str, NodeState] = {}
        self._pods: dict[str, PodEntry] = {}
        self._assumed: set[str] = set()
        self._orphans: dict[str, set[str]] = {}
        self._total_free: Resources = {}
        self._cache: dict[Any, tuple[int, Any]] = {}
        """Derived values keyed by their inputs, tagged with `node_epoch` (see `cached`)."""
        self.classes = NodeClasses(self._nodes)
        """Node classes, their free sums and orders, and the static filters' verdicts."""
        self.pod_index = PodIndex(self._pods, self._nodes)
        """The held pods by label, namespace, carried term, unit and termination."""
        self.volumes = VolumeState(self._pods, self._nodes, max_pd_volumes)
        """PersistentVolumes, the promises of assumed pods, attach limits."""
        self.images = ImageState(self._nodes)
        """Image names the nodes list, with how many nodes list each and its size."""
        self.quotas = QuotaState(self._pods, self.pod_index.units())
        """The ElasticQuota tree and each quota's use by the pods held (none: no tree)."""

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
    def node_epoch(self) -> int:
        """Changes whenever a node appears, goes, or changes labels, taints or conditions."""
        return self.classes.node_epoch

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

    def node_pods(self, name: str) -> list[PodInfo]:
        """The facts of every pod on a node (bound or assumed)."""
        pods = self._pods
        return [pods[uid].info for uid in self._nodes[name].pods]

    def cached(self, key: Any, compute: Callable[[], Any]) -> Any:
        """`compute()` once per node epoch for `key` (node-derived values: domains, scores)."""
        return memoized(self._cache, self.classes.node_epoch, key, compute)

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
            self.pod_index.state(),
            self.volumes.state(),
            self.quotas.state(),
            tuple(
                (
                    name,
                    tuple(sorted((str(p), n) for p, n in node.ports.items())),
                    tuple(sorted(node.priorities.items())),
                    tuple(sorted(node.pods)),
                )
                for name, node in sorted(self._nodes.items())
            ),
        )

    # --- node events -----------------------------------------------------------------------------
    def add_node(self, node: Mapping[str, Any]) -> None:
        """Add or replace a node from its raw dict; bound pods keep counting against it."""
        facts = node_facts(node)
        allocatable = node_allocatable(node)
        old = self._nodes.get(facts.name)
        self.volumes.node_changed(
            facts.name, old.allocatable if old is not None else None, allocatable
        )
        images = node_images(node)
        if old is not None:
            self.images.set_node(old, images)
            self._update_node(old, facts, allocatable)
            return
        state = NodeState(facts.name, facts, allocatable)
        self._nodes[facts.name] = state
        self.images.set_node(state, images)
        self.images.node_count_changed()
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
        self.classes.join(state)
        self._count_total(state, +1)

    update_node = add_node

    def remove_node(self, name: str) -> None:
        """Forget a node; its pods wait (uncounted) in case the node comes back."""
        state = self._nodes.pop(name, None)
        if state is None:
            self.volumes.node_changed(name, None, None)
            return
        self.volumes.node_changed(name, state.allocatable, None)
        self.images.set_node(state, {})
        self.images.node_count_changed()
        self._count_total(state, -1)
        self.classes.leave(state)
        if state.pods:
            self._orphans.setdefault(name, set()).update(state.pods)

    def _update_node(self, state: NodeState, facts: NodeFacts, allocatable: Resources) -> None:
        self._count_total(state, -1)
        classes = self.classes
        static_changed = facts != state.facts
        if static_changed:
            classes.leave(state)
        else:
            classes.unindex(state)
            assert state.node_class is not None
            state.node_class.count(state.free, -1)
        state.facts = facts
        state.allocatable = allocatable
        state.free = {n: a - state.requested.get(n, 0) for n, a in allocatable.items()}
        state.score = state.compute_score()
        if static_changed:
            classes.join(state)
        else:
            assert state.node_class is not None
            state.node_class.count(state.free, +1)
            classes.index(state)
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
        if volumes:
            self.volumes.check_promises(volumes)
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
        self._book_many(by_node)
        booked = [e.info.uid for entries in by_node.values() for e in entries]
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
            self._book_many(by_node)
            removed.clear()

        return undo

    # --- bookkeeping -----------------------------------------------------------------------------
    def _register(self, entries: Sequence[PodEntry]) -> None:
        """Store pods and put them into every concern's index (resources and ports are per
        node, in `_apply`)."""
        pods = self._pods
        for entry in entries:
            pods[entry.info.uid] = entry
            if entry.volumes:
                self.volumes.promise(entry)
        self.pod_index.add(entries)
        quotas = self.quotas
        if quotas.usage is not None:  # no ElasticQuota tree: not even a call
            quotas.add(entries)

    def _book(self, entry: PodEntry) -> None:
        self._register((entry,))
        state = self._nodes.get(entry.node)
        if state is None:
            self._orphans.setdefault(entry.node, set()).add(entry.info.uid)
            return
        self._apply(state, [entry.info], +1)

    def _book_many(self, by_node: Mapping[str, list[PodEntry]]) -> None:
        """Book pods on known nodes, each node's in one step (one re-sort per node)."""
        for entries in by_node.values():
            self._register(entries)
        nodes = self._nodes
        for node_name, entries in by_node.items():
            self._apply(nodes[node_name], [e.info for e in entries], +1)

    def _forget(self, uid: str) -> None:
        self._forget_many([uid])

    def _forget_many(self, uids: Sequence[str]) -> None:
        """Drop held pods from the store and every concern, and release what they held."""
        pods, assumed = self._pods, self._assumed
        entries = [pods.pop(uid) for uid in uids]
        assumed.difference_update(uids)
        self.pod_index.remove(entries)
        quotas = self.quotas
        if quotas.usage is not None:
            quotas.remove(entries)
        by_node: dict[str, list[PodInfo]] = {}
        for entry in entries:
            if entry.volumes:
                self.volumes.release(entry)
            uid = entry.info.uid
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
        classes = self.classes
        classes.unindex(state)
        state.score = state.compute_score()
        classes.index(state)

    def _count_total(self, state: NodeState, sign: int) -> None:
        if not state.usable:
            return
        cluster = self._total_free
        for name, amount in state.free.items():
            cluster[name] = cluster.get(name, 0) + sign * amount
