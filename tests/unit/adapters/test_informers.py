"""Informers over the in-memory API server: paginated lists, watch events, 410, handlers.

Each test waits on what the informer reports (its store, its handler calls, the fake's open
watches) rather than on time passing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters import informers
from podgroup_operator.adapters.informers import Informer, object_key
from podgroup_operator.adapters.kube import (
    CSI_NODES,
    PDBS,
    PDBS_V1BETA1,
    PODGROUPS,
    PODS,
    VOLCANO_PODGROUPS,
    KubeClient,
)
from podgroup_operator.adapters.slim import SharedValues, slim_pod, without_managed_fields
from podgroup_operator.api.backoff import Backoff
from podgroup_operator.constants import WatchEventType
from podgroup_operator.controllers.dialects import dialect_informers
from podgroup_operator.controllers.runtime import Informers
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.scheduling.placement import member_shape
from podgroup_operator.scheduling.podinfo import host_ports, inter_pod_constraints, pod_info
from podgroup_operator.scheduling.resources import pod_requests
from podgroup_operator.scheduling.volumes import pod_disks
from tests.builders import pod
from tests.fakes import FakeApiServer
from tests.waiting import until

Seen = list[tuple[WatchEventType, str, str | None]]


@pytest.fixture
def api() -> FakeApiServer:
    return FakeApiServer()


@pytest.fixture
async def started(
    api: FakeApiServer,
) -> AsyncIterator[Callable[..., Awaitable[tuple[Informer, Seen]]]]:
    tasks: list[asyncio.Task[None]] = []

    async def start(page_size: int = 2) -> tuple[Informer, Seen]:
        informer = Informer(KubeClient(api), PODS, slim_pod, page_size=page_size)
        seen: Seen = []

        def record(kind: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            seen.append((kind, object_key(obj), None if old is None else object_key(old)))

        informer.add_handler(record)
        tasks.append(asyncio.create_task(informer.run()))
        await asyncio.wait_for(informer.synced.wait(), 2)
        await until(lambda: api.open_watches, "the watch to open")
        return informer, seen

    yield start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_first_list_comes_in_pages_and_every_object_reaches_the_handlers(
    api: FakeApiServer, started: Callable[..., Awaitable[tuple[Informer, Seen]]]
) -> None:
    api.seed(*(pod(f"p{i}", group="g") for i in range(5)))
    informer, seen = await started(page_size=2)
    assert informer.stats.pages == 3
    assert len(informer.store) == 5
    assert sorted(key for _, key, _ in seen) == [f"default/p{i}" for i in range(5)]
    assert {kind for kind, _, _ in seen} == {WatchEventType.ADDED}


async def test_watch_events_carry_the_previous_object_and_keep_indexes_current(
    api: FakeApiServer, started: Callable[..., Awaitable[tuple[Informer, Seen]]]
) -> None:
    informer, seen = await started()
    members = informer.store.add_index("group", group_key_of)
    kube = KubeClient(api)
    await kube.create(PODS, pod("a", group="g1"), "default")
    await until(lambda: members.get(("default", "g1")), "a to be indexed under g1")
    await kube.patch(PODS, "a", {"metadata": {"labels": {c.LABEL_POD_GROUP: "g2"}}}, "default")
    await until(lambda: members.get(("default", "g2")), "a to move to g2")
    assert members.get(("default", "g1")) == ()
    await kube.delete(PODS, "a", "default")
    await until(lambda: len(seen) == 4, "the delete")
    assert seen == [
        (WatchEventType.ADDED, "default/a", None),
        (WatchEventType.MODIFIED, "default/a", "default/a"),
        (WatchEventType.MODIFIED, "default/a", "default/a"),  # the deletionTimestamp
        (WatchEventType.DELETED, "default/a", "default/a"),
    ]
    assert members.keys() == []


async def test_gone_lists_again_and_reports_what_was_deleted_meanwhile(
    api: FakeApiServer, started: Callable[..., Awaitable[tuple[Informer, Seen]]]
) -> None:
    api.seed(pod("kept"), pod("lost"))
    informer, seen = await started()
    lists = api.count("GET", "/api/v1/pods")
    relist = api.hold("GET", "/api/v1/pods")
    api.inject_error("WATCH", "/api/v1/pods", 410, "Expired")
    api.close_watches()
    await until(lambda: api.count("GET", "/api/v1/pods") > lists, "the list after 410")
    await KubeClient(api).delete(PODS, "lost", "default")  # unseen: no watch is open
    relist.set()
    await until(lambda: informer.store.get("default/lost") is None, "lost to leave the store")
    assert seen[-1] == (WatchEventType.DELETED, "default/lost", "default/lost")
    assert informer.stats.gone == 1
    assert informer.store.get("default/kept") is not None


async def test_bookmarks_move_the_resume_point_without_events(
    api: FakeApiServer, started: Callable[..., Awaitable[tuple[Informer, Seen]]]
) -> None:
    informer, seen = await started()
    api.seed(pod("noise", namespace="elsewhere"))  # bumps the resourceVersion
    await until(lambda: len(seen) == 1, "the seeded pod")
    api.bookmark()
    await until(lambda: informer.stats.bookmarks == 1, "the bookmark")
    watches = informer.stats.watches
    api.close_watches()
    await until(lambda: informer.stats.watches > watches, "the watch to resume")
    assert informer.stats.lists == 1  # resumed from the bookmark: no new list
    assert len(seen) == 1


async def test_a_failing_handler_stops_neither_the_informer_nor_other_handlers(
    api: FakeApiServer, started: Callable[..., Awaitable[tuple[Informer, Seen]]]
) -> None:
    informer, seen = await started()

    def broken(kind: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        raise OverflowError("date value out of range")

    informer.add_handler(broken)
    await KubeClient(api).create(PODS, pod("x"), "default")
    await KubeClient(api).create(PODS, pod("y"), "default")
    await until(lambda: len(seen) == 2, "both pods to reach the healthy handler")
    assert informer.stats.handler_errors == 2


async def test_a_late_handler_is_replayed_the_store() -> None:
    api = FakeApiServer()
    api.seed(pod("a"), pod("b"))
    informer = Informer(KubeClient(api), PODS, slim_pod)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 2)
        seen: list[str] = []
        informer.add_handler(lambda kind, obj, old: seen.append(f"{kind}:{object_key(obj)}"))
        assert sorted(seen) == ["ADDED:default/a", "ADDED:default/b"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.fixture
async def six_pods(api: FakeApiServer, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Informer]:
    """A synced pod informer over p0..p5, replaying two objects per slice."""
    monkeypatch.setattr(informers, "REPLAY_SLICE", 2)
    api.seed(*(pod(f"p{i}") for i in range(6)))
    informer = Informer(KubeClient(api), PODS, slim_pod)
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.synced.wait(), 2)
    yield informer
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_an_attached_handler_is_replayed_in_slices_and_never_sees_the_deleted_again(
    six_pods: Informer,
) -> None:
    """Between slices the loop runs: events meanwhile reach the handler at once, and an object
    they delete or change before its turn is skipped, or replayed as it is now."""
    informer = six_pods
    seen: list[str] = []

    def record(kind: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        labels = obj["metadata"].get("labels") or {}
        seen.append(f"{kind}:{obj['metadata']['name']}{':' + labels['v'] if labels else ''}")

    async def meanwhile() -> None:
        """What the watch brings after the first slice (the task's first turn)."""
        p3, p4 = informer.store.get("default/p3"), informer.store.get("default/p4")
        assert p3 is not None and p4 is not None
        informer._on_event("MODIFIED", {**p3, "metadata": {**p3["metadata"], "labels": {"v": "2"}}})
        informer._on_event("DELETED", p4)

    side = asyncio.create_task(meanwhile())
    await informer.attach(record)
    await side

    assert seen[:2] == ["ADDED:p0", "ADDED:p1"]
    assert seen[2:4] == ["MODIFIED:p3:2", "DELETED:p4"]  # between the slices
    assert seen[4:] == ["ADDED:p2", "ADDED:p3:2", "ADDED:p5"]  # p4 is gone: not replayed


async def test_a_handler_removed_during_its_replay_gets_no_more_of_it(six_pods: Informer) -> None:
    seen: list[str] = []

    def record(kind: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        seen.append(obj["metadata"]["name"])
        if len(seen) == 2:
            six_pods.remove_handler(record)

    await six_pods.attach(record)
    assert seen == ["p0", "p1"]
    six_pods.remove_handler(record)  # a second removal is let be


class FaultyWatches(KubeClient):
    """The fake's client, except that its first watches misbehave as `faults` says, in order:
    "hang" never yields nor ends (a dead connection), "empty" ends at once with nothing,
    "reset" fails as a dropped connection does."""

    def __init__(self, api: FakeApiServer, *faults: str) -> None:
        super().__init__(api)
        self.faults = list(faults)
        self.from_versions: list[str | None] = []

    async def watch(
        self, kind: Any, namespace: str | None = None, **kwargs: Any
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        self.from_versions.append(kwargs.get("resource_version"))
        fault = self.faults.pop(0) if self.faults else None
        if fault == "hang":
            await asyncio.Event().wait()
        if fault == "reset":
            raise ConnectionResetError("Connection reset by peer")
        if fault is not None:
            return
        async for event in super().watch(kind, namespace, **kwargs):
            yield event


async def _run_until_seen(client: FaultyWatches, api: FakeApiServer, **fields: Any) -> Informer:
    """Run an informer on `client` until a pod created after its first list is in its store."""
    api.seed(pod("old"))
    informer = Informer(client, PODS, slim_pod, **fields)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 2)
        await KubeClient(api).create(PODS, pod("new"), "default")
        await until(lambda: informer.store.get("default/new") is not None, "the new pod", 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return informer


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(informers, "RETRY", Backoff(initial_seconds=0.001, max_seconds=0.002))


@pytest.mark.usefixtures("quick_retries")
async def test_a_watch_the_server_never_ends_is_ended_here_and_resumed_from_its_version(
    api: FakeApiServer,
) -> None:
    client = FaultyWatches(api, "hang")
    informer = await _run_until_seen(client, api, watch_seconds=(0, 0), watch_grace_seconds=0.05)
    assert informer.stats.stalls == 1
    assert informer.stats.lists == 1
    assert client.from_versions[0] and client.from_versions[1] == client.from_versions[0]


@pytest.mark.usefixtures("quick_retries")
async def test_dropped_and_empty_watches_are_backed_off_and_resumed_without_a_list(
    api: FakeApiServer,
) -> None:
    client = FaultyWatches(api, "reset", "empty", "empty")
    informer = await _run_until_seen(client, api)
    assert informer.stats.failures == 3  # each backed off, the empty ones too
    assert informer.stats.lists == 1
    assert len(set(client.from_versions)) == 1  # every watch from the list's version


def test_slim_pods_keep_what_the_operator_reads_and_bare_pods_keep_their_spec() -> None:
    controlled = pod("c", group="g", requests={"cpu": "1"}, node="n1")
    controlled["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "rs",
            "uid": "u",
            "controller": True,
        }
    ]
    controlled["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    controlled["spec"]["containers"][0]["env"] = [{"name": "A", "value": "x" * 1000}]
    controlled["status"]["containerStatuses"] = [{"name": "main", "ready": True}]
    slim = slim_pod(controlled)
    assert "managedFields" not in slim["metadata"]
    assert slim["spec"]["containers"] == [
        {
            "name": "main",
            "image": "registry.local/sim:latest",
            "resources": {"requests": {"cpu": "1"}},
        }
    ]
    assert slim["spec"]["nodeName"] == "n1"
    assert "containerStatuses" not in slim["status"]
    assert group_key_of(slim) == ("default", "g")
    bare = pod("b", requests={"cpu": "1"})
    bare["spec"]["containers"][0]["env"] = [{"name": "A", "value": "x"}]
    assert slim_pod(bare)["spec"] == bare["spec"]


def test_slim_pods_keep_their_scheduling_gates() -> None:
    """The scheduler never binds a gated pod (scheduling/gates.py); a slim copy without the
    gates would have it bound."""
    gated = pod("g", group="g", schedulingGates=[{"name": c.KUEUE_ADMISSION_GATE}])
    gated["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "ReplicationController",
            "name": "r",
            "uid": "u",
            "controller": True,
        }
    ]
    assert slim_pod(gated)["spec"]["schedulingGates"] == [{"name": c.KUEUE_ADMISSION_GATE}]


def test_a_pod_not_bound_yet_keeps_its_pod_scheduled_condition_only() -> None:
    """A new leader reads what the last one wrote there (controllers/podsignals.py)."""
    scheduled = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "short 2 nodes",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    waiting = pod("w", group="g")
    waiting["status"]["conditions"] = [{"type": "Ready", "status": "False"}, scheduled]
    share = SharedValues()
    slim = slim_pod(waiting, share)
    assert slim["status"]["conditions"] == [
        {k: scheduled[k] for k in ("type", "status", "reason", "message")}
    ]
    mate = pod("m", group="g")
    mate["status"]["conditions"] = [dict(scheduled)]
    assert slim_pod(mate, share)["status"]["conditions"] is slim["status"]["conditions"]
    bound = pod("b", group="g", node="n1")
    bound["status"]["conditions"] = [{**scheduled, "status": "True", "reason": ""}]
    assert "conditions" not in slim_pod(bound)["status"]


def test_slim_pods_keep_every_fact_the_scheduler_reads() -> None:
    """The scheduler decides on slim pods: a controlled pod using every scheduling field must
    look the same to it slim as whole (requests with sidecars and overhead, host ports,
    pod-to-pod constraints, volumes, priority, preferences)."""
    full = pod(
        "p",
        group="g",
        labels={"app": "web"},
        requests={"cpu": "1"},
        priority=7,
        preemptionPolicy="Never",
        overhead={"cpu": "100m"},
        nodeSelector={"disk": "ssd"},
        tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
        affinity={
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 5,
                        "preference": {
                            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]
                        },
                    }
                ]
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            },
        },
        topologySpreadConstraints=[
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "matchLabelKeys": ["app"],
            }
        ],
        volumes=[
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "ebs", "awsElasticBlockStore": {"volumeID": "vol-1", "fsType": "ext4"}},
            {"name": "pd", "gcePersistentDisk": {"pdName": "pd-1", "readOnly": True}},
            {"name": "rbd", "rbd": {"monitors": ["m1"], "pool": "rbd", "image": "i"}},
            {"name": "token", "secret": {"secretName": "default-token-x"}},
            {"name": "config", "projected": {"sources": [{"configMap": {"name": "c"}}]}},
        ],
        initContainers=[
            {
                "name": "proxy",
                "image": "x",
                "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "500m"}},
                "ports": [{"containerPort": 80, "hostPort": 8080}],
            },
            {
                "name": "setup",
                "image": "x",
                "command": ["true"],
                "resources": {"requests": {"memory": "1Gi"}},
            },
        ],
    )
    full["spec"]["containers"][0]["ports"] = [{"containerPort": 9000, "hostPort": 9000}]
    full["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
    ]
    slim = slim_pod(full)
    assert slim["spec"] != full["spec"]  # slimmed indeed (image, command dropped)
    assert pod_requests(slim) == pod_requests(full)
    assert pod_requests(slim)["cpu"] == 1600  # main + sidecar + overhead
    assert pod_info(slim, "u1", pod_requests(slim), group_key_of) == pod_info(
        full, "u1", pod_requests(full), group_key_of
    )
    assert len(host_ports(slim)) == 2
    assert inter_pod_constraints(slim) == inter_pod_constraints(full)
    assert member_shape(slim) == member_shape(full)
    assert slim["spec"]["preemptionPolicy"] == "Never"
    assert [v["name"] for v in slim["spec"]["volumes"]] == ["data", "scratch", "ebs", "pd", "rbd"]
    assert len(pod_disks(slim)) == 3
    shared = slim_pod(full, SharedValues())
    assert shared == slim
    assert inter_pod_constraints(shared) == inter_pod_constraints(full)
    assert member_shape(shared) == member_shape(full)


def _template_pod(name: str, *, owner: str | None) -> dict[str, Any]:
    """A pod as the apiserver sends it for one template (parsed anew, as each watch event is)."""
    body = pod(
        name,
        group="g",
        labels={"app": "train"},
        requests={"cpu": "1"},
        node="n1",
        tolerations=[
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
        ],
        volumes=[{"name": "token", "secret": {"secretName": "default-token-x"}}],
    )
    body["metadata"]["uid"] = f"uid-{name}"
    if owner is not None:
        body["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": "u", "controller": True}
        ]
    return orjson.loads(orjson.dumps(body))


@pytest.mark.parametrize("owner", ["job", None], ids=["controlled", "bare"])
def test_pods_of_one_template_share_what_they_hold_alike(owner: str | None) -> None:
    """Each watch event parses a pod anew; kept as parsed, every pod of a Job held its own
    containers, tolerations, labels and owners (most of a slim pod's memory). With
    `SharedValues` they hold one copy, and each pod still reads as it did."""
    share = SharedValues()
    first, second = (slim_pod(_template_pod(name, owner=owner), share) for name in ("a", "b"))
    assert first == slim_pod(_template_pod("a", owner=owner))
    assert second["metadata"]["name"] == "b"
    for part, field in [
        ("metadata", "labels"),
        ("spec", "containers"),
        ("spec", "tolerations"),
    ]:
        assert second[part][field] is first[part][field], field
    if owner is not None:
        assert second["metadata"]["ownerReferences"] is first["metadata"]["ownerReferences"]
        assert "volumes" not in second["spec"]  # a token volume does not constrain placement
    else:
        assert second["spec"]["volumes"] is first["spec"]["volumes"]  # kept whole, once
    assert second["spec"]["nodeName"] is first["spec"]["nodeName"]  # strings interned
    different = _template_pod("c", owner=owner)
    different["spec"]["tolerations"] = []
    assert slim_pod(different, share)["spec"]["tolerations"] == []


def test_shared_values_compare_json_and_start_over_at_their_limit() -> None:
    share = SharedValues(limit=2)
    one = {"a": [1]}
    assert share(one) is one
    assert share({"a": [1]}) is one
    assert share({"a": [True]}) == {"a": [True]}  # JSON true is not 1
    assert share({"a": [True]}) is not one
    assert len(share) == 2
    share({"b": 1})  # a third distinct value: the table starts over
    assert len(share) == 1
    assert share({"a": [1]}) is not one  # forgotten (the pods holding `one` keep it)
    assert share({}) == {} and share(None) is None
    kept = len(share)
    big = {"x": "y" * 5000}
    assert share(big) is big and share({"x": "y" * 5000}) is not big  # too big to keep
    odd = {"a": {1, 2}}
    assert share(odd) is odd  # not JSON: as it is
    assert len(share) == kept


async def test_a_kind_the_server_does_not_serve_falls_back_to_the_older_version(
    api: FakeApiServer,
) -> None:
    # Kubernetes 1.20 serves PodDisruptionBudgets only as policy/v1beta1.
    api.seed(
        {
            "apiVersion": "policy/v1beta1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}},
        }
    )
    api.inject_error("GET", PDBS.path(), 404, "NotFound", "the server could not find it")
    informer = Informer(KubeClient(api), PDBS, without_managed_fields, fallbacks=(PDBS_V1BETA1,))
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 2)
        assert informer.kind == PDBS_V1BETA1
        assert [object_key(o) for o in informer.store.objects()] == ["default/guard"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_crd_not_installed_is_named_with_its_fix_on_one_line(
    api: FakeApiServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API server answers a kind nobody installed with "404 page not found\n": the log
    said that, over two lines, and nothing of the CRD. Once the CRD is there, it syncs."""
    monkeypatch.setattr(informers, "RETRY", Backoff(initial_seconds=0.01, max_seconds=0.01))
    api.inject_error("GET", PODGROUPS.path(), 404, "NotFound", "404 page not found\n")
    built = Informers.build(KubeClient(api))
    task = asyncio.create_task(built.podgroups.run())
    try:
        await asyncio.wait_for(built.podgroups.synced.wait(), 1)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    (line,) = [r.getMessage() for r in caplog.records if "list failed" in r.getMessage()]
    assert "\n" not in line
    assert f"{PODGROUPS.path()} is not served (404); install the PodGroup CRD" in line
    assert c.CRD_INSTALL_HINT in line


def test_the_operators_pod_informer_shares_what_pods_hold_alike() -> None:
    """The wiring, not only the function: the runtime's pod store is built with sharing."""
    informers = Informers.build(KubeClient(FakeApiServer()))
    first, second = (informers.pods.slim(_template_pod(n, owner="job")) for n in ("a", "b"))
    assert second["spec"]["containers"] is first["spec"]["containers"]
    assert second["metadata"]["labels"] is first["metadata"]["labels"]


async def test_csinodes_refused_by_an_older_clusterrole_do_not_hold_the_operator_back(
    api: FakeApiServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new release run under the ClusterRole of an older one: the CSINode list is refused
    (403). The informer counts as synced (synced gates leadership, so every gang would wait),
    says once what goes missing and how to fix it, and fills its store once the list is let
    through."""
    monkeypatch.setattr(informers, "RETRY", Backoff(initial_seconds=0.01, max_seconds=0.01))
    api.inject_error("GET", CSI_NODES.path(), 403, "Forbidden", "csinodes is forbidden", times=3)
    built = Informers.build(KubeClient(api))
    api.seed({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n0"}})
    seen: list[str] = []
    built.csi_nodes.add_handler(lambda kind, obj, old: seen.append(obj["metadata"]["name"]))
    task = asyncio.create_task(built.csi_nodes.run())
    try:
        await asyncio.wait_for(built.csi_nodes.synced.wait(), 1)
        assert len(built.csi_nodes.store) == 0
        await until(lambda: seen, "the store to fill once the list is let through")
        assert seen == ["n0"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    going_on = [r.getMessage() for r in caplog.records if "going on without it" in r.getMessage()]
    assert len(going_on) == 1, going_on
    assert "csinodes.storage.k8s.io" in going_on[0] and "403" in going_on[0]


async def test_a_required_kind_refused_is_not_counted_synced(
    api: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pods are not optional: a refused pod list keeps the informer unsynced (the operator
    does not lead on a cluster it cannot see), and retries."""
    monkeypatch.setattr(informers, "RETRY", Backoff(initial_seconds=0.01, max_seconds=0.01))
    api.inject_error("GET", PODS.path(), 403, "Forbidden", "pods is forbidden", times=1000)
    built = Informers.build(KubeClient(api))
    task = asyncio.create_task(built.pods.run())
    try:
        await until(lambda: built.pods.stats.failures >= 5, "five refused lists")
        assert not built.pods.synced.is_set()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# --- caught_up: a new leader's wait for its pod watch ---------------------------------------------


def _at(informer: Informer, version: int) -> None:
    """The watch delivers a change of pod p at `version`."""
    body = pod("p")
    body["metadata"]["resourceVersion"] = str(version)
    informer._on_event("MODIFIED", body)


def _resume_point(informer: Informer) -> int:
    stored = informer.store.get("default/p")
    assert stored is not None
    return int(stored["metadata"]["resourceVersion"])


async def _deliver(informer: Informer, versions: range, every: float) -> None:
    for version in versions:
        await asyncio.sleep(every)
        _at(informer, version)


async def test_caught_up_waits_while_the_watch_brings_changes_older_than_the_version() -> None:
    informer = Informer(KubeClient(FakeApiServer()), PODS, slim_pod)
    _at(informer, 10)
    delivering = asyncio.create_task(_deliver(informer, range(11, 30), every=0.02))
    try:
        assert await informer.caught_up("15", quiet=5, timeout=10)
        assert _resume_point(informer) >= 15  # never quiet for 5 s: it waited for 15
    finally:
        delivering.cancel()


async def test_caught_up_counts_a_quiet_watch_as_caught_up() -> None:
    """Nothing on its way: a version past the last pod change (the Lease's own writes) is
    never reached by the pod watch, and need not be."""
    informer = Informer(KubeClient(FakeApiServer()), PODS, slim_pod)
    _at(informer, 10)
    assert await informer.caught_up("99", quiet=0.05, timeout=5)
    assert _resume_point(informer) == 10


async def test_caught_up_gives_up_at_its_timeout_while_changes_keep_coming_below_the_version() -> (
    None
):
    informer = Informer(KubeClient(FakeApiServer()), PODS, slim_pod)
    _at(informer, 10)
    delivering = asyncio.create_task(_deliver(informer, range(11, 1000), every=0.01))
    try:
        assert not await informer.caught_up("5000", quiet=5, timeout=0.2)
    finally:
        delivering.cancel()


async def test_caught_up_does_not_compare_versions_that_are_not_numbers() -> None:
    informer = Informer(KubeClient(FakeApiServer()), PODS, slim_pod)
    _at(informer, 10)
    informer.stats.last_event = asyncio.get_running_loop().time() + 60  # never quiet
    assert await informer.caught_up("a1b2", quiet=0.05, timeout=5)


async def test_an_optional_kind_never_served_is_said_once_then_retried_quietly(
    api: FakeApiServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster without Volcano: its PodGroup kind is not served (404) for ever. One warning
    says so; the retries that follow log at debug level only, not one line every 30 s."""
    monkeypatch.setattr(informers, "RETRY", Backoff(initial_seconds=0.01, max_seconds=0.01))
    api.inject_error("GET", VOLCANO_PODGROUPS.path(), 404, "NotFound", "not found", times=1000)
    caplog.set_level(logging.DEBUG, logger=informers.__name__)
    volcano = dialect_informers(KubeClient(api))[c.Dialect.VOLCANO]
    task = asyncio.create_task(volcano.run())
    try:
        await until(lambda: volcano.stats.unserved >= 5, "five lists not served")
        assert volcano.synced.is_set()
        # Absent, not failing: podgroup_informer_failures (and bench scale's informer trouble)
        # count nothing for it.
        assert volcano.stats.failures == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1, warned
    assert "going on without it" in warned[0] and "404" in warned[0]
    quiet = [
        r for r in caplog.records if r.levelno == logging.DEBUG and "list failed" in r.getMessage()
    ]
    assert len(quiet) >= 3
