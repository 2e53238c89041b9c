"""A stand-in for cluster-autoscaler on the dev cluster: it answers ProvisioningRequests.

cluster-autoscaler cannot run without a cloud, yet gang-aware autoscaling
(controllers/provisioning.py) must be proven against a real control plane. `SimProvisioner`
plays the autoscaler's part for its two classes, as `sim-nodes --provisioner` or in tests:

* a new request is `Accepted` at once;
* after `delay` seconds, for `best-effort-atomic-scale-up.autoscaling.x-k8s.io`, it adds the
  nodes the request's pod sets need, made from one node template (`NodePool`), all or none:
  `Provisioned`; past `maximum` nodes added in all, or a pod that no template node can hold
  (resources, nodeSelector), it adds nothing: `Failed`, with a message saying why;
  for `check-capacity.autoscaling.x-k8s.io` it adds nothing and says whether the pods fit on
  the free room of the sim nodes now (`Provisioned`, or `Failed`);
* `booking_seconds` after `Provisioned`, a request still there gets `BookingExpired`.

Pods are counted per pod set, each on nodes of its own (no packing across sets), which is what
a node group of identical nodes gives. Other classes are left alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    JSON,
    POD_TEMPLATES,
    PROVISIONING_REQUESTS,
    ApiError,
    KubeClient,
)
from podgroup_operator.api.quantity import to_milli
from podgroup_operator.api.times import rfc3339
from podgroup_operator.scheduling.resources import Resources, copies_that_fit, pod_requests

if TYPE_CHECKING:  # simnodes starts the provisioner: a runtime import would be a cycle
    from podgroup_operator.devcluster.simnodes import NodePool, SimCluster

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.25
"""How often the requests are listed (a dev tool: a list is cheaper to get right than a watch)."""


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Seen:
    accepted_at: datetime
    provisioned_at: datetime | None = None
    done: bool = False


def _condition(kind: c.ProvisioningConditionType, reason: str, message: str, now: datetime) -> JSON:
    return {
        "type": kind.value,
        "status": c.ConditionStatus.TRUE.value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": rfc3339(now),
    }


def nodes_needed(
    template: NodePool, request: Resources, selector: Mapping[str, str], count: int
) -> int | str:
    """Template nodes that hold `count` pods of `request` (and `selector`), or why none can."""
    labels = {**template.labels, **(template.node_labels[0] if template.node_labels else {})}
    wrong = {key: value for key, value in selector.items() if labels.get(key) != value}
    if wrong:
        return f"the template nodes lack the labels {wrong} the pods select"
    allocatable = {name: to_milli(qty) for name, qty in template.allocatable().items()}
    per_node = copies_that_fit(sorted((k, v) for k, v in request.items() if v > 0), allocatable)
    if per_node <= 0:
        return f"a pod asking for {request} does not fit on a template node ({allocatable})"
    return -(-count // per_node)


@dataclass
class SimProvisioner:
    """Answers ProvisioningRequests as cluster-autoscaler would (see the module docstring)."""

    kube: KubeClient
    sim: SimCluster
    template: NodePool
    """The nodes it adds: their shape, labels and taints (`count` is not read); named
    `<template.name_prefix>-<batch>-<i>`."""
    maximum: int = 10
    """Nodes it may add in all."""
    delay: float = 1.0
    booking_seconds: float = 600.0
    clock: Callable[[], datetime] = _now
    added: list[str] = field(default_factory=list)
    """The nodes added so far."""
    expired: list[str] = field(default_factory=list)
    """`namespace/name` of the requests whose booking it expired."""
    _seen: dict[str, _Seen] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> SimProvisioner:
        self._task = asyncio.create_task(self._run(), name="sim provisioner")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        said = False
        while True:
            try:
                await self.step()
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                if not exc.not_found:
                    logger.warning("sim provisioner: %s", exc)
                elif not said:
                    logger.warning(
                        "sim provisioner: %s is not served: install a ProvisioningRequest CRD "
                        "(tests/crds/ has one); until then there is nothing to answer",
                        c.PROVISIONING_CRD_NAME,
                    )
                said = said or exc.not_found
            except Exception as exc:
                logger.warning("sim provisioner: %s", exc)
            await asyncio.sleep(POLL_SECONDS)

    async def step(self) -> None:
        """Answer every request once: what a pass of the autoscaler's loop does."""
        items = (await self.kube.list(PROVISIONING_REQUESTS)).get("items") or []
        live = set()
        for body in items:
            uid = str(body["metadata"]["uid"])
            live.add(uid)
            await self._answer(uid, body)
        for uid in [uid for uid in self._seen if uid not in live]:
            del self._seen[uid]

    async def _answer(self, uid: str, body: JSON) -> None:
        spec = body.get("spec") or {}
        chosen = spec.get("provisioningClassName")
        if chosen not in (
            c.ProvisioningClass.BEST_EFFORT_ATOMIC,
            c.ProvisioningClass.CHECK_CAPACITY,
        ):
            return
        now = self.clock()
        seen = self._seen.get(uid)
        if seen is None:
            seen = self._seen[uid] = _Seen(accepted_at=now)
            await self._set(
                body,
                [_condition(c.ProvisioningConditionType.ACCEPTED, "Accepted", "accepted", now)],
            )
            return
        if seen.provisioned_at is not None and not seen.done:
            if (now - seen.provisioned_at).total_seconds() >= self.booking_seconds:
                seen.done = True
                meta = body["metadata"]
                self.expired.append(f"{meta['namespace']}/{meta['name']}")
                await self._add(
                    body,
                    _condition(
                        c.ProvisioningConditionType.BOOKING_EXPIRED,
                        "BookingExpired",
                        f"the capacity was booked for {self.booking_seconds:g}s",
                        now,
                    ),
                )
            return
        if seen.done or (now - seen.accepted_at).total_seconds() < self.delay:
            return
        outcome = await self._provision(body, chosen)
        if isinstance(outcome, _Refused):
            seen.done = True
            await self._add(
                body,
                _condition(c.ProvisioningConditionType.FAILED, "CapacityIsNotFound", outcome, now),
            )
            return
        seen.provisioned_at = now
        await self._add(
            body,
            _condition(c.ProvisioningConditionType.PROVISIONED, "Provisioned", outcome, now),
        )

    async def _provision(self, body: JSON, chosen: str) -> str:
        """Add the nodes (or check the room): `Provisioned`'s message, or a `_Refused` with
        `Failed`'s."""
        namespace = body["metadata"]["namespace"]
        wanted: list[tuple[Resources, Mapping[str, str], int]] = []
        for pod_set in (body.get("spec") or {}).get("podSets") or ():
            name = str((pod_set.get("podTemplateRef") or {}).get("name") or "")
            try:
                template = await self.kube.get(POD_TEMPLATES, name, namespace)
            except ApiError as exc:
                if exc.not_found:
                    return _Refused(f"PodTemplate {namespace}/{name} not found")
                raise
            pod = {"spec": (template.get("template") or {}).get("spec") or {}}
            selector = pod["spec"].get("nodeSelector") or {}
            wanted.append((pod_requests(pod), selector, int(pod_set.get("count") or 0)))
        total = sum(count for _, _, count in wanted)
        if chosen == c.ProvisioningClass.CHECK_CAPACITY:
            return self._check(wanted, total)
        nodes = 0
        for request, selector, count in wanted:
            needed = nodes_needed(self.template, request, selector, count)
            if isinstance(needed, str):
                return _Refused(needed)
            nodes += needed
        if len(self.added) + nodes > self.maximum:
            return _Refused(
                f"{total} pod(s) need {nodes} more node(s), but at most {self.maximum} may be "
                f"added ({len(self.added)} added already): the node group is at its maximum size"
            )
        batch = dataclasses.replace(
            self.template,
            count=nodes,
            name_prefix=f"{self.template.name_prefix}-{len(self.added)}",
            node_labels=(),
        )
        names = await self.sim.add_pool(batch)
        self.added.extend(names)
        logger.info(
            "sim provisioner: added %s for %s/%s",
            ", ".join(names),
            namespace,
            body["metadata"]["name"],
        )
        return f"added {nodes} node(s) for {total} pod(s): {', '.join(names)}"

    def _check(self, wanted: list[tuple[Resources, Mapping[str, str], int]], total: int) -> str:
        free = self.sim.free()
        for request, _, count in wanted:
            pairs = sorted((k, v) for k, v in request.items() if v > 0)
            left = count
            for name, room in free.items():
                if left <= 0:
                    break
                copies = min(left, copies_that_fit(pairs, room))
                for resource, amount in pairs:
                    room[resource] = room.get(resource, 0) - copies * amount
                left -= copies
                free[name] = room
            if left > 0:
                return _Refused(f"{left} of {total} pod(s) do not fit on the nodes there are")
        return f"the {total} pod(s) fit on the nodes there are"

    async def _set(self, body: JSON, conditions: list[JSON]) -> None:
        meta = body["metadata"]
        try:
            await self.kube.patch_status(
                PROVISIONING_REQUESTS, meta["name"], meta["namespace"], {"conditions": conditions}
            )
        except ApiError as exc:
            if not exc.not_found:
                raise

    async def _add(self, body: JSON, condition: JSON) -> None:
        conditions = [
            each
            for each in (body.get("status") or {}).get("conditions") or ()
            if each.get("type") != condition["type"]
        ]
        await self._set(body, [*conditions, condition])


class _Refused(str):
    """A request the provisioner refuses: its `Failed` message."""

    __slots__ = ()
