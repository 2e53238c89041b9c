"""The gang scheduler honours every event a placement rule declares can lift it
(scheduling/registry.py, `Rule.lifted_by`): a gang refused and backed off, whose member asks for
the rule, is due again within one backoff step (1 s) after the event, instead of after its
backoff (32 s here). One case per (rule, event) pair declared."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.api.keys import pod_uid
from podgroup_operator.scheduling.registry import RULES, Event, Rule
from tests.builders import node, pod
from tests.unit.controllers.test_gang_scheduler_unit import NS, Harness
from tests.unit.scheduling.rule_samples import SAMPLES

GANG = (NS, "g")
STEP = 1.0
"""One backoff step, in seconds (`GangScheduler.backoff`'s first)."""
PV = {
    "metadata": {"name": "pv-1"},
    "spec": {"storageClassName": "local", "capacity": {"storage": "1Gi"}},
    "status": {"phase": "Available"},
}
CLAIM = {
    "metadata": {"name": "data-0", "namespace": NS},
    "spec": {"storageClassName": "local", "resources": {"requests": {"storage": "1Gi"}}},
    "status": {"phase": "Pending"},
}


def bound_elsewhere(h: Harness, name: str, labels: dict[str, str]) -> dict[str, Any]:
    """A pod of another scheduler, bound to n1 and known to the scheduler."""
    (stored,) = h.fake.seed(pod(name, NS, node="n1", phase="Running", labels=labels))
    return stored


def changed(body: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    new = copy.deepcopy(body)
    change(new)
    return new


def deliver(h: Harness, event: Event, n1: dict[str, Any], other: dict[str, Any]) -> None:
    """The watch (or the volume binder's informers) delivering `event`."""
    scheduler, volumes = h.scheduler, h.scheduler.volumes
    modified = c.WatchEventType.MODIFIED
    added = c.WatchEventType.ADDED
    if event is Event.NODE_ADDED:
        h.add_node("n2")
    elif event is Event.NODE_LABELS:
        scheduler.on_node(
            modified, changed(n1, lambda b: b["metadata"]["labels"].update(z="b")), n1
        )
    elif event is Event.NODE_TAINTS:
        scheduler.on_node(modified, changed(n1, lambda b: b["spec"].update(taints=[])), n1)
    elif event is Event.NODE_ALLOCATABLE:
        more = changed(n1, lambda b: b["status"]["allocatable"].update(cpu="16"))
        scheduler.on_node(modified, more, n1)
    elif event is Event.NODE_CONDITION:
        ready = changed(n1, lambda b: b["status"]["conditions"][0].update(status="True"))
        scheduler.on_node(modified, ready, n1)
    elif event is Event.NODE_UNSCHEDULABLE:
        scheduler.on_node(modified, changed(n1, lambda b: b["spec"].pop("unschedulable")), n1)
    elif event is Event.POD_DELETED:
        scheduler.on_pod(c.WatchEventType.DELETED, other)
    elif event is Event.POD_BOUND:
        scheduler.on_pod(added, bound_elsewhere(h, "newcomer", {"app": "db"}))
    elif event is Event.POD_LABELS:
        scheduler.on_pod(modified, changed(other, lambda b: b["metadata"]["labels"].clear()))
    elif event is Event.PV_ADDED:
        volumes.on_volume(added, PV, None)
    elif event is Event.PV_UPDATED:
        grown = changed(PV, lambda b: b["spec"]["capacity"].update(storage="2Gi"))
        volumes.on_volume(modified, grown, PV)
    elif event is Event.PVC_ADDED:
        volumes.on_claim(added, CLAIM, None)
    elif event is Event.PVC_UPDATED:
        volumes.on_claim(
            modified, changed(CLAIM, lambda b: b["status"].update(phase="Bound")), CLAIM
        )
    elif event is Event.STORAGE_CLASS_ADDED:
        volumes.on_storage_class(added, {"metadata": {"name": "local"}, "provisioner": "x"}, None)
    elif event is Event.CSI_NODE:
        drivers = [{"name": "csi.example", "allocatable": {"count": 5}}]
        volumes.on_csi_node(added, {"metadata": {"name": "n1"}, "spec": {"drivers": drivers}}, None)
    else:
        raise AssertionError(f"no way to deliver {event}: add one here")


def refuse(h: Harness) -> float:
    """The gang refused after five refusals before: seconds until it is due."""
    now = h.clock()
    state = h.scheduler.queue.waiting[GANG]
    state.failures, state.last_failure = 5, now
    h.scheduler._refused(GANG, c.Reason.NOT_ENOUGH_RESOURCES, "refused", now)
    due = h.scheduler._due_in(GANG, state, now)
    assert due is not None
    return due


CASES = [(rule, event) for rule in RULES for event in sorted(rule.lifted_by)]


@pytest.mark.parametrize(
    ("rule", "event"), CASES, ids=[f"{rule.name}:{event.value}" for rule, event in CASES]
)
async def test_a_gang_refused_by_a_rule_is_due_again_after_an_event_that_lifts_it(
    rule: Rule, event: Event
) -> None:
    h = Harness()
    taint = {"key": "gpu", "value": "yes", "effect": "NoSchedule"}
    (n1,) = h.fake.seed(node("n1", cpu=8, taints=[taint], unschedulable=True, ready=False))
    h.scheduler.on_node(c.WatchEventType.ADDED, n1)
    other = bound_elsewhere(h, "resident", {"app": "web"})
    h.scheduler.on_pod(c.WatchEventType.ADDED, other)
    h.add_group("g", min_member=1)
    plain: dict[str, Any] = {"metadata": {}, "spec": {}}  # a rule that reads no pod field
    asking = next((body for (name, _), body in SAMPLES.items() if name == rule.name), plain)
    member = pod("g-0", NS, group="g", requests={"cpu": 1}, scheduler=c.SCHEDULER_NAME)
    member["spec"].update({k: v for k, v in asking["spec"].items() if k != "containers"})
    member["metadata"]["labels"].update(asking["metadata"].get("labels") or {})
    (stored,) = h.fake.seed(member)
    h.members.put(GANG, stored)
    h.scheduler.on_pod(c.WatchEventType.ADDED, stored)
    h.scheduler._refresh_queue(h.clock())
    assert set(h.scheduler.queue.pending[GANG]) == {pod_uid(stored)}

    assert refuse(h) > STEP
    deliver(h, event, n1, other)
    due = h.scheduler._due_in(GANG, h.scheduler.queue.waiting[GANG], h.clock())
    assert due is not None and due <= STEP, (rule.name, event, due)
