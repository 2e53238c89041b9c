"""A RestartGang gang of bare pods gets back every member it had, whoever deleted it: the
taint manager evicting it from a dead node, or a plain pod delete while the gang runs.

Bare pods have no owner to recreate them: the operator keeps each member's body from when it
first sees it, and its restart recreates the ones gone, once their names are free.
"""

from __future__ import annotations

from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import PODS, KubeClient
from tests.kube_helpers import (
    TOLERATE_5S,
    create_group,
    fail_node,
    gang_pods,
    pool,
    running_members,
    wait_group,
)
from tests.waiting import wait_for

JSON = dict[str, Any]
POLICY = {"action": "RestartGang", "maxRestarts": 3, "backoffSeconds": 1}


async def whole_again(
    kube: KubeClient, namespace: str, names: list[str], old: set[str], timeout: float
) -> list[JSON]:
    """The gang Running on 4 members of the same names, none of them an old pod."""

    async def fresh() -> list[JSON] | None:
        members = await running_members(kube, namespace, "bare")
        uids = {p["metadata"]["uid"] for p in members}
        ran = sorted(p["metadata"]["name"] for p in members)
        return members if ran == names and not uids & old else None

    members = await wait_for(fresh, timeout, "4 recreated members running")
    status = await wait_group(kube, namespace, "bare", timeout=30, phase=c.Phase.RUNNING)
    assert status["running"] == 4 and status["restarts"] >= 1, status
    return members


async def test_a_member_deleted_while_the_gang_runs_is_recreated(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    async with pool(kube, count=2, cpu="4", memory="16Gi") as (_, pool_name):
        await create_group(kube, namespace, "bare", min_member=4, policy=POLICY)
        await gang_pods(kube, namespace, "bare", 4, pool_name, group="bare")
        await wait_group(kube, namespace, "bare", phase=c.Phase.RUNNING, running=4)
        members = await running_members(kube, namespace, "bare")
        names = sorted(p["metadata"]["name"] for p in members)
        await kube.delete(PODS, "bare-2", namespace)

        await whole_again(kube, namespace, names, {p["metadata"]["uid"] for p in members}, 60)


async def test_a_member_on_a_dead_node_is_recreated_once_its_name_is_free(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    """The issue's second scenario: the node's kubelet dies, the taint manager evicts the
    member after its 5 s toleration, the pod stays Terminating on the dead node until the Node
    is deleted and the pod GC removes it; then the gang runs whole again on the live nodes."""
    async with pool(kube, count=3, cpu="2", memory="16Gi") as (sim, pool_name):
        await create_group(kube, namespace, "bare", min_member=4, policy=POLICY)
        await gang_pods(
            kube, namespace, "bare", 4, pool_name, group="bare", tolerations=TOLERATE_5S
        )
        await wait_group(kube, namespace, "bare", phase=c.Phase.RUNNING, running=4)
        members = await running_members(kube, namespace, "bare")
        names = sorted(p["metadata"]["name"] for p in members)
        dead = members[0]["spec"]["nodeName"]
        await fail_node(kube, sim, namespace, dead)

        fresh = await whole_again(
            kube, namespace, names, {p["metadata"]["uid"] for p in members}, 150
        )
        assert dead not in {p["spec"]["nodeName"] for p in fresh}
