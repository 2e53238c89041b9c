"""NonStrict holds on the real control plane, as two tenants see them.

A NonStrict gang that cannot fit holds the members that do fit in the scheduler's memory, never
bound; `run --nonstrict-hold-seconds` bounds how long, whatever its scheduleTimeoutSeconds. The
operator here runs with a short cap, so it gets a control plane of its own (one per module).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import NAMESPACES, PODS, KubeClient
from podgroup_operator.devcluster import cluster as devcluster
from podgroup_operator.devcluster.process import OperatorProcess, leading
from tests.kube_helpers import create_group, gang_pods, group_status, pool, wait_group
from tests.tenants import PODGROUP_WRITER, tenant
from tests.waiting import wait_for

CAP_SECONDS = 15
"""The operator's hold cap here: long enough for the small gang to be refused while the room is
held on a busy machine, short enough for the test."""
YEAR_SECONDS = 365 * 24 * 3600


async def unschedulable_message(kube: KubeClient, namespace: str, group: str) -> str:
    """The group's Unschedulable=True message, or "" while it has none."""
    conditions = (await group_status(kube, namespace, group)).get("conditions") or []
    cond: dict[str, Any] = next((x for x in conditions if x["type"] == "Unschedulable"), {})
    return str(cond.get("message", "")) if cond.get("status") == "True" else ""


async def test_a_nonstrict_hold_is_named_released_at_the_cap_and_its_room_goes_to_another_tenant(
    own_cluster: devcluster.ClusterState, own_kube: KubeClient, tmp_path: Path
) -> None:
    """Tenant A's NonStrict 3 x 4 cpu gang with a one-year timeout cannot fit on 2 nodes of
    4 cpu and holds 2 members; its condition names both nodes. Tenant B's 2 x 1 cpu gang, created
    then, is refused naming A's gang as the holder, and is placed once the hold reaches the cap;
    A's members are never bound."""
    team_a, team_b = "team-a", "team-b"
    for name in (team_a, team_b):
        await own_kube.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
    process = OperatorProcess(
        own_cluster.kubeconfig,
        tmp_path / "op.log",
        ["--webhooks", "off", "--nonstrict-hold-seconds", str(CAP_SECONDS)],
    )
    async with (
        pool(own_kube, count=2, cpu="4", memory="16Gi") as (sim, pool_name),
        tenant(own_kube, own_cluster.kubeconfig, team_a, tmp_path, rules=PODGROUP_WRITER) as a,
        tenant(own_kube, own_cluster.kubeconfig, team_b, tmp_path, rules=PODGROUP_WRITER) as b,
    ):
        first, second = sorted(sim.node_names)
        process.start()
        try:
            process.wait_ready()
            await wait_for(lambda: leading(own_kube, [process]), 45, "the operator to lead")
            await create_group(
                a, team_a, "big", minMember=3, mode="NonStrict", scheduleTimeoutSeconds=YEAR_SECONDS
            )
            await gang_pods(a, team_a, "big", 3, pool_name, group="big", requests={"cpu": "4"})

            async def holding() -> str:
                message = await unschedulable_message(a, team_a, "big")
                return message if f"holds 2 member(s) on {first}, {second} until" in message else ""

            held = await wait_for(holding, 30, "the holder's condition to name its held nodes")
            assert "Insufficient cpu" in held, held

            await create_group(b, team_b, "small", minMember=2)
            await gang_pods(b, team_b, "small", 2, pool_name, group="small")

            async def refused_for_held_room() -> str:
                message = await unschedulable_message(b, team_b, "small")
                return message if f"held by NonStrict gang {team_a}/big until" in message else ""

            refused = await wait_for(
                refused_for_held_room, CAP_SECONDS, "the small gang's refusal to name the holder"
            )
            assert "Insufficient cpu" in refused, refused
            assert "{cpu: 4} on " in refused, refused

            async def small_bound() -> bool:
                pods = (await b.list(PODS, team_b))["items"]
                return sum(1 for p in pods if p["spec"].get("nodeName")) == 2

            # The hold began before the small gang came: it is placed within the cap of it.
            await wait_for(small_bound, CAP_SECONDS + 5, "the small gang to be bound")
            await wait_group(b, team_b, "small", timeout=30, phase=c.Phase.RUNNING)
            bound = [p for p in (await a.list(PODS, team_a))["items"] if p["spec"].get("nodeName")]
            assert bound == [], [p["metadata"]["name"] for p in bound]  # held, never bound
        finally:
            process.stop()
