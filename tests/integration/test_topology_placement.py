"""Topology-aware gang placement on the real control plane, with the operator running.

Each test brings its own labelled fabric of sim nodes: one node pool per rack, every node with
`pool=<unique>` (its pods select it, so tests share the control plane without sharing
capacity) and `example.com/block` / `example.com/rack` labels. Racks are named `r<i>` and
blocks `b<i>` in every test: domains are only ever drawn from the nodes a gang may use.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    EVENTS,
    PODS,
    Kind,
    KubeClient,
)
from podgroup_operator.devcluster.process import OperatorProcess
from tests.builders import replicaset
from tests.conftest import PriorityClassFactory
from tests.kube_helpers import (
    TOLERATE_5S,
    create_bound,
    create_group,
    create_pod,
    fail_node,
    gang_pods,
    group_status,
    refusal,
    wait_group,
)
from tests.racks import BLOCK, RACK, rack_of, racks_sim, uniform
from tests.waiting import wait_for

REPLICASETS = Kind("apps", "v1", "replicasets")


@asynccontextmanager
async def fabric(
    kube: KubeClient, blocks: int, racks: int, hosts: int, cpu: str = "4"
) -> AsyncIterator[str]:
    """blocks x racks x hosts sim nodes named `<pool>-b<i>-r<j>-<k>`; yields the pool value."""
    async with racks_sim(kube, uniform(blocks, racks, hosts, cpu)) as (_, name):
        yield name


async def bound_nodes(kube: KubeClient, namespace: str, group: str) -> list[str]:
    pods = (await kube.list(PODS, namespace, label_selector=f"{c.LABEL_POD_GROUP}={group}"))[
        "items"
    ]
    return [
        p["spec"]["nodeName"]
        for p in pods
        if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    ]


async def placed(kube: KubeClient, namespace: str, group: str, count: int) -> list[str]:
    """The nodes of the group's members once `count` are bound and its placement is written."""

    async def probe() -> list[str] | None:
        nodes = await bound_nodes(kube, namespace, group)
        status = await group_status(kube, namespace, group)
        return nodes if len(nodes) >= count and status.get("placement") else None

    return await wait_for(probe, 30, f"{namespace}/{group}: {count} members bound, placement")


async def test_a_required_rack_gang_lands_in_one_rack_and_says_which(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    async with fabric(kube, 1, 3, 2) as pool:
        constraint = {"requiredTopologyLevel": RACK}
        await create_group(kube, namespace, "job", min_member=4, topologyConstraint=constraint)
        await gang_pods(kube, namespace, "job", 4, pool, group="job", requests={"cpu": "2"})
        nodes = await placed(kube, namespace, "job", 4)
        assert len({rack_of(n) for n in nodes}) == 1, nodes
        status = await group_status(kube, namespace, "job")
        assert status["placement"] == {"level": RACK, "domain": rack_of(nodes[0]).split("-")[1]}


async def test_no_rack_fits_waits_and_says_how_close_the_best_came(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    async with fabric(kube, 1, 2, 2) as pool:
        constraint = {"requiredTopologyLevel": RACK}
        await create_group(kube, namespace, "big", min_member=6, topologyConstraint=constraint)
        pods = await gang_pods(kube, namespace, "big", 6, pool, group="big", requests={"cpu": "2"})
        cond = await refusal(kube, namespace, "big")
        expected = (
            "no rack (example.com/rack) holds 6 x {cpu: 2}: 2 of 2 racks tried; best r0 holds "
            "4, short 2 pods"
        )
        assert expected in cond["message"], cond
        assert await bound_nodes(kube, namespace, "big") == []

        async def failed_scheduling() -> list[dict[str, Any]] | None:
            name = pods[0]["metadata"]["name"]
            items = (await kube.list(EVENTS, namespace))["items"]
            found = [
                e
                for e in items
                if e["involvedObject"].get("name") == name and e["reason"] == "FailedScheduling"
            ]
            return found or None

        found = await wait_for(failed_scheduling, 30, "the member's FailedScheduling Event")
        assert any(expected in e["message"] for e in found), [e["message"] for e in found]


async def test_required_block_preferred_rack_falls_back_to_the_block(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    topology: Callable[..., Any],
) -> None:
    name = await topology(BLOCK, RACK, c.LABEL_HOSTNAME)
    async with fabric(kube, 2, 2, 1) as pool:
        constraint = {
            "topology": name,
            "requiredTopologyLevel": BLOCK,
            "preferredTopologyLevel": RACK,
        }
        # Two racks' worth of room: no rack holds the gang, one block does.
        await create_group(kube, namespace, "job", min_member=4, topologyConstraint=constraint)
        await gang_pods(kube, namespace, "job", 4, pool, group="job", requests={"cpu": "2"})
        nodes = await placed(kube, namespace, "job", 4)
        assert len({rack_of(n).split("-")[0] for n in nodes}) == 1, nodes
        assert len({rack_of(n) for n in nodes}) == 2, nodes
        status = await group_status(kube, namespace, "job")
        assert status["placement"]["level"] == BLOCK
        # A gang that fits in one rack is placed at the preferred level.
        await create_group(kube, namespace, "small", min_member=2, topologyConstraint=constraint)
        await gang_pods(kube, namespace, "small", 2, pool, group="small", requests={"cpu": "2"})
        small = await placed(kube, namespace, "small", 2)
        assert len({rack_of(n) for n in small}) == 1, small
        assert (await group_status(kube, namespace, "small"))["placement"]["level"] == RACK


async def test_preferred_rack_without_a_required_level_falls_back_to_the_cluster(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    async with fabric(kube, 1, 2, 1) as pool:
        constraint = {"preferredTopologyLevel": RACK}
        await create_group(kube, namespace, "wide", min_member=4, topologyConstraint=constraint)
        await gang_pods(kube, namespace, "wide", 4, pool, group="wide", requests={"cpu": "2"})

        async def all_bound() -> list[str] | None:
            nodes = await bound_nodes(kube, namespace, "wide")
            return nodes if len(nodes) == 4 else None

        nodes = await wait_for(all_bound, 30, "the gang placed across racks")
        assert len({rack_of(n) for n in nodes}) == 2, nodes
        # Its status, written once the gang runs, names no domain: none held it.
        status = await wait_group(kube, namespace, "wide", phase=c.Phase.RUNNING)
        assert "placement" not in status, status


async def test_best_fit_chooses_the_fuller_rack(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    async with fabric(kube, 1, 3, 2) as pool:
        await create_bound(
            kube, namespace, "busy", f"{pool}-b0-r1-0", requests={"cpu": "2"}, scheduler=None
        )
        constraint = {"requiredTopologyLevel": RACK}
        await create_group(kube, namespace, "job", min_member=2, topologyConstraint=constraint)
        await gang_pods(kube, namespace, "job", 2, pool, group="job", requests={"cpu": "2"})
        nodes = await placed(kube, namespace, "job", 2)
        assert {rack_of(n) for n in nodes} == {"b0-r1"}, nodes


async def test_a_replacement_goes_back_into_its_gangs_rack(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    async with fabric(kube, 1, 2, 2) as pool:
        busy = await create_bound(
            kube, namespace, "busy-r1", f"{pool}-b0-r1-0", requests={"cpu": "4"}, scheduler=None
        )
        constraint = {"requiredTopologyLevel": RACK}
        await create_group(kube, namespace, "job", min_member=2, topologyConstraint=constraint)
        template = {
            "metadata": {"labels": {"app": "job", c.LABEL_POD_GROUP: "job"}},
            "spec": {
                "schedulerName": c.SCHEDULER_NAME,
                "nodeSelector": {"pool": pool},
                "containers": [
                    {"name": "w", "image": "x", "resources": {"requests": {"cpu": "2"}}}
                ],
            },
        }
        await kube.create(REPLICASETS, replicaset("job", 2, template), namespace)
        nodes = await placed(kube, namespace, "job", 2)
        assert {rack_of(n) for n in nodes} == {"b0-r1"}, nodes  # the fuller rack
        # Now make rack r0 the fuller one: a lone replacement placed by best fit alone would go
        # there; its gang's rack r1 (emptied of the busy pod) must take it instead.
        await create_bound(
            kube, namespace, "busy-r0a", f"{pool}-b0-r0-0", requests={"cpu": "4"}, scheduler=None
        )
        await create_bound(
            kube, namespace, "busy-r0b", f"{pool}-b0-r0-1", requests={"cpu": "2"}, scheduler=None
        )
        await kube.delete(PODS, busy["metadata"]["name"], namespace)
        members = (await kube.list(PODS, namespace, label_selector="app=job"))["items"]
        victim = members[0]["metadata"]["name"]
        await kube.delete(PODS, victim, namespace)

        async def replaced() -> list[str] | None:
            pods = (await kube.list(PODS, namespace, label_selector="app=job"))["items"]
            live = [
                p
                for p in pods
                if not p["metadata"].get("deletionTimestamp")
                and p["metadata"]["name"] != victim
                and p["spec"].get("nodeName")
            ]
            return [p["spec"]["nodeName"] for p in live] if len(live) == 2 else None

        nodes = await wait_for(replaced, 30, "the replacement bound")
        assert {rack_of(n) for n in nodes} == {"b0-r1"}, nodes


async def test_preemption_frees_one_rack_and_never_evicts_across_racks(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    priority_class: PriorityClassFactory,
) -> None:
    low = await priority_class(10)
    mid = await priority_class(20)
    high = await priority_class(1000)
    async with fabric(kube, 1, 2, 2) as pool:
        # Rack r0 holds one cheap gang on both nodes; rack r1 two dearer gangs of one node.
        gangs = (("cheap", low, "r0", 2), ("dear1", mid, "r1", 1), ("dear2", mid, "r1", 1))
        for name, klass, rack, size in gangs:
            await create_group(kube, namespace, name, min_member=size)
            for i in range(size):
                await create_pod(
                    kube,
                    namespace,
                    f"{name}-{i}",
                    group=name,
                    requests={"cpu": "4"},
                    scheduler=c.SCHEDULER_NAME,
                    priorityClassName=klass,
                    nodeSelector={"pool": pool, RACK: rack},
                )
        for name in ("cheap", "dear1", "dear2"):

            async def running(group: str = name) -> bool:
                status = await group_status(kube, namespace, group)
                return status.get("phase") == c.Phase.RUNNING

            await wait_for(running, 30, f"gang {name} to run")
        constraint = {"requiredTopologyLevel": RACK}
        await create_group(kube, namespace, "big", min_member=2, topologyConstraint=constraint)
        await gang_pods(
            kube,
            namespace,
            "big",
            2,
            pool,
            group="big",
            requests={"cpu": "4"},
            priorityClassName=high,
        )
        nodes = await placed(kube, namespace, "big", 2)
        assert {rack_of(n) for n in nodes} == {"b0-r0"}, nodes

        async def preempted() -> dict[str, Any] | None:
            status = await group_status(kube, namespace, "cheap")
            conds = [x for x in status.get("conditions", []) if x["type"] == "Preempted"]
            return conds[0] if conds else None

        cond = await wait_for(preempted, 30, "the cheap gang's Preempted condition")
        assert f"{namespace}/big" in cond["message"], cond
        for name in ("dear1", "dear2"):
            status = await group_status(kube, namespace, name)
            assert status.get("phase") == c.Phase.RUNNING, (name, status)
            assert not [x for x in status.get("conditions", []) if x["type"] == "Preempted"]


async def test_a_gang_whose_rack_fails_is_restarted_whole_in_another_rack(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    """A gang that must sit in one rack fills it; one of the rack's nodes dies. Its member is
    evicted, the gang is restarted whole, and every member lands together in the other rack:
    the failed rack no longer holds the gang."""
    async with racks_sim(kube, uniform(1, 2, 2, "4")) as (sim, pool):
        policy = {"action": "RestartGang", "maxRestarts": 3, "backoffSeconds": 1}
        constraint = {"requiredTopologyLevel": RACK}
        await create_group(
            kube, namespace, "train", min_member=4, topologyConstraint=constraint, policy=policy
        )
        await gang_pods(
            kube,
            namespace,
            "train",
            4,
            pool,
            group="train",
            requests={"cpu": "2"},
            tolerations=TOLERATE_5S,
        )
        await wait_group(kube, namespace, "train", phase=c.Phase.RUNNING, running=4)
        before = await placed(kube, namespace, "train", 4)
        [rack] = {rack_of(n) for n in before}
        old = {p["metadata"]["uid"] for p in (await kube.list(PODS, namespace))["items"]}
        await fail_node(kube, sim, namespace, before[0])

        async def moved() -> list[str] | None:
            selector = f"{c.LABEL_POD_GROUP}=train"
            pods = (await kube.list(PODS, namespace, label_selector=selector))["items"]
            fresh = [
                p
                for p in pods
                if p["metadata"]["uid"] not in old
                and p["status"].get("phase") == c.PodPhase.RUNNING
            ]
            return [p["spec"]["nodeName"] for p in fresh] if len(fresh) == 4 else None

        nodes = await wait_for(moved, 150, "the gang running again, whole, on fresh members")
        racks = {rack_of(n) for n in nodes}
        assert len(racks) == 1 and racks != {rack}, (rack, nodes)
        status = await wait_group(kube, namespace, "train", phase=c.Phase.RUNNING, restarts=1)
        assert status["placement"]["domain"] == racks.pop().split("-")[1], status["placement"]
