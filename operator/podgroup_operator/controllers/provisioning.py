"""Gang-aware autoscaling: one cluster-autoscaler ProvisioningRequest per gang refused for room.

When a gang is refused for room (`NotEnoughResources`, and only then: a gang waiting for a
member, a partner, a gate or quota asks for nothing), the scheduler asks `wants` whether it
should have nodes provisioned and, if so, hands `ask` the pod sets still missing once what fits
is placed (scheduling/provisioning.py). This controller then

* creates one PodTemplate per pod set and one `ProvisioningRequest` (`autoscaling.x-k8s.io/v1`)
  for the gang, all owned by the PodGroup (the garbage collector deletes them with it), and
  annotates the pending members to consume it (cluster-autoscaler then scales for them only
  through the request);
* follows the request's conditions through the informer: `Provisioned` makes the gang due at
  once (`due`); `Failed` is reported with the autoscaler's message and a new request is made
  after a backoff, at most `MAX_FAILURES` times in a row; `BookingExpired` or
  `CapacityRevoked` before the gang is bound start over at the gang's next refusal;
* deletes the request and its templates (`done`) when the gang is placed, gone, or no longer
  refused for room; the members' annotations are removed when the gang still waits;
* adopts, after a restart or a new leader, the request it made before (found by the PodGroup
  label and owner uid), instead of making a second one: one request per gang at a time.

While a request is in flight the members' `PodScheduled` reason is `WaitingForProvisioning`
(`in_flight`, read by the scheduler), and the PodGroup has a `Provisioning` condition naming the
request and its state (`publish`, to the status reconciler). Without the ProvisioningRequest CRD
(or without leave to list it) the feature stays off and says so once (`available`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator import metrics
from podgroup_operator.adapters.kube import (
    JSON,
    POD_TEMPLATES,
    PODS,
    PROVISIONING_REQUESTS,
    ApiError,
    FencedError,
    KubeClient,
)
from podgroup_operator.api.backoff import Backoff
from podgroup_operator.api.keys import GroupKey
from podgroup_operator.domain.provisioning import (
    ProvisioningView,
    RequestState,
    provisioning_class,
    request_name,
    request_state,
)
from podgroup_operator.logs import describe, truncate
from podgroup_operator.scheduling.provisioning import PodSet

logger = logging.getLogger(__name__)

MAX_FAILURES = 5
"""Failed requests in a row after which a gang asks no more (until it is placed, or its
PodGroup changes)."""
RETRY = Backoff(initial_seconds=5, max_seconds=300)
"""The wait before a new request after a Failed one: 5 s, doubling, at most 5 minutes."""


@dataclass
class Tracked:
    """One gang's provisioning, as this leader knows it."""

    name: str | None = None
    """The request in flight (or being created), None when there is none."""
    attempt: int = 0
    """Requests made for the gang so far (names the next one)."""
    templates: tuple[str, ...] = ()
    state: RequestState = RequestState.PENDING
    message: str = ""
    failures: int = 0
    """Failed requests in a row."""
    retry_at: dt.datetime | None = None
    generation: int | None = None
    """The PodGroup's generation when the failures were counted (a change starts afresh)."""
    pods: set[str] = field(default_factory=set)
    """(namespace/name) of the members annotated to consume the request."""


def _label(body: Mapping[str, Any]) -> str | None:
    return ((body.get("metadata") or {}).get("labels") or {}).get(c.LABEL_POD_GROUP)


def _owner_uid(body: Mapping[str, Any]) -> str | None:
    for owner in (body.get("metadata") or {}).get("ownerReferences") or ():
        if owner.get("kind") == c.KIND and str(owner.get("apiVersion", "")).startswith(c.GROUP):
            return str(owner.get("uid") or "")
    return None


def _attempt_of(body: Mapping[str, Any]) -> int:
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    try:
        return int(annotations.get(c.ANNOTATION_PROVISIONING_ATTEMPT, "0"))
    except ValueError:
        return 0


def _templates(body: Mapping[str, Any]) -> tuple[str, ...]:
    pod_sets = (body.get("spec") or {}).get("podSets") or ()
    return tuple(str((s.get("podTemplateRef") or {}).get("name") or "") for s in pod_sets)


def _bound(group: Mapping[str, Any]) -> bool:
    """The PodGroup's status counts minMember members bound (its gang was placed)."""
    scheduled = (group.get("status") or {}).get("scheduled") or 0
    return bool(scheduled) and scheduled >= ((group.get("spec") or {}).get("minMember") or 1)


def describe_sets(pod_sets: Sequence[PodSet]) -> str:
    """`6 pod(s) of 2 template(s)` and the like, for messages."""
    count = sum(pod_set.count for pod_set in pod_sets)
    return f"{count} pod(s) in {len(pod_sets)} pod set(s)"


class Provisioning:
    """Keeps one ProvisioningRequest per gang that needs nodes (see the module docstring)."""

    def __init__(
        self,
        kube: KubeClient | None = None,
        *,
        default_class: str | None = None,
        available: Callable[[], bool] = lambda: False,
        group_body: Callable[[GroupKey], JSON | None] = lambda key: None,
        publish: Callable[[GroupKey, ProvisioningView], None] = lambda key, view: None,
        due: Callable[[GroupKey], None] = lambda key: None,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.kube = kube
        self.default_class = default_class
        self.available = available
        """Whether the ProvisioningRequest kind is served and listed (the informer's first list
        succeeded)."""
        self.group_body = group_body
        self.publish = publish
        self.due = due
        """Make the gang due at once (its capacity is there, or a retry is)."""
        self.clock = clock
        self.tracked: dict[GroupKey, Tracked] = {}
        self.retired: set[tuple[str, str]] = set()
        """(namespace, name) of the requests this leader deleted, until their deletion shows:
        an event of one of them (its Provisioned condition, written while the gang was being
        placed on the new nodes) must never be adopted as a request still in flight."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._timers: dict[GroupKey, asyncio.TimerHandle] = {}
        self._said_off = False

    # --- what the scheduler asks ---------------------------------------------------------------
    def class_of(self, key: GroupKey) -> str | None:
        """The class the gang's request would name, or None when provisioning is off for it."""
        if self.kube is None:
            return None
        body = self.group_body(key)
        if body is None:
            return None
        annotations = (body.get("metadata") or {}).get("annotations") or {}
        return provisioning_class(annotations, self.default_class)

    def wants(self, key: GroupKey, now: dt.datetime) -> str | None:
        """The class of a new request the gang, just refused for room, should get now; None
        when it has one in flight, is backing off after a failure, gave up, or has provisioning
        off (the CRD missing is said once in the log and in a metric)."""
        chosen = self.class_of(key)
        if chosen is None:
            if key in self.tracked and self.tracked[key].name is not None:
                self.done(key, placed=False)  # turned off meanwhile (`none`)
            return None
        if not self.available():
            if not self._said_off:
                self._said_off = True
                metrics.PROVISIONING.labels("unavailable").inc()
                logger.warning(
                    "provisioning is on (class %s) but %s is not served or may not be listed: "
                    "no ProvisioningRequest is made until cluster-autoscaler's CRD is installed "
                    "and the operator may list, watch and create %s.%s (deploy/base/rbac.yaml)",
                    chosen,
                    c.PROVISIONING_CRD_NAME,
                    c.PROVISIONING_PLURAL,
                    c.PROVISIONING_GROUP,
                )
            return None
        tracked = self.tracked.get(key)
        if tracked is None:
            return chosen
        generation = ((self.group_body(key) or {}).get("metadata") or {}).get("generation")
        if tracked.generation is not None and generation != tracked.generation:
            tracked.failures, tracked.retry_at, tracked.generation = 0, None, None
        if tracked.name is not None:
            return None
        if tracked.failures >= MAX_FAILURES:
            return None
        if tracked.retry_at is not None and now < tracked.retry_at:
            return None
        return chosen

    def in_flight(self, key: GroupKey) -> str | None:
        """`ProvisioningRequest ns/name (state)` while the gang has one in flight, else None."""
        tracked = self.tracked.get(key)
        if tracked is None or tracked.name is None or not tracked.state.in_flight:
            return None
        return f"ProvisioningRequest {key[0]}/{tracked.name} ({tracked.state.value})"

    def ask(
        self,
        key: GroupKey,
        chosen: str,
        pod_sets: Sequence[PodSet],
        pending: Iterable[Mapping[str, Any]],
    ) -> str:
        """Create the gang's request for `pod_sets` in the background; returns what the
        refusal's message adds."""
        if not pod_sets:
            return ""
        body = self.group_body(key)
        if body is None:
            return ""
        tracked = self.tracked.setdefault(key, Tracked())
        tracked.attempt += 1
        name = request_name(key[1], tracked.attempt)
        tracked.name, tracked.state, tracked.message = name, RequestState.PENDING, ""
        tracked.templates = tuple(f"{name}-{i}" for i in range(len(pod_sets)))
        members = [pod for pod in pending if (pod.get("metadata") or {}).get("name")]
        self._spawn(self._create(key, body, name, chosen, tuple(pod_sets), members))
        what = describe_sets(pod_sets)
        self.publish(
            key,
            ProvisioningView(
                True,
                c.Reason.WAITING_FOR_PROVISIONING,
                f"ProvisioningRequest {name} (class {chosen}) asks for the {what} that do not "
                "fit on the nodes there are",
            ),
        )
        return f"; asking for nodes: ProvisioningRequest {name} for {what}"

    def done(self, key: GroupKey, *, placed: bool) -> None:
        """The gang was placed, is gone, or is no longer refused for room: delete its request
        and templates (and, when it still waits, take the consume annotation off its pods)."""
        tracked = self.tracked.get(key)
        if tracked is None:
            return
        if placed or self.group_body(key) is None:
            self.tracked.pop(key, None)
            timer = self._timers.pop(key, None)
            if timer is not None:
                timer.cancel()
        if tracked.name is None:
            return
        name, templates, pods = tracked.name, tracked.templates, set(tracked.pods)
        tracked.name, tracked.templates, tracked.pods = None, (), set()
        self.retired.add((key[0], name))
        self._spawn(self._delete(key, name, templates, () if placed else pods))
        self.publish(
            key,
            ProvisioningView(
                False,
                c.Reason.PROVISIONING_ENDED,
                f"ProvisioningRequest {name} was deleted: "
                + (
                    "the gang was placed"
                    if placed
                    else "the gang no longer waits for room (or asks for no nodes)"
                ),
            ),
        )

    # --- what the informer says ---------------------------------------------------------------
    def on_request(self, kind: c.WatchEventType, body: JSON, old: JSON | None) -> None:
        """A ProvisioningRequest changed: adopt ours, follow its state."""
        meta = body.get("metadata") or {}
        group = _label(body)
        labels = meta.get("labels") or {}
        if group is None or labels.get(c.LABEL_MANAGED_BY) != c.OPERATOR_NAME:
            return
        key: GroupKey = (str(meta.get("namespace") or ""), group)
        name = str(meta.get("name") or "")
        tracked = self.tracked.get(key)
        if kind is c.WatchEventType.DELETED:
            self.retired.discard((key[0], name))
            if tracked is not None and tracked.name == name:
                tracked.name, tracked.templates = None, ()
            return
        if (key[0], name) in self.retired or meta.get("deletionTimestamp"):
            return  # ours, on its way out
        if tracked is None or tracked.name is None:
            owner = self.group_body(key)
            owner_uid = ((owner or {}).get("metadata") or {}).get("uid")
            if owner is None or _owner_uid(body) != owner_uid:
                return  # another incarnation's: the garbage collector takes it
            state, _ = request_state(body)
            if _bound(owner):
                # Bound while no leader watched (or before this one took over): no longer
                # needed, and no refusal will come to end it.
                self.retired.add((key[0], name))
                self._spawn(self._delete(key, name, _templates(body), ()))
                return
            if not state.in_flight:
                return
            tracked = self.tracked.setdefault(key, Tracked())
            tracked.name = name
            tracked.attempt = max(tracked.attempt, _attempt_of(body))
            tracked.templates = _templates(body)
            logger.info("adopted ProvisioningRequest %s/%s of gang %s", key[0], name, group)
            metrics.PROVISIONING.labels("adopted").inc()
        elif tracked.name != name:
            return  # an older request of ours, on its way out
        self._follow(key, tracked, body)

    def _follow(self, key: GroupKey, tracked: Tracked, body: JSON) -> None:
        state, message = request_state(body)
        if state == tracked.state and message == tracked.message:
            return
        tracked.state, tracked.message = state, message
        name = str((body.get("metadata") or {}).get("name") or "")
        label = f"ProvisioningRequest {name}"
        said = f": {message}" if message else ""
        if state is RequestState.ACCEPTED:
            view = ProvisioningView(
                True, c.Reason.WAITING_FOR_PROVISIONING, f"{label} was accepted{said}"
            )
        elif state is RequestState.PROVISIONED:
            metrics.PROVISIONING.labels("provisioned").inc()
            view = ProvisioningView(
                True, c.Reason.PROVISIONED, f"{label}: the nodes are there{said}; placing the gang"
            )
            self.due(key)
        elif state is RequestState.FAILED:
            metrics.PROVISIONING.labels("failed").inc()
            view = self._failed(key, tracked, label, message)
        elif state is RequestState.EXPIRED:
            metrics.PROVISIONING.labels("expired").inc()
            view = ProvisioningView(
                False,
                c.Reason.BOOKING_EXPIRED,
                f"{label}: the booked capacity is gone before the gang was bound{said}; "
                "asking again",
            )
            self._retire(key, tracked)
            self.due(key)
        else:
            return
        logger.info("gang %s/%s: %s", key[0], key[1], truncate(view.message))
        self.publish(key, view)

    def _failed(
        self, key: GroupKey, tracked: Tracked, label: str, message: str
    ) -> ProvisioningView:
        tracked.failures += 1
        generation = ((self.group_body(key) or {}).get("metadata") or {}).get("generation")
        tracked.generation = generation
        said = message or "no message"
        self._retire(key, tracked)
        if tracked.failures >= MAX_FAILURES:
            return ProvisioningView(
                False,
                c.Reason.PROVISIONING_FAILED,
                f"{label} failed: {said}; {tracked.failures} requests failed in a row, no more are "
                "made until the gang is placed or its PodGroup changes",
            )
        delay = RETRY.delay(tracked.failures)
        tracked.retry_at = self.clock() + delay
        self._later(key, delay.total_seconds())
        return ProvisioningView(
            False,
            c.Reason.PROVISIONING_FAILED,
            f"{label} failed: {said}; asking again in {int(delay.total_seconds())}s "
            f"(failure {tracked.failures} of at most {MAX_FAILURES})",
        )

    def _retire(self, key: GroupKey, tracked: Tracked) -> None:
        """The request is spent: delete it and its templates; the members keep waiting."""
        if tracked.name is None:
            return
        name, templates = tracked.name, tracked.templates
        tracked.name, tracked.templates = None, ()
        self.retired.add((key[0], name))
        self._spawn(self._delete(key, name, templates, ()))

    def _later(self, key: GroupKey, seconds: float) -> None:
        with contextlib.suppress(RuntimeError):  # no running loop (unit tests of the logic)
            loop = asyncio.get_running_loop()
            old = self._timers.pop(key, None)
            if old is not None:
                old.cancel()
            self._timers[key] = loop.call_later(seconds, self.due, key)

    # --- writing -------------------------------------------------------------------------------
    def _spawn(self, job: Any) -> None:
        try:
            task = asyncio.get_running_loop().create_task(job)
        except RuntimeError:
            job.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _owner(self, body: JSON) -> JSON:
        meta = body.get("metadata") or {}
        return {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND,
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "controller": True,
        }

    def _metadata(self, key: GroupKey, name: str, owner: JSON, attempt: int) -> JSON:
        return {
            "name": name,
            "namespace": key[0],
            "labels": {c.LABEL_POD_GROUP: key[1], c.LABEL_MANAGED_BY: c.OPERATOR_NAME},
            "annotations": {c.ANNOTATION_PROVISIONING_ATTEMPT: str(attempt)},
            "ownerReferences": [owner],
        }

    async def _create(
        self,
        key: GroupKey,
        group: JSON,
        name: str,
        chosen: str,
        pod_sets: tuple[PodSet, ...],
        pending: list[Mapping[str, Any]],
    ) -> None:
        assert self.kube is not None
        owner = self._owner(group)
        tracked = self.tracked.get(key)
        attempt = tracked.attempt if tracked is not None else 0
        try:
            refs = []
            for index, pod_set in enumerate(pod_sets):
                template = f"{name}-{index}"
                await self._create_one(
                    POD_TEMPLATES,
                    key[0],
                    {
                        "apiVersion": "v1",
                        "kind": "PodTemplate",
                        "metadata": self._metadata(key, template, owner, attempt),
                        "template": {
                            "metadata": {"labels": {c.LABEL_POD_GROUP: key[1]}},
                            "spec": dict(pod_set.spec),
                        },
                    },
                )
                refs.append({"podTemplateRef": {"name": template}, "count": pod_set.count})
            await self._create_one(
                PROVISIONING_REQUESTS,
                key[0],
                {
                    "apiVersion": f"{c.PROVISIONING_GROUP}/{c.PROVISIONING_VERSION}",
                    "kind": c.PROVISIONING_KIND,
                    "metadata": self._metadata(key, name, owner, attempt),
                    "spec": {"provisioningClassName": chosen, "podSets": refs},
                },
            )
            metrics.PROVISIONING.labels("created").inc()
            logger.info(
                "gang %s/%s: created ProvisioningRequest %s (class %s) for %s",
                key[0],
                key[1],
                name,
                chosen,
                describe_sets(pod_sets),
            )
            await self._mark(key, name, chosen, pending)
        except FencedError:
            return
        except ApiError as exc:
            metrics.PROVISIONING.labels("error").inc()
            logger.warning(
                "gang %s/%s: ProvisioningRequest %s not created: %s",
                key[0],
                key[1],
                name,
                describe(exc),
            )
            tracked = self.tracked.get(key)
            if tracked is not None and tracked.name == name:
                tracked.name = None
                tracked.failures += 1
                delay = RETRY.delay(tracked.failures)
                tracked.retry_at = self.clock() + delay
                self._later(key, delay.total_seconds())
                self.publish(
                    key,
                    ProvisioningView(
                        False,
                        c.Reason.PROVISIONING_FAILED,
                        f"ProvisioningRequest {name} could not be created: {describe(exc)}; "
                        f"asking again in {int(delay.total_seconds())}s",
                    ),
                )
            await self._delete(key, name, tuple(f"{name}-{i}" for i in range(len(pod_sets))), ())

    async def _create_one(self, kind: Any, namespace: str, body: JSON) -> None:
        """Create, taking one that exists already (made before a restart) as done."""
        assert self.kube is not None
        try:
            await self.kube.create(kind, body, namespace)
        except ApiError as exc:
            if not exc.already_exists:
                raise

    async def _mark(
        self, key: GroupKey, name: str, chosen: str, pending: list[Mapping[str, Any]]
    ) -> None:
        """Annotate the pending members to consume request `name` (a pod gone meanwhile is let
        be)."""
        assert self.kube is not None
        tracked = self.tracked.get(key)
        annotations = {
            c.ANNOTATION_CONSUME_PROVISIONING: name,
            c.ANNOTATION_PROVISIONING_CLASS_NAME: chosen,
        }
        for pod in pending:
            meta = pod.get("metadata") or {}
            if (meta.get("annotations") or {}).get(c.ANNOTATION_CONSUME_PROVISIONING) == name:
                continue
            try:
                await self.kube.patch(
                    PODS,
                    str(meta.get("name")),
                    {"metadata": {"annotations": annotations}},
                    str(meta.get("namespace") or key[0]),
                )
            except ApiError as exc:
                if not exc.not_found:
                    raise
                continue
            if tracked is not None:
                tracked.pods.add(str(meta.get("name")))

    async def _delete(
        self, key: GroupKey, name: str, templates: Sequence[str], pods: Iterable[str]
    ) -> None:
        """Delete the request and its templates; take the consume annotation off `pods`."""
        assert self.kube is not None
        try:
            for kind, each in [(PROVISIONING_REQUESTS, name)] + [
                (POD_TEMPLATES, template) for template in templates
            ]:
                try:
                    await self.kube.delete(kind, each, key[0])
                except ApiError as exc:
                    if not exc.not_found:
                        raise
                    if kind is PROVISIONING_REQUESTS:
                        self.retired.discard((key[0], name))  # no deletion event will come
            for pod in pods:
                try:
                    await self.kube.patch(
                        PODS,
                        pod,
                        {
                            "metadata": {
                                "annotations": {
                                    c.ANNOTATION_CONSUME_PROVISIONING: None,
                                    c.ANNOTATION_PROVISIONING_CLASS_NAME: None,
                                }
                            }
                        },
                        key[0],
                    )
                except ApiError as exc:
                    if not exc.not_found:
                        raise
            metrics.PROVISIONING.labels("deleted").inc()
        except FencedError:
            return
        except ApiError as exc:
            metrics.PROVISIONING.labels("error").inc()
            logger.warning(
                "gang %s/%s: ProvisioningRequest %s not deleted: %s (its PodGroup owns it: the "
                "garbage collector deletes it with the PodGroup)",
                key[0],
                key[1],
                name,
                describe(exc),
            )

    async def stop(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        tasks = list(self._tasks)
        await asyncio.gather(*tasks, return_exceptions=True)
