"""Pod-to-pod filters of the bundled scheduler on the real control plane (issue 10, item 2).

Each test brings its own sim nodes, labelled with a unique `pool` value its pods select. Without
the filters, best-fit packing would put every member on one node (the nodes are roomy), so a
member per node, per zone or per port proves the filter, not the capacity.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import PODS, KubeClient
from podgroup_operator.devcluster.process import OperatorProcess
from podgroup_operator.devcluster.simnodes import NodePool, SimCluster
from podgroup_operator.scheduling.filters import Exclusion
from tests.kube_helpers import (
    create_group,
    create_pod,
    gang_pods,
    pool,
    refusal,
    scheduling_attempts,
    unique_prefix,
    wait_scheduling_attempts,
)
from tests.waiting import wait_for

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


async def pods_of(kube: KubeClient, namespace: str, selector: str) -> list[dict[str, Any]]:
    return list((await kube.list(PODS, namespace, label_selector=selector))["items"])


def bound(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if p["spec"].get("nodeName")]


async def all_bound(kube: KubeClient, namespace: str, selector: str, count: int) -> list[Any]:
    async def probe() -> list[dict[str, Any]]:
        placed = bound(await pods_of(kube, namespace, selector))
        return placed if len(placed) == count else []

    return await wait_for(probe, 30, f"{count} pods of {selector} to be bound")


async def still_unbound_after_more_refusals(
    kube: KubeClient, operator: OperatorProcess, namespace: str, selector: str
) -> None:
    """The barrier before "nothing was bound": the scheduler refused twice more meanwhile."""
    refused = await scheduling_attempts(operator, "refused")
    await wait_scheduling_attempts(operator, "refused", since=refused, more=2)
    assert not bound(await pods_of(kube, namespace, selector))


def anti_affinity(app: str) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME}
            ]
        }
    }


async def test_required_anti_affinity_puts_one_member_per_node(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    async with pool(kube, count=3, cpu="8", memory="16Gi") as (_, name):
        await create_group(kube, namespace, "web", min_member=3)
        await gang_pods(
            kube,
            namespace,
            "w",
            3,
            name,
            group="web",
            labels={"app": "web"},
            affinity=anti_affinity("web"),
        )
        placed = await all_bound(kube, namespace, "app=web", 3)
        assert len({p["spec"]["nodeName"] for p in placed}) == 3, placed

        # A newcomer with the label but no anti-affinity of its own: the running members'
        # anti-affinity keeps it off every node (kube-scheduler's symmetry rule).
        await create_group(kube, namespace, "late", min_member=1)
        await gang_pods(kube, namespace, "l", 1, name, group="late", labels={"app": "web"})
        cond = await refusal(kube, namespace, "late")
        assert Exclusion.EXISTING_ANTI_AFFINITY.value in cond["message"], cond
        await still_unbound_after_more_refusals(
            kube, operator, namespace, f"{c.LABEL_POD_GROUP}=late"
        )


async def test_gang_with_more_anti_affine_members_than_nodes_is_refused_whole(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    """Members of one gang count against each other within the one placement."""
    async with pool(kube, count=2, cpu="8", memory="16Gi") as (_, name):
        await create_group(kube, namespace, "wide", min_member=3)
        await gang_pods(
            kube,
            namespace,
            "w",
            3,
            name,
            group="wide",
            labels={"app": "wide"},
            affinity=anti_affinity("wide"),
        )
        cond = await refusal(kube, namespace, "wide")
        assert "anti-affinity" in cond["message"], cond
        await still_unbound_after_more_refusals(kube, operator, namespace, "app=wide")


@asynccontextmanager
async def zones(kube: KubeClient, **per_zone: int) -> AsyncIterator[str]:
    """Ready sim nodes in zones (`a=2, b=1`: two nodes in zone a, one in b), all with one
    unique `pool` label; yields that value."""
    name = unique_prefix()
    pools = [
        NodePool(
            count=count,
            cpu="8",
            memory="16Gi",
            labels={"pool": name, ZONE: zone},
            name_prefix=f"{name}-{zone}",
        )
        for zone, count in per_zone.items()
    ]
    async with SimCluster(kube, pools, start_delay=0.1, lease_interval=2.0) as sim:
        await sim.wait_ready(30)
        yield name


async def test_zone_spread_constraint_holds(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "spread"}},
        }
    ]
    async with zones(kube, a=2, b=1) as name:
        await create_group(kube, namespace, "spread", min_member=4)
        await gang_pods(
            kube,
            namespace,
            "s",
            4,
            name,
            group="spread",
            labels={"app": "spread"},
            topologySpreadConstraints=spread,
        )
        placed = await all_bound(kube, namespace, "app=spread", 4)
        nodes = {n["metadata"]["name"]: n for n in await _nodes(kube, name)}
        per_zone = Counter(nodes[p["spec"]["nodeName"]]["metadata"]["labels"][ZONE] for p in placed)
        assert per_zone == {"a": 2, "b": 2}, per_zone


async def _nodes(kube: KubeClient, pool_name: str) -> list[dict[str, Any]]:
    from podgroup_operator.adapters.kube import NODES

    return list((await kube.list(NODES, label_selector=f"pool={pool_name}"))["items"])


async def test_pods_with_the_same_host_port_never_share_a_node(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    async def with_port(prefix: str, group: str, count: int, pool_name: str) -> None:
        pods = await gang_pods(
            kube,
            namespace,
            prefix,
            count,
            pool_name,
            group=group,
            labels={"app": "port"},
            containers=[
                {
                    "name": "main",
                    "image": "registry.local/sim:latest",
                    "resources": {"requests": {"cpu": "1"}},
                    "ports": [{"containerPort": 8080, "hostPort": 8080}],
                }
            ],
        )
        assert all(p["spec"]["containers"][0]["ports"][0]["hostPort"] == 8080 for p in pods)

    async with pool(kube, count=2, cpu="8", memory="16Gi") as (_, name):
        await create_group(kube, namespace, "ports", min_member=2)
        await with_port("p", "ports", 2, name)
        placed = await all_bound(kube, namespace, f"{c.LABEL_POD_GROUP}=ports", 2)
        assert len({p["spec"]["nodeName"] for p in placed}) == 2, placed

        await create_group(kube, namespace, "third", min_member=1)
        await with_port("t", "third", 1, name)
        cond = await refusal(kube, namespace, "third")
        assert Exclusion.PORTS.value in cond["message"], cond
        await still_unbound_after_more_refusals(
            kube, operator, namespace, f"{c.LABEL_POD_GROUP}=third"
        )


async def test_constraint_the_scheduler_cannot_evaluate_refuses_the_gang_naming_it(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    # The apiserver (1.20) does not validate a spread constraint's selector; `Gt` is no label
    # selector operator, so no scheduler can evaluate it. Ignoring it would place the pods.
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {
                "matchExpressions": [{"key": "rank", "operator": "Gt", "values": ["1"]}]
            },
        }
    ]
    async with pool(kube, count=1, cpu="8", memory="16Gi", labels={ZONE: "a"}) as (_, name):
        await create_group(kube, namespace, "odd", min_member=2)
        await gang_pods(
            kube, namespace, "o", 2, name, group="odd", topologySpreadConstraints=spread
        )
        cond = await refusal(kube, namespace, "odd", c.Reason.UNSUPPORTED_CONSTRAINT)
        field = "spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].operator"
        assert field in cond["message"], cond
        await still_unbound_after_more_refusals(
            kube, operator, namespace, f"{c.LABEL_POD_GROUP}=odd"
        )


async def test_a_gang_goes_to_the_node_holding_its_image_though_packing_picks_a_fuller_one(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    """Two nodes: `busy` runs a 4-cpu pod; `cached` lists the gang's image as pulled (100 GiB:
    the top image score however many nodes the cluster has, up to 102). A gang of another
    image goes where packing says, to `busy`; the gang of the cached image goes to `cached`,
    as kube-scheduler's ImageLocality weighs it (and kube-scheduler would not pack at all)."""
    shared = {"shared": namespace}
    image = f"registry.local/trainer-{namespace}:v1"
    async with (
        pool(kube, count=1, cpu="8", memory="16Gi", labels=shared) as (busy, _),
        pool(kube, count=1, cpu="8", memory="16Gi", labels=shared, images={image: "100Gi"}) as (
            cached,
            _,
        ),
    ):
        busy_node, cached_node = busy.node_names[0], cached.node_names[0]
        await create_pod(kube, namespace, "filler", node=busy_node, requests={"cpu": "4"})

        async def gang(name: str, container_image: str) -> set[str]:
            await create_group(kube, namespace, name, min_member=2)
            for i in range(2):
                await create_pod(
                    kube,
                    namespace,
                    f"{name}-{i}",
                    group=name,
                    scheduler=c.SCHEDULER_NAME,
                    nodeSelector=shared,
                    containers=[
                        {
                            "name": "main",
                            "image": container_image,
                            "resources": {"requests": {"cpu": "1"}},
                        }
                    ],
                )
            placed = await all_bound(kube, namespace, f"{c.LABEL_POD_GROUP}={name}", 2)
            return {p["spec"]["nodeName"] for p in placed}

        assert await gang("plain", "registry.local/sim:latest") == {busy_node}
        assert await gang("train", image) == {cached_node}
