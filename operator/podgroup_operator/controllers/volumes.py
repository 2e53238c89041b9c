"""The scheduler's volume side: claims for the pure core, PVs into its snapshot, and binding.

kube-scheduler's VolumeBinding plugin does three things, and so does this module for the gang
scheduler (the decisions themselves are pure, in scheduling/volumes.py):

1. **Facts.** Every PersistentVolume goes into the snapshot (`on_volume`), so placement knows
   which static PVs each node can reach; each waiting gang's `GangRequest.claims` are its
   members' PVCs resolved with their StorageClass (`claims_for`), read from the informers'
   stores. For attach limits (NodeVolumeLimits), each CSINode's limits and each claim's class
   provisioner go into the snapshot too (`on_csi_node`, `on_claim`): the volumes of pods
   already on a node are counted from them. A change of any may let a waiting gang fit:
   `changed` wakes the scheduler.
2. **Binding before the pod** (`prepare`). A placement's `Binding.volumes` say, per claim that
   waits for its first consumer, "bind PV X" or "provision on node N". As upstream's volume
   binder: set the PV's `spec.claimRef` to the claim (with the PV's resourceVersion as the
   precondition, so a PV taken meanwhile is a conflict, not a double binding; the PV
   controller of kube-controller-manager then binds the claim), or annotate the claim with
   `volume.kubernetes.io/selected-node` for its provisioner; then wait until every such claim is
   Bound, and only then bind the pods. A gang's claims are all prepared before any of its pods
   is bound, so a failure leaves no member bound without its volume.
3. **Failure** (`VolumeBindingError`): the scheduler un-assumes the gang's pods and reports the
   cause in the PodGroup's status; the gang is decided again after a backoff (by then the watch
   has brought the PV or claim as it is now).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    JSON,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    ApiError,
    KubeClient,
)
from podgroup_operator.constants import WatchEventType
from podgroup_operator.scheduling import (
    Binding,
    Snapshot,
    VolumeAction,
    VolumeClaim,
    VolumeDecision,
    persistent_volume,
    volume_claim,
)
from podgroup_operator.scheduling.podinfo import pod_claims
from podgroup_operator.scheduling.volumes import SELECTED_NODE_ANNOTATION, csi_node_limits

logger = logging.getLogger(__name__)

ClaimKey = tuple[str, str]

BOUND = "Bound"
"""`status.phase` of a claim bound to its volume."""
BIND_TIMEOUT_SECONDS = 120.0
"""How long a gang waits for its claims to be Bound after the scheduler bound or asked for
their volumes (kube-scheduler's `bindTimeoutSeconds`, 600 s there; a static PV binds in a
second, and a provisioner that takes longer than this is retried with a fresh decision)."""


class Lookup(Protocol):
    """What is read from an informer's store: an object by `namespace/name` (or `name`)."""

    def get(self, key: str) -> JSON | None: ...

    def values(self) -> Iterable[JSON]: ...


class VolumeBindingError(Exception):
    """A claim could not be given its volume; the message names the claim and the cause."""


def claim_is_bound(claim: Mapping[str, Any]) -> bool:
    return bool((claim.get("spec") or {}).get("volumeName")) and (
        (claim.get("status") or {}).get("phase") == BOUND
    )


def _claim_facts(claim: Mapping[str, Any] | None) -> tuple[Any, ...]:
    """What placement reads of a claim (not its resourceVersion or managed annotations)."""
    if claim is None:
        return ()
    meta = claim.get("metadata") or {}
    return (
        claim.get("spec"),
        (claim.get("status") or {}).get("phase"),
        bool(meta.get("deletionTimestamp")),
    )


def with_volumes(
    bindings: Sequence[Binding], gang_of: Callable[[str], Any]
) -> tuple[list[Binding], list[list[Binding]]]:
    """Split a batch of bindings: those of gangs without volume decisions (bind at once), and
    the gangs with some (each a list: prepared together, then bound)."""
    gangs: dict[Any, list[Binding]] = {}
    for binding in bindings:
        gangs.setdefault(gang_of(binding.pod_uid) or binding.pod_uid, []).append(binding)
    plain: list[Binding] = []
    prepared: list[list[Binding]] = []
    for members in gangs.values():
        if any(b.volumes for b in members):
            prepared.append(members)
        else:
            plain.extend(members)
    return plain, prepared


class VolumeBinder:
    """Claims and volumes for one scheduler (see the module docstring)."""

    def __init__(
        self,
        kube: KubeClient,
        volumes: Lookup | None = None,
        claims: Lookup | None = None,
        classes: Lookup | None = None,
        *,
        bind_timeout_seconds: float = BIND_TIMEOUT_SECONDS,
    ) -> None:
        self.kube = kube
        self.volumes: Lookup = volumes if volumes is not None else {}
        """PersistentVolumes by name (the volumes informer's store)."""
        self.claims: Lookup = claims if claims is not None else {}
        """PersistentVolumeClaims by `namespace/name` (the claims informer's store)."""
        self.classes: Lookup = classes if classes is not None else {}
        """StorageClasses by name."""
        self.bind_timeout_seconds = bind_timeout_seconds
        self.snapshot: Snapshot | None = None
        self.changed: Callable[[], None] = lambda: None
        self.exclusive: Callable[..., None] = lambda call, *args: call(*args)
        """How a change reaches the snapshot: the scheduler's, which holds it back while a
        worker thread decides on the snapshot (controllers/offload.py)."""
        self._waiters: dict[ClaimKey, list[asyncio.Future[None]]] = {}

    def attach(
        self,
        snapshot: Snapshot,
        changed: Callable[[], None],
        exclusive: Callable[..., None] | None = None,
    ) -> None:
        """The snapshot PVs go into, what to call when a waiting gang may now fit, and how to
        reach the snapshot (`exclusive(call, *args)`: at once, or after a decision using it)."""
        self.snapshot = snapshot
        self.changed = changed
        if exclusive is not None:
            self.exclusive = exclusive

    # --- informer events ---------------------------------------------------------------------
    def on_volume(self, kind: WatchEventType, pv: JSON, old: JSON | None) -> None:
        self.exclusive(self._on_volume, kind, pv, old)

    def _on_volume(self, kind: WatchEventType, pv: JSON, old: JSON | None) -> None:
        if self.snapshot is None:
            return
        name = str((pv.get("metadata") or {}).get("name") or "")
        if kind is WatchEventType.DELETED:
            self.snapshot.volumes.remove_volume(name)
            self.changed()
            return
        volume = persistent_volume(pv)
        if old is not None and persistent_volume(old) == volume:
            return
        self.snapshot.volumes.set_volume(volume)
        self.changed()

    def on_claim(self, kind: WatchEventType, claim: JSON, old: JSON | None) -> None:
        meta = claim.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if kind is WatchEventType.DELETED:
            self._resolve(key, VolumeBindingError(f"PVC {key[1]!r} was deleted"))
        elif claim_is_bound(claim):
            self._resolve(key, None)
        if kind is WatchEventType.DELETED or _claim_facts(claim) != _claim_facts(old):
            provisioner = "" if kind is WatchEventType.DELETED else self._provisioner(claim)
            self.exclusive(self._set_claim_provisioner, key, provisioner)
            self.changed()

    def _provisioner(self, claim: JSON) -> str:
        class_name = (claim.get("spec") or {}).get("storageClassName")
        klass = self.classes.get(str(class_name)) if class_name else None
        return str((klass or {}).get("provisioner") or "")

    def _set_claim_provisioner(self, key: ClaimKey, provisioner: str) -> None:
        if self.snapshot is not None:
            self.snapshot.volumes.set_claim_provisioner(key, provisioner)

    def on_storage_class(self, kind: WatchEventType, body: JSON, old: JSON | None) -> None:
        """A class made after its claims, or deleted, changes what they count against a
        node's attach limits (their provisioner's driver): each claim of it is told again."""
        name = (body.get("metadata") or {}).get("name")
        provisioner = "" if kind is WatchEventType.DELETED else str(body.get("provisioner") or "")
        if old is None or kind is WatchEventType.DELETED or old.get("provisioner") != provisioner:
            for claim in list(self.claims.values()):
                if (claim.get("spec") or {}).get("storageClassName") == name:
                    meta = claim.get("metadata") or {}
                    key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
                    self.exclusive(self._set_claim_provisioner, key, provisioner)
        self.changed()

    def on_csi_node(self, kind: WatchEventType, body: JSON, old: JSON | None) -> None:
        limits = {} if kind is WatchEventType.DELETED else csi_node_limits(body)
        if (
            old is not None
            and kind is not WatchEventType.DELETED
            and csi_node_limits(old) == limits
        ):
            return
        name = str((body.get("metadata") or {}).get("name") or "")
        self.exclusive(self._set_csi_limits, name, limits)
        self.changed()

    def _set_csi_limits(self, name: str, limits: dict[str, int]) -> None:
        if self.snapshot is not None:
            self.snapshot.volumes.set_csi_limits(name, limits)

    # --- requests ------------------------------------------------------------------------------
    def claims_for(self, pods: Iterable[Mapping[str, Any]]) -> dict[ClaimKey, VolumeClaim]:
        """The members' claims with their StorageClass; a claim missing from the store is left
        out (the core then says it was not found, and the gang waits for it)."""
        found: dict[ClaimKey, VolumeClaim] = {}
        for pod in pods:
            if not (pod.get("spec") or {}).get("volumes"):
                continue
            namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
            for name in pod_claims(pod):
                key = (namespace, name)
                if key in found:
                    continue
                raw = self.claims.get(f"{namespace}/{name}")
                if raw is None:
                    continue
                class_name = (raw.get("spec") or {}).get("storageClassName")
                klass = self.classes.get(str(class_name)) if class_name else None
                found[key] = volume_claim(raw, klass)
        return found

    # --- binding -------------------------------------------------------------------------------
    async def prepare(self, bindings: Sequence[Binding]) -> None:
        """Carry out every volume decision of these bindings (one gang), then wait until each
        claim they name is Bound. Raises `VolumeBindingError` naming the claim that failed."""
        decisions: dict[ClaimKey, VolumeDecision] = {}
        for binding in bindings:
            for decision in binding.volumes:
                decisions.setdefault(decision.key, decision)
        if not decisions:
            return
        await asyncio.gather(*(self._carry_out(d) for d in decisions.values()))
        try:
            async with asyncio.timeout(self.bind_timeout_seconds):
                await asyncio.gather(*(self._wait_bound(key) for key in decisions))
        except TimeoutError:
            waiting = sorted(
                name
                for (namespace, name) in decisions
                if not claim_is_bound(self.claims.get(f"{namespace}/{name}") or {})
            )
            raise VolumeBindingError(
                f"PVC(s) {', '.join(waiting)} not Bound within {self.bind_timeout_seconds:.0f}s "
                "after their volumes were chosen"
            ) from None

    async def _carry_out(self, decision: VolumeDecision) -> None:
        claim = self.claims.get(f"{decision.namespace}/{decision.claim}")
        if claim is None:
            raise VolumeBindingError(f"PVC {decision.claim!r} is gone")
        if claim_is_bound(claim):
            return
        try:
            if decision.action is VolumeAction.BIND:
                await self._bind_volume(decision, claim)
            else:
                await self._select_node(decision, claim)
        except ApiError as exc:
            target = (
                f"PV {decision.volume!r}"
                if decision.action is VolumeAction.BIND
                else f"PVC {decision.claim!r}"
            )
            raise VolumeBindingError(
                f"{decision.action} for PVC {decision.claim!r} failed: {target}: "
                f"{exc.status} {exc.message}"
            ) from exc

    async def _bind_volume(self, decision: VolumeDecision, claim: JSON) -> None:
        """Point the PV at the claim, as kube-scheduler's volume binder does (it then waits
        for the PV controller to bind the claim). The PV's resourceVersion is the precondition:
        a PV changed or taken since the decision is a 409, never a second claim on it."""
        assert decision.volume is not None
        raw = self.volumes.get(decision.volume)
        if raw is None:
            raise VolumeBindingError(f"PV {decision.volume!r} is gone")
        pv = persistent_volume(raw)
        meta = claim.get("metadata") or {}
        claim_ref = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "namespace": decision.namespace,
            "name": decision.claim,
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        }
        patch: JSON = {
            "metadata": {"resourceVersion": (raw.get("metadata") or {}).get("resourceVersion")},
            "spec": {"claimRef": claim_ref},
        }
        if pv.claim != decision.key:  # not pre-bound by a person: say a controller bound it
            patch["metadata"]["annotations"] = {c.ANNOTATION_BOUND_BY_CONTROLLER: "yes"}
        await self.kube.patch(PERSISTENT_VOLUMES, decision.volume, patch)

    async def _select_node(self, decision: VolumeDecision, claim: JSON) -> None:
        """Ask the claim's provisioner for a volume reachable from the chosen node."""
        meta = claim.get("metadata") or {}
        if (meta.get("annotations") or {}).get(SELECTED_NODE_ANNOTATION) == decision.node:
            return
        patch = {
            "metadata": {
                "resourceVersion": meta.get("resourceVersion"),
                "annotations": {SELECTED_NODE_ANNOTATION: decision.node},
            }
        }
        await self.kube.patch(PERSISTENT_VOLUME_CLAIMS, decision.claim, patch, decision.namespace)

    async def _wait_bound(self, key: ClaimKey) -> None:
        if claim_is_bound(self.claims.get(f"{key[0]}/{key[1]}") or {}):
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, []).append(future)
        try:
            await future
        finally:
            waiters = self._waiters.get(key)
            if waiters is not None:
                if future in waiters:
                    waiters.remove(future)
                if not waiters:
                    del self._waiters[key]

    def _resolve(self, key: ClaimKey, error: Exception | None) -> None:
        for future in self._waiters.pop(key, ()):
            if not future.done():
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)
