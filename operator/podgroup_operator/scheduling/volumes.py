"""PersistentVolumeClaims as kube-scheduler's VolumeBinding plugin sees them, without the API.

A pod with a claim can only run where its volume can be attached, and a claim that waits for its
first consumer (`volumeBindingMode: WaitForFirstConsumer`) is bound by the scheduler itself, to a
static PV reachable from the chosen node or to one provisioned there. So the decision for a gang
member is not only "this node" but also "and these volumes": `Binding.volumes` carries them, and
the controller must carry them out before it binds the pod (see `VolumeDecision`).

The caller resolves what the pod mounts into small models: each claim with its StorageClass
facts (`VolumeClaim`, passed with the `GangRequest`) and every PersistentVolume (`PersistentVolume`,
kept in the snapshot with `VolumeState.set_volume`, `snapshot.volumes`). The rules, per claim:

- bound (`spec.volumeName` set): the PV's node affinity must accept the node
  (`node(s) had volume node affinity conflict`), and so must its zone and region labels
  (kube-scheduler's VolumeZone: on a node with any zone or region label, the node's value of
  each such label the PV carries must be one of the PV's, `__`-separated; `node(s) had no
  available volume zone`). Older PVs of cloud disks carry only the labels;
- unbound, `Immediate` binding: the PV controller binds it, not the scheduler, so the pod waits
  ("waiting for PVC X to be bound") whatever the node;
- unbound, `WaitForFirstConsumer`: per node, the smallest available static PV that fits (same
  class, enough capacity, the access modes, the volume mode, the claim's selector, node
  affinity accepting the node; a PV pre-bound to this claim first), else dynamic provisioning if
  the class has a provisioner and its allowedTopologies accept the node, else the node is out
  (`node(s) didn't find available persistent volumes to bind`).

A static PV chosen for one member is held in the snapshot (with the member's assumption, and
released by the same undo), so a second member, or a second claim of the same pod, never gets
the same PV.

Attach limits (kube-scheduler's NodeVolumeLimits, CSI part): a node takes at most so many
volumes of each CSI driver, from its CSINode (`spec.drivers[].allocatable.count`) or else its
`attachable-volumes-csi-<driver>` allocatable. Each claim counts as one volume of a driver
(`Attachment`): a claim bound or promised to a CSI PV as that PV's driver and handle, so pods
sharing a volume count it once; any other claim as its class's provisioner, one volume per claim
(a claim bound to a PV that is not CSI counts nothing). A pod is refused where its new volumes
would take a driver past the limit (`exceeds_attach_limits`: `node(s) exceed max volume count`).

In-tree disks (kube-scheduler's EBSLimits, GCEPDLimits and AzureDiskLimits, in its default
profile): an AWS EBS volume, GCE PD or Azure Disk counts against the node's limit for its type
(`Disk.attachment`), whether the pod names it inline or through a claim bound to such a PV (one
volume either way, by its ID); a claim not bound yet whose class provisions that type counts as
one. Every node has these limits: its `attachable-volumes-aws-ebs` (`-gce-pd`, `-azure-disk`)
allocatable, else `KUBE_MAX_PD_VOLS` when set (as kube-scheduler reads it: the snapshot's
`max_pd_volumes`), else upstream's defaults (`in_tree_limits`: EBS 39, or 25 on Nitro instance
types; GCE PD 16; Azure Disk 16). And an inline disk a pod on the node already uses may be refused
(VolumeRestrictions, `Disk.conflicts`: `node(s) had no available disk`): the same EBS volume
always, the same GCE PD, iSCSI IQN or Ceph RBD image (on a shared monitor) unless both pods
mount it read-only.

Not modelled: CSI storage capacity; ReadWriteOncePod; Cinder's limit (not in kube-scheduler's
default profile); in-tree volumes migrated to CSI (the migration gates are off in v1.20).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any

from podgroup_operator.api.quantity import to_milli
from podgroup_operator.scheduling.filters import (
    HOSTNAME_LABEL,
    Exclusion,
    Rejection,
    Requirement,
    Term,
    TermIndex,
    any_term_matches,
    node_selector_terms,
    term_index,
)
from podgroup_operator.scheduling.selectors import LabelSelector, parse_selector

NO_PROVISIONER = "kubernetes.io/no-provisioner"
"""The provisioner of classes that only bind static PVs."""
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
"""Set on a claim to ask its provisioner for a volume reachable from that node."""
FILESYSTEM = "Filesystem"
ATTACH_LIMIT_PREFIX = "attachable-volumes-"
"""Node allocatable resources with this prefix are limits on attached volumes, not amounts."""
CSI_ATTACH_LIMIT_PREFIX = "attachable-volumes-csi-"
RESOURCE_NAME_LIMIT = 63

Attachment = tuple[str, str]
"""A volume a node attaches: (`<driver>/<handle>`, the node's limit key for the driver)."""


class DiskPlugin(StrEnum):
    """The in-tree volume types kube-scheduler counts or keeps apart (named as their
    StorageClass provisioners are)."""

    AWS_EBS = "kubernetes.io/aws-ebs"
    GCE_PD = "kubernetes.io/gce-pd"
    AZURE_DISK = "kubernetes.io/azure-disk"
    ISCSI = "kubernetes.io/iscsi"
    RBD = "kubernetes.io/rbd"


IN_TREE_LIMIT_KEYS: Mapping[str, str] = {
    DiskPlugin.AWS_EBS: "attachable-volumes-aws-ebs",
    DiskPlugin.GCE_PD: "attachable-volumes-gce-pd",
    DiskPlugin.AZURE_DISK: "attachable-volumes-azure-disk",
}
"""The in-tree types with an attach limit, and the allocatable that sets a node's."""
DEFAULT_MAX_EBS = 39
DEFAULT_MAX_EBS_NITRO = 25
EBS_NITRO = re.compile(r"^[cmr]5.*|t3|z1d")
"""Upstream's pattern for Nitro instance types, searched (not matched) as Go's MatchString does."""
DEFAULT_MAX_GCE_PD = 16
DEFAULT_MAX_AZURE_DISK = 16
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
_DISK_SOURCES = {
    "awsElasticBlockStore": (DiskPlugin.AWS_EBS, "volumeID"),
    "gcePersistentDisk": (DiskPlugin.GCE_PD, "pdName"),
    "azureDisk": (DiskPlugin.AZURE_DISK, "diskName"),
    "iscsi": (DiskPlugin.ISCSI, "iqn"),
    "rbd": (DiskPlugin.RBD, "image"),
}
DISK_SOURCES = frozenset(_DISK_SOURCES)
"""The volume sources (pod `spec.volumes[]` keys) that name an in-tree disk."""


@dataclass(frozen=True, slots=True)
class Disk:
    """An in-tree disk a pod mounts inline, or a PV's (for its attach limit only)."""

    plugin: DiskPlugin
    name: str
    """The EBS volume ID, GCE PD name, Azure disk name, iSCSI IQN or RBD image."""
    read_only: bool = False
    pool: str = ""
    """RBD only: the image's RADOS pool."""
    monitors: frozenset[str] = frozenset()
    """RBD only: the Ceph monitors; two mounts are of one image only if they share one."""

    @property
    def attachment(self) -> Attachment | None:
        """What the disk counts against a node's limit; None for a type without one."""
        key = IN_TREE_LIMIT_KEYS.get(self.plugin)
        return None if key is None else (f"{self.plugin}/{self.name}", key)

    def conflicts(self, other: Disk) -> bool:
        """True when both cannot be mounted on one node (upstream's `isVolumeConflict`): the
        same EBS volume always; the same GCE PD, iSCSI target or RBD image unless both are
        read-only; Azure disks never."""
        if self.plugin != other.plugin or self.name != other.name:
            return False
        if self.plugin == DiskPlugin.AWS_EBS:
            return True
        if self.plugin == DiskPlugin.AZURE_DISK:
            return False
        if self.plugin == DiskPlugin.RBD and (
            self.pool != other.pool or not self.monitors & other.monitors
        ):
            return False
        return not (self.read_only and other.read_only)


@dataclass(frozen=True, slots=True)
class DiskCounts:
    """A pod's inline disks as every node it visits asks about them: by name (conflicts),
    what they attach (unique name -> limit key) and how many per limit key."""

    by_name: Mapping[tuple[str, str], tuple[Disk, ...]]
    attaching: dict[str, str]
    counts: Mapping[str, int]

    @classmethod
    def of(cls, disks: Sequence[Disk]) -> DiskCounts:
        if not disks:
            return NO_DISKS
        by_name: dict[tuple[str, str], tuple[Disk, ...]] = {}
        attaching: dict[str, str] = {}
        for disk in disks:
            name = (disk.plugin, disk.name)
            by_name[name] = (*by_name.get(name, ()), disk)
            if (found := disk.attachment) is not None:
                attaching[found[0]] = found[1]
        return cls(by_name, attaching, Counter(attaching.values()))


NO_DISKS = DiskCounts({}, {}, {})


def disk_of(volume: Mapping[str, Any]) -> Disk | None:
    """The in-tree disk a pod volume (or a PV's spec) names, None for any other source."""
    for source in volume:  # a volume has its name and one source: fewer keys than sources
        found = _DISK_SOURCES.get(source)
        if found is None:
            continue
        plugin, field_name = found
        raw = volume[source]
        if isinstance(raw, Mapping):
            return Disk(
                plugin,
                str(raw.get(field_name) or ""),
                read_only=raw.get("readOnly") is True,
                pool=str(raw.get("pool") or "") if plugin == DiskPlugin.RBD else "",
                monitors=frozenset(map(str, raw.get("monitors") or ()))
                if plugin == DiskPlugin.RBD
                else frozenset(),
            )
    return None


class VolumeKind(IntEnum):
    """What a pod volume is to placement (the shape key and the slim store read it)."""

    OTHER = 0
    """A secret, ConfigMap, projected or emptyDir volume: it does not constrain the node."""
    CLAIM = 1
    """A PVC or a generic ephemeral volume's claim."""
    DISK = 2
    """An in-tree disk named inline (`DISK_SOURCES`)."""


_KIND_OF_SOURCE = {
    "persistentVolumeClaim": VolumeKind.CLAIM,
    "ephemeral": VolumeKind.CLAIM,
    **dict.fromkeys(DISK_SOURCES, VolumeKind.DISK),
}


def volume_kind(volume: Mapping[str, Any]) -> VolumeKind:
    # By the volume's own keys (its name and its one source: the apiserver allows no second),
    # since every pod event and every pending pod's shape key asks.
    for key in volume:
        kind = _KIND_OF_SOURCE.get(key)
        if kind is not None and volume[key]:
            return kind
    return VolumeKind.OTHER


def pod_disks(pod: Mapping[str, Any]) -> tuple[Disk, ...]:
    """The in-tree disks a raw pod mounts inline, in order, each once."""
    found = [
        disk
        for volume in (pod.get("spec") or {}).get("volumes") or ()
        if not DISK_SOURCES.isdisjoint(volume) and (disk := disk_of(volume)) is not None
    ]
    return tuple(dict.fromkeys(found)) if found else ()


class BindingMode(StrEnum):
    IMMEDIATE = "Immediate"
    WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


class VolumeAction(StrEnum):
    BIND = "Bind"
    """Set the PV's `spec.claimRef` to the claim (the PV controller completes the binding)."""
    PROVISION = "Provision"
    """Annotate the claim with `volume.kubernetes.io/selected-node: <node>`."""


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    """The facts of a PV that decide which claims and nodes it can serve."""

    name: str
    storage_class: str
    capacity: int
    """Bytes."""
    access_modes: frozenset[str] = frozenset()
    volume_mode: str = FILESYSTEM
    node_affinity: tuple[Term, ...] | None = None
    """Required node affinity terms (ORed); None when the PV is reachable from every node."""
    claim: tuple[str, str] | None = None
    """`spec.claimRef` (namespace, name): bound or pre-bound to that claim only."""
    labels: Mapping[str, str] = field(default_factory=dict)
    available: bool = True
    """False when Released/Failed or being deleted: never offered to a new claim."""
    csi: tuple[str, str] | None = None
    """`spec.csi` (driver, volumeHandle); None for a volume of another type."""
    disk: Disk | None = None
    """The in-tree disk it is (EBS, GCE PD, Azure Disk...); None for another type."""
    matching: TermIndex | None = field(init=False, repr=False, compare=False, hash=False)
    """`node_affinity` by what a node needs to match each term, when they are many."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "matching", term_index(self.node_affinity))

    @property
    def attachment(self) -> Attachment | None:
        """What the PV counts against a node's attach limit: its CSI volume or its in-tree
        disk (counted once with the same disk named inline); None for other types."""
        if self.csi is None:
            return self.disk.attachment if self.disk is not None else None
        driver, handle = self.csi
        return f"{driver}/{handle}", attach_limit_key(driver)

    def reachable_from(self, name: str, labels: Mapping[str, str]) -> bool:
        terms = self.node_affinity
        return terms is None or any_term_matches(terms, self.matching, name, labels)

    def in_zone(self, node_labels: Mapping[str, str]) -> bool:
        """kube-scheduler's VolumeZone for a bound PV (see the module docstring). A label value
        with an empty element is skipped, as upstream skips what it cannot parse."""
        if not any(key in node_labels for key in ZONE_LABELS):
            return True
        for key, value in self.labels.items():
            if key not in ZONE_LABELS:
                continue
            zones = {zone.strip() for zone in value.split(MULTI_ZONE_DELIMITER)}
            if "" in zones:
                continue
            if node_labels.get(key, "") not in zones:
                return False
        return True

    @property
    def pinned_host(self) -> str | None:
        """The one hostname a local PV is tied to, so lookups per node can skip the rest."""
        if self.node_affinity is None or len(self.node_affinity) != 1:
            return None
        term = self.node_affinity[0]
        if term.fields or len(term.expressions) != 1:
            return None
        req = term.expressions[0]
        if req.key == HOSTNAME_LABEL and req.operator == "In" and len(req.values) == 1:
            return req.values[0]
        return None


ZONE_LABELS = frozenset(
    {
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    }
)
"""The node and PV labels kube-scheduler's VolumeZone compares."""
MULTI_ZONE_DELIMITER = "__"
"""Separates the zones of a PV that spans several (`us-east-1a__us-east-1b`)."""


@dataclass(frozen=True, slots=True)
class VolumeClaim:
    """A PVC with the StorageClass facts that decide how it gets a volume."""

    namespace: str
    name: str
    volume: str | None = None
    """`spec.volumeName`: the PV it is bound (or pre-bound) to."""
    storage_class: str = ""
    binding_mode: BindingMode = BindingMode.IMMEDIATE
    request: int = 0
    """Bytes requested (`spec.resources.requests.storage`)."""
    access_modes: frozenset[str] = frozenset()
    volume_mode: str = FILESYSTEM
    selector: LabelSelector | None = None
    """`spec.selector` over PV labels; a claim with one is never provisioned dynamically."""
    provisioner: str = ""
    """The class's provisioner; empty or `kubernetes.io/no-provisioner` means static PVs only."""
    allowed_topologies: tuple[Term, ...] | None = None
    """The class's allowedTopologies as node selector terms; None allows every node."""
    deleting: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def can_provision(self) -> bool:
        return bool(self.provisioner) and self.provisioner != NO_PROVISIONER and not self.selector

    def accepts(self, pv: PersistentVolume) -> bool:
        """Static matching without node: class, claimRef, capacity, modes and selector."""
        if not pv.available or pv.storage_class != self.storage_class:
            return False
        if pv.claim is not None and pv.claim != self.key:
            return False
        if pv.capacity < self.request or not self.access_modes <= pv.access_modes:
            return False
        if pv.volume_mode != self.volume_mode:
            return False
        return self.selector is None or self.selector.matches(pv.labels)


@dataclass(frozen=True, slots=True)
class VolumeDecision:
    """What the controller must do for one claim before binding the pod to `node`.

    BIND: update PV `volume` with `spec.claimRef` = the claim (namespace, name, uid), as the
    volume binder does; PROVISION: annotate the claim with `volume.kubernetes.io/selected-node`.
    Then wait for the claim to be Bound before binding the pod. A claim shared by several
    members is decided once, on the first member's binding; the others only wait for it.
    """

    namespace: str
    claim: str
    action: VolumeAction
    node: str
    volume: str | None = None
    provisioner: str = ""
    """PROVISION: the class's provisioner, which the volume will count against (attach limits)."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.claim)


def pod_level_problem(
    claims: Sequence[str],
    namespace: str,
    known: Mapping[tuple[str, str], VolumeClaim],
    volumes: Mapping[str, PersistentVolume],
) -> str | None:
    """Why no node can take the pod because of its claims, or None (VolumeBinding PreFilter)."""
    for name in claims:
        claim = known.get((namespace, name))
        if claim is None:
            return f"persistentvolumeclaim {name!r} not found"
        if claim.deleting:
            return f"persistentvolumeclaim {name!r} is being deleted"
        if claim.volume is not None:
            if claim.volume not in volumes:
                return f"waiting for PV {claim.volume!r} of PVC {name!r}"
            continue
        if claim.binding_mode is BindingMode.IMMEDIATE:
            return f"waiting for PVC {name!r} to be bound (volumeBindingMode Immediate)"
    return None


def choose_volumes(
    claims: Iterable[VolumeClaim],
    node_name: str,
    node_labels: Mapping[str, str],
    candidates: Mapping[str, Sequence[PersistentVolume]],
    volumes: Mapping[str, PersistentVolume],
    held: Mapping[str, str],
    decided: Mapping[tuple[str, str], VolumeDecision] | None = None,
) -> tuple[Rejection | None, tuple[VolumeDecision, ...]]:
    """The volume part of the node filter for one pod: a rejection, or what to do per claim.

    `candidates` are the available PVs per storage class reachable from this node (any order);
    `held` maps PVs already promised to an assumed pod to that pod's UID; `decided` holds the
    decisions assumed pods made for claims (a claim shared by gang members is decided once: the
    next member must reach the same PV, or go to the node the volume is provisioned for).
    """
    decisions: list[VolumeDecision] = []
    taken: set[str] = set()
    for claim in claims:
        earlier = decided.get(claim.key) if decided else None
        volume = claim.volume
        if volume is None and earlier is not None:
            if earlier.action is VolumeAction.PROVISION:
                if earlier.node != node_name:
                    return (
                        Rejection(
                            Exclusion.VOLUME_BINDING,
                            f"(PVC {claim.name} is provisioned for node {earlier.node})",
                        ),
                        (),
                    )
                continue
            volume = earlier.volume
        if volume is not None:
            pv = volumes.get(volume)
            if pv is None or not pv.reachable_from(node_name, node_labels):
                return Rejection(Exclusion.VOLUME_NODE_AFFINITY, f"(PV {volume})"), ()
            if claim.volume is not None and not pv.in_zone(node_labels):
                # Upstream compares zones only for claims the API shows bound: not for the
                # PV an earlier member of the gang was promised.
                return Rejection(Exclusion.VOLUME_ZONE, f"(PV {volume})"), ()
            continue
        best: PersistentVolume | None = None
        for pv in candidates.get(claim.storage_class, ()):
            if pv.name in held or pv.name in taken or not claim.accepts(pv):
                continue
            if not pv.reachable_from(node_name, node_labels):
                continue
            rank = (pv.claim is None, pv.capacity, pv.name)
            if best is None or rank < (best.claim is None, best.capacity, best.name):
                best = pv
        if best is not None:
            taken.add(best.name)
            decisions.append(
                VolumeDecision(claim.namespace, claim.name, VolumeAction.BIND, node_name, best.name)
            )
        elif claim.can_provision and (
            claim.allowed_topologies is None
            or any(t.matches(node_name, node_labels) for t in claim.allowed_topologies)
        ):
            decisions.append(
                VolumeDecision(
                    claim.namespace,
                    claim.name,
                    VolumeAction.PROVISION,
                    node_name,
                    provisioner=claim.provisioner,
                )
            )
        else:
            return Rejection(Exclusion.VOLUME_BINDING, f"(PVC {claim.name})"), ()
    return None, tuple(decisions)


# --- attach limits (NodeVolumeLimits) ------------------------------------------------------------
def attach_limit_key(driver: str) -> str:
    """The resource name of a node's limit on `driver`'s volumes, as kubelet and kube-scheduler
    write it: a name that would reach 63 characters keeps the driver's first 23 and 16 hex
    digits of its SHA-1."""
    if len(CSI_ATTACH_LIMIT_PREFIX) + len(driver) >= RESOURCE_NAME_LIMIT:
        digest = hashlib.sha1(driver.encode(), usedforsecurity=False).hexdigest()[:16]
        return f"{CSI_ATTACH_LIMIT_PREFIX}{driver[:23]}{digest}"
    return CSI_ATTACH_LIMIT_PREFIX + driver


def claim_attachment(namespace: str, claim: str, provisioner: str) -> Attachment | None:
    """A claim with no PV to name counts as one volume of its class's provisioner (as
    upstream, which also gives it a handle of its own): an in-tree type's (EBS, GCE PD, Azure
    Disk) or a CSI driver's; none without a provisioner."""
    if not provisioner:
        return None
    key = IN_TREE_LIMIT_KEYS.get(provisioner) or attach_limit_key(provisioner)
    return f"{provisioner}/(claim {namespace}/{claim})", key


@functools.lru_cache(maxsize=256)
def in_tree_limits(instance_type: str, max_pd_volumes: int | None = None) -> Mapping[str, int]:
    """Upstream's limits for a node whose allocatable sets none: `KUBE_MAX_PD_VOLS` for every
    type when given, else EBS 39 (25 on Nitro instance types), GCE PD 16, Azure Disk 16."""
    if max_pd_volumes is not None and max_pd_volumes > 0:
        return dict.fromkeys(IN_TREE_LIMIT_KEYS.values(), max_pd_volumes)
    ebs = DEFAULT_MAX_EBS_NITRO if EBS_NITRO.search(instance_type) else DEFAULT_MAX_EBS
    return {
        IN_TREE_LIMIT_KEYS[DiskPlugin.AWS_EBS]: ebs,
        IN_TREE_LIMIT_KEYS[DiskPlugin.GCE_PD]: DEFAULT_MAX_GCE_PD,
        IN_TREE_LIMIT_KEYS[DiskPlugin.AZURE_DISK]: DEFAULT_MAX_AZURE_DISK,
    }


def node_attach_limits(
    allocatable: Mapping[str, int],
    csi_limits: Mapping[str, int] | None,
    labels: Mapping[str, str] | None = None,
    max_pd_volumes: int | None = None,
) -> dict[str, int]:
    """A node's limit per key: the in-tree types' defaults (`in_tree_limits`, by the node's
    instance type label), its `attachable-volumes-*` allocatable (milli-units here) over
    them, then its CSINode's counts, which win."""
    labels = labels or {}
    instance = next((labels[k] for k in INSTANCE_TYPE_LABELS if k in labels), "")
    limits = dict(in_tree_limits(instance, max_pd_volumes))
    for name, amount in allocatable.items():
        if name.startswith(ATTACH_LIMIT_PREFIX):
            limits[name] = amount // 1000
    if csi_limits:
        limits.update(csi_limits)
    return limits


def exceeds_attach_limits(
    new: Mapping[str, str],
    attached: Mapping[str, str],
    limits: Mapping[str, int],
    new_counts: Mapping[str, int] | None = None,
) -> bool:
    """True when the volumes a pod brings (`new`: unique name -> limit key) take some driver
    past the node's limit, counting the volumes already `attached` once each (a volume the
    node already has adds nothing).

    `new_counts` (new's volumes per key, which a caller checking many nodes keeps) spares
    counting `new` again: the cost per node is then its attached volumes, not the pod's,
    which may name thousands of disks."""
    counts = new_counts if new_counts is not None else Counter(new.values())
    if not any(key in limits for key in counts):
        return False
    present: dict[str, int] = {}
    shared: dict[str, int] = {}
    for unique, key in attached.items():
        if key in counts:
            present[key] = present.get(key, 0) + 1
            if unique in new:
                shared[key] = shared.get(key, 0) + 1
    for key, count in counts.items():
        limit = limits.get(key)
        if limit is None:
            continue
        adding = count - shared.get(key, 0)
        # Upstream's CSI filter checks only the drivers a pod adds a volume of; its in-tree
        # filters check every type the pod mounts, so a node already past its limit (lowered
        # since, or pods bound by name) takes no pod of that type at all.
        if (adding or not key.startswith(CSI_ATTACH_LIMIT_PREFIX)) and present.get(
            key, 0
        ) + adding > limit:
            return True
    return False


def csi_node_limits(raw: Mapping[str, Any]) -> dict[str, int]:
    """A raw CSINode's limits: limit key -> `allocatable.count`, for the drivers that set one."""
    limits: dict[str, int] = {}
    for driver in (raw.get("spec") or {}).get("drivers") or ():
        if not isinstance(driver, Mapping):
            continue
        count = (driver.get("allocatable") or {}).get("count")
        if isinstance(count, int) and not isinstance(count, bool) and driver.get("name"):
            limits[attach_limit_key(str(driver["name"]))] = count
    return limits


# --- parsing raw objects (for the controller) ----------------------------------------------------
def _bytes(value: Any) -> int:
    return to_milli(value) // 1000 if value is not None else 0


_MODES = frozenset(m.value for m in BindingMode)


def persistent_volume(raw: Mapping[str, Any]) -> PersistentVolume:
    """A raw PersistentVolume as the model the snapshot keeps."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    ref = spec.get("claimRef")
    affinity = (spec.get("nodeAffinity") or {}).get("required")
    phase = (raw.get("status") or {}).get("phase")
    return PersistentVolume(
        name=str(meta.get("name", "")),
        storage_class=str(spec.get("storageClassName") or ""),
        capacity=_bytes((spec.get("capacity") or {}).get("storage")),
        access_modes=frozenset(spec.get("accessModes") or ()),
        volume_mode=str(spec.get("volumeMode") or FILESYSTEM),
        node_affinity=node_selector_terms(affinity.get("nodeSelectorTerms")) if affinity else None,
        claim=(str(ref.get("namespace", "")), str(ref.get("name", ""))) if ref else None,
        labels=dict(meta.get("labels") or {}),
        available=phase not in ("Released", "Failed") and not meta.get("deletionTimestamp"),
        csi=_csi_source(spec.get("csi")),
        disk=disk_of(spec),
    )


def _csi_source(raw: Any) -> tuple[str, str] | None:
    if not isinstance(raw, Mapping) or not raw.get("driver"):
        return None
    return str(raw["driver"]), str(raw.get("volumeHandle") or "")


def volume_claim(
    raw: Mapping[str, Any], storage_class: Mapping[str, Any] | None = None
) -> VolumeClaim:
    """A raw PVC and its raw StorageClass (None when the class does not exist) as the model.

    A claim whose class is missing gets the Immediate mode: it waits, as it would upstream.
    """
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    klass = storage_class or {}
    topologies = klass.get("allowedTopologies")
    allowed: tuple[Term, ...] | None = None
    if topologies:
        allowed = tuple(
            Term(
                tuple(
                    Requirement(
                        str(e.get("key", "")), "In", tuple(str(v) for v in e.get("values") or ())
                    )
                    for e in t.get("matchLabelExpressions") or ()
                ),
                (),
            )
            for t in topologies
        )
    selector = spec.get("selector")
    mode = klass.get("volumeBindingMode") or BindingMode.IMMEDIATE.value
    return VolumeClaim(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name", "")),
        volume=spec.get("volumeName") or None,
        storage_class=str(spec.get("storageClassName") or ""),
        binding_mode=BindingMode(mode) if mode in _MODES else BindingMode.IMMEDIATE,
        request=_bytes(((spec.get("resources") or {}).get("requests") or {}).get("storage")),
        access_modes=frozenset(spec.get("accessModes") or ()),
        volume_mode=str(spec.get("volumeMode") or FILESYSTEM),
        selector=parse_selector(selector, "spec.selector", strict=False) if selector else None,
        provisioner=str(klass.get("provisioner") or ""),
        allowed_topologies=allowed,
        deleting=bool(meta.get("deletionTimestamp")),
    )
