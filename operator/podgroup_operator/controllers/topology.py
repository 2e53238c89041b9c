"""Topologies: their levels for the scheduler and the webhook, and their status kept true.

`TopologyLevels` answers `levels_of(name)` from the Topology informer's store, on every replica:
the validating webhook checks a PodGroup's `spec.topologyConstraint` with it, the scheduler
reads the levels a constraint may fall back through.

`TopologyStatusController` runs on the leader. Node events that change what a status counts (a
node added or deleted, its labels or its readiness changed) mark every Topology dirty; a
Topology's own events mark it. Dirty Topologies are recomputed together `delay` seconds after
the first mark (`domain.topology.topology_status`), so a burst of node events costs one
recompute, and each status is written only when it differs from the stored one, with the
resourceVersion it was computed against (a conflict is recomputed from the newer object).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from podgroup_operator.adapters.informers import Store, object_key, resource_version
from podgroup_operator.adapters.kube import JSON, TOPOLOGIES, ApiError, KubeClient
from podgroup_operator.constants import WatchEventType
from podgroup_operator.controllers.background import Background
from podgroup_operator.controllers.clock import LOOP_CLOCK, MonotonicClock, sleep
from podgroup_operator.controllers.isolation import Failures
from podgroup_operator.domain.topology import (
    NodeLabels,
    status_differs,
    stored_levels,
    topology_status,
)
from podgroup_operator.scheduling.filters import node_ready

logger = logging.getLogger(__name__)

COALESCE_SECONDS = 1.0
"""How long after the first change the dirty Topologies are recomputed, all at once."""


class TopologyLevels:
    """The levels of each Topology, as the informer's store holds it."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def levels_of(self, name: str) -> tuple[str, ...] | None:
        """The node label keys of Topology `name`, coarse to fine, as stored; None when there is
        none such (or the Topology CRD is not installed). Levels stored against the rules (with
        the webhook off) are answered as they are: `api.models.level_problems` names what is
        wrong with them."""
        body = self._store.get(name)
        return None if body is None else stored_levels(body)


def _labels(node: Mapping[str, Any]) -> Any:
    return (node.get("metadata") or {}).get("labels")


class TopologyStatusController(Background):
    """Keeps each Topology's status equal to what the nodes say (see the module docstring)."""

    task_name = "topology-status"

    def __init__(
        self,
        kube: KubeClient,
        topologies: Store,
        nodes: Store,
        *,
        delay: float | None = None,
        monotonic: MonotonicClock = LOOP_CLOCK,
    ) -> None:
        self.kube = kube
        self.topologies = topologies
        self.nodes = nodes
        self.delay = COALESCE_SECONDS if delay is None else delay
        self.monotonic = monotonic
        """Times the coalescing `delay` and the back-off of a Topology that failed."""
        self.failures = Failures(
            "status of Topology", logger, metric="topology", monotonic=monotonic
        )
        self.recomputes = 0
        """Rounds of recomputation (each covers every dirty Topology)."""
        self.writes = 0
        self._dirty: set[str] = set()
        self._all = False
        self._wake = asyncio.Event()

    # --- events ------------------------------------------------------------------------------
    def on_node(self, kind: WatchEventType, node: JSON, old: JSON | None) -> None:
        """A node added, deleted, relabelled or turned (un)Ready changes what statuses count;
        anything else (a heartbeat, an image list) does not."""
        if (
            kind is not WatchEventType.MODIFIED
            or old is None
            or _labels(node) != _labels(old)
            or node_ready(node) != node_ready(old)
        ):
            self._all = True
            self._wake.set()

    def on_topology(self, kind: WatchEventType, body: JSON, old: JSON | None) -> None:
        name = object_key(body)
        if kind is WatchEventType.DELETED:
            self._dirty.discard(name)
            self.failures.forget(name)
            return
        self.touch(name)

    def touch(self, name: str) -> None:
        self._dirty.add(name)
        self._wake.set()

    # --- the loop ----------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            await sleep(self.monotonic, self.delay)
            await self.recompute()

    async def recompute(self) -> None:
        """Recompute every dirty Topology from the stores; write those whose status changed."""
        self._wake.clear()
        names = set(self.topologies.object_keys()) if self._all else self._dirty
        self._all, self._dirty = False, set()
        if not names:
            return
        self.recomputes += 1
        nodes = [NodeLabels(_labels(node) or {}, node_ready(node)) for node in self.nodes.values()]
        for name in sorted(names):
            await self.failures.attempt(name, self._reconcile(name, nodes), self.touch)

    async def _reconcile(self, name: str, nodes: list[NodeLabels]) -> None:
        body = self.topologies.get(name)
        if body is None:
            return  # deleted meanwhile
        generation = (body.get("metadata") or {}).get("generation")
        computed = topology_status(stored_levels(body), nodes, generation)
        if not status_differs(body.get("status"), computed):
            return
        patch = {
            "metadata": {"resourceVersion": resource_version(body)},
            "status": computed.to_api(),
        }
        try:
            await self.kube.patch(TOPOLOGIES, name, patch, subresource="status")
        except ApiError as exc:
            if exc.not_found:
                return
            if exc.conflict:
                # Written by someone else meanwhile: the watch brings that version, and its
                # event marks the Topology dirty again.
                return
            raise
        self.writes += 1
