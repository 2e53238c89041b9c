"""What the operator relies on from an API server, as one suite run against two backends.

`ApiContract` holds the tests; a subclass supplies the `api` fixture (a `Backend`):
`tests/unit/fakes/test_fake_api.py` runs them against the in-memory `FakeApiServer` (unit tier,
no cluster), `tests/integration/test_api_contract.py` against the real kube-apiserver of the dev
cluster (cluster tier). A behaviour the fake gets wrong fails the second run; a test that only
the fake can pass does not belong here. Everything goes through `KubeClient`, as in production.

Objects live in the backend's namespaces and carry its `scope` label, so lists and watches on a
shared cluster see only this test's objects. Custom-resource writes use `Probe`, a kind nobody
controls (the operator, when a session runs it, writes PodGroup status and would race them).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    EVENTS,
    PODGROUPS,
    PODS,
    STRATEGIC_PATCH,
    ApiError,
    Kind,
    KubeClient,
    Request,
)
from tests.kube_helpers import create_pod

JSON = dict[str, Any]
SCOPE_LABEL = "contract.podgroup.test/scope"

PROBE_GROUP = "contract.podgroup.test"
PROBES = Kind(PROBE_GROUP, "v1", "probes")
PROBE_CRD: JSON = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"probes.{PROBE_GROUP}"},
    "spec": {
        "group": PROBE_GROUP,
        "scope": "Namespaced",
        "names": {
            "plural": "probes",
            "singular": "probe",
            "kind": "Probe",
            "listKind": "ProbeList",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                                "properties": {
                                    "size": {"type": "integer", "minimum": 0, "maximum": 100}
                                },
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                            "closed": {
                                "type": "object",
                                "properties": {
                                    "kept": {"type": "string"},
                                    "when": {"type": "string", "format": "date-time"},
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}
"""A custom resource with a status subresource, controlled by no one. Its schema is open but for
`spec.size` (0 to 100) and `closed` (only `kept`, a string, and `when`, a date-time): enough to
see the apiserver check and prune writes as it does a PodGroup's."""
PROBE: JSON = {"apiVersion": f"{PROBE_GROUP}/v1", "kind": "Probe"}


@dataclass
class Backend:
    """One API server under the contract, and where on it a test works."""

    kube: KubeClient
    namespace: str
    other_namespace: str
    scope: str
    """The value of SCOPE_LABEL on every object this test makes."""
    terminate_other: Callable[[], Awaitable[None]]
    """Start deleting `other_namespace`, and keep it being deleted until the test ends."""

    def selector(self, extra: str = "") -> str:
        """A label selector for this test's objects, plus `extra` requirements."""
        own = f"{SCOPE_LABEL}={self.scope}"
        return f"{own},{extra}" if extra else own

    async def pod(
        self,
        name: str,
        namespace: str | None = None,
        *,
        labels: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> JSON:
        """A pod no scheduler claims (tests bind by hand), labelled with the scope."""
        return await create_pod(
            self.kube,
            namespace or self.namespace,
            name,
            labels={SCOPE_LABEL: self.scope, **(labels or {})},
            **kwargs,
        )

    async def probe(self, name: str, **fields: Any) -> JSON:
        """A Probe custom resource; keyword arguments become top-level fields (spec, status)."""
        body = {
            **PROBE,
            "metadata": {"name": name, "labels": {SCOPE_LABEL: self.scope}},
            "spec": {"size": 1},
            **fields,
        }
        return await self.kube.create(PROBES, body, self.namespace)


def new_scope() -> str:
    return uuid.uuid4().hex[:10]


async def api_error(call: Awaitable[Any]) -> ApiError:
    with pytest.raises(ApiError) as caught:
        await call
    return caught.value


def causes(error: ApiError) -> list[str]:
    """The fields a 422 names in its Status's `details.causes`, sorted."""
    return sorted(cause["field"] for cause in error.body["details"]["causes"])


def names(listing: JSON) -> list[str]:
    return [item["metadata"]["name"] for item in listing["items"]]


def version(obj: JSON) -> int:
    """A resourceVersion as a number: the contract's servers hand out increasing integers
    (etcd revisions); clients must not rely on that, but the suite may compare them."""
    return int(obj["metadata"]["resourceVersion"])


async def collect(api: Backend, count: int, **watch_args: Any) -> list[tuple[str, str]]:
    """(type, name) of the first `count` events of a pod watch on this test's pods."""
    seen: list[tuple[str, str]] = []
    watch_args.setdefault("label_selector", api.selector())
    # A bound on the watch, so that a missing event fails the test instead of hanging it.
    stream = cast(
        AsyncGenerator[tuple[str, JSON], None],
        api.kube.watch(PODS, api.namespace, timeout_seconds=5, **watch_args),
    )
    try:
        async for kind, obj in stream:
            seen.append((kind, obj["metadata"]["name"]))
            if len(seen) == count:
                break
    finally:
        await stream.aclose()
    return seen


SUPPORTED_POD_FIELDS = [
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
]
"""Field labels the apiserver (v1.20) accepts in a pod field selector; nothing else."""


class ApiContract:
    """The suite; subclasses provide the `api` fixture."""

    # --- create and read ------------------------------------------------------------------------

    async def test_create_assigns_server_fields(self, api: Backend) -> None:
        created = await api.probe("gang")
        meta = created["metadata"]
        assert meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"]
        assert meta["generation"] == 1
        assert await api.kube.get(PROBES, "gang", api.namespace) == created

    async def test_a_client_chosen_uid_is_replaced(self, api: Backend) -> None:
        body = {**PROBE, "metadata": {"name": "p", "uid": "client-chosen"}}
        created = await api.kube.create(PROBES, body, api.namespace)
        assert created["metadata"]["uid"] not in ("", "client-chosen")

    async def test_resource_versions_increase_across_kinds(self, api: Backend) -> None:
        a = await api.pod("a")
        probe = await api.probe("p")
        b = await api.pod("b")
        assert version(a) < version(probe) < version(b)

    async def test_a_new_pod_is_pending_and_a_custom_resource_loses_its_status(
        self, api: Backend
    ) -> None:
        pod = await api.pod("p")
        probe = await api.probe("g", status={"phase": "Running"})
        assert pod["status"]["phase"] == c.PodPhase.PENDING
        assert "status" not in probe

    async def test_creating_an_existing_name_is_409_already_exists(self, api: Backend) -> None:
        await api.pod("p")
        error = await api_error(api.pod("p"))
        assert (error.status, error.reason) == (409, "AlreadyExists")
        assert error.conflict and error.already_exists and not error.namespace_terminating
        assert error.body["kind"] == "Status" and error.body["status"] == "Failure"
        assert error.body["code"] == 409
        assert error.message == 'pods "p" already exists'

    async def test_same_name_in_other_namespace_or_kind_is_another_object(
        self, api: Backend
    ) -> None:
        await api.pod("x")
        await api.pod("x", api.other_namespace)
        await api.probe("x")
        assert len((await api.kube.list(PODS, label_selector=api.selector()))["items"]) == 2

    async def test_generate_name_gives_fresh_names_with_the_prefix(self, api: Backend) -> None:
        body = {**PROBE, "metadata": {"generateName": "gang-"}}
        made = [await api.kube.create(PROBES, body, api.namespace) for _ in range(10)]
        found = {probe["metadata"]["name"] for probe in made}
        assert len(found) == 10
        assert all(name.startswith("gang-") and len(name) == len("gang-") + 5 for name in found)

    async def test_a_name_is_required(self, api: Backend) -> None:
        body = {**PROBE, "metadata": {}}
        error = await api_error(api.kube.create(PROBES, body, api.namespace))
        assert (error.status, error.reason) == (422, "Invalid")

    async def test_namespace_in_body_must_match_the_path(self, api: Backend) -> None:
        body = {**PROBE, "metadata": {"name": "p", "namespace": api.other_namespace}}
        error = await api_error(api.kube.create(PROBES, body, api.namespace))
        assert (error.status, error.reason) == (400, "BadRequest")

    async def test_get_of_a_missing_object_is_404_with_a_status_body(self, api: Backend) -> None:
        error = await api_error(api.kube.get(PODGROUPS, "nope", api.namespace))
        assert error.not_found and error.reason == "NotFound"
        assert error.message == 'podgroups.scheduling.x-k8s.io "nope" not found'
        assert error.body["details"] == {"name": "nope", "group": c.GROUP, "kind": "podgroups"}
        core = await api_error(api.kube.get(PODS, "nope", api.namespace))
        assert core.body["details"] == {"name": "nope", "kind": "pods"}

    async def test_bodies_travel_as_json(self, api: Backend) -> None:
        with pytest.raises(TypeError):
            await api.kube.create(PODS, {"metadata": {"name": "q"}, "spec": {"x": object()}})

    # --- schemas --------------------------------------------------------------------------------

    async def test_a_write_outside_the_schema_is_refused_naming_each_field(
        self, api: Backend
    ) -> None:
        closed = {"kept": 5, "when": "yesterday"}
        error = await api_error(api.probe("p", spec={"size": 101}, closed=closed))
        assert (error.status, error.reason) == (422, "Invalid")
        assert error.message.startswith(f'Probe.{PROBE_GROUP} "p" is invalid: ')
        assert causes(error) == ["closed.kept", "closed.when", "spec.size"]
        assert error.body["details"]["kind"] == "Probe"  # a NotFound names the plural instead
        await api.probe("p", spec={"size": 100})
        error = await api_error(api.kube.patch(PROBES, "p", {"spec": {"size": -1}}, api.namespace))
        assert (error.status, causes(error)) == (422, ["spec.size"])
        assert (await api.kube.get(PROBES, "p", api.namespace))["spec"]["size"] == 100

    async def test_fields_the_schema_does_not_declare_are_dropped(self, api: Backend) -> None:
        created = await api.probe("p", closed={"kept": "yes", "dropped": 1}, extra={"a": 1})
        assert created["closed"] == {"kept": "yes"}
        assert "extra" not in created
        patched = await api.kube.patch(PROBES, "p", {"closed": {"late": 2}}, api.namespace)
        assert patched["closed"] == {"kept": "yes"}

    async def test_a_podgroup_outside_its_crd_is_refused_naming_each_field(
        self, api: Backend
    ) -> None:
        """The CRD in crds/ (the fake reads the same file): bounds, patterns and list sizes."""
        body = {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND,
            "metadata": {"name": "gang", "labels": {SCOPE_LABEL: api.scope}},
            "spec": {
                "minMember": 0,
                "scheduleTimeoutSeconds": 31_536_001,
                "gangGroup": ["Not/valid"],
                "minResources": {"cpu": "lots"},
            },
        }
        error = await api_error(api.kube.create(PODGROUPS, body, api.namespace))
        assert (error.status, error.reason) == (422, "Invalid")
        assert causes(error) == [
            "spec.gangGroup",  # v1.20 names a list item by its list
            "spec.minMember",
            "spec.minResources.cpu",
            "spec.scheduleTimeoutSeconds",
        ]

    # --- list and selectors ---------------------------------------------------------------------

    @pytest.fixture
    async def labelled(self, api: Backend) -> None:
        await api.pod("a", labels={"app": "web", "tier": "front"}, node="n1")
        await api.pod("b", labels={"app": "web"}, node="n2")
        await api.pod("c", labels={"app": "db"})
        await api.pod("d", api.other_namespace, labels={"app": "web"})

    @pytest.mark.parametrize(
        ("selector", "expected"),
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
    async def test_label_selectors(self, api: Backend, selector: str, expected: list[str]) -> None:
        found = await api.kube.list(PODS, label_selector=api.selector(selector))
        assert sorted(names(found)) == expected

    @pytest.mark.parametrize(
        ("selector", "expected"),
        [
            ("metadata.name=b", ["b"]),
            ("spec.nodeName=n1", ["a"]),
            ("spec.nodeName=", ["c", "d"]),
            ("spec.nodeName!=", ["a", "b"]),
            ("status.phase=Pending,spec.nodeName!=n1", ["b", "c", "d"]),
            ("spec.schedulerName=nobody", ["a", "b", "c", "d"]),
        ],
    )
    @pytest.mark.usefixtures("labelled")
    async def test_field_selectors(self, api: Backend, selector: str, expected: list[str]) -> None:
        found = await api.kube.list(PODS, label_selector=api.selector(), field_selector=selector)
        assert sorted(names(found)) == expected

    @pytest.mark.usefixtures("labelled")
    async def test_field_selector_on_the_namespace(self, api: Backend) -> None:
        found = await api.kube.list(
            PODS,
            label_selector=api.selector(),
            field_selector=f"metadata.namespace={api.other_namespace}",
        )
        assert names(found) == ["d"]

    @pytest.mark.parametrize("path", SUPPORTED_POD_FIELDS)
    async def test_every_supported_pod_field_label_is_accepted(
        self, api: Backend, path: str
    ) -> None:
        await api.kube.list(PODS, api.namespace, field_selector=f"{path}=x")

    @pytest.mark.parametrize(
        ("kind", "path"),
        [
            (PODS, "spec.priority"),
            (PODS, "metadata.labels.app"),
            (PODS, "metadata.uid"),
            (PODS, "status.hostIP"),
            (PODS, "involvedObject.name"),
            (EVENTS, "message"),
            (PODGROUPS, "spec.minMember"),
            (PODGROUPS, "status.phase"),
        ],
    )
    async def test_other_field_labels_are_refused(
        self, api: Backend, kind: Kind, path: str
    ) -> None:
        error = await api_error(api.kube.list(kind, api.namespace, field_selector=f"{path}=1"))
        assert (error.status, error.reason) == (400, "BadRequest")
        assert error.message == f"field label not supported: {path}"

    async def test_a_watch_with_an_unsupported_field_label_is_refused(self, api: Backend) -> None:
        with pytest.raises(ApiError) as caught:
            await collect(api, 1, field_selector="spec.priority=1")
        assert (caught.value.status, caught.value.reason) == (400, "BadRequest")

    async def test_custom_resources_select_by_name_and_namespace_only(self, api: Backend) -> None:
        await api.probe("a")
        await api.probe("b")
        found = await api.kube.list(
            PROBES, field_selector=f"metadata.name=b,metadata.namespace={api.namespace}"
        )
        assert names(found) == ["b"]

    @pytest.mark.usefixtures("labelled")
    async def test_list_is_namespaced_and_carries_the_current_version(self, api: Backend) -> None:
        last = await api.probe("last")
        found = await api.kube.list(PODS, api.namespace, label_selector=api.selector())
        assert sorted(names(found)) == ["a", "b", "c"]
        assert found["kind"] == "PodList" and found["apiVersion"] == "v1"
        assert int(found["metadata"]["resourceVersion"]) >= version(last)
        empty = await api.kube.list(PODGROUPS, api.namespace)
        assert empty["kind"] == "PodGroupList" and empty["items"] == []
        assert empty["apiVersion"] == c.API_VERSION

    async def test_events_are_found_by_involved_object(self, api: Backend) -> None:
        probe = await api.probe("gang")
        await api.kube.create_event(
            probe, event_type="Normal", reason="ContractCheck", message="m", timestamp=NOW
        )
        found = await api.kube.list(
            EVENTS, api.namespace, field_selector="involvedObject.name=gang,reason=ContractCheck"
        )
        assert [e["reason"] for e in found["items"]] == ["ContractCheck"]
        assert found["items"][0]["involvedObject"]["uid"] == probe["metadata"]["uid"]
        other = await api.kube.list(
            EVENTS, api.namespace, field_selector="involvedObject.name=someone-else"
        )
        assert other["items"] == []

    async def test_a_namespace_being_deleted_refuses_every_create_with_its_cause(
        self, api: Backend
    ) -> None:
        """The scheduler's binds, the Events of every controller and the pods a restart makes
        are told apart from other refusals by this cause (`ApiError.namespace_terminating`)."""
        pending = await api.pod("p", api.other_namespace)
        uid = pending["metadata"]["uid"]
        await api.terminate_other()
        refusals = [
            await api_error(api.kube.bind(api.other_namespace, "p", "n1", uid)),
            await api_error(
                api.kube.create_event(
                    pending, event_type="Normal", reason="ContractCheck", message="m", timestamp=NOW
                )
            ),
            await api_error(api.pod("q", api.other_namespace)),
        ]
        for refusal in refusals:
            assert (refusal.status, refusal.reason) == (403, "Forbidden"), refusal.body
            assert refusal.namespace_terminating and not refusal.conflict
            assert refusal.message.endswith(
                f"unable to create new content in namespace {api.other_namespace} because it "
                "is being terminated"
            )

    # --- update and patch -----------------------------------------------------------------------

    async def test_put_needs_the_current_resource_version(self, api: Backend) -> None:
        created = await api.probe("p")
        stale = {**created, "metadata": {**created["metadata"]}}
        created["metadata"]["labels"] = {"new": "yes"}
        replaced = await api.kube.replace(PROBES, "p", created, api.namespace)
        assert replaced["metadata"]["labels"] == {"new": "yes"}
        assert version(replaced) > version(stale)
        error = await api_error(api.kube.replace(PROBES, "p", stale, api.namespace))
        assert (error.status, error.reason) == (409, "Conflict")
        assert "the object has been modified" in error.message

    async def test_put_of_a_missing_object_is_404(self, api: Backend) -> None:
        body = {"metadata": {"name": "ghost"}, "spec": {"containers": [{"name": "m"}]}}
        error = await api_error(api.kube.replace(PODS, "ghost", body, api.namespace))
        assert (error.status, error.reason) == (404, "NotFound")

    async def test_merge_patch_merges_maps_deletes_nulls_and_replaces_lists(
        self, api: Backend
    ) -> None:
        await api.probe("p", spec={"items": ["a", "b"], "map": {"a": "1", "b": "2"}})
        patched = await api.kube.patch(
            PROBES,
            "p",
            {"spec": {"items": ["c"], "map": {"a": None, "c": "3"}}},
            api.namespace,
        )
        assert patched["spec"] == {"items": ["c"], "map": {"b": "2", "c": "3"}}

    async def test_strategic_merge_patch_merges_pod_conditions_by_type(self, api: Backend) -> None:
        """What the scheduler's PodScheduled patch relies on: other conditions stay, the one of
        its type is updated in place, and fields the patch leaves out are kept."""
        await api.pod("p")
        ready = {"type": "Ready", "status": "False", "reason": "Waiting"}
        await api.kube.patch_status(PODS, "p", api.namespace, {"conditions": [ready]})

        def scheduled(message: str, **extra: Any) -> JSON:
            condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
            return {"status": {"conditions": [{**condition, "message": message, **extra}]}}

        first = scheduled("short 1", lastTransitionTime="2026-01-01T00:00:00Z")
        await api.kube.patch(
            PODS, "p", first, api.namespace, subresource="status", content_type=STRATEGIC_PATCH
        )
        patched = await api.kube.patch(
            PODS,
            "p",
            scheduled("short 2"),
            api.namespace,
            subresource="status",
            content_type=STRATEGIC_PATCH,
        )
        conditions = {x["type"]: x for x in patched["status"]["conditions"]}
        assert set(conditions) == {"Ready", "PodScheduled"}
        assert conditions["Ready"]["reason"] == "Waiting"
        assert conditions["PodScheduled"]["message"] == "short 2"
        assert conditions["PodScheduled"]["lastTransitionTime"] == "2026-01-01T00:00:00Z"

    async def test_resource_version_in_a_patch_is_a_precondition(self, api: Backend) -> None:
        created = await api.probe("p")
        await api.kube.patch(PROBES, "p", {"metadata": {"labels": {"a": "b"}}}, api.namespace)
        stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}}
        error = await api_error(
            api.kube.patch(PROBES, "p", {**stale, "spec": {"x": 1}}, api.namespace)
        )
        assert (error.status, error.reason) == (409, "Conflict")
        current = await api.kube.get(PROBES, "p", api.namespace)
        assert "x" not in current["spec"]
        fresh = {"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]}}
        ok = await api.kube.patch(PROBES, "p", {**fresh, "spec": {"x": 1}}, api.namespace)
        assert ok["spec"]["x"] == 1

    async def test_another_uid_in_a_patch_is_invalid(self, api: Backend) -> None:
        await api.pod("p")
        error = await api_error(
            api.kube.patch(PODS, "p", {"metadata": {"uid": "another"}}, api.namespace)
        )
        assert (error.status, error.reason) == (422, "Invalid")
        assert "metadata.uid" in error.message and "field is immutable" in error.message

    async def test_status_subresource_writes_only_status(self, api: Backend) -> None:
        await api.probe("p", spec={"size": 2})
        patched = await api.kube.patch(
            PROBES,
            "p",
            {"spec": {"size": 9}, "metadata": {"labels": {"a": "b"}}, "status": {"phase": "X"}},
            api.namespace,
            subresource="status",
        )
        assert patched["status"] == {"phase": "X"}
        assert patched["spec"]["size"] == 2
        assert "a" not in patched["metadata"]["labels"]
        assert patched["metadata"]["generation"] == 1

    async def test_main_resource_writes_leave_status_alone(self, api: Backend) -> None:
        await api.probe("p", spec={"size": 2})
        await api.kube.patch_status(PROBES, "p", api.namespace, {"phase": "Pending", "running": 0})
        patched = await api.kube.patch(
            PROBES, "p", {"spec": {"size": 3}, "status": {"phase": "Running"}}, api.namespace
        )
        assert patched["spec"]["size"] == 3
        assert patched["status"] == {"phase": "Pending", "running": 0}

    async def test_generation_counts_spec_changes_only(self, api: Backend) -> None:
        await api.probe("p", spec={"size": 2})
        labelled = await api.kube.patch(
            PROBES, "p", {"metadata": {"labels": {"a": "b"}}}, api.namespace
        )
        status = await api.kube.patch_status(PROBES, "p", api.namespace, {"phase": "Pending"})
        spec = await api.kube.patch(PROBES, "p", {"spec": {"size": 3}}, api.namespace)
        assert [o["metadata"]["generation"] for o in (labelled, status, spec)] == [1, 1, 2]

    async def test_a_no_op_patch_keeps_the_resource_version(self, api: Backend) -> None:
        created = await api.probe("p", spec={"size": 1})
        same = await api.kube.patch(PROBES, "p", {"spec": {"size": 1}}, api.namespace)
        assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    async def test_server_fields_cannot_be_patched(self, api: Backend) -> None:
        created = await api.probe("p")
        patched = await api.kube.patch(
            PROBES,
            "p",
            {"metadata": {"creationTimestamp": "1999-01-01T00:00:00Z", "generation": 7}},
            api.namespace,
        )
        assert patched["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]
        assert patched["metadata"]["generation"] == 1

    async def test_dry_run_stores_nothing(self, api: Backend) -> None:
        body = {**PROBE, "metadata": {"name": "p"}}
        status, answer = await api.kube.transport.send(
            Request("POST", PROBES.path(api.namespace), params={"dryRun": "All"}, body=body)
        )
        assert status == 201 and answer["metadata"]["name"] == "p"
        assert (await api_error(api.kube.get(PROBES, "p", api.namespace))).not_found

    # --- delete ---------------------------------------------------------------------------------

    async def test_an_unbound_pod_is_deleted_at_once(self, api: Backend) -> None:
        created = await api.pod("p")
        deleted = await api.kube.delete(PODS, "p", api.namespace, uid=created["metadata"]["uid"])
        assert deleted["metadata"]["uid"] == created["metadata"]["uid"]
        assert (await api_error(api.kube.get(PODS, "p", api.namespace))).not_found
        assert (await api_error(api.kube.delete(PODS, "p", api.namespace))).not_found

    async def test_delete_with_another_uid_leaves_the_namesake_alone(self, api: Backend) -> None:
        old = await api.pod("p")
        await api.kube.delete(PODS, "p", api.namespace)
        await api.pod("p")
        error = await api_error(
            api.kube.delete(PODS, "p", api.namespace, uid=old["metadata"]["uid"])
        )
        assert (error.status, error.reason) == (409, "Conflict")
        assert "does not match the UID in record" in error.message
        assert await api.kube.get(PODS, "p", api.namespace)

    async def test_finalizers_hold_a_deleted_object_until_removed(self, api: Backend) -> None:
        body = {**PROBE, "metadata": {"name": "p", "finalizers": ["example.com/hold"]}}
        await api.kube.create(PROBES, body, api.namespace)
        marked = await api.kube.delete(PROBES, "p", api.namespace)
        assert marked["metadata"]["deletionTimestamp"]
        assert await api.kube.get(PROBES, "p", api.namespace)
        await api.kube.patch(PROBES, "p", {"metadata": {"finalizers": None}}, api.namespace)
        assert (await api_error(api.kube.get(PROBES, "p", api.namespace))).not_found

    # --- binding --------------------------------------------------------------------------------

    async def test_binding_sets_the_node_and_answers_a_status(self, api: Backend) -> None:
        created = await api.pod("p")
        body = {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}}
        status, answer = await api.kube.transport.send(
            Request("POST", PODS.path(api.namespace, "p", "binding"), body=body)
        )
        assert (status, answer["kind"], answer["status"]) == (201, "Status", "Success")
        bound = await api.kube.get(PODS, "p", api.namespace)
        assert bound["spec"]["nodeName"] == "n1"
        scheduled = [x for x in bound["status"]["conditions"] if x["type"] == "PodScheduled"]
        assert [x["status"] for x in scheduled] == ["True"]
        assert version(bound) > version(created)

    async def test_binding_twice_is_409(self, api: Backend) -> None:
        created = await api.pod("p")
        await api.kube.bind(api.namespace, "p", "n1", uid=created["metadata"]["uid"])
        error = await api_error(api.kube.bind(api.namespace, "p", "n2"))
        assert (error.status, error.reason) == (409, "Conflict")
        assert error.conflict and not error.already_exists
        assert error.message.endswith('pod p is already assigned to node "n1"')

    async def test_binding_a_missing_pod_is_404(self, api: Backend) -> None:
        error = await api_error(api.kube.bind(api.namespace, "p", "n1"))
        assert (error.status, error.reason) == (404, "NotFound")

    async def test_binding_a_pod_being_deleted_is_409(self, api: Backend) -> None:
        created = await api.pod("p")
        await api.kube.patch(
            PODS, "p", {"metadata": {"finalizers": ["example.com/hold"]}}, api.namespace
        )
        await api.kube.delete(PODS, "p", api.namespace, uid=created["metadata"]["uid"])
        try:
            error = await api_error(api.kube.bind(api.namespace, "p", "n1"))
            assert (error.status, error.reason) == (409, "Conflict")
            assert "nodeName" not in (await api.kube.get(PODS, "p", api.namespace))["spec"]
        finally:
            await api.kube.patch(PODS, "p", {"metadata": {"finalizers": None}}, api.namespace)

    # --- watches --------------------------------------------------------------------------------

    async def test_watch_replays_changes_after_its_version(self, api: Backend) -> None:
        since = (await api.pod("before"))["metadata"]["resourceVersion"]
        await api.pod("p")
        await api.kube.patch(PODS, "p", {"metadata": {"labels": {"a": "b"}}}, api.namespace)
        await api.pod("elsewhere", api.other_namespace)
        await api.kube.patch(PODS, "p", {"metadata": {"labels": {"a": "c"}}}, api.namespace)
        await api.kube.delete(PODS, "p", api.namespace)
        events = await collect(api, 5, resource_version=since)
        # A pod's deletion is graceful: its deletionTimestamp is stored (MODIFIED) before it goes.
        assert events == [
            ("ADDED", "p"),
            ("MODIFIED", "p"),
            ("MODIFIED", "p"),
            ("MODIFIED", "p"),
            ("DELETED", "p"),
        ]

    async def test_watch_without_a_version_starts_with_the_current_state(
        self, api: Backend
    ) -> None:
        await api.pod("b")
        since = (await api.pod("a"))["metadata"]["resourceVersion"]
        await api.kube.delete(PODS, "b", api.namespace)
        # The apiserver answers a watch without a version from its watch cache, which trails etcd
        # (a CI run saw "b" there). The cache updates its store before it sends an event, so once a
        # watch from before the deletion reports it, the cache no longer holds "b".
        deletion = await collect(api, 2, resource_version=since)
        assert deletion == [("MODIFIED", "b"), ("DELETED", "b")]
        assert await collect(api, 1) == [("ADDED", "a")]

    async def test_watch_with_a_selector_reports_objects_entering_and_leaving(
        self, api: Backend
    ) -> None:
        since = (await api.probe("marker"))["metadata"]["resourceVersion"]
        await api.pod("p")
        await api.kube.patch(PODS, "p", {"metadata": {"labels": {"app": "web"}}}, api.namespace)
        await api.kube.patch(PODS, "p", {"metadata": {"annotations": {"x": "y"}}}, api.namespace)
        await api.kube.patch(PODS, "p", {"metadata": {"labels": {"app": None}}}, api.namespace)
        await api.kube.delete(PODS, "p", api.namespace)
        events = await collect(
            api, 3, resource_version=since, label_selector=api.selector("app=web")
        )
        assert events == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]

    async def test_a_watch_ends_after_its_timeout(self, api: Backend) -> None:
        stream = api.kube.watch(
            PODS, api.namespace, label_selector=api.selector(), timeout_seconds=1
        )
        events = await asyncio.wait_for(_drain(stream), 10)
        assert events == []


NOW = "2026-03-01T12:00:00Z"


async def _drain(stream: AsyncGenerator[tuple[str, JSON], None]) -> list[tuple[str, JSON]]:
    return [event async for event in stream]
