"""The provisioning controller (controllers/provisioning.py) over the in-memory API server: one
request per gang, its life from the autoscaler's conditions, adoption, and the feature off."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from podgroup_operator import constants as c
from podgroup_operator import metrics
from podgroup_operator.adapters.kube import (
    JSON,
    POD_TEMPLATES,
    PODS,
    PROVISIONING_REQUESTS,
    KubeClient,
)
from podgroup_operator.api.keys import GroupKey
from podgroup_operator.controllers.provisioning import MAX_FAILURES, Provisioning
from podgroup_operator.domain.provisioning import ProvisioningView
from podgroup_operator.scheduling.provisioning import pod_sets
from tests.builders import pod
from tests.clock import T0
from tests.fakes import FakeApiServer

NS = "team"
KEY: GroupKey = (NS, "train")
CLASS = c.ProvisioningClass.BEST_EFFORT_ATOMIC.value


def group(annotations: dict[str, str] | None = None, generation: int = 1) -> JSON:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {
            "name": "train",
            "namespace": NS,
            "uid": "uid-train",
            "generation": generation,
            "annotations": annotations or {},
        },
    }


class Harness:
    def __init__(self, *, default: str | None = CLASS, available: bool = True) -> None:
        self.api = FakeApiServer(status_subresources=("pods", c.PROVISIONING_PLURAL))
        self.now = T0
        self.body: JSON | None = group()
        self.views: list[ProvisioningView] = []
        self.due: list[GroupKey] = []
        self.available = available
        self.provisioning = Provisioning(
            KubeClient(self.api),
            default_class=default,
            available=lambda: self.available,
            group_body=lambda key: self.body if key == KEY else None,
            publish=lambda key, view: self.views.append(view),
            due=self.due.append,
            clock=lambda: self.now,
        )
        self.members = self.api.seed(
            *(pod(f"train-{i}", NS, group="train", requests={"cpu": 2}) for i in range(3))
        )

    async def settle(self) -> None:
        while self.provisioning._tasks:
            await asyncio.gather(*self.provisioning._tasks)

    async def ask(self) -> str:
        chosen = self.provisioning.wants(KEY, self.now)
        assert chosen is not None
        added = self.provisioning.ask(KEY, chosen, pod_sets(self.members[1:]), self.members)
        await self.settle()
        return added

    def request(self, name: str = "train-pr1") -> JSON | None:
        return self.api.get_object(PROVISIONING_REQUESTS, name, NS)

    def answer(self, name: str, kind: c.ProvisioningConditionType, message: str = "") -> None:
        body = self.request(name)
        assert body is not None
        body["status"] = {
            "conditions": [
                {"type": kind.value, "status": "True", "reason": kind.value, "message": message}
            ]
        }
        self.provisioning.on_request(c.WatchEventType.MODIFIED, body, None)


async def test_a_gang_gets_one_request_with_its_templates_owned_by_the_podgroup() -> None:
    h = Harness()
    added = await h.ask()
    request = h.request()
    assert request is not None
    assert "ProvisioningRequest train-pr1 for 2 pod(s) in 1 pod set(s)" in added
    assert request["spec"] == {
        "provisioningClassName": CLASS,
        "podSets": [{"podTemplateRef": {"name": "train-pr1-0"}, "count": 2}],
    }
    owner = request["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == (c.KIND, "train", "uid-train")
    assert request["metadata"]["labels"][c.LABEL_POD_GROUP] == "train"
    template = h.api.get_object(POD_TEMPLATES, "train-pr1-0", NS)
    assert template is not None
    assert template["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "2"}}
    assert template["metadata"]["ownerReferences"][0]["uid"] == "uid-train"
    for member in h.api.objects(PODS, NS):
        assert member["metadata"]["annotations"][c.ANNOTATION_CONSUME_PROVISIONING] == "train-pr1"
        assert member["metadata"]["annotations"][c.ANNOTATION_PROVISIONING_CLASS_NAME] == CLASS
    assert h.views[-1].active and h.views[-1].reason is c.Reason.WAITING_FOR_PROVISIONING
    assert h.provisioning.in_flight(KEY) == f"ProvisioningRequest {NS}/train-pr1 (Pending)"
    assert h.provisioning.wants(KEY, h.now) is None  # one request per gang at a time


async def test_provisioned_makes_the_gang_due_and_placing_it_deletes_request_and_templates() -> (
    None
):
    h = Harness()
    await h.ask()
    h.answer("train-pr1", c.ProvisioningConditionType.PROVISIONED)
    assert h.due == [KEY]
    assert h.views[-1].reason is c.Reason.PROVISIONED
    assert h.provisioning.in_flight(KEY) is not None
    h.provisioning.done(KEY, placed=True)
    await h.settle()
    assert h.request() is None
    assert h.api.objects(POD_TEMPLATES, NS) == []
    assert h.views[-1].reason is c.Reason.PROVISIONING_ENDED and not h.views[-1].active
    assert KEY not in h.provisioning.tracked


async def test_provisioned_seen_after_the_gang_was_placed_is_not_adopted_again() -> None:
    """The new nodes come before the request's Provisioned condition: the gang is placed on
    them and its request deleted; the condition's event, arriving then, must not adopt the
    request back (its view would say Provisioned for ever, with no refusal to end it)."""
    h = Harness()
    await h.ask()
    in_flight = h.request()
    assert in_flight is not None
    h.provisioning.done(KEY, placed=True)  # deletes it, in a task not run yet
    in_flight["status"] = {
        "conditions": [{"type": "Provisioned", "status": "True", "reason": "Provisioned"}]
    }
    h.provisioning.on_request(c.WatchEventType.MODIFIED, in_flight, None)
    await h.settle()

    assert h.views[-1].reason is c.Reason.PROVISIONING_ENDED and not h.views[-1].active
    assert KEY not in h.provisioning.tracked and h.due == []
    h.provisioning.on_request(c.WatchEventType.DELETED, in_flight, None)
    assert h.provisioning.retired == set()  # forgotten once its deletion shows


async def test_a_failed_request_is_reported_deleted_and_asked_again_after_a_backoff() -> None:
    h = Harness()
    await h.ask()
    h.answer("train-pr1", c.ProvisioningConditionType.FAILED, "node group at its maximum")
    await h.settle()
    view = h.views[-1]
    assert view.reason is c.Reason.PROVISIONING_FAILED and not view.active
    assert "node group at its maximum" in view.message and "asking again in 5s" in view.message
    assert h.request() is None
    assert h.provisioning.in_flight(KEY) is None
    assert h.provisioning.wants(KEY, h.now) is None  # backing off
    h.now += dt.timedelta(seconds=5)
    assert h.provisioning.wants(KEY, h.now) == CLASS
    await h.ask()
    assert h.request("train-pr2") is not None


async def test_requests_stop_after_the_failures_in_a_row_until_the_podgroup_changes() -> None:
    h = Harness()
    for attempt in range(1, MAX_FAILURES + 1):
        h.now += dt.timedelta(hours=1)
        await h.ask()
        h.answer(f"train-pr{attempt}", c.ProvisioningConditionType.FAILED, "no")
        await h.settle()
    h.now += dt.timedelta(hours=1)
    assert "no more are made" in h.views[-1].message
    assert h.provisioning.wants(KEY, h.now) is None
    h.body = group(generation=2)
    assert h.provisioning.wants(KEY, h.now) == CLASS


async def test_an_expired_booking_deletes_the_request_and_makes_the_gang_due_to_ask_again() -> None:
    h = Harness()
    await h.ask()
    h.answer("train-pr1", c.ProvisioningConditionType.PROVISIONED)
    h.answer("train-pr1", c.ProvisioningConditionType.BOOKING_EXPIRED)
    await h.settle()
    assert h.views[-1].reason is c.Reason.BOOKING_EXPIRED
    assert h.request() is None
    assert h.due == [KEY, KEY]
    assert h.provisioning.wants(KEY, h.now) == CLASS


async def test_a_new_leader_adopts_the_request_its_podgroup_owns_and_makes_no_second() -> None:
    first = Harness()
    await first.ask()
    made = first.request()
    assert made is not None
    second = Harness()
    second.provisioning.on_request(c.WatchEventType.ADDED, made, None)
    assert second.provisioning.in_flight(KEY) == f"ProvisioningRequest {NS}/train-pr1 (Pending)"
    assert second.provisioning.wants(KEY, second.now) is None
    assert second.provisioning.tracked[KEY].attempt == 1


async def test_a_request_of_another_incarnation_of_the_podgroup_is_not_adopted() -> None:
    first = Harness()
    await first.ask()
    made = first.request()
    assert made is not None
    second = Harness()
    second.body = {**group(), "metadata": {**group()["metadata"], "uid": "uid-new"}}
    second.provisioning.on_request(c.WatchEventType.ADDED, made, None)
    assert second.provisioning.in_flight(KEY) is None


async def test_no_longer_needing_nodes_deletes_the_request_and_unmarks_the_members() -> None:
    h = Harness()
    await h.ask()
    h.provisioning.done(KEY, placed=False)
    await h.settle()
    assert h.request() is None
    for member in h.api.objects(PODS, NS):
        assert c.ANNOTATION_CONSUME_PROVISIONING not in (
            member["metadata"].get("annotations") or {}
        )
    assert h.provisioning.wants(KEY, h.now) == CLASS


@pytest.mark.parametrize(
    ("default", "annotation", "expected"),
    [
        (CLASS, None, CLASS),
        (None, None, None),
        (None, "example.com/queued", "example.com/queued"),
        (CLASS, c.PROVISIONING_OFF, None),
    ],
)
def test_the_podgroup_annotation_overrides_the_operator_default(
    default: str | None, annotation: str | None, expected: str | None
) -> None:
    h = Harness(default=default)
    h.body = group({c.ANNOTATION_PROVISIONING_CLASS: annotation} if annotation else None)
    assert h.provisioning.class_of(KEY) == expected


def test_without_the_crd_nothing_is_asked_and_it_is_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness(available=False)
    before = metrics.PROVISIONING.labels("unavailable")._value.get()
    assert h.provisioning.wants(KEY, h.now) is None
    assert h.provisioning.wants(KEY, h.now) is None
    assert metrics.PROVISIONING.labels("unavailable")._value.get() == before + 1
    said = [r.getMessage() for r in caplog.records if c.PROVISIONING_CRD_NAME in r.getMessage()]
    assert len(said) == 1 and "no ProvisioningRequest is made" in said[0]


async def test_a_request_found_for_a_gang_already_bound_is_deleted_not_adopted() -> None:
    first = Harness()
    await first.ask()
    made = first.request()
    assert made is not None
    second = Harness()
    second.api = first.api
    second.provisioning.kube = first.provisioning.kube
    bound = group()
    bound["spec"], bound["status"] = {"minMember": 3}, {"scheduled": 3}
    second.body = bound
    second.provisioning.on_request(c.WatchEventType.ADDED, made, None)
    await second.settle()
    assert second.provisioning.in_flight(KEY) is None
    assert first.request() is None
    assert first.api.objects(POD_TEMPLATES, NS) == []
