"""The one wiring point: the client, the informers, and the controllers they feed, in order.

One place, typed and explicit, because the parts depend on each other in order (the scheduler
publishes verdicts to the status reconciler, both read the informers' stores, the quota webhooks
need the stores synced):

1. `KubeClient` from the kubeconfig (or in-cluster credentials), and a small one of its own for
   the leader election's Lease;
2. `Informers`: one list+watch per kind (pods, nodes, PodGroups, ResourceQuotas, for
   volume binding PersistentVolumes, PersistentVolumeClaims and StorageClasses, the
   PodDisruptionBudgets preemption honours, Topologies, whose levels the PodGroup webhook
   and the scheduler read through `Informers.levels_of`, and other schedulers' PodGroup kinds,
   each optional, which the leader's `DialectMirrors` mirrors into ours), always
   cluster-wide for pods and nodes, because placement must see every bound pod whatever
   namespaces the operator handles;
3. the `QuotaService`, fed by the informers on every replica (admission webhooks answer on all);
4. once the informers are synced and this replica wins the Lease (`controllers/leader.py`;
   without election, at once): the `StatusReconciler` and the `GangScheduler`, registered as
   informer handlers with a replay of the stores, so a new leader rebuilds its whole state from
   what the informers hold (and from PodGroup status), the quota service's release and status
   work, and the `TopologyStatusController`. Losing the lead stops them and drops their state;
   a clean stop releases the Lease.
   With `--write-process` (the default), the scheduler's writes (binds, pod Events) go
   through a second client whose requests a child process sends (adapters/writer.py); reads
   and status writes stay with the first, so that a status PATCH never waits behind hundreds
   of binds.

Handlers here stay tiny: they route an event to the consumers that care and never raise into
the informer (each consumer isolates its own failures).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator import metrics
from podgroup_operator.adapters import heap
from podgroup_operator.adapters.informers import Handler, IndexView, Informer
from podgroup_operator.adapters.kube import (
    CSI_NODES,
    ELASTIC_QUOTAS,
    JSON,
    KOORD_ELASTIC_QUOTAS,
    NODES,
    PDBS,
    PDBS_V1BETA1,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODGROUPS,
    PODS,
    PROVISIONING_REQUESTS,
    RESOURCE_QUOTAS,
    STORAGE_CLASSES,
    TOPOLOGIES,
    FencedTransport,
    KubeClient,
)
from podgroup_operator.adapters.record_key import SecretRecordKey
from podgroup_operator.adapters.slim import (
    SharedValues,
    slim_csi_node,
    slim_node,
    slim_pod,
    without_managed_fields,
)
from podgroup_operator.adapters.writer import WriterTransport, writer_connections
from podgroup_operator.api.keys import GroupKey, pod_uid
from podgroup_operator.constants import WatchEventType
from podgroup_operator.controllers.dialects import (
    DialectMirrors,
    dialect_informers,
    install_dialect_crds,
)
from podgroup_operator.controllers.elastic_quotas import ElasticQuotaController, QuotaSource
from podgroup_operator.controllers.leader import LeaderElector
from podgroup_operator.controllers.preemption import budgets_of
from podgroup_operator.controllers.provisioning import Provisioning
from podgroup_operator.controllers.quota import QuotaService
from podgroup_operator.controllers.scheduler import GangScheduler
from podgroup_operator.controllers.status import StatusReconciler
from podgroup_operator.controllers.topology import TopologyLevels, TopologyStatusController
from podgroup_operator.controllers.volumes import VolumeBinder
from podgroup_operator.domain.gang_groups import GangGroupTrust
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.scheduling.elastic.tree import QuotaTree
from podgroup_operator.scheduling.preemption import DisruptionBudget
from podgroup_operator.settings import OperatorSettings

logger = logging.getLogger(__name__)

LEASE_CONNECTIONS = 3
"""The Lease client's pool (`Runtime.lease_kube`): the election sends one request at a time,
and a candidate watches the Lease meanwhile (`LeaderElector._watch_for_release`)."""


BY_GROUP = "by-group"
"""Index of pods by the PodGroup they belong to."""
BY_KEY = "by-key"
"""Index of PodGroups by (namespace, name)."""
BY_NAMESPACE = "by-namespace"


CATCH_UP_QUIET_SECONDS = 0.2
"""A new leader's pod watch silent this long has nothing on its way to catch up with
(docs/decisions/009-leader-hand-over.md)."""
CATCH_UP_SECONDS = 5.0
"""The longest a new leader's first placement waits for its pod watch (`Leading._catch_up`;
docs/decisions/009-leader-hand-over.md)."""
LOOP_LAG_PERIOD_SECONDS = 0.5
"""How often the event loop's lag is sampled (`measure_loop_lag`)."""


async def measure_loop_lag(
    observe: Callable[[float], None],
    period: float = LOOP_LAG_PERIOD_SECONDS,
    *,
    held: Callable[[float, float, float], None] | None = None,
) -> None:
    """Sleep `period` again and again and report how late each wake-up came: the time the loop
    was held by something (a long gang decision, a collector pause, a burst of events) while
    lease renewal, webhooks and probes waited. Every replica measures its own loop. A lag of
    LOOP_HELD_SECONDS or more is also told to `held` (lag, `time.monotonic()` at the sleep's
    start, the process's CPU seconds since then)."""
    loop = asyncio.get_running_loop()
    while True:
        start = loop.time()
        began = time.monotonic()
        cpu = time.process_time()
        await asyncio.sleep(period)
        lag = max(0.0, loop.time() - start - period)
        observe(lag)
        if held is not None and lag >= LOOP_HELD_SECONDS:
            held(lag, began, time.process_time() - cpu)


LOOP_HELD_SECONDS = 0.25
"""A lag from which the loop is said to have been held, in one log line (`HeldLoop`)."""
LOOP_HELD_LOG_INTERVAL_SECONDS = 10.0
"""At most one such line per this many seconds; the ones left out are counted in the next."""


class HeldLoop:
    """Say in the log that the event loop was held, and whether the garbage collector held it.

    The lag histogram says how often the loop was held, not when nor by what. The line has the
    log's timestamp, how much CPU the process had in that time (a process held off the CPU by a
    busy machine looks like a held loop), and the collections of SLOW_PAUSE_SECONDS or more that
    ended meanwhile, with their own CPU time (`heap.pauses`, recorded by the collector's
    callback, which must not log)."""

    def __init__(
        self,
        pauses: heap.Pauses = heap.pauses,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pauses = pauses
        self.clock = clock
        self._quiet_until = 0.0
        self._left_out = 0

    def __call__(self, lag: float, since: float, cpu: float) -> None:
        now = self.clock()
        if now < self._quiet_until:
            self._left_out += 1
            return
        self._quiet_until = now + LOOP_HELD_LOG_INTERVAL_SECONDS
        window = now - since
        ran = f"the process ran {cpu:.2f} s of the last {window:.2f} s"
        if cpu < window / 2:
            ran += " (it waited for a core)"
        collections = self.pauses.slow_since(since)
        if collections:
            took = sum(pause.seconds for pause in collections)
            each = "; ".join(
                f"generation {pause.generation}, {pause.cpu:.2f} s of CPU, "
                f"{pause.freed} object(s) freed"
                for pause in collections
            )
            cause = f"the garbage collector took {took:.2f} s of it ({each})"
        else:
            cause = (
                f"no garbage collection of {heap.SLOW_PAUSE_SECONDS:g} s or more: a long "
                "decision, or a burst of events"
            )
        left_out = (
            f"; held {self._left_out} more time(s) since the last such line"
            if self._left_out
            else ""
        )
        self._left_out = 0
        logger.warning(
            "the event loop was held %.2f s (lease renewal, watches, webhooks waited): %s; %s%s",
            lag,
            ran,
            cause,
            left_out,
        )


def _namespace_of(obj: JSON) -> Hashable | None:
    return (obj.get("metadata") or {}).get("namespace")


def _group_key(body: JSON) -> GroupKey:
    meta = body.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        logger.error("leading did not start: %s", exc, exc_info=exc)


def _may_flip_phase(kind: WatchEventType, pod: JSON, old: JSON | None) -> bool:
    """A member that changed phase, or went away, may flip its group's phase."""
    if kind is WatchEventType.DELETED:
        return True
    if old is None:
        return False
    return (pod.get("status") or {}).get("phase") != (old.get("status") or {}).get("phase") or (
        bool((pod.get("metadata") or {}).get("deletionTimestamp"))
        != bool((old.get("metadata") or {}).get("deletionTimestamp"))
    )


def _keys_changed(pod: JSON, old: JSON | None) -> bool:
    """The pod is new, or its labels or annotations (where membership keys live) changed."""
    if old is None:
        return True
    meta, before = pod.get("metadata") or {}, old.get("metadata") or {}
    return meta.get("labels") != before.get("labels") or meta.get("annotations") != before.get(
        "annotations"
    )


@dataclass
class Informers:
    """The operator's informers and the indexes its controllers read."""

    pods: Informer
    nodes: Informer
    podgroups: Informer
    quotas: Informer
    volumes: Informer
    """PersistentVolumes (cluster-scoped): the snapshot's static PVs."""
    claims: Informer
    """PersistentVolumeClaims: members' claims, and when they are Bound."""
    storage_classes: Informer
    """StorageClasses: a claim's binding mode and provisioner."""
    csi_nodes: Informer
    """CSINodes: each node's attach limit per CSI driver."""
    pdbs: Informer
    """PodDisruptionBudgets, which preemption honours where it can."""
    topologies: Informer
    """Topologies (cluster-scoped): the levels a PodGroup's topologyConstraint names."""
    provisioning_requests: Informer
    """cluster-autoscaler's ProvisioningRequests, the gangs' own among them
    (controllers/provisioning.py); empty without that CRD."""
    elastic_quotas: Informer
    """ElasticQuotas of our group (scheduler-plugins' kind): the quota tree."""
    koord_quotas: Informer
    """Koordinator's ElasticQuotas (`scheduling.sigs.k8s.io`), where that CRD is served."""
    dialects: dict[c.Dialect, Informer] = field(default_factory=dict)
    """Other schedulers' PodGroups (Volcano, Koordinator, native), each kind optional:
    mirrored into ours by `DialectMirrors` (controllers/dialects.py)."""
    members: IndexView = field(init=False)
    """Pods by PodGroup key."""
    groups: IndexView = field(init=False)
    """PodGroups by (namespace, name): at most one each."""
    levels: TopologyLevels = field(init=False)

    def __post_init__(self) -> None:
        self.levels = TopologyLevels(self.topologies.store)
        self.members = self.pods.store.add_index(BY_GROUP, group_key_of)
        self.groups = self.podgroups.store.add_index(BY_KEY, _group_key)
        for informer in (self.pods, self.podgroups, self.quotas):
            informer.store.add_index(BY_NAMESPACE, _namespace_of)

    @classmethod
    def build(cls, kube: KubeClient) -> Informers:
        return cls(
            pods=Informer(kube, PODS, functools.partial(slim_pod, share=SharedValues())),
            nodes=Informer(kube, NODES, functools.partial(slim_node, share=SharedValues())),
            podgroups=Informer(
                kube,
                PODGROUPS,
                without_managed_fields,
                missing=f"install the PodGroup CRD ({c.CRD_INSTALL_HINT}); until then no "
                "PodGroup is read, and a replica starting meanwhile does not lead",
            ),
            quotas=Informer(kube, RESOURCE_QUOTAS, without_managed_fields),
            volumes=Informer(kube, PERSISTENT_VOLUMES, without_managed_fields),
            claims=Informer(kube, PERSISTENT_VOLUME_CLAIMS, without_managed_fields),
            storage_classes=Informer(kube, STORAGE_CLASSES, without_managed_fields),
            csi_nodes=Informer(
                kube,
                CSI_NODES,
                slim_csi_node,
                optional="attach limits are not counted until the operator may list and "
                f"watch {CSI_NODES.plural}.{CSI_NODES.group} (deploy/base/rbac.yaml)",
            ),
            pdbs=Informer(kube, PDBS, without_managed_fields, fallbacks=(PDBS_V1BETA1,)),
            topologies=Informer(
                kube,
                TOPOLOGIES,
                without_managed_fields,
                optional="topology constraints name no Topology (each is reported missing) "
                f"until the Topology CRD is installed ({c.CRD_INSTALL_HINT}) and the operator "
                f"may list and watch {c.TOPOLOGY_PLURAL}.{c.GROUP} (deploy/base/rbac.yaml)",
            ),
            provisioning_requests=Informer(
                kube,
                PROVISIONING_REQUESTS,
                without_managed_fields,
                optional="gangs refused for room ask for no nodes (provisioning stays off) "
                f"until cluster-autoscaler's {c.PROVISIONING_CRD_NAME} CRD is installed and "
                f"the operator may list and watch {c.PROVISIONING_PLURAL}."
                f"{c.PROVISIONING_GROUP} (deploy/base/rbac.yaml)",
            ),
            dialects=dialect_informers(kube),
            elastic_quotas=Informer(
                kube,
                ELASTIC_QUOTAS,
                without_managed_fields,
                optional="no ElasticQuota is read, and no gang is held to one, until the "
                f"ElasticQuota CRD is installed ({c.CRD_INSTALL_HINT}) and the operator may list "
                f"and watch {c.ELASTIC_QUOTA_CRD_NAME} (deploy/base/rbac.yaml)",
            ),
            koord_quotas=Informer(
                kube,
                KOORD_ELASTIC_QUOTAS,
                without_managed_fields,
                name=f"{c.ELASTIC_QUOTA_PLURAL}.{c.KOORD_QUOTA_GROUP}",
                optional="Koordinator's ElasticQuotas are not read: its CRD "
                f"({c.ELASTIC_QUOTA_PLURAL}.{c.KOORD_QUOTA_GROUP}) is not served here, or the "
                "operator may not list and watch it",
            ),
        )

    def all(self) -> tuple[Informer, ...]:
        return (
            self.nodes,
            self.pods,
            self.podgroups,
            self.quotas,
            self.volumes,
            self.claims,
            self.storage_classes,
            self.csi_nodes,
            self.pdbs,
            self.topologies,
            self.provisioning_requests,
            *self.dialects.values(),
            self.elastic_quotas,
            self.koord_quotas,
        )

    def topology_levels(self) -> dict[str, tuple[str, ...]]:
        """Every Topology's levels by name (what a Volcano networkTopology's tiers map to)."""
        found = {}
        for name in self.topologies.store.object_keys():
            levels = self.levels.levels_of(name)
            if levels:
                found[name] = levels
        return found

    def levels_of(self, name: str) -> tuple[str, ...] | None:
        """The node label keys of Topology `name`, coarse to fine; None: no such Topology."""
        return self.levels.levels_of(name)

    async def topologies_synced(self, timeout: float) -> bool:
        """Wait until the Topology informer has listed once (at most `timeout` seconds); False
        when it has not, and `levels_of` may not know a Topology that exists."""
        try:
            async with asyncio.timeout(timeout):
                await self.topologies.synced.wait()
        except TimeoutError:
            return False
        return True

    def budgets(self) -> list[DisruptionBudget]:
        """The PodDisruptionBudgets for the preemption planner."""
        return budgets_of(self.pdbs.store.objects(), v1beta1=self.pdbs.kind == PDBS_V1BETA1)

    @property
    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.all())

    async def wait_synced(self) -> None:
        await asyncio.gather(*(informer.synced.wait() for informer in self.all()))

    async def objects(self, namespace: str) -> tuple[list[JSON], list[JSON], list[JSON]]:
        """A namespace's quotas, PodGroups and pods from the stores (the quota ledger's source)."""
        await self.wait_synced()
        return (
            list(self.quotas.store.index(BY_NAMESPACE).get(namespace)),
            list(self.podgroups.store.index(BY_NAMESPACE).get(namespace)),
            list(self.pods.store.index(BY_NAMESPACE).get(namespace)),
        )


class Leading:
    """What only the leader runs: status, scheduling, and the quota's release and status work."""

    def __init__(self, runtime: Runtime) -> None:
        settings = runtime.settings
        informers = runtime.informers
        self.runtime = runtime
        kube, writer = runtime.kube, runtime.writer
        elector = runtime.elector
        self.fences: list[FencedTransport] = []
        if elector is not None:
            # Every write of the leader's controllers goes out only while the Lease is held
            # (`LeaderElector.holds`); the informers and the quota ledger (whose records every
            # replica writes, with preconditions) keep the plain client.
            why = f"this replica no longer holds the lease {elector.namespace}/{elector.name}"
            self.fences = [
                FencedTransport(client.transport, elector.holds, why) for client in (kube, writer)
            ]
            kube, writer = (
                KubeClient(fence, client.field_manager)
                for fence, client in zip(self.fences, (kube, writer), strict=True)
            )
        self.status = StatusReconciler(
            kube,
            informers.groups,
            informers.members,
            # The operator's own namespace (POD_NAMESPACE), where its Lease lives too.
            record_key=SecretRecordKey(kube, settings.lease_namespace),
            workers=settings.status_worker_count,
            routine_workers=settings.status_workers,
            namespaces=frozenset(settings.namespaces),
        )
        self.started = 0.0
        self._starting: asyncio.Task[None] | None = None
        self._took: str | None = None
        """The Lease's resourceVersion as this replica took it (`_catch_up`)."""
        self.provisioning = Provisioning(
            kube,
            default_class=settings.provisioning_class,
            available=lambda: informers.provisioning_requests.stats.lists > 0,
            group_body=lambda key: next(iter(informers.groups.get(key, ())), None),
            publish=self.status.set_provisioning,
        )
        self.scheduler = GangScheduler(
            writer,
            informers.groups,
            informers.members,
            publish=self.status.set_verdict,
            default_timeout_seconds=settings.default_schedule_timeout_seconds,
            namespaces=frozenset(settings.namespaces),
            volumes=VolumeBinder(
                kube,
                informers.volumes.store,
                informers.claims.store,
                informers.storage_classes.store,
            ),
            budgets=informers.budgets,
            on_preempted=self.status.set_preempted,
            scheduler_names=frozenset(settings.scheduler_names),
            bind_concurrency=settings.bind_concurrency,
            max_pd_volumes=settings.max_pd_volumes,
            nonstrict_hold_seconds=settings.nonstrict_hold_seconds,
            reservation_timeout_seconds=settings.reservation_timeout_seconds,
            topology_levels=informers.levels_of,
            gang_group_trust=GangGroupTrust.of(settings.gang_group_trust),
            provisioning=self.provisioning,
        )
        self.provisioning.due = self.scheduler.provisioned
        self.topology = TopologyStatusController(
            kube, informers.topologies.store, informers.nodes.store
        )
        self.dialects = DialectMirrors(
            kube,
            informers.podgroups.store,
            informers.dialects,
            informers.topology_levels,
            namespaces=frozenset(settings.namespaces),
        )
        scheduler = self.scheduler
        self.elastic_quotas = ElasticQuotaController(
            kube,
            [
                QuotaSource(informers.elastic_quotas.store, ELASTIC_QUOTAS),
                QuotaSource(informers.koord_quotas.store, KOORD_ELASTIC_QUOTAS),
            ],
            scheduler.snapshot,
            set_tree=self._set_quota_tree,
            waiting=scheduler.quota_queues.waiting,
            busy=lambda: scheduler.offload.deciding,
        )

    def _set_quota_tree(self, tree: QuotaTree | None) -> None:
        """A new ElasticQuota tree: the scheduler charges by it, and Volcano queues map to it."""
        self.scheduler.set_quota_tree(tree)
        self.dialects.on_quota_tree(tree)

    def on_node(self, kind: WatchEventType, node: JSON, old: JSON | None) -> None:
        self.scheduler.on_node(kind, node, old)
        self.topology.on_node(kind, node, old)
        self.elastic_quotas.on_node(kind, node, old)

    def on_pod(self, kind: WatchEventType, pod: JSON, old: JSON | None) -> None:
        self.scheduler.on_pod(kind, pod)
        if kind is WatchEventType.DELETED:
            self.status.pod_gone(pod_uid(pod))
        key = group_key_of(pod)
        previous = None if old is None else group_key_of(old)
        if key is not None:
            if kind is not WatchEventType.DELETED and _keys_changed(pod, old):
                self.status.member_seen(pod)
            urgent = _may_flip_phase(kind, pod, old) and not self.status.starts_short(key, pod, old)
            self.status.touch(key, urgent=urgent)
        if previous is not None and previous != key:
            self.status.touch(previous, urgent=True)  # it left that group

    def on_group(self, kind: WatchEventType, body: JSON, old: JSON | None) -> None:
        key = _group_key(body)
        if kind is WatchEventType.DELETED:
            self.status.touch(key)
        else:
            self.status.group_changed(key, body)
        self.scheduler.on_group(key)

    def _volume_handlers(self) -> list[tuple[Informer, Handler]]:
        informers, volumes = self.runtime.informers, self.scheduler.volumes
        return [
            (informers.volumes, volumes.on_volume),
            (informers.claims, volumes.on_claim),
            (informers.storage_classes, volumes.on_storage_class),
            (informers.csi_nodes, volumes.on_csi_node),
        ]

    def start(self) -> None:
        """Start leading in the background (`_start`): the elector renews the Lease meanwhile."""
        self.started = asyncio.get_running_loop().time()
        elector = self.runtime.elector
        self._took = elector.version if elector is not None else None
        self._starting = asyncio.create_task(self._start(), name="leading-start")
        self._starting.add_done_callback(_log_failure)

    async def _start(self) -> None:
        """Replay the stores to the handlers, then start the controllers.

        The replays come first and whole: the scheduler must know every node and every bound
        pod before it places one, and the status reconciler every member before it counts.
        Each replay lets the event loop run between slices (`Informer.attach`), because the
        Lease's first renewal, the probes and the watches must not wait for 50,000 pods."""
        informers = self.runtime.informers
        # Nodes first, so the snapshot knows every node before the pods bound to them.
        await informers.nodes.attach(self.on_node)
        for informer, handler in self._volume_handlers():
            await informer.attach(handler)
        await informers.pods.attach(self.on_pod)
        await informers.podgroups.attach(self.on_group)
        await informers.topologies.attach(self.topology.on_topology)
        await informers.topologies.attach(self.scheduler.on_topology)
        await informers.provisioning_requests.attach(self.provisioning.on_request)
        for dialect, informer in informers.dialects.items():
            await informer.attach(self.dialects.on_source(dialect))
        await informers.podgroups.attach(self.dialects.on_group)
        self.dialects.start()
        await informers.elastic_quotas.attach(self.elastic_quotas.on_quota)
        await informers.koord_quotas.attach(self.elastic_quotas.on_quota)
        self.elastic_quotas.rebuild()  # the quota tree is in place before the first cycle
        self.status.start()
        await self._catch_up()
        self.scheduler.start()
        self.runtime.quota.publish = self.status.set_quota_view
        self.runtime.quota.start()
        self.topology.start()
        self.elastic_quotas.start()

    async def _catch_up(self) -> None:
        """Before the first placement, let the pod watch bring every change made before this
        replica took the Lease.

        The last leader's final binds were made before this replica took the Lease; a store
        behind them shows their nodes free, and one gang member that a kubelet then refuses
        fails its whole gang (docs/decisions/009-leader-hand-over.md)."""
        if not self._took:
            return
        loop = asyncio.get_running_loop()
        began = loop.time()
        pods = self.runtime.informers.pods
        if await pods.caught_up(self._took, quiet=CATCH_UP_QUIET_SECONDS, timeout=CATCH_UP_SECONDS):
            logger.info(
                "the pod watch at resourceVersion %s, the Lease taken at %s: placing after %.2fs",
                pods.resource_version,
                self._took,
                loop.time() - began,
            )
        else:
            logger.warning(
                "the pod watch had not brought what changed before this replica took the Lease "
                "(resourceVersion %s) within %.0fs; placing anyway: a node the last leader filled "
                "just before may still look free, and its kubelet would refuse what is placed "
                "there (OutOfcpu)",
                self._took,
                CATCH_UP_SECONDS,
            )

    async def stop(self) -> None:
        if self._starting is not None:
            self._starting.cancel()  # still replaying: the controllers never start
            await asyncio.gather(self._starting, return_exceptions=True)
        informers = self.runtime.informers
        informers.nodes.remove_handler(self.on_node)
        informers.pods.remove_handler(self.on_pod)
        informers.podgroups.remove_handler(self.on_group)
        informers.topologies.remove_handler(self.topology.on_topology)
        informers.topologies.remove_handler(self.scheduler.on_topology)
        informers.provisioning_requests.remove_handler(self.provisioning.on_request)
        for dialect, informer in informers.dialects.items():
            informer.remove_handler(self.dialects.on_source(dialect))
        informers.podgroups.remove_handler(self.dialects.on_group)
        informers.elastic_quotas.remove_handler(self.elastic_quotas.on_quota)
        informers.koord_quotas.remove_handler(self.elastic_quotas.on_quota)
        for informer, handler in self._volume_handlers():
            informer.remove_handler(handler)
        await self.dialects.stop()
        await self.topology.stop()
        await self.elastic_quotas.stop()
        await self.scheduler.stop()
        await self.provisioning.stop()
        await self.status.stop()
        await self.runtime.quota.stop()
        self.runtime.quota.publish = lambda key, view: None
        refused = sum(fence.refused for fence in self.fences)
        if refused:
            metrics.FENCED_WRITES.inc(refused)
            logger.warning(
                "%d write(s) not sent: the lease was last held more than the renew deadline "
                "ago (the process stood still, or the API server did not answer)",
                refused,
            )


class Runtime:
    """Everything the operator runs, started and stopped as one."""

    def __init__(
        self,
        settings: OperatorSettings,
        kube: KubeClient,
        writer: KubeClient | None = None,
        lease_kube: KubeClient | None = None,
    ) -> None:
        self.settings = settings
        self.kube = kube
        """Reads: the informers' lists and watches, and every replica's own requests."""
        self.writer = writer or kube
        """The scheduler's writes (binds, Events on pods): the writer process's client
        (adapters/writer.py), or `kube` itself when there is none."""
        self.lease_kube = lease_kube or kube
        """The leader election's reads and writes of the Lease: a client of their own in
        production (`build_runtime`), as kube-scheduler's leader election and a kubelet's
        heartbeats have. `kube`'s connection pool queues requests in turn, and the leader
        fills it (status writes, and the binds without `--write-process`): a renewal queued
        behind them could miss its deadline in a bind flood, and the leader would drop its
        work mid-flood, which is when it matters most."""
        self.informers = Informers.build(kube)
        self.quota = QuotaService(kube, self.informers)
        self.leading: Leading | None = None
        self.elector = (
            LeaderElector(
                self.lease_kube, namespace=settings.lease_namespace, name=c.LEADER_LEASE_NAME
            )
            if settings.leader_election
            else None
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._handing_over: asyncio.Future[None] | None = None

    def _on_pod_for_quota(self, kind: WatchEventType, pod: JSON, old: JSON | None) -> None:
        self.quota.observe_pod(pod, kind)

    def _on_group_for_quota(self, kind: WatchEventType, body: JSON, old: JSON | None) -> None:
        self.quota.observe_group(body, kind)

    def _on_quota(self, kind: WatchEventType, body: JSON, old: JSON | None) -> None:
        self.quota.observe_quota(body, kind)

    async def start(self) -> None:
        """Start the informers; once synced, lead (after winning the election, if enabled).
        With `--dialect-crds install`, the CRDs of other schedulers' kinds that none serves are
        installed first, so their informers find them at once."""
        if self.settings.dialect_crds is c.DialectCRDs.INSTALL:
            await install_dialect_crds(self.kube)
        self.informers.pods.add_handler(self._on_pod_for_quota)
        self.informers.podgroups.add_handler(self._on_group_for_quota)
        self.informers.quotas.add_handler(self._on_quota)
        self._tasks = [
            asyncio.create_task(informer.run(), name=f"informer-{informer.name}")
            for informer in self.informers.all()
        ]
        self._tasks.append(asyncio.create_task(self._lead_when_synced(), name="lead"))
        self._tasks.append(
            asyncio.create_task(
                measure_loop_lag(metrics.EVENT_LOOP_LAG.observe, held=HeldLoop()), name="loop-lag"
            )
        )

    async def _lead_when_synced(self) -> None:
        """Campaign only once synced: a new leader must be able to act on the whole cluster."""
        await self.informers.wait_synced()
        logger.info(
            "informers synced: %s",
            ", ".join(f"{len(i.store)} {i.name}" for i in self.informers.all()),
        )
        if self.elector is None:
            await self.start_leading()
        else:
            await self.elector.run(self.start_leading, self.stop_leading)

    async def start_leading(self) -> None:
        """Build the leader's controllers from the synced stores and start them."""
        await self.informers.wait_synced()
        if self.leading is None:
            self.leading = Leading(self)
            self.leading.start()
            logger.info("leading: scheduling and status writes started")

    async def stop_leading(self) -> None:
        """Stop the leader's controllers and forget their state (a new lead rebuilds it)."""
        leading, self.leading = self.leading, None
        if leading is not None:
            await leading.stop()
            if self.writer is not self.kube:
                # The writer process sends every write handed to it, those of cancelled binds
                # too, and exits: all are answered before the Lease is released (`hand_over`).
                # A bind landing after the next leader has placed on the same room fails a pod
                # (docs/decisions/009-leader-hand-over.md). The next lead starts a new one.
                await self.writer.close()
            logger.info("no longer leading: scheduling and status writes stopped")

    async def hand_over(self) -> None:
        """Stop leading, then release the Lease; done once, for whichever caller comes first
        (SIGTERM as it arrives, `handlers/startup.py`, or `stop`), the others waiting for it.

        Once: two callers each stopping and releasing could release while the other's
        `stop_leading` still had binds to answer (a second caller finds `leading` None)."""
        if self._handing_over is None:
            self._handing_over = asyncio.ensure_future(self._stop_leading_and_release())
        await asyncio.shield(self._handing_over)

    async def _stop_leading_and_release(self) -> None:
        await self.stop_leading()
        if self.elector is not None:
            await self.elector.release()

    async def stop(self) -> None:
        """Stop leading first, then hand the Lease over, then stop watching."""
        await self.hand_over()
        for task in self._tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for client in (self.writer, self.lease_kube):
            if client is not self.kube:  # each is either its own client or `kube`
                await client.close()
        await self.kube.close()

    # --- what /metrics, /readyz and /livez report (controllers/observe.py, metrics.py) --------
    def metric_snapshot(self) -> dict[str, Any]:
        phases = [
            (group.get("status") or {}).get("phase")
            for group in self.informers.podgroups.store.objects()
        ]
        waiting: list[str] = []
        if self.leading is not None:
            for state in self.leading.scheduler.queue.waiting.values():
                waiting.append(str(state.reason) if state.reason else "Pending")
        return {
            "phases": phases,
            "waiting_reasons": waiting,
            "quota": self.quota.usage_by_resource(),
            "informers": {
                informer.name: {
                    "synced": informer.synced.is_set(),
                    "last_event": informer.stats.last_event,
                    "objects": len(informer.store),
                    "lists": informer.stats.lists,
                    "failures": informer.stats.failures,
                    "stalls": informer.stats.stalls,
                }
                for informer in self.informers.all()
            },
            "leader": 1.0 if self.leading is not None else 0.0,
            "binds_allowed": (
                float(self.leading.scheduler.binder.allowed) if self.leading is not None else 0.0
            ),
        }

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        synced = {informer.name: informer.synced.is_set() for informer in self.informers.all()}
        return all(synced.values()), {"informers_synced": synced, "leading": bool(self.leading)}

    def liveness(self, stuck_after: float) -> tuple[bool, dict[str, Any]]:
        """Stuck: a loop with work queued that has not finished any for `stuck_after` s."""
        if self.leading is None:
            return True, {"leading": False}
        now = asyncio.get_running_loop().time()
        started = self.leading.started
        scheduler, status = self.leading.scheduler, self.leading.status
        last_cycle = scheduler.last_cycle or started
        last_done = status.last_done or started
        stuck = {
            "scheduler": bool(scheduler.queue.pending) and now - last_cycle > stuck_after,
            "status": status.backlog > 0 and now - last_done > stuck_after,
        }
        return not any(stuck.values()), {"stuck": stuck, "leading": True}


def build_runtime(settings: OperatorSettings, kube: KubeClient | None = None) -> Runtime:
    """The operator's runtime, with the client from the current kubeconfig unless given (the
    Lease then gets one of its own: `Runtime.lease_kube`), and the scheduler's writes sent by a
    writer process when the settings ask for one."""
    writer = (
        KubeClient(WriterTransport(connections=writer_connections(settings.most_binds_in_flight)))
        if settings.write_process
        else None
    )
    lease_kube = None
    if kube is None:
        kube = KubeClient.from_kubeconfig()
        if settings.leader_election:
            lease_kube = KubeClient.from_kubeconfig(limit=LEASE_CONNECTIONS)
    return Runtime(settings, kube, writer, lease_kube)
