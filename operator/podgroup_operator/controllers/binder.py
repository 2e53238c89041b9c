"""The gang scheduler's binds: sent concurrently, paced, volumes first, fenced.

All bindings of a decision go out concurrently, as many in flight as the bind pacer allows
(scheduling/pacing.py: more while the API server answers binds fast, fewer when it slows, so that
our status writes and the kubelets' do not queue behind a flood; `run --bind-concurrency N` fixes
the number instead). A gang whose placement chose volumes for its claims has them bound first,
and none of its pods is bound if that fails (controllers/volumes.py). A bind that fails, or is
refused by the lease fence, undoes its pod's assumption in the snapshot (`Binder._unassume`, the
one way it is undone) and the pod stays pending; what that means for the queue is the
scheduler's (`BindOutcomes`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from podgroup_operator import metrics, tuning
from podgroup_operator.adapters.kube import PODS, ApiError, FencedError, KubeClient
from podgroup_operator.api.keys import GroupKey, pod_uid
from podgroup_operator.controllers.pacing import Slots
from podgroup_operator.controllers.podsignals import PodSignals
from podgroup_operator.controllers.volumes import VolumeBinder, VolumeBindingError, with_volumes
from podgroup_operator.logs import describe, truncate
from podgroup_operator.scheduling.gang import Binding
from podgroup_operator.scheduling.pacing import BindPacer
from podgroup_operator.scheduling.snapshot import Snapshot

logger = logging.getLogger(__name__)

Exclusive = Callable[..., None]
"""`Offload.exclusive`: a call on the snapshot, now or after the worker thread's decision."""


@dataclass(frozen=True)
class BindOutcomes:
    """What the scheduler does with a bind's answer; each is called through `Exclusive`."""

    bound: Callable[[Binding], None]
    """The pod is on its node (bound by us, or by anyone meanwhile): never pending again."""
    landed: Callable[[str], None]
    """The pod's bind is answered or given up (by UID): no longer in flight."""
    retry: Callable[[], None]
    """A bind failed and its pod is pending again: a cycle decides it afresh."""
    leaving: Callable[[str], None]
    """A bind was refused because this namespace is being deleted."""
    volumes_failed: Callable[[GroupKey | None, VolumeBindingError], None]
    """The volumes of this gang (None: its pods are no longer pending) could not be bound."""
    gang_of: Callable[[str], GroupKey | None]
    """The group a pending pod (by UID) waits with, if it is still pending."""


class Binder:
    """Sends the binds of the scheduler's decisions, paced, and reports each answer."""

    def __init__(
        self,
        kube: KubeClient,
        snapshot: Snapshot,
        volumes: VolumeBinder,
        signals: PodSignals,
        exclusive: Exclusive,
        outcomes: BindOutcomes,
        *,
        bind_concurrency: int | None = None,
    ) -> None:
        self.kube = kube
        self._snapshot = snapshot
        self._volumes = volumes
        self._signals = signals
        self._exclusive = exclusive
        self._outcomes = outcomes
        self.pacer = (
            BindPacer(
                floor=tuning.BIND_CONCURRENCY,
                ceiling=tuning.BIND_CONCURRENCY_CEILING,
                target_seconds=tuning.BIND_LATENCY_TARGET_SECONDS,
            )
            if bind_concurrency is None
            else None
        )
        """Moves the binds in flight with their latency (scheduling/pacing.py); None when
        `bind_concurrency` fixes the number."""
        self._slots = Slots(bind_concurrency or tuning.BIND_CONCURRENCY)
        self.batches: set[asyncio.Task[None]] = set()
        """Bind batches still in flight (pipelined cycles)."""
        self.binds = 0
        """Pods bound so far."""

    @property
    def allowed(self) -> int:
        """Binds allowed in flight now: the pacer's choice, or the fixed `bind_concurrency`."""
        return self._slots.limit

    @property
    def busy(self) -> bool:
        """Whether a batch of binds sent in the background is still in flight."""
        return bool(self.batches)

    def dispatch(self, binds: list[Binding]) -> None:
        """Send binds in the background (their pods are in flight, never decided twice)."""
        if binds:
            task = asyncio.create_task(self.bind_all(binds))
            self.batches.add(task)
            task.add_done_callback(self._batch_done)

    def _batch_done(self, task: asyncio.Task[None]) -> None:
        self.batches.discard(task)
        if not self.batches:
            self._signals.resume()  # narration waited behind the binds (controllers/podsignals.py)

    async def bind_all(self, bindings: list[Binding]) -> None:
        """Send every binding, a gang's volumes before its pods, and report each answer."""
        plain, with_claims = with_volumes(bindings, self._outcomes.gang_of)
        await asyncio.gather(
            *(self._bind(b) for b in plain),
            *(self._bind_with_volumes(gang) for gang in with_claims),
        )

    async def _bind(self, binding: Binding) -> None:
        async with self._slots:
            try:
                await self._send(binding)
                self.binds += 1
                metrics.BINDS.labels("bound").inc()
                self._signals.bound(binding.pod_uid, binding.node)
                self._exclusive(self._outcomes.bound, binding)
            except FencedError:
                # This replica stopped leading: un-assume quietly; the scheduler is being
                # stopped, and the new leader decides the pod afresh.
                self._exclusive(self._unassume, binding, False)
            except ApiError as exc:
                if exc.namespace_terminating:
                    self._exclusive(self._namespace_leaving, binding)
                    return
                if exc.conflict and await self._bound_meanwhile(binding):
                    # By us (a retried request) or anyone: placed.
                    self._exclusive(self._outcomes.bound, binding)
                    return
                # Node gone, pod deleted or bound meanwhile: release what we assumed and let
                # the next cycle (fed by the watch) decide again.
                self._exclusive(self._failed, binding, exc)
            except Exception as exc:
                # No answer (a connection lost, the writer process gone): bound or not, the
                # next cycle decides again, and a bind that did land answers it with 409.
                self._exclusive(self._failed, binding, exc)
            finally:
                self._exclusive(self._outcomes.landed, binding.pod_uid)

    async def _bind_with_volumes(self, gang: list[Binding]) -> None:
        """Bind the gang's volumes first; if that fails, none of its pods is bound."""
        try:
            await self._volumes.prepare(gang)
        except VolumeBindingError as exc:
            self._exclusive(self._volumes_failed, gang, exc)
            return
        except FencedError:  # no longer leading: un-assume quietly, as `_bind` does
            for binding in gang:
                self._exclusive(self._unassume, binding, False)
            return
        await asyncio.gather(*(self._bind(b) for b in gang))

    async def _send(self, binding: Binding) -> None:
        """Send one bind and tell the pacer how long it took to answer, whether it bound or
        failed: a bind refused or timed out after seconds says the API server's queue is long as
        surely as a slow success (counting successes only, binds that all time out would never
        lower the limit). A cancelled or fenced bind says nothing and is not told."""
        sent = asyncio.get_running_loop().time()
        try:
            await self.kube.bind(binding.namespace, binding.pod, binding.node, binding.pod_uid)
        except FencedError:
            raise  # never sent: it says nothing of the API server's queue
        except Exception:  # not CancelledError, a BaseException
            self._answered(sent)
            raise
        self._answered(sent)

    def _answered(self, sent: float) -> None:
        if self.pacer is not None:
            answered = asyncio.get_running_loop().time()
            self._slots.limit = self.pacer.observe(answered - sent, answered)

    def _unassume(self, binding: Binding, failed: bool) -> None:
        """The one way a placed pod's assumption is undone: the snapshot gives back what it
        held, and it is no longer in flight (still pending, its group's entry gets it back).
        `failed` counts it as a failed bind; a bind refused by the lease fence is not one."""
        if failed:
            metrics.BINDS.labels("failed").inc()
        self._snapshot.remove_pod(binding.pod_uid)
        self._outcomes.landed(binding.pod_uid)

    def _failed(self, binding: Binding, exc: Exception) -> None:
        """Un-assume the pod (it stays pending) and ask for a cycle."""
        logger.warning(
            "bind %s/%s -> %s failed: %s",
            binding.namespace,
            binding.pod,
            binding.node,
            truncate(describe(exc)),
        )
        self._unassume(binding, True)
        self._outcomes.retry()

    def _namespace_leaving(self, binding: Binding) -> None:
        """A bind refused because the pod's namespace is being deleted: un-assume the pod, and
        have the scheduler leave the namespace's gangs undecided for a while."""
        self._unassume(binding, True)
        self._outcomes.leaving(binding.namespace)

    def _volumes_failed(self, gang: list[Binding], exc: VolumeBindingError) -> None:
        """Un-assume the gang's pods (they stay pending) and have the scheduler say why."""
        key = self._outcomes.gang_of(gang[0].pod_uid)
        logger.warning("volumes of %s not bound: %s", key, exc)
        for binding in gang:
            self._unassume(binding, True)
        self._outcomes.volumes_failed(key, exc)

    async def _bound_meanwhile(self, binding: Binding) -> bool:
        """After a 409 on the binding: is this pod (same UID) on a node now?

        The apiserver answers 409 Conflict both for a pod already assigned and for a failed
        UID precondition, with nothing but the message text to tell them apart; the pod
        itself does."""
        try:
            pod = await self.kube.get(PODS, binding.pod, binding.namespace)
        except ApiError:
            return False
        return pod_uid(pod) == binding.pod_uid and bool((pod.get("spec") or {}).get("nodeName"))
