"""Shared fixtures: the real control plane (one per test run), a client, fresh namespaces.

The cluster is the project's own dev cluster, started once per session in a private state
directory, unless PODGROUP_TEST_KUBECONFIG names an existing cluster (kind, k3d, a real one).
Tests that need it use the `cluster` marker (added automatically to tests using these fixtures).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import hypothesis
import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters import heap
from podgroup_operator.adapters.kube import NAMESPACES, TOPOLOGIES, ApiError, Kind, KubeClient
from podgroup_operator.devcluster import cluster as devcluster
from podgroup_operator.devcluster.process import OperatorProcess
from podgroup_operator.local import is_dev_cluster_kubeconfig

# The API server contract is a suite in a helper module; its asserts should explain failures.
pytest.register_assert_rewrite("tests.api_contract")

CLUSTER_FIXTURES = {"cluster", "kube", "namespace", "kubeconfig", "crds", "operator"}


UNIT_TIER = Path(__file__).resolve().parent / "unit"
UNIT_TIMEOUT_SECONDS = 2
"""Per-test limit of the fast tier: a pure test that waits on the clock or hangs fails fast
(pyproject's `timeout` stays the integration tier's)."""

PROPERTY_TIMEOUT_SECONDS = 30
"""A property test is many tests: each of its examples is held to the fast tier's limit by
hypothesis' `deadline`, the whole run to this (the thorough profile lifts it)."""

hypothesis.settings.register_profile(
    "fast", max_examples=50, deadline=timedelta(seconds=UNIT_TIMEOUT_SECONDS)
)
hypothesis.settings.register_profile(
    "thorough", max_examples=1000, deadline=timedelta(seconds=UNIT_TIMEOUT_SECONDS)
)
HYPOTHESIS_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "fast")
hypothesis.settings.load_profile(HYPOTHESIS_PROFILE)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.cluster)
        if (
            HYPOTHESIS_PROFILE == "fast"
            and item.path.is_relative_to(UNIT_TIER)
            and item.get_closest_marker("timeout") is None
        ):
            is_property = getattr(getattr(item, "obj", None), "is_hypothesis_test", False)
            limit = PROPERTY_TIMEOUT_SECONDS if is_property else UNIT_TIMEOUT_SECONDS
            # The test itself, not fixture teardown: the session's control plane is stopped
            # when the last test of a whole run ends, which is a unit test.
            item.add_marker(pytest.mark.timeout(limit, func_only=True))


class ClusterUnderTest:
    """How tests reach the control plane."""

    def __init__(self, kubeconfig: Path, state: devcluster.ClusterState | None) -> None:
        self.kubeconfig = kubeconfig
        self.state = state

    def client(self) -> KubeClient:
        return KubeClient.from_kubeconfig(str(self.kubeconfig))


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterUnderTest]:
    external = os.environ.get("PODGROUP_TEST_KUBECONFIG")
    if external:
        yield ClusterUnderTest(Path(external), None)
        return
    # Under pytest's temporary root, which keeps the last few sessions (their logs, for a
    # failure) and removes older ones: a directory of its own was left behind by every run.
    state_dir = tmp_path_factory.mktemp("podgroup-test-cluster")
    state = devcluster.up(state_dir)
    try:
        yield ClusterUnderTest(state.kubeconfig, state)
    finally:
        devcluster.down(state_dir)


@pytest.fixture(scope="session")
def kubeconfig(cluster: ClusterUnderTest) -> Path:
    return cluster.kubeconfig


@pytest.fixture(scope="session")
async def kube(cluster: ClusterUnderTest) -> AsyncIterator[KubeClient]:
    client = cluster.client()
    yield client
    await client.close()


@pytest.fixture
async def namespace(kube: KubeClient) -> AsyncIterator[str]:
    """A fresh namespace per test, deleted afterwards (pods in it go with it)."""
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


@pytest.fixture
def widened(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, bool]]:
    """Every call of `heap.widen_tls_buffer` from now on, with the transport it was given and
    what it answered (the real function still runs)."""
    calls: list[tuple[Any, bool]] = []
    real_widen = heap.widen_tls_buffer

    def recording_widen(transport: object) -> bool:
        result = real_widen(transport)
        calls.append((transport, result))
        return result

    monkeypatch.setattr(heap, "widen_tls_buffer", recording_widen)
    return calls


REPO = Path(__file__).resolve().parents[1]
CRD_FILE = REPO / "crds" / "podgroups.scheduling.x-k8s.io.yaml"


@pytest.fixture(scope="session")
async def crds(kube: KubeClient) -> None:
    """The project's CRDs (PodGroup, Topology), applied from crds/ and Established."""
    from tests.crd_schema import project_crds
    from tests.kube_helpers import apply_crd

    for body in project_crds():
        await apply_crd(kube, body)


@pytest.fixture(scope="session")
def operator(
    cluster: ClusterUnderTest, crds: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """The operator running against the test cluster for the whole session."""
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    process = OperatorProcess(cluster.kubeconfig, log)
    # On the dev cluster the operator serves webhooks on 127.0.0.1 (`run` picks local mode from
    # the kubeconfig), and the tooling installs their configurations, as `make demo` does: the
    # operator never writes them. Another cluster cannot call us: run without webhooks there.
    local = is_dev_cluster_kubeconfig(cluster.kubeconfig)
    process.start()
    try:
        process.wait_ready()
        if local:
            process.install_webhooks()
        yield process
    finally:
        if local:
            process.uninstall_webhooks()
        process.stop()
        print(f"\noperator log: {log}")


PRIORITY_CLASSES = Kind("scheduling.k8s.io", "v1", "priorityclasses")

ClusterScopedFactory = Callable[[Kind, dict[str, Any]], Awaitable[dict[str, Any]]]
"""`await cluster_scoped(kind, body)`: the object created, deleted after the test."""
PriorityClassFactory = Callable[..., Any]
TopologyFactory = Callable[..., Awaitable[str]]
"""`await topology(*levels)`: the name of a new Topology of those node label keys."""
"""`await priority_class(value, never=False)`: the name of a new PriorityClass."""


@pytest.fixture
async def cluster_scoped(kube: KubeClient) -> AsyncIterator[ClusterScopedFactory]:
    """Create cluster-scoped objects (no test namespace takes them along); each is deleted after
    the test."""
    made: list[tuple[Kind, str]] = []

    async def create(kind: Kind, body: dict[str, Any]) -> dict[str, Any]:
        created = await kube.create(kind, body)
        made.append((kind, body["metadata"]["name"]))
        return dict(created)

    yield create
    for kind, name in reversed(made):
        try:
            await kube.delete(kind, name)
        except ApiError as exc:
            if not exc.not_found:
                raise


@pytest.fixture
def priority_class(cluster_scoped: ClusterScopedFactory) -> PriorityClassFactory:
    """Uniquely named PriorityClasses, deleted after the test."""

    async def make(value: int, *, never: bool = False) -> str:
        name = f"p{value}-{uuid.uuid4().hex[:6]}"
        body: dict[str, Any] = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        if never:
            body["preemptionPolicy"] = "Never"
        await cluster_scoped(PRIORITY_CLASSES, body)
        return name

    return make


@pytest.fixture
def topology(cluster_scoped: ClusterScopedFactory) -> TopologyFactory:
    """Uniquely named Topologies of the given levels, deleted after the test."""

    async def make(*levels: str) -> str:
        name = f"fabric-{uuid.uuid4().hex[:6]}"
        body = {
            "apiVersion": c.API_VERSION,
            "kind": c.TOPOLOGY_KIND,
            "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]},
        }
        await cluster_scoped(TOPOLOGIES, body)
        return name

    return make
