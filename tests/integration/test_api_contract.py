"""The API server contract of `tests/api_contract.py`, against the dev cluster's kube-apiserver.

The same suite runs against the in-memory fake in `tests/unit/fakes/test_fake_api.py`: when the
fake and the apiserver disagree, one of the two runs fails, and the fake is what gets fixed.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from podgroup_operator.adapters.kube import NAMESPACES, ApiError, KubeClient
from podgroup_operator.adapters.quota_record import CONFIG_MAPS
from tests.api_contract import PROBE_CRD, ApiContract, Backend, new_scope
from tests.kube_helpers import apply_crd


@pytest.fixture(scope="module")
async def probe_crd(kube: KubeClient) -> None:
    await apply_crd(kube, PROBE_CRD)


HOLD = "hold"
"""A ConfigMap with a finalizer: it keeps a namespace being deleted until the test ends."""


async def hold_namespace(kube: KubeClient, namespace: str) -> None:
    held = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": HOLD, "finalizers": ["example.com/hold"]},
    }
    await kube.create(CONFIG_MAPS, held, namespace)


async def release_namespace(kube: KubeClient, namespace: str) -> None:
    try:
        await kube.patch(CONFIG_MAPS, HOLD, {"metadata": {"finalizers": None}}, namespace)
    except ApiError as exc:
        if not exc.not_found:
            raise


@pytest.fixture
async def other_namespace(kube: KubeClient) -> AsyncIterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    await release_namespace(kube, name)
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
        async def terminate_other() -> None:
            await hold_namespace(kube, other_namespace)
            await kube.delete(NAMESPACES, other_namespace)

        return Backend(kube, namespace, other_namespace, new_scope(), terminate_other)
