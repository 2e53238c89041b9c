"""The operator restarted while the head gang holds a reservation keeps the queue order: the
order is by creation time, which comes from the API objects, and the new leader's scheduler
reserves again at the head's first refusal. A control plane of its own (one per module): the
test stops and starts its operator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import NAMESPACES, PODS, KubeClient
from podgroup_operator.api.times import parse_time
from podgroup_operator.devcluster import cluster as devcluster
from podgroup_operator.devcluster import keys as sim_keys
from podgroup_operator.devcluster.process import OperatorProcess, leading
from tests.kube_helpers import create_group, gang_pods, group_status, pool, wait_group
from tests.waiting import wait_for

WHOLE_NODE = {"cpu": "1", "nvidia.com/gpu": "8"}
NAMESPACE = "restart-order"


def finishing(seconds: float) -> dict[str, str]:
    return {sim_keys.SIM_ANNOTATION_SUCCEED_AFTER: str(seconds)}


async def reservation_message(kube: KubeClient, group: str) -> str:
    conditions = (await group_status(kube, NAMESPACE, group)).get("conditions") or []
    found: dict[str, Any] = next((x for x in conditions if x["type"] == "Unschedulable"), {})
    message = str(found.get("message", ""))
    return message if "holds a reservation of 4 node(s)" in message else ""


async def test_an_operator_restarted_mid_reservation_keeps_the_queue_order(
    own_cluster: devcluster.ClusterState, own_kube: KubeClient, tmp_path: Path
) -> None:
    """A 4-node gang waits behind 4 running one-node gangs (one ends early) and reserves; 4
    one-node gangs created after it wait too. The operator is stopped and started again: the big
    gang reserves again, the node that frees early is kept for it, and it starts first, before
    every gang created after it."""
    await own_kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    arguments = ["--webhooks", "off"]
    first = OperatorProcess(own_cluster.kubeconfig, tmp_path / "first.log", arguments)
    second = OperatorProcess(own_cluster.kubeconfig, tmp_path / "second.log", arguments)
    async with pool(own_kube, count=4, gpu=8) as (_, pool_name):
        first.start()
        try:
            first.wait_ready()
            await wait_for(lambda: leading(own_kube, [first]), 45, "the operator to lead")
            # The pool frees one node early and three later: without the reservation the
            # early node would go to a small gang created after the big one.
            for i, seconds in enumerate((8, 20, 20, 20)):
                await create_group(
                    own_kube, NAMESPACE, f"filler{i}", min_member=1, maxRunSeconds=60
                )
                await gang_pods(
                    own_kube, NAMESPACE, f"filler{i}", 1, pool_name, group=f"filler{i}",
                    requests=WHOLE_NODE, annotations=finishing(seconds),
                )  # fmt: skip
            for i in range(4):
                await wait_group(own_kube, NAMESPACE, f"filler{i}", phase=c.Phase.RUNNING)
            await create_group(own_kube, NAMESPACE, "big", min_member=4)
            await gang_pods(
                own_kube, NAMESPACE, "big", 4, pool_name, group="big",
                requests=WHOLE_NODE, annotations=finishing(1),
            )  # fmt: skip
            await wait_for(lambda: reservation_message(own_kube, "big"), 30, "the reservation")
            for i in range(4):
                await create_group(own_kube, NAMESPACE, f"small{i}", min_member=1)
                await gang_pods(
                    own_kube, NAMESPACE, f"small{i}", 1, pool_name, group=f"small{i}",
                    requests=WHOLE_NODE, annotations=finishing(1),
                )  # fmt: skip
        finally:
            first.stop()
        second.start()
        try:
            second.wait_ready()
            await wait_for(lambda: leading(own_kube, [second]), 45, "the new operator to lead")
            await wait_group(own_kube, NAMESPACE, "big", timeout=60, phase=c.Phase.FINISHED)
            for i in range(4):
                await wait_group(
                    own_kube, NAMESPACE, f"small{i}", timeout=60, phase=c.Phase.FINISHED
                )
        finally:
            second.stop()
        pods = (await own_kube.list(PODS, NAMESPACE))["items"]

        def starts(prefix: str) -> list[Any]:
            return [
                parse_time(p["status"].get("startTime"))
                for p in pods
                if p["metadata"]["name"].startswith(prefix)
            ]

        big_start = max(starts("big-"))
        assert all(s >= big_start for s in starts("small")), (big_start, starts("small"))
