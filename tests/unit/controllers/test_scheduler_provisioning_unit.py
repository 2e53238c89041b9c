"""The scheduler and the provisioning controller together (controllers/scheduler.py
`_provision`): who asks, for how many, and what the pods say meanwhile."""

from __future__ import annotations

from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import PODS, PROVISIONING_REQUESTS
from podgroup_operator.controllers.provisioning import Provisioning
from podgroup_operator.domain.provisioning import ProvisioningView
from tests.unit.controllers.test_gang_scheduler_unit import NS, Harness

CLASS = c.ProvisioningClass.BEST_EFFORT_ATOMIC.value


def with_provisioning(h: Harness) -> list[ProvisioningView]:
    views: list[ProvisioningView] = []
    h.scheduler.provisioning = Provisioning(
        h.kube,
        default_class=CLASS,
        available=lambda: True,
        group_body=lambda key: next(iter(h.groups.get(key, ())), None),
        publish=lambda key, view: views.append(view),
        due=h.scheduler.provisioned,
        clock=h.clock,
    )
    return views


async def settle(h: Harness) -> None:
    provisioning = h.scheduler.provisioning
    while provisioning._tasks:
        for task in list(provisioning._tasks):
            await task
    await h.scheduler.signals.idle()


def counts(h: Harness, name: str) -> list[int]:
    body = h.fake.get_object(PROVISIONING_REQUESTS, name, NS)
    assert body is not None, f"no request {name}"
    return [pod_set["count"] for pod_set in body["spec"]["podSets"]]


def pod_reasons(h: Harness) -> set[str]:
    return {
        condition["reason"]
        for body in h.fake.objects(PODS, NS)
        for condition in (body.get("status") or {}).get("conditions") or ()
        if condition["type"] == c.PodConditionType.POD_SCHEDULED
    }


async def test_a_strict_gang_refused_for_room_asks_for_what_does_not_fit_and_its_pods_wait() -> (
    None
):
    h = Harness()
    with_provisioning(h)
    h.add_node("n1", cpu=4)
    h.add_group("gang", min_member=4)
    h.add_pods("gang", 4, cpu=2)

    await h.scheduler.cycle()
    await settle(h)

    assert counts(h, "gang-pr1") == [2]
    assert pod_reasons(h) == {c.PodReason.WAITING_FOR_PROVISIONING}
    (verdict,) = h.verdicts_for("gang")
    assert verdict.reason is c.Reason.NOT_ENOUGH_RESOURCES
    assert "asking for nodes: ProvisioningRequest gang-pr1 for 2 pod(s)" in verdict.message
    assert h.binds() == 0
    assert h.cpu_free("n1") == 4000  # the what-if left nothing assumed


async def test_a_nonstrict_gang_asks_for_what_its_hold_does_not_cover() -> None:
    h = Harness()
    with_provisioning(h)
    h.add_node("n1", cpu=4)
    h.add_group("gang", min_member=5, mode=c.GangMode.NON_STRICT)
    h.add_pods("gang", 5, cpu=2)

    await h.scheduler.cycle()
    await settle(h)

    assert counts(h, "gang-pr1") == [3]
    assert h.cpu_free("n1") == 0  # its 2 held members


async def test_provisioned_nodes_get_the_gang_placed_at_once_and_the_request_deleted() -> None:
    h = Harness()
    views = with_provisioning(h)
    h.add_node("n1", cpu=2)
    h.add_group("gang", min_member=2)
    h.add_pods("gang", 2, cpu=2)
    await h.scheduler.cycle()
    await settle(h)
    request: Any = h.fake.get_object(PROVISIONING_REQUESTS, "gang-pr1", NS)
    request["status"] = {"conditions": [{"type": "Provisioned", "status": "True"}]}
    h.scheduler.provisioning.on_request(c.WatchEventType.MODIFIED, request, None)
    state = h.scheduler.queue.waiting[(NS, "gang")]
    assert (state.failures, state.last_failure) == (0, None)  # due at once, whatever backoff
    h.add_node("n2", cpu=2)

    await h.scheduler.cycle()
    await settle(h)

    assert sorted(h.bound_pods()) == ["gang-0", "gang-1"]
    assert h.fake.get_object(PROVISIONING_REQUESTS, "gang-pr1", NS) is None
    assert views[-1].reason is c.Reason.PROVISIONING_ENDED


async def test_a_gang_short_of_members_asks_for_nothing_and_waits_for_its_members() -> None:
    """No request, and its pods say WaitingForGang: cluster-autoscaler adds no node for them."""
    h = Harness()
    with_provisioning(h)
    h.add_node("n1", cpu=1)
    h.add_group("gang", min_member=3)
    h.add_pods("gang", 2, cpu=2)

    await h.scheduler.cycle()
    await settle(h)

    (verdict,) = h.verdicts_for("gang")
    assert verdict.reason is c.Reason.NOT_ENOUGH_TASKS
    assert h.fake.objects(PROVISIONING_REQUESTS) == []
    assert pod_reasons(h) == {c.PodReason.WAITING_FOR_GANG}


async def test_a_gang_whose_refusal_turns_to_missing_members_gives_its_request_back() -> None:
    h = Harness()
    with_provisioning(h)
    h.add_node("n1", cpu=1)
    h.add_group("gang", min_member=2)
    first, _ = h.add_pods("gang", 2, cpu=2)
    await h.scheduler.cycle()
    await settle(h)
    assert counts(h, "gang-pr1") == [2]
    marked = {
        p["metadata"]["annotations"].get(c.ANNOTATION_CONSUME_PROVISIONING)
        for p in h.fake.objects(PODS, NS)
    }
    assert marked == {"gang-pr1"}
    await h.kube.delete(PODS, first["metadata"]["name"], NS)
    h.members.remove((NS, "gang"), first)
    h.scheduler.on_pod("DELETED", first)

    await h.scheduler.cycle()
    await settle(h)

    (verdict, *_) = reversed(h.verdicts_for("gang"))
    assert verdict.reason is c.Reason.NOT_ENOUGH_TASKS
    assert h.fake.objects(PROVISIONING_REQUESTS) == []
    (remaining,) = h.fake.objects(PODS, NS)
    assert c.ANNOTATION_CONSUME_PROVISIONING not in (remaining["metadata"].get("annotations") or {})
