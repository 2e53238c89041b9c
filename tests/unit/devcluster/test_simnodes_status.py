"""The sim kubelet keeps every pod's status and writes it until the API server has it, as a
kubelet's status manager does: through an API server that refuses connections for a while, a
409 on a pod still there, and a re-list that shows a pod behind what the kubelet knows."""

from __future__ import annotations

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import PODS, KubeClient, Request
from podgroup_operator.devcluster import simnodes
from podgroup_operator.devcluster.simnodes import NodePool, SimCluster
from tests.builders import pod
from tests.fakes import FakeApiServer, Fault, FaultyTransport
from tests.waiting import until

NS = "default"


def status_patch(request: Request) -> bool:
    return (
        request.method == "PATCH" and request.path.endswith("/status") and "/pods/" in request.path
    )


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simnodes, "STATUS_RETRY_SECONDS", 0.05)
    monkeypatch.setattr(simnodes, "RETRY_DELAYS", (0.01,))


def phase(fake: FakeApiServer, name: str) -> str | None:
    stored = fake.get_object(PODS, name, NS)
    return None if stored is None else (stored.get("status") or {}).get("phase")


async def test_a_status_not_written_while_the_api_server_is_away_is_written_when_it_is_back() -> (
    None
):
    fake = FakeApiServer()
    transport = FaultyTransport(fake, matching=status_patch)
    kube = KubeClient(transport)
    async with SimCluster(kube, [NodePool(count=1, name_prefix="n")], start_delay=0.01) as sim:
        transport.fault = Fault.REFUSE
        fake.seed(pod("p", NS, node=sim.node_names[0]))
        await until(lambda: transport.refused >= 3, "status writes refused", timeout=5)
        assert phase(fake, "p") == c.PodPhase.PENDING

        transport.fault = None

        await until(lambda: phase(fake, "p") == c.PodPhase.RUNNING, "p Running", timeout=5)


async def test_a_409_on_a_pod_still_there_is_written_again() -> None:
    fake = FakeApiServer()
    kube = KubeClient(fake)
    fake.inject_error("PATCH", status_patch, 409, "Conflict", times=3)
    async with SimCluster(kube, [NodePool(count=1, name_prefix="n")], start_delay=0.01) as sim:
        fake.seed(pod("p", NS, node=sim.node_names[0]))

        await until(lambda: phase(fake, "p") == c.PodPhase.RUNNING, "p Running", timeout=5)


async def test_a_pod_the_api_server_shows_behind_what_the_kubelet_knows_is_written_again() -> None:
    """As a re-list after an API server restart that lost the write would show it."""
    fake = FakeApiServer()
    kube = KubeClient(fake)
    async with SimCluster(kube, [NodePool(count=1, name_prefix="n")], start_delay=0.01) as sim:
        fake.seed(pod("p", NS, node=sim.node_names[0]))
        await until(lambda: phase(fake, "p") == c.PodPhase.RUNNING, "p Running", timeout=5)

        await kube.patch(
            PODS, "p", {"status": {"phase": c.PodPhase.PENDING}}, NS, subresource="status"
        )

        await until(lambda: phase(fake, "p") == c.PodPhase.RUNNING, "p Running again", timeout=5)
