"""The Topology status controller over the in-memory API server: coalesced, written on change."""

from __future__ import annotations

from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.informers import Store, object_key
from podgroup_operator.adapters.kube import TOPOLOGIES, KubeClient
from podgroup_operator.constants import WatchEventType
from podgroup_operator.controllers import topology as topology_module
from podgroup_operator.controllers.topology import TopologyLevels, TopologyStatusController
from podgroup_operator.devcluster.fabric import parse_fabric
from tests.builders import node, pod
from tests.fakes import FakeApiServer
from tests.unit.controllers.test_runtime_unit import leading_over
from tests.waiting import until

ZONE, RACK = "example.com/zone", "example.com/rack"
FABRIC = parse_fabric("zone=2,rack=3,host=2")


def fabric_nodes() -> list[dict[str, Any]]:
    return [
        node(f"n{index}", labels={c.LABEL_HOSTNAME: f"n{index}", **labels})
        for index, labels in enumerate(FABRIC.node_labels())
    ]


async def controller_over(
    api: FakeApiServer, nodes: list[dict[str, Any]]
) -> tuple[TopologyStatusController, Store, Store]:
    """A controller over stores filled as the informers fill them, the Topology `fabric` made."""
    kube = KubeClient(api)
    created = await kube.create(TOPOLOGIES, FABRIC.topology("fabric"))
    topologies, node_store = Store(), Store()
    topologies.put(object_key(created), created)
    controller = TopologyStatusController(kube, topologies, node_store, delay=0)
    controller.on_topology(WatchEventType.ADDED, created, None)
    for body in nodes:
        node_store.put(object_key(body), body)
        controller.on_node(WatchEventType.ADDED, body, None)
    return controller, topologies, node_store


def refresh(api: FakeApiServer, topologies: Store, name: str = "fabric") -> dict[str, Any]:
    """What the informer would store after the watch brings the written version."""
    current = api.get_object(TOPOLOGIES, name)
    assert current is not None
    topologies.put(name, current)
    return current


async def test_a_burst_of_node_events_costs_one_recompute_and_one_write() -> None:
    api = FakeApiServer()
    controller, topologies, _ = await controller_over(api, fabric_nodes())
    api.clear_requests()
    await controller.recompute()
    assert controller.recomputes == 1 and controller.writes == 1
    assert api.count("PATCH", "/topologies/fabric/status") == 1
    (patch,) = [r for r in api.request_log if r.method == "PATCH"]
    assert patch.body["metadata"]["resourceVersion"]  # written over the version it read
    status = refresh(api, topologies)["status"]
    assert status == {
        "levels": [
            {"nodeLabel": ZONE, "domains": 2, "nodesWithoutLabel": 0},
            {"nodeLabel": RACK, "domains": 6, "nodesWithoutLabel": 0},
            {"nodeLabel": c.LABEL_HOSTNAME, "domains": 12, "nodesWithoutLabel": 0},
        ],
        "observedGeneration": 1,
    }


async def test_its_own_write_coming_back_is_recomputed_but_not_written_again() -> None:
    api = FakeApiServer()
    controller, topologies, _ = await controller_over(api, fabric_nodes())
    await controller.recompute()
    written = refresh(api, topologies)
    controller.on_topology(WatchEventType.MODIFIED, written, None)
    await controller.recompute()
    assert (controller.recomputes, controller.writes) == (2, 1)


async def test_a_heartbeat_marks_nothing_a_relabel_or_readiness_change_marks_all() -> None:
    api = FakeApiServer()
    nodes = fabric_nodes()
    controller, topologies, node_store = await controller_over(api, nodes)
    await controller.recompute()
    refresh(api, topologies)
    before = nodes[0]
    heartbeat = {**before, "metadata": {**before["metadata"], "resourceVersion": "99"}}
    controller.on_node(WatchEventType.MODIFIED, heartbeat, before)
    await controller.recompute()
    assert controller.recomputes == 1  # nothing was dirty

    unlabelled = node("n0", labels={c.LABEL_HOSTNAME: "n0"})
    node_store.put("n0", unlabelled)
    controller.on_node(WatchEventType.MODIFIED, unlabelled, before)
    await controller.recompute()
    levels = refresh(api, topologies)["status"]["levels"]
    assert [level["nodesWithoutLabel"] for level in levels] == [1, 1, 0]

    not_ready = node("n0", labels={c.LABEL_HOSTNAME: "n0"}, ready=False)
    node_store.put("n0", not_ready)
    controller.on_node(WatchEventType.MODIFIED, not_ready, unlabelled)
    await controller.recompute()
    levels = refresh(api, topologies)["status"]["levels"]
    assert [level["nodesWithoutLabel"] for level in levels] == [0, 0, 0]
    assert (controller.recomputes, controller.writes) == (3, 3)


async def test_a_conflict_is_left_to_the_newer_version_the_watch_brings() -> None:
    api = FakeApiServer()
    controller, topologies, _ = await controller_over(api, fabric_nodes())
    kube = KubeClient(api)
    await kube.patch(TOPOLOGIES, "fabric", {"metadata": {"labels": {"team": "a"}}})
    await controller.recompute()  # over the stale version in the store: 409
    assert controller.writes == 0 and len(controller.failures) == 0
    newer = refresh(api, topologies)
    controller.on_topology(WatchEventType.MODIFIED, newer, None)
    await controller.recompute()
    assert controller.writes == 1
    assert refresh(api, topologies)["status"]["levels"][1]["domains"] == 6


async def test_a_deleted_topology_is_forgotten() -> None:
    api = FakeApiServer()
    controller, topologies, _ = await controller_over(api, [])
    body = topologies.get("fabric")
    assert body is not None
    topologies.delete("fabric")
    controller.on_topology(WatchEventType.DELETED, body, body)
    await controller.recompute()
    assert controller.recomputes == 0 and controller.writes == 0


def test_levels_of_reads_the_store() -> None:
    store = Store()
    store.put("fabric", FABRIC.topology("fabric"))
    levels = TopologyLevels(store)
    assert levels.levels_of("fabric") == (ZONE, RACK, c.LABEL_HOSTNAME)
    assert levels.levels_of("other") is None


async def test_the_leader_keeps_topology_status_and_answers_levels_of(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Wired in the runtime: every replica's informers answer levels_of; the leader writes."""
    monkeypatch.setattr(topology_module, "COALESCE_SECONDS", 0.0)
    api = FakeApiServer()
    api.seed(*fabric_nodes(), pod("p", group="g"))
    async with leading_over(api) as (runtime, _leading):
        assert runtime.informers.levels_of("fabric") is None
        await KubeClient(api).create(TOPOLOGIES, FABRIC.topology("fabric"))

        def written() -> bool:
            body = api.get_object(TOPOLOGIES, "fabric") or {}
            return bool((body.get("status") or {}).get("levels"))

        await until(written, "the Topology's status")
        assert runtime.informers.levels_of("fabric") == (ZONE, RACK, c.LABEL_HOSTNAME)
        assert await runtime.informers.topologies_synced(0.1)
        status = (api.get_object(TOPOLOGIES, "fabric") or {})["status"]
        assert [level["domains"] for level in status["levels"]] == [2, 6, 12]
