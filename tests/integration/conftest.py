"""Fixtures for the integration tests that need a control plane of their own (a module each)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from podgroup_operator.adapters.kube import KubeClient
from podgroup_operator.devcluster import cluster as devcluster
from podgroup_operator.manifests import uninstall_local
from tests.crd_schema import project_crds
from tests.deploy_helpers import ensure_operator_namespace, webhook_configurations_restored
from tests.kube_helpers import apply_crd


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[devcluster.ClusterState]:
    """A dev cluster for one test module, apart from the session's: for tests that stop, kill or
    reconfigure the control plane."""
    state_dir = tmp_path_factory.mktemp("podgroup-own-cluster")  # kept as conftest's `cluster`
    state = devcluster.up(state_dir)
    try:
        yield state
    finally:
        devcluster.down(state_dir)


@pytest.fixture(scope="module")
async def own_kube(own_cluster: devcluster.ClusterState) -> AsyncIterator[KubeClient]:
    """A client of `own_cluster`, with the project's CRDs applied and Established."""
    kube = KubeClient.from_kubeconfig(str(own_cluster.kubeconfig))
    for body in project_crds():
        await apply_crd(kube, body)
    yield kube
    await kube.close()


@pytest.fixture
async def operator_namespace(kube: KubeClient) -> None:
    """The install's namespace exists (a server dry run of namespaced objects needs it)."""
    await ensure_operator_namespace(kube)


@pytest.fixture
async def fresh_configurations(kube: KubeClient) -> AsyncIterator[None]:
    """No webhook configurations of ours, as on a cluster we were never installed on.

    The session operator's (on the dev cluster: pointing at a URL, written by `webhooks
    install`) would otherwise be patched by `kubectl apply`, which keeps their `url` next to the
    install's `service` (invalid: exactly one is allowed). They are put back afterwards."""
    async with webhook_configurations_restored(kube):
        await uninstall_local(kube)
        yield
