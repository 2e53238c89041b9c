"""The ElasticQuota controller over the in-memory API server: the tree it hands the scheduler,
the statuses it writes (only when changed), and each quota's queue of waiting gangs."""

from __future__ import annotations

import datetime as dt
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator import metrics
from podgroup_operator.adapters.informers import Store, object_key
from podgroup_operator.adapters.kube import ELASTIC_QUOTAS, KOORD_ELASTIC_QUOTAS, KubeClient
from podgroup_operator.api.elastic_quota import QuotaRef, QuotaSpec
from podgroup_operator.constants import WatchEventType
from podgroup_operator.controllers.elastic_quotas import ElasticQuotaController, QuotaSource
from podgroup_operator.controllers.quota_queues import QuotaQueues
from podgroup_operator.controllers.scheduler_queue import QueueEntry
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.scheduling.elastic.status import quota_statuses
from podgroup_operator.scheduling.elastic.tree import QuotaTree, build_tree
from podgroup_operator.scheduling.elastic.usage import Member, QuotaUsage
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.builders import node, pod
from tests.fakes import FakeApiServer

GPU = "nvidia.com/gpu"


def quota_body(namespace: str, name: str, api: str = c.API_VERSION, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": api,
        "kind": c.ELASTIC_QUOTA_KIND,
        "metadata": {"namespace": namespace, "name": name, "resourceVersion": "1"},
        "spec": spec,
    }


def running(name: str, namespace: str, gpus: int) -> dict[str, Any]:
    return pod(
        name, namespace, node="n0", phase=c.PodPhase.RUNNING, requests={GPU: gpus, "cpu": "1"}
    )


class Harness:
    def __init__(self, *bodies: dict[str, Any], koord: tuple[dict[str, Any], ...] = ()) -> None:
        self.api = FakeApiServer(schemas={})
        self.kube = KubeClient(self.api)
        self.ours, self.theirs = Store(), Store()
        for store, items in ((self.ours, bodies), (self.theirs, koord)):
            for body in items:
                store.put(object_key(body), body)
        self.snapshot = Snapshot.build(
            [node("n0", extended={GPU: 8})],
            [running("a-0", "team-a", 3), running("b-0", "team-b", 1)],
            gang_of=group_key_of,
        )
        self.trees: list[QuotaTree | None] = []
        self.controller = ElasticQuotaController(
            self.kube,
            [
                QuotaSource(self.ours, ELASTIC_QUOTAS),
                QuotaSource(self.theirs, KOORD_ELASTIC_QUOTAS),
            ],
            self.snapshot,
            set_tree=self.set_tree,
            waiting=lambda: ({("team-a", "a"): 2}, {("team-a", "a"): {GPU: 2000}}),
        )

    def set_tree(self, tree: QuotaTree | None) -> None:
        self.trees.append(tree)
        self.snapshot.quotas.set_tree(tree)

    async def seed(self) -> None:
        """Our quotas stored in the API server, as the informer's store holds them."""
        for stored in self.api.seed(*self.ours.values()):
            self.ours.put(object_key(stored), stored)


async def test_the_tree_has_every_valid_quota_and_the_nodes_capacity() -> None:
    bad = quota_body("team-c", "c", min={GPU: "4"}, max={GPU: "2"})
    koord = quota_body("team-k", "k", api=f"{c.KOORD_QUOTA_GROUP}/v1alpha1", min={GPU: "1"})
    h = Harness(
        quota_body("team-a", "a", min={GPU: "2"}),
        quota_body("team-b", "b", min={GPU: "6"}),
        bad,
        koord=(koord,),
    )
    h.controller.rebuild()
    [tree] = h.trees
    assert tree is not None
    assert sorted(tree.nodes) == [("team-a", "a"), ("team-b", "b"), ("team-k", "k")]
    assert tree.capacity[GPU] == 8000
    usage = h.snapshot.quotas.usage
    assert usage is not None and usage.of_quota(("team-a", "a")) == {GPU: 3000}


async def test_no_quota_leaves_no_tree() -> None:
    h = Harness()
    h.controller.rebuild()
    assert h.trees == [None]
    assert h.snapshot.quotas.usage is None


async def test_a_status_only_change_does_not_rebuild_and_a_spec_change_does() -> None:
    body = quota_body("team-a", "a", min={GPU: "2"})
    h = Harness(body)
    h.controller.rebuild()
    h.controller.on_quota(WatchEventType.MODIFIED, {**body, "status": {"used": {}}}, body)
    assert not h.controller._dirty
    changed = quota_body("team-a", "a", min={GPU: "3"})
    h.controller.on_quota(WatchEventType.MODIFIED, changed, body)
    assert h.controller._dirty


async def test_statuses_are_written_once_until_they_change() -> None:
    h = Harness(
        quota_body("team-a", "a", min={GPU: "2"}), quota_body("team-b", "b", min={GPU: "6"})
    )
    await h.seed()
    h.controller.rebuild()
    await h.controller.write_statuses()
    assert h.api.count("PATCH", "/status") == 2
    stored = h.api.get_object(ELASTIC_QUOTAS, "a", "team-a")
    assert stored is not None
    assert stored["status"] == {
        "used": {GPU: "3"},
        "borrowed": {GPU: "1"},
        "lent": {GPU: "0"},
        "fairShare": stored["status"]["fairShare"],
        "gangsWaiting": 2,
        "min": {GPU: "2"},
        "max": {},
        "guarantee": {},
    }
    b = h.api.get_object(ELASTIC_QUOTAS, "b", "team-b")
    assert b is not None and b["status"]["lent"] == {GPU: "1"}
    h.api.clear_requests()
    await h.controller.write_statuses()
    assert h.api.count("PATCH") == 0
    families = {f.name: f for f in metrics.REGISTRY.collect()}
    used = families["podgroup_elastic_quota_used"]
    assert {(s.labels["quota"], s.value) for s in used.samples} == {
        ("team-a/a", 3.0),
        ("team-b/b", 1.0),
    }


def test_fair_share_gives_the_surplus_by_demand_and_weight() -> None:
    tree = build_tree(
        [
            QuotaSpec(key=("x", "a"), min={GPU: 2000}),
            QuotaSpec(key=("x", "b"), min={GPU: 2000}),
        ],
        {GPU: 8000},
    )
    usage = QuotaUsage.of(
        tree, [Member("p", ("x", "a"), {GPU: 2000}), Member("q", ("x", "b"), {GPU: 2000})]
    )
    statuses = quota_statuses(tree, usage, {("x", "a"): 1}, {("x", "a"): {GPU: 8000}})
    assert statuses[("x", "a")].fair_share[GPU] == 6000
    assert statuses[("x", "b")].fair_share[GPU] == 2000
    assert statuses[("x", "a")].gangs_waiting == 1


def entry(name: str, namespace: str, created: int, priority: int = 0, **labels: str) -> QueueEntry:
    return QueueEntry(
        namespace,
        name,
        [pod(f"{name}-0", namespace, group=name, labels=labels or None)],
        priority=priority,
        created=dt.datetime(2026, 1, 1, 0, 0, created, tzinfo=dt.UTC),
    )


def test_a_strict_fifo_quota_holds_back_its_own_gangs_only() -> None:
    snapshot = Snapshot()
    snapshot.quotas.set_tree(
        build_tree(
            [
                QuotaSpec(
                    key=("f", "fifo"), min={GPU: 1000}, queueing=c.QueueingStrategy.STRICT_FIFO
                ),
                QuotaSpec(key=("p", "prio"), min={GPU: 1000}),
            ],
            {GPU: 2000},
        )
    )
    queues = QuotaQueues(snapshot)
    queues.refresh(
        [
            entry("second", "f", 2, priority=100),
            entry("first", "f", 1),
            entry("low", "p", 1),
            entry("high", "p", 2, priority=100),
        ]
    )
    assert queues.held_back(("f", "first")) is None
    behind = queues.held_back(("f", "second"))
    assert behind == "quota f/fifo is StrictFIFO: waiting behind its head f/first"
    assert queues.position_text(("f", "second")) == "; position 2 of 2 in quota f/fifo"
    assert queues.held_back(("p", "low")) is None
    assert queues.position_text(("p", "high")) == "; position 1 of 2 in quota p/prio"
    counts, demand = queues.waiting()
    assert counts == {("f", "fifo"): 2, ("p", "prio"): 2}
    assert demand[("f", "fifo")]["pods"] == 2000


def test_a_waiting_gang_is_queued_in_the_quota_its_podgroup_names() -> None:
    snapshot = Snapshot()
    specs = [QuotaSpec(key=("q", "one"), min={GPU: 1000}), QuotaSpec(key=("q", "two"))]
    snapshot.quotas.set_tree(build_tree(specs, {GPU: 1000}))
    snapshot.quotas.set_group_ref(("x", "grouped"), QuotaRef(None, "one"))
    queues = QuotaQueues(snapshot)
    queues.refresh([entry("grouped", "x", 1), entry("own", "x", 2), entry("plain", "x", 3)])
    assert queues.quota_of == {("x", "grouped"): ("q", "one")}  # "x" has no quota of its own
    labelled = entry("grouped", "x", 1, **{c.LABEL_ELASTIC_QUOTA: "two"})
    queues.refresh([labelled])
    assert queues.quota_of == {("x", "grouped"): ("q", "two")}  # the member's label wins


def test_without_a_tree_the_queues_cost_nothing() -> None:
    queues = QuotaQueues(Snapshot())
    queues.refresh([entry("g", "f", 1)])
    assert queues.quota_of == {} and queues.held_back(("f", "g")) is None
    assert queues.position_text(("f", "g")) == ""
