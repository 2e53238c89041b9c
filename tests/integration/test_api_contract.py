"""The API server contract of `tests/api_contract.py`, against the dev cluster's kube-apiserver.

The same suite runs against the in-memory fake in `tests/unit/fakes/test_fake_api.py`: when the
fake and the apiserver disagree, one of the two runs fails, and the fake is what gets fixed.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from podgroup_operator.adapters.kube import EVENTS, NAMESPACES, ApiError, KubeClient
from podgroup_operator.adapters.quota_record import CONFIG_MAPS
from tests.api_contract import PROBE_CRD, ApiContract, Backend, new_scope
from tests.kube_helpers import apply_crd


@pytest.fixture(scope="module")
async def probe_crd(kube: KubeClient) -> None:
    await apply_crd(kube, PROBE_CRD)


@pytest.fixture
async def other_namespace(kube: KubeClient) -> AsyncIterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    try:
        await kube.delete(NAMESPACES, name)
    except ApiError as exc:
        if not exc.not_found:
            raise


class TestRealApiserver(ApiContract):
    """The API server contract, against kube-apiserver v1.20."""

    @pytest.fixture
    async def api(
        self, kube: KubeClient, namespace: str, other_namespace: str, crds: None, probe_crd: None
    ) -> Backend:
        return Backend(kube, namespace, other_namespace, new_scope())


async def test_a_namespace_being_deleted_refuses_new_objects_with_its_cause(
    kube: KubeClient, other_namespace: str
) -> None:
    """Only the apiserver has namespace lifecycle (the fake keeps no namespaces): the 403 it
    answers carries the NamespaceTerminating cause the status reconciler classifies by."""
    held = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "hold", "finalizers": ["example.com/hold"]},
    }
    await kube.create(CONFIG_MAPS, held, other_namespace)
    await kube.delete(NAMESPACES, other_namespace)
    try:
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": other_namespace},
            "reason": "Probe",
            "message": "probe",
            "type": "Normal",
        }
        with pytest.raises(ApiError) as caught:
            await kube.create(EVENTS, event, other_namespace)
        assert caught.value.status == 403, caught.value.body
        assert caught.value.namespace_terminating and not caught.value.conflict
    finally:
        await kube.patch(CONFIG_MAPS, "hold", {"metadata": {"finalizers": None}}, other_namespace)
