"""The in-memory API server behaves like the apiserver where the operator relies on it.

`TestInMemoryFake` runs the contract of `tests/api_contract.py` against the fake; the same suite
runs against the dev cluster's kube-apiserver in `tests/integration/test_api_contract.py`, so
what passes here is what a real server does. The tests below the suite cover what only the fake
has: its test controls (seeding, the request log, injected errors, holds, closing watches), its
deterministic clock and counters, and its deliberate differences.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    PODGROUPS,
    PODS,
    KubeClient,
    Request,
)
from tests.api_contract import (
    PROBE_CRD,
    PROBES,
    ApiContract,
    Backend,
    api_error,
    collect,
    new_scope,
)
from tests.builders import pod, podgroup
from tests.clock import T0
from tests.crd_schema import crd_schemas
from tests.fakes import FakeApiServer, Locator, merge_patch, project_schemas

JSON_PATCH = "application/json-patch+json"
"""A patch type the fake refuses (no code under test sends it)."""

NS = "default"


def fake_server() -> FakeApiServer:
    """The fake with the contract's Probe kind declared like its CRD: a status subresource and
    its schema."""
    return FakeApiServer(
        clock=lambda: T0,
        status_subresources=("pods", "nodes", "namespaces", c.PLURAL, PROBES.plural),
        status_reset_on_create=(c.PLURAL, PROBES.plural),
        schemas={**project_schemas(), **crd_schemas(PROBE_CRD)},
    )


def fake_backend(fake: FakeApiServer, kube: KubeClient) -> Backend:
    async def terminate_other() -> None:
        fake.terminate_namespace("other")

    return Backend(kube, NS, "other", new_scope(), terminate_other)


class TestInMemoryFake(ApiContract):
    """The API server contract, against the fake."""

    @pytest.fixture
    async def api(self) -> AsyncIterator[Backend]:
        fake = fake_server()
        kube = KubeClient(fake)
        yield fake_backend(fake, kube)
        await kube.close()


@pytest.fixture
def fake() -> FakeApiServer:
    return fake_server()


@pytest.fixture
def client(fake: FakeApiServer) -> KubeClient:
    return KubeClient(fake)


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


# --- what only the fake does -------------------------------------------------------------------


async def test_versions_and_times_are_deterministic(client: KubeClient) -> None:
    body = podgroup("gang", min_member=2)
    del body["metadata"]["creationTimestamp"]
    meta = (await client.create(PODGROUPS, body, NS))["metadata"]
    assert meta["resourceVersion"] == "1"
    assert meta["creationTimestamp"] == "2026-03-01T12:00:00Z"


async def test_a_given_creation_time_is_kept(client: KubeClient) -> None:
    created = await client.create(PODS, pod("p", created="2025-05-05T00:00:00Z"), NS)
    assert created["metadata"]["creationTimestamp"] == "2025-05-05T00:00:00Z"


async def test_built_in_kinds_keep_their_status_on_create(client: KubeClient) -> None:
    running = await client.create(PODS, pod("p", phase=c.PodPhase.RUNNING), NS)
    assert running["status"]["phase"] == "Running"


async def test_json_patches_are_not_served(client: KubeClient) -> None:
    await client.create(PODS, pod("p"), NS)
    error = await api_error(client.patch(PODS, "p", [], NS, content_type=JSON_PATCH))
    assert (error.status, error.reason) == (415, "UnsupportedMediaType")


async def test_a_list_carries_the_newest_version(fake: FakeApiServer, client: KubeClient) -> None:
    await client.create(PODS, pod("p"), NS)
    found = await client.list(PODS, NS)
    assert found["metadata"]["resourceVersion"] == fake.resource_version


async def test_stored_events_are_found_by_involved_object_and_reason(
    fake: FakeApiServer, client: KubeClient
) -> None:
    group = await client.create(PODGROUPS, podgroup("gang"), NS)
    await client.create_event(
        group, event_type="Normal", reason="PhaseChanged", message="m", timestamp="t"
    )
    assert [e["reason"] for e in fake.events(involved="gang", reason="PhaseChanged")] == [
        "PhaseChanged"
    ]
    assert fake.events(involved="someone-else") == []


async def test_binding_another_incarnation_is_409(client: KubeClient) -> None:
    """Stricter than kube-apiserver v1.20, which binds whatever the binding's uid says (checked
    in tests/api_contract.py's history): the scheduler sends the uid it decided for, and the fake
    holds it to that so unit tests notice a bind of the wrong incarnation."""
    await client.create(PODS, pod("p"), NS)
    error = await api_error(client.bind(NS, "p", "n1", uid="not-its-uid"))
    assert (error.status, error.reason) == (409, "Conflict")
    assert "nodeName" not in (await client.get(PODS, "p", NS))["spec"]


# --- the request log and injected errors ---------------------------------------------------------


async def test_requests_are_logged_in_order(fake: FakeApiServer, client: KubeClient) -> None:
    await client.create(PODGROUPS, podgroup("gang"), NS)
    await client.get(PODGROUPS, "gang", NS)
    await client.patch_status(PODGROUPS, "gang", NS, {"phase": "Pending"})
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
    fake: FakeApiServer, client: KubeClient
) -> None:
    await client.create(PODS, pod("p"), NS)
    fake.inject_error("PATCH", "/pods/p", 500, times=2)
    for _ in range(2):
        error = await api_error(client.patch(PODS, "p", {"metadata": {"labels": {"a": "b"}}}, NS))
        assert (error.status, error.reason) == (500, "InternalError")
    await client.patch(PODS, "p", {"metadata": {"labels": {"a": "b"}}}, NS)
    assert await client.get(PODS, "p", NS)


async def test_an_injected_watch_error_is_an_error_event(
    fake: FakeApiServer, client: KubeClient
) -> None:
    fake.inject_error("WATCH", PODS.path(NS), 410, "Expired")
    events = [event async for event in client.watch(PODS, NS, resource_version="1")]
    assert [(kind, obj["code"], obj["reason"]) for kind, obj in events] == [
        ("ERROR", 410, "Expired")
    ]


# --- watches -------------------------------------------------------------------------------------


async def until(condition: Callable[[], bool]) -> None:
    """Yield to the event loop until the condition holds (no wall-clock waiting)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


async def test_closing_watches_ends_them(fake: FakeApiServer, client: KubeClient) -> None:
    api = fake_backend(fake, client)
    watcher = asyncio.create_task(collect(api, 5, resource_version=fake.resource_version))
    await until(lambda: fake.open_watches == 1)
    await api.pod("p")
    fake.close_watches()
    assert await watcher == [("ADDED", "p")]
    assert fake.open_watches == 0


async def test_watch_ends_after_a_fraction_of_a_second(fake: FakeApiServer) -> None:
    request = Request("GET", PODS.path(NS), params={"watch": "true", "timeoutSeconds": "0.01"})
    assert [event async for event in fake.stream(request)] == []
    assert fake.requests == [("WATCH", PODS.path(NS))]


async def test_held_requests_wait_until_released(fake: FakeApiServer, client: KubeClient) -> None:
    released = fake.hold("POST", PODS.path(NS))
    first = asyncio.create_task(client.create(PODS, pod("p"), NS))
    await until(lambda: fake.count("POST") == 1)
    for _ in range(10):
        await asyncio.sleep(0)
    assert fake.objects(PODS) == [] and not first.done()
    released.set()
    await first
    assert [p["metadata"]["name"] for p in fake.objects(PODS)] == ["p"]
    await client.create(PODS, pod(f"q-{uuid.uuid4().hex[:4]}"), NS)  # a released hold holds no more
