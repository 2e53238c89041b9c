"""The snapshot's volumes: PersistentVolumes, what assumed pods were promised, attach limits.

PersistentVolumes are kept as their informer reports them (`set_volume`), indexed by storage
class and, for local PVs, by the one host they are tied to; with them the PVs promised to
assumed pods and what those pods decided per claim, so a second member mounting the same claim
agrees. Attach limits need each CSINode's limits, which PV each claim is bound to, and each
claim's class provisioner (`attachment`, `attach_limits`); the in-tree disks pods mount inline
are in their `PodInfo` (`node_attachments`, `disk_conflict`).

The `Snapshot` owns one `VolumeState` (`snapshot.volumes`): it records the promises of each pod
it books or forgets (`promise`, `release`) and tells it when a node's allocatable changes, so
that a pod's assumption and its undo keep the volumes consistent with the pods. PV, CSINode and
claim events come straight from the volume binder (`set_volume`, `set_csi_limits`, ...).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from podgroup_operator.scheduling.snapshot_nodes import NodeState, PodEntry
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

IN_TREE_KEYS = frozenset(IN_TREE_LIMIT_KEYS.values())


def limit_keys(allocatable: Mapping[str, int]) -> list[str]:
    """The attach limits a node's allocatable sets (`attachable-volumes-*`)."""
    return [name for name in allocatable if name.startswith(ATTACH_LIMIT_PREFIX)]


class VolumeState:
    """PVs by name (`pvs`), the promises of assumed pods, and what attach limits need.

    `pods` and `nodes` are the snapshot's own stores (read, never changed here).
    `max_pd_volumes` is kube-scheduler's `KUBE_MAX_PD_VOLS`: every node's in-tree disk limit,
    where its allocatable sets none (`volumes.in_tree_limits`)."""

    def __init__(
        self,
        pods: Mapping[str, PodEntry],
        nodes: Mapping[str, NodeState],
        max_pd_volumes: int | None = None,
    ) -> None:
        self._pods = pods
        self._nodes = nodes
        self.max_pd_volumes = max_pd_volumes
        self.pvs: dict[str, PersistentVolume] = {}
        """Every PersistentVolume, by name."""
        self._by_class: dict[str, dict[str, PersistentVolume]] = {}
        self._pinned: dict[tuple[str, str], dict[str, PersistentVolume]] = {}
        """(storage class, hostname) -> local PVs tied to that one host."""
        self.holders: dict[str, str] = {}
        """PV name -> UID of the assumed pod it is promised to."""
        self.claim_decisions: dict[tuple[str, str], VolumeDecision] = {}
        """(namespace, claim) -> what an assumed pod decided for it: a second member mounting
        the same claim must agree (same PV, or the node it is provisioned for)."""
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

    # --- bookkeeping (the Snapshot calls these) --------------------------------------------------
    def promise(self, entry: PodEntry) -> None:
        """Record an assumed pod's volume decisions (its PVs are no longer offered)."""
        uid = entry.info.uid
        for decision in entry.volumes:
            if decision.volume is not None:
                self.holders[decision.volume] = uid
            self.claim_decisions.setdefault(decision.key, decision)

    def release(self, entry: PodEntry) -> None:
        """Drop the decisions `promise` recorded for a pod no longer held."""
        uid = entry.info.uid
        for decision in entry.volumes:
            if decision.volume is not None and self.holders.get(decision.volume) == uid:
                del self.holders[decision.volume]
            if self.claim_decisions.get(decision.key) is decision:
                del self.claim_decisions[decision.key]

    def check_promises(self, volumes: Mapping[str, Sequence[VolumeDecision]]) -> None:
        """Raise ValueError when a PV in these decisions (by pod UID) is promised to another."""
        for uid, decisions in volumes.items():
            for decision in decisions:
                if decision.volume is None:
                    continue
                holder = self.holders.get(decision.volume)
                if holder is not None and holder != uid:
                    raise ValueError(f"PV {decision.volume} is already promised to pod {holder}")

    def node_changed(
        self, name: str, before: Mapping[str, int] | None, after: Mapping[str, int] | None
    ) -> None:
        """A node's allocatable changed (None: the node is absent then)."""
        self._attach_limits.pop(name, None)
        if before is not None:
            self._limit_key_nodes.subtract(limit_keys(before))
        if after is not None:
            self._limit_key_nodes.update(limit_keys(after))

    def state(self) -> tuple[Any, ...]:
        """The promises in a comparable form (`Snapshot.index_state`)."""
        return (
            tuple(sorted(self.holders.items())),
            tuple(sorted((k, str(d)) for k, d in self.claim_decisions.items())),
        )

    # --- PersistentVolumes -----------------------------------------------------------------------
    def set_volume(self, volume: PersistentVolume) -> None:
        """Add or replace a PersistentVolume (from its informer, via `volumes.persistent_volume`).

        A PV that now carries a claimRef is no longer offered to other claims; a promise made
        to an assumed pod is kept until that pod's assumption ends.
        """
        self.remove_volume(volume.name, keep_holder=True)
        self.pvs[volume.name] = volume
        if (attachment := volume.attachment) is not None:
            self._class_keys.setdefault(volume.storage_class, Counter())[attachment[1]] += 1
        if volume.claim is not None:
            self._claim_volumes[volume.claim] = volume.name
        host = volume.pinned_host
        if host is not None:
            self._pinned.setdefault((volume.storage_class, host), {})[volume.name] = volume
        else:
            self._by_class.setdefault(volume.storage_class, {})[volume.name] = volume

    def remove_volume(self, name: str, *, keep_holder: bool = False) -> None:
        volume = self.pvs.pop(name, None)
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
            self._pinned.get((volume.storage_class, host), {}).pop(name, None)
        else:
            self._by_class.get(volume.storage_class, {}).pop(name, None)
        if not keep_holder:
            self.holders.pop(name, None)

    def candidates(
        self, storage_classes: Iterable[str], hostname: str | None
    ) -> dict[str, list[PersistentVolume]]:
        """PVs of these classes that a node with this hostname might reach (unfiltered)."""
        out: dict[str, list[PersistentVolume]] = {}
        for klass in storage_classes:
            found = list(self._by_class.get(klass, {}).values())
            if hostname is not None:
                found.extend(self._pinned.get((klass, hostname), {}).values())
            out[klass] = found
        return out

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
        decision = self.claim_decisions.get(key)
        name = decision.volume if decision is not None else self._claim_volumes.get(key)
        if name is not None and (volume := self.pvs.get(name)) is not None:
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
