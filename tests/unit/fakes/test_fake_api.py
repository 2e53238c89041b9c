"""The in-memory API server behaves like the apiserver where the operator relies on it.

Every test drives the fake through the real `KubeClient`, so what passes here is what handler
tests get: the same requests, the same Status errors.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, cast

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    EVENTS,
    JSON_PATCH,
    NODES,
    PODGROUPS,
    PODS,
    STRATEGIC_PATCH,
    ApiError,
    KubeClient,
    Request,
)
from tests.builders import node, pod, podgroup
from tests.fakes import FakeApiServer, Locator, merge_patch

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
NS = "default"


@pytest.fixture
def fake() -> FakeApiServer:
    return FakeApiServer(clock=lambda: T0)


@pytest.fixture
def kube(fake: FakeApiServer) -> KubeClient:
    return KubeClient(fake)


async def api_error(call: Awaitable[Any]) -> ApiError:
    with pytest.raises(ApiError) as caught:
        await call
    return caught.value


# --- paths ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/api/v1/pods", Locator("/api/v1", "pods")),
        ("/api/v1/namespaces/ns/pods", Locator("/api/v1", "pods", "ns")),
        ("/api/v1/namespaces/ns/pods/p/binding", Locator("/api/v1", "pods", "ns", "p", "binding")),
        ("/api/v1/namespaces/ns", Locator("/api/v1", "namespaces", None, "ns")),
        ("/api/v1/namespaces/ns/status", Locator("/api/v1", "namespaces", None, "ns", "status")),
        ("/api/v1/nodes/n%2F1", Locator("/api/v1", "nodes", None, "n/1")),
        (
            "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups/g/status",
            Locator("/apis/scheduling.x-k8s.io/v1alpha1", "podgroups", "ns", "g", "status"),
        ),
    ],
)
def test_paths_are_taken_apart_like_the_apiserver_does(path: str, expected: Locator) -> None:
    assert Locator.parse(path) == expected


# --- create and read -----------------------------------------------------------------------------


async def test_create_assigns_server_fields(fake: FakeApiServer, kube: KubeClient) -> None:
    body = podgroup("gang", min_member=2)
    body["metadata"]["uid"] = "client-chosen"
    del body["metadata"]["creationTimestamp"]
    created = await kube.create(PODGROUPS, body, NS)
    meta = created["metadata"]
    assert meta["uid"] and meta["uid"] != "client-chosen"
    assert meta["resourceVersion"] == "1"
    assert meta["generation"] == 1
    assert meta["creationTimestamp"] == "2026-03-01T12:00:00Z"
    assert await kube.get(PODGROUPS, "gang", NS) == created


async def test_resource_versions_come_from_one_counter_across_kinds(kube: KubeClient) -> None:
    a = await kube.create(PODS, pod("a"), NS)
    n = await kube.create(NODES, node("n1"))
    b = await kube.create(PODS, pod("b"), NS)
    versions = [int(o["metadata"]["resourceVersion"]) for o in (a, n, b)]
    assert versions == sorted(versions) and len(set(versions)) == 3
    assert "namespace" not in n["metadata"]


async def test_custom_resources_lose_status_on_create_pods_keep_it(kube: KubeClient) -> None:
    group = await kube.create(PODGROUPS, podgroup("gang", status={"phase": "Running"}), NS)
    running = await kube.create(PODS, pod("p", phase=c.PodPhase.RUNNING), NS)
    assert "status" not in group
    assert running["status"]["phase"] == "Running"


async def test_creating_an_existing_name_is_409_already_exists(kube: KubeClient) -> None:
    await kube.create(PODS, pod("p"), NS)
    error = await api_error(kube.create(PODS, pod("p"), NS))
    assert (error.status, error.reason) == (409, "AlreadyExists")
    assert error.body["kind"] == "Status" and error.body["status"] == "Failure"
    assert error.body["code"] == 409
    assert '"p" already exists' in error.message


async def test_same_name_in_other_namespace_or_kind_is_another_object(kube: KubeClient) -> None:
    await kube.create(PODS, pod("x"), NS)
    await kube.create(PODS, pod("x", "other"), "other")
    await kube.create(PODGROUPS, podgroup("x"), NS)
    assert len((await kube.list(PODS))["items"]) == 2


async def test_generate_name_gives_fresh_names_with_the_prefix(kube: KubeClient) -> None:
    body = {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "gang."}}
    names = {(await kube.create(EVENTS, body, NS))["metadata"]["name"] for _ in range(20)}
    assert len(names) == 20
    assert all(name.startswith("gang.") and len(name) == len("gang.") + 5 for name in names)


async def test_a_name_is_required(kube: KubeClient) -> None:
    error = await api_error(kube.create(EVENTS, {"metadata": {}}, NS))
    assert (error.status, error.reason) == (422, "Invalid")


async def test_namespace_in_body_must_match_the_path(kube: KubeClient) -> None:
    error = await api_error(kube.create(PODS, pod("p", "elsewhere"), NS))
    assert (error.status, error.reason) == (400, "BadRequest")


async def test_get_of_a_missing_object_is_404_with_a_status_body(kube: KubeClient) -> None:
    error = await api_error(kube.get(PODGROUPS, "nope", NS))
    assert error.not_found and error.reason == "NotFound"
    assert error.message == 'podgroups.scheduling.x-k8s.io "nope" not found'
    assert error.body["details"] == {"name": "nope", "kind": "podgroups"}


async def test_bodies_travel_as_json(fake: FakeApiServer, kube: KubeClient) -> None:
    created = await kube.create(PODS, pod("p", phase=c.PodPhase.RUNNING), NS)
    assert type(created["status"]["phase"]) is str
    with pytest.raises(TypeError):
        await kube.create(PODS, {"metadata": {"name": "q"}, "spec": {"x": object()}}, NS)


# --- list and selectors --------------------------------------------------------------------------


@pytest.fixture
async def labelled(kube: KubeClient) -> None:
    await kube.create(PODS, pod("a", labels={"app": "web", "tier": "front"}, node="n1"), NS)
    await kube.create(PODS, pod("b", labels={"app": "web"}, node="n2"), NS)
    await kube.create(PODS, pod("c", labels={"app": "db"}), NS)
    await kube.create(PODS, pod("d", "other", labels={"app": "web"}), "other")


@pytest.mark.parametrize(
    ("selector", "names"),
    [
        ("app=web", ["a", "b", "d"]),
        ("app==web", ["a", "b", "d"]),
        ("app!=web", ["c"]),
        ("tier", ["a"]),
        ("!tier", ["b", "c", "d"]),
        ("app=web,tier", ["a"]),
        ("app=web,!tier", ["b", "d"]),
        ("app in (db, cache)", ["c"]),
        ("app notin (db),tier", ["a"]),
        ("app=nothing", []),
        ("", ["a", "b", "c", "d"]),
    ],
)
@pytest.mark.usefixtures("labelled")
async def test_label_selectors(kube: KubeClient, selector: str, names: list[str]) -> None:
    found = await kube.list(PODS, label_selector=selector)
    assert [p["metadata"]["name"] for p in found["items"]] == names


@pytest.mark.parametrize(
    ("selector", "names"),
    [
        ("metadata.name=b", ["b"]),
        ("spec.nodeName=n1", ["a"]),
        ("spec.nodeName=", ["c", "d"]),
        ("spec.nodeName!=", ["a", "b"]),
        ("metadata.namespace=other", ["d"]),
        ("status.phase=Pending,spec.nodeName!=n1", ["b", "c", "d"]),
    ],
)
@pytest.mark.usefixtures("labelled")
async def test_field_selectors(kube: KubeClient, selector: str, names: list[str]) -> None:
    found = await kube.list(PODS, field_selector=selector)
    assert [p["metadata"]["name"] for p in found["items"]] == names


@pytest.mark.usefixtures("labelled")
async def test_list_is_namespaced_and_carries_the_current_version(
    fake: FakeApiServer, kube: KubeClient
) -> None:
    found = await kube.list(PODS, NS)
    assert [p["metadata"]["name"] for p in found["items"]] == ["a", "b", "c"]
    assert found["kind"] == "PodList" and found["apiVersion"] == "v1"
    assert found["metadata"]["resourceVersion"] == fake.resource_version
    empty = await kube.list(PODGROUPS, NS)
    assert empty["kind"] == "PodGroupList" and empty["items"] == []
    assert empty["apiVersion"] == c.API_VERSION


async def test_events_are_found_by_involved_object(fake: FakeApiServer, kube: KubeClient) -> None:
    group = await kube.create(PODGROUPS, podgroup("gang"), NS)
    await kube.create_event(
        group, event_type="Normal", reason="PhaseChanged", message="m", timestamp="t"
    )
    found = await kube.list(EVENTS, NS, field_selector="involvedObject.name=gang")
    assert [e["reason"] for e in found["items"]] == ["PhaseChanged"]
    assert found["items"][0]["involvedObject"]["uid"] == group["metadata"]["uid"]
    assert fake.events(involved="gang", reason="PhaseChanged") == found["items"]
    assert fake.events(involved="someone-else") == []


# --- update and patch ----------------------------------------------------------------------------


async def test_put_needs_the_current_resource_version(kube: KubeClient) -> None:
    created = await kube.create(PODS, pod("p"), NS)
    stale = {**created, "metadata": {**created["metadata"]}}
    created["metadata"]["labels"] = {"new": "yes"}
    replaced = await kube.apply_json(PODS, created, NS)
    assert replaced["metadata"]["labels"] == {"new": "yes"}
    assert int(replaced["metadata"]["resourceVersion"]) > int(stale["metadata"]["resourceVersion"])
    status, body = await kube.transport.send(Request("PUT", PODS.path(NS, "p"), body=stale))
    assert (status, body["reason"]) == (409, "Conflict")
    assert "the object has been modified" in body["message"]


async def test_put_of_a_missing_object_is_404(kube: KubeClient) -> None:
    status, body = await kube.transport.send(
        Request("PUT", PODS.path(NS, "ghost"), body=pod("ghost"))
    )
    assert (status, body["reason"]) == (404, "NotFound")


@pytest.mark.parametrize(
    ("target", "patch", "result"),
    [
        # RFC 7386 appendix A, the interesting rows.
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
        ({"a": "foo"}, "bar", "bar"),
    ],
)
def test_merge_patch_follows_rfc_7386(target: Any, patch: Any, result: Any) -> None:
    before = repr(target)
    assert merge_patch(target, patch) == result
    assert repr(target) == before  # the input is not modified


async def test_merge_patch_merges_maps_deletes_nulls_and_replaces_lists(
    kube: KubeClient,
) -> None:
    await kube.create(PODS, pod("p", labels={"a": "1", "b": "2"}), NS)
    patched = await kube.patch(
        PODS,
        "p",
        {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"containers": [{"name": "x"}]}},
        NS,
    )
    assert patched["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert patched["spec"]["containers"] == [{"name": "x"}]


async def test_strategic_merge_patch_merges_containers_by_name(kube: KubeClient) -> None:
    body = pod("p")
    body["spec"]["containers"].append({"name": "side", "image": "side:1"})
    await kube.create(PODS, body, NS)
    patched = await kube.patch(
        PODS,
        "p",
        {"spec": {"containers": [{"name": "side", "image": "side:2"}]}},
        NS,
        content_type=STRATEGIC_PATCH,
    )
    assert [(x["name"], x["image"]) for x in patched["spec"]["containers"]] == [
        ("main", "registry.local/sim:latest"),
        ("side", "side:2"),
    ]


async def test_strategic_merge_patch_of_a_custom_resource_is_415(kube: KubeClient) -> None:
    await kube.create(PODGROUPS, podgroup("gang"), NS)
    error = await api_error(
        kube.patch(PODGROUPS, "gang", {"spec": {"minMember": 2}}, NS, content_type=STRATEGIC_PATCH)
    )
    assert (error.status, error.reason) == (415, "UnsupportedMediaType")


async def test_json_patch_applies_operations_in_order(kube: KubeClient) -> None:
    await kube.create(PODS, pod("p", labels={"a": "1"}), NS)
    patched = await kube.patch(
        PODS,
        "p",
        [
            {"op": "test", "path": "/metadata/labels/a", "value": "1"},
            {"op": "add", "path": "/metadata/labels/x~1y", "value": "2"},
            {"op": "remove", "path": "/metadata/labels/a"},
            {"op": "add", "path": "/spec/containers/-", "value": {"name": "side"}},
            {"op": "replace", "path": "/spec/containers/0/name", "value": "first"},
            {"op": "copy", "from": "/metadata/labels", "path": "/metadata/annotations"},
        ],
        NS,
        content_type=JSON_PATCH,
    )
    assert patched["metadata"]["labels"] == {"x/y": "2"}
    assert patched["metadata"]["annotations"] == {"x/y": "2"}
    assert [x["name"] for x in patched["spec"]["containers"]] == ["first", "side"]


async def test_a_failing_json_patch_test_changes_nothing(kube: KubeClient) -> None:
    created = await kube.create(PODS, pod("p", labels={"a": "1"}), NS)
    error = await api_error(
        kube.patch(
            PODS,
            "p",
            [
                {"op": "add", "path": "/metadata/labels/b", "value": "2"},
                {"op": "test", "path": "/metadata/labels/a", "value": "other"},
            ],
            NS,
            content_type=JSON_PATCH,
        )
    )
    assert error.status == 422
    assert await kube.get(PODS, "p", NS) == created


async def test_resource_version_in_a_patch_is_a_precondition(kube: KubeClient) -> None:
    created = await kube.create(PODGROUPS, podgroup("gang"), NS)
    version = created["metadata"]["resourceVersion"]
    await kube.patch(PODGROUPS, "gang", {"metadata": {"labels": {"a": "b"}}}, NS)
    error = await api_error(
        kube.patch(
            PODGROUPS, "gang", {"metadata": {"resourceVersion": version}, "spec": {"x": 1}}, NS
        )
    )
    assert (error.status, error.reason) == (409, "Conflict")
    current = await kube.get(PODGROUPS, "gang", NS)
    assert "x" not in current["spec"]
    fresh = current["metadata"]["resourceVersion"]
    ok = await kube.patch(
        PODGROUPS, "gang", {"metadata": {"resourceVersion": fresh}, "spec": {"x": 1}}, NS
    )
    assert ok["spec"]["x"] == 1


async def test_uid_in_a_patch_is_a_precondition(kube: KubeClient) -> None:
    await kube.create(PODS, pod("p"), NS)
    error = await api_error(kube.patch(PODS, "p", {"metadata": {"uid": "another"}}, NS))
    assert error.conflict and "Precondition failed" in error.message


async def test_status_subresource_writes_only_status(kube: KubeClient) -> None:
    await kube.create(PODGROUPS, podgroup("gang", min_member=2), NS)
    patched = await kube.patch(
        PODGROUPS,
        "gang",
        {"spec": {"minMember": 9}, "metadata": {"labels": {"a": "b"}}, "status": {"phase": "X"}},
        NS,
        subresource="status",
    )
    assert patched["status"] == {"phase": "X"}
    assert patched["spec"]["minMember"] == 2
    assert "labels" not in patched["metadata"]
    assert patched["metadata"]["generation"] == 1


async def test_main_resource_writes_leave_status_alone(kube: KubeClient) -> None:
    await kube.create(PODGROUPS, podgroup("gang", min_member=2), NS)
    await kube.patch_status(PODGROUPS, "gang", NS, {"phase": "Pending", "running": 0})
    patched = await kube.patch(
        PODGROUPS, "gang", {"spec": {"minMember": 3}, "status": {"phase": "Running"}}, NS
    )
    assert patched["spec"]["minMember"] == 3
    assert patched["status"] == {"phase": "Pending", "running": 0}


async def test_generation_counts_spec_changes_only(kube: KubeClient) -> None:
    await kube.create(PODGROUPS, podgroup("gang", min_member=2), NS)
    labelled = await kube.patch(PODGROUPS, "gang", {"metadata": {"labels": {"a": "b"}}}, NS)
    status = await kube.patch_status(PODGROUPS, "gang", NS, {"phase": "Pending"})
    spec = await kube.patch(PODGROUPS, "gang", {"spec": {"minMember": 3}}, NS)
    assert [o["metadata"]["generation"] for o in (labelled, status, spec)] == [1, 1, 2]


async def test_a_no_op_patch_keeps_the_resource_version(kube: KubeClient) -> None:
    created = await kube.create(PODS, pod("p", labels={"a": "1"}), NS)
    same = await kube.patch(PODS, "p", {"metadata": {"labels": {"a": "1"}}}, NS)
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_server_fields_cannot_be_patched(kube: KubeClient) -> None:
    created = await kube.create(PODS, pod("p"), NS)
    patched = await kube.patch(
        PODS,
        "p",
        {"metadata": {"creationTimestamp": "1999-01-01T00:00:00Z", "generation": 7}},
        NS,
    )
    assert patched["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]
    assert patched["metadata"]["generation"] == 1


async def test_dry_run_stores_nothing(fake: FakeApiServer, kube: KubeClient) -> None:
    status, body = await fake.send(
        Request("POST", PODS.path(NS), params={"dryRun": "All"}, body=pod("p"))
    )
    assert status == 201 and body["metadata"]["name"] == "p"
    assert fake.objects(PODS) == []


# --- delete --------------------------------------------------------------------------------------


async def test_delete_removes_at_once(fake: FakeApiServer, kube: KubeClient) -> None:
    created = await kube.create(PODS, pod("p"), NS)
    deleted = await kube.delete(PODS, "p", NS, uid=created["metadata"]["uid"])
    assert deleted["metadata"]["uid"] == created["metadata"]["uid"]
    assert fake.get_object(PODS, "p", NS) is None
    assert (await api_error(kube.delete(PODS, "p", NS))).not_found


async def test_delete_with_another_uid_leaves_the_namesake_alone(
    fake: FakeApiServer, kube: KubeClient
) -> None:
    old = await kube.create(PODS, pod("p"), NS)
    await kube.delete(PODS, "p", NS)
    await kube.create(PODS, pod("p"), NS)
    error = await api_error(kube.delete(PODS, "p", NS, uid=old["metadata"]["uid"]))
    assert (error.status, error.reason) == (409, "Conflict")
    assert "Precondition failed: UID in precondition" in error.message
    assert fake.get_object(PODS, "p", NS) is not None


async def test_finalizers_hold_a_deleted_object_until_removed(
    fake: FakeApiServer, kube: KubeClient
) -> None:
    body = podgroup("gang")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    await kube.create(PODGROUPS, body, NS)
    marked = await kube.delete(PODGROUPS, "gang", NS)
    assert marked["metadata"]["deletionTimestamp"] == "2026-03-01T12:00:00Z"
    assert fake.get_object(PODGROUPS, "gang", NS) is not None
    await kube.patch(PODGROUPS, "gang", {"metadata": {"finalizers": None}}, NS)
    assert fake.get_object(PODGROUPS, "gang", NS) is None


# --- binding -------------------------------------------------------------------------------------


async def test_binding_sets_the_node_and_answers_a_status(
    fake: FakeApiServer, kube: KubeClient
) -> None:
    created = await kube.create(PODS, pod("p"), NS)
    status, body = await fake.send(
        Request(
            "POST",
            PODS.path(NS, "p", "binding"),
            body={"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}},
        )
    )
    assert (status, body["kind"], body["status"]) == (201, "Status", "Success")
    bound = fake.get_object(PODS, "p", NS)
    assert bound is not None and bound["spec"]["nodeName"] == "n1"
    assert {"type": "PodScheduled", "status": "True"}.items() <= bound["status"]["conditions"][
        0
    ].items()
    assert int(bound["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


async def test_binding_twice_is_409(kube: KubeClient) -> None:
    created = await kube.create(PODS, pod("p"), NS)
    await kube.bind(NS, "p", "n1", uid=created["metadata"]["uid"])
    error = await api_error(kube.bind(NS, "p", "n2"))
    assert error.conflict and "already assigned to node 'n1'" in error.message


@pytest.mark.parametrize(
    ("setup", "code"),
    [("missing", 404), ("other-uid", 409), ("deleting", 409)],
)
async def test_binding_refusals(
    fake: FakeApiServer, kube: KubeClient, setup: str, code: int
) -> None:
    if setup == "deleting":
        fake.seed(pod("p", deleting=True))
    elif setup == "other-uid":
        await kube.create(PODS, pod("p"), NS)
    uid = "not-its-uid" if setup == "other-uid" else None
    error = await api_error(kube.bind(NS, "p", "n1", uid=uid))
    assert error.status == code
    stored = fake.get_object(PODS, "p", NS)
    assert stored is None or "nodeName" not in stored["spec"]


# --- the request log and injected errors ---------------------------------------------------------


async def test_requests_are_logged_in_order(fake: FakeApiServer, kube: KubeClient) -> None:
    await kube.create(PODGROUPS, podgroup("gang"), NS)
    await kube.get(PODGROUPS, "gang", NS)
    await kube.patch_status(PODGROUPS, "gang", NS, {"phase": "Pending"})
    base = PODGROUPS.path(NS)
    assert fake.requests == [
        ("POST", base),
        ("GET", f"{base}/gang"),
        ("PATCH", f"{base}/gang/status"),
    ]
    assert fake.writes == [("POST", base), ("PATCH", f"{base}/gang/status")]
    assert fake.count("PATCH", "/status") == 1
    assert fake.request_log[-1].body == {"status": {"phase": "Pending"}}
    fake.clear_requests()
    assert fake.requests == [] and fake.writes == []


async def test_seeding_is_not_logged(fake: FakeApiServer) -> None:
    (stored,) = fake.seed(podgroup("gang", status={"phase": "Running"}))
    assert fake.requests == []
    assert stored["status"] == {"phase": "Running"}
    assert stored["metadata"]["resourceVersion"] == fake.resource_version
    assert fake.get_object(PODGROUPS, "gang", NS) == stored


async def test_injected_errors_fail_the_next_matching_requests(
    fake: FakeApiServer, kube: KubeClient
) -> None:
    await kube.create(PODS, pod("p"), NS)
    fake.inject_error("PATCH", "/pods/p", 500, times=2)
    for _ in range(2):
        error = await api_error(kube.patch(PODS, "p", {"metadata": {"labels": {"a": "b"}}}, NS))
        assert (error.status, error.reason) == (500, "InternalError")
    await kube.patch(PODS, "p", {"metadata": {"labels": {"a": "b"}}}, NS)
    assert await kube.get(PODS, "p", NS)


# --- watches -------------------------------------------------------------------------------------


async def collect(kube: KubeClient, count: int, **watch_args: Any) -> list[tuple[str, str]]:
    """(type, name) of the first `count` events of a pod watch in NS."""
    seen: list[tuple[str, str]] = []
    # A bound on the watch, so that a missing event fails the test instead of hanging it.
    stream = cast(
        AsyncGenerator[tuple[str, dict[str, Any]], None],
        kube.watch(PODS, NS, timeout_seconds=5, **watch_args),
    )
    try:
        async for kind, obj in stream:
            seen.append((kind, obj["metadata"]["name"]))
            if len(seen) == count:
                break
    finally:
        await stream.aclose()
    return seen


async def until(condition: Callable[[], bool]) -> None:
    """Yield to the event loop until the condition holds (no wall-clock waiting)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


async def test_watch_sees_changes_after_its_version(fake: FakeApiServer, kube: KubeClient) -> None:
    await kube.create(PODS, pod("before"), NS)
    since = fake.resource_version
    watcher = asyncio.create_task(collect(kube, 3, resource_version=since))
    await until(lambda: fake.open_watches == 1)
    await kube.create(PODS, pod("p"), NS)
    await kube.patch(PODS, "p", {"metadata": {"labels": {"a": "b"}}}, NS)
    await kube.create(PODS, pod("elsewhere", "other"), "other")
    await kube.delete(PODS, "p", NS)
    assert await watcher == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]
    await until(lambda: fake.open_watches == 0)


async def test_watch_from_an_older_version_replays_the_history(
    fake: FakeApiServer, kube: KubeClient
) -> None:
    await kube.create(PODS, pod("before"), NS)
    since = fake.resource_version
    await kube.create(PODS, pod("a"), NS)
    await kube.bind(NS, "a", "n1")
    await kube.delete(PODS, "a", NS)
    events = await collect(kube, 3, resource_version=since)
    assert events == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


async def test_watch_without_a_version_starts_with_the_current_state(
    kube: KubeClient,
) -> None:
    await kube.create(PODS, pod("b"), NS)
    await kube.create(PODS, pod("a"), NS)
    await kube.delete(PODS, "b", NS)
    assert await collect(kube, 1) == [("ADDED", "a")]


async def test_watch_with_a_selector_reports_objects_entering_and_leaving(
    fake: FakeApiServer, kube: KubeClient
) -> None:
    fake.seed(node("n1"))
    since = fake.resource_version
    await kube.create(PODS, pod("p"), NS)
    await kube.patch(PODS, "p", {"metadata": {"labels": {"app": "web"}}}, NS)
    await kube.patch(PODS, "p", {"metadata": {"annotations": {"x": "y"}}}, NS)
    await kube.patch(PODS, "p", {"metadata": {"labels": {"app": None}}}, NS)
    await kube.delete(PODS, "p", NS)
    events = await collect(kube, 3, resource_version=since, label_selector="app=web")
    assert events == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]


async def test_closing_watches_ends_them(fake: FakeApiServer, kube: KubeClient) -> None:
    watcher = asyncio.create_task(collect(kube, 5, resource_version=fake.resource_version))
    await until(lambda: fake.open_watches == 1)
    await kube.create(PODS, pod("p"), NS)
    fake.close_watches()
    assert await watcher == [("ADDED", "p")]
    assert fake.open_watches == 0


async def test_watch_ends_after_its_timeout(fake: FakeApiServer) -> None:
    request = Request("GET", PODS.path(NS), params={"watch": "true", "timeoutSeconds": "0.01"})
    assert [event async for event in fake.stream(request)] == []
    assert fake.requests == [("WATCH", PODS.path(NS))]


async def test_watch_from_a_compacted_version_is_410(fake: FakeApiServer, kube: KubeClient) -> None:
    fake.seed(node("n1"))
    since = fake.resource_version
    await kube.create(PODS, pod("a"), NS)
    await kube.create(PODS, pod("b"), NS)
    fake.compact()
    events = [(kind, obj) async for kind, obj in kube.watch(PODS, NS, resource_version=since)]
    assert len(events) == 1
    kind, status = events[0]
    assert kind == "ERROR" and status["code"] == 410 and status["reason"] == "Expired"


async def test_held_requests_wait_until_released(fake: FakeApiServer, kube: KubeClient) -> None:
    released = fake.hold("POST", PODS.path(NS))
    first = asyncio.create_task(kube.create(PODS, pod("p"), NS))
    await until(lambda: fake.count("POST") == 1)
    for _ in range(10):
        await asyncio.sleep(0)
    assert fake.objects(PODS) == [] and not first.done()
    released.set()
    await first
    assert [p["metadata"]["name"] for p in fake.objects(PODS)] == ["p"]
    await kube.create(PODS, pod("q"), NS)  # a released hold holds nothing more
