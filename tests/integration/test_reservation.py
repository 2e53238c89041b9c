"""Big gangs never starve, on the real control plane: the head gang reserves, later gangs
backfill only within their maxRunSeconds, a gang keeps its place, and a gang past its
maxRunSeconds is stopped whole (docs/concepts/reservation.md).

Each test has a pool of 4 sim nodes of 8 GPUs of its own; every pod takes a whole node.
"""

from __future__ import annotations

from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import EVENTS, PODS, KubeClient
from podgroup_operator.api.times import parse_time
from podgroup_operator.devcluster import keys as sim_keys
from tests.kube_helpers import (
    create_group,
    create_pod,
    gang_pods,
    group_status,
    pool,
    wait_group,
)
from tests.waiting import wait_for

GPU = "nvidia.com/gpu"
WHOLE_NODE = {"cpu": "1", GPU: "8"}
JSON = dict[str, Any]


def finishing(seconds: float) -> dict[str, str]:
    """Annotations that make a sim node's pod succeed `seconds` after it starts."""
    return {sim_keys.SIM_ANNOTATION_SUCCEED_AFTER: str(seconds)}


async def events(kube: KubeClient, namespace: str, involved: str, reason: str) -> list[JSON]:
    items = (await kube.list(EVENTS, namespace))["items"]
    return [
        e
        for e in items
        if e["involvedObject"].get("name") == involved and e.get("reason") == reason
    ]


async def unschedulable_message(kube: KubeClient, namespace: str, group: str) -> str:
    conditions = (await group_status(kube, namespace, group)).get("conditions") or []
    found: JSON = next((x for x in conditions if x["type"] == "Unschedulable"), {})
    return str(found.get("message", "")) if found.get("status") == "True" else ""


async def pods_of(kube: KubeClient, namespace: str, prefix: str) -> list[JSON]:
    return [
        p
        for p in (await kube.list(PODS, namespace))["items"]
        if p["metadata"]["name"].startswith(f"{prefix}-")
    ]


def started(pod: JSON) -> Any:
    return parse_time((pod.get("status") or {}).get("startTime"))


async def test_the_head_reserves_a_short_gang_backfills_and_one_without_a_limit_waits(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    """A 2-node gang runs (limit 20 s); a 4-node gang created next cannot fit and reserves all 4
    nodes, its condition naming them and its estimated start. A 1-node gang with maxRunSeconds 5
    (done before that start) backfills a free reserved node, with a Backfilled Event; a 1-node gang
    without a limit does not, and says why. The head starts when the first gang ends, before the
    gang without a limit: no later gang delays it."""
    async with pool(kube, count=4, gpu=8) as (_, pool_name):
        await create_group(kube, namespace, "first", min_member=2, maxRunSeconds=20)
        await gang_pods(
            kube, namespace, "first", 2, pool_name, group="first", requests=WHOLE_NODE,
            annotations=finishing(12),
        )  # fmt: skip
        await wait_group(kube, namespace, "first", phase=c.Phase.RUNNING)

        await create_group(kube, namespace, "big", min_member=4)
        await gang_pods(
            kube, namespace, "big", 4, pool_name, group="big", requests=WHOLE_NODE,
            annotations=finishing(2),
        )  # fmt: skip

        async def reserved() -> str:
            message = await unschedulable_message(kube, namespace, "big")
            return message if "holds a reservation of 4 node(s)" in message else ""

        message = await wait_for(reserved, 30, "the head gang to say it holds a reservation")
        assert "estimated start" in message, message
        assert pool_name in message, message  # the nodes are named

        await create_group(kube, namespace, "short", min_member=1, maxRunSeconds=5)
        await gang_pods(
            kube, namespace, "short", 1, pool_name, group="short", requests=WHOLE_NODE,
            annotations=finishing(1),
        )  # fmt: skip
        backfilled = await wait_for(
            lambda: events(kube, namespace, "short", c.Reason.BACKFILLED),
            30,
            "the short gang's Backfilled Event",
        )
        assert "reserved for" in backfilled[0]["message"], backfilled[0]
        assert "before that gang's estimated start" in backfilled[0]["message"], backfilled[0]

        await create_group(kube, namespace, "endless", min_member=1)
        await gang_pods(
            kube, namespace, "endless", 1, pool_name, group="endless", requests=WHOLE_NODE,
            annotations=finishing(1),
        )  # fmt: skip

        async def kept_off() -> str:
            message = await unschedulable_message(kube, namespace, "endless")
            return message if f"nodes reserved for {namespace}/big are not used" in message else ""

        await wait_for(kept_off, 30, "the gang without a limit to be kept off the reserved nodes")
        assert [
            p for p in await pods_of(kube, namespace, "endless") if p["spec"].get("nodeName")
        ] == []

        await wait_group(kube, namespace, "big", timeout=45, phase=c.Phase.RUNNING)
        await wait_group(kube, namespace, "endless", timeout=45, phase=c.Phase.FINISHED)
        big_start = max(started(p) for p in await pods_of(kube, namespace, "big"))
        (endless,) = await pods_of(kube, namespace, "endless")
        assert started(endless) >= big_start, (started(endless), big_start)


async def test_a_gang_past_its_max_run_seconds_is_stopped_whole(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    """maxRunSeconds 3 on a gang whose pods would run for ever: Failed with RunTimeExceeded on
    its condition, a Warning Event, and its members deleted."""
    async with pool(kube, count=2, gpu=8) as (_, pool_name):
        await create_group(kube, namespace, "capped", min_member=2, maxRunSeconds=3)
        await gang_pods(
            kube, namespace, "capped", 2, pool_name, group="capped", requests=WHOLE_NODE
        )
        await wait_group(kube, namespace, "capped", phase=c.Phase.RUNNING)
        status = await wait_group(kube, namespace, "capped", timeout=30, phase=c.Phase.FAILED)
        condition = next(x for x in status["conditions"] if x["type"] == "Unschedulable")
        assert condition["reason"] == c.Reason.RUN_TIME_EXCEEDED, condition
        (event,) = await wait_for(
            lambda: events(kube, namespace, "capped", c.Reason.RUN_TIME_EXCEEDED), 15, "the Event"
        )
        assert event["type"] == c.EventType.WARNING and "maxRunSeconds 3" in event["message"]

        async def members_gone() -> bool:
            return not await pods_of(kube, namespace, "capped")

        await wait_for(members_gone, 30, "the members to be deleted")


async def test_a_gang_refused_short_of_members_keeps_its_place(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    """A 4-node gang with 1 of its 4 pods is refused (NotEnoughTasks) while the pool is busy;
    4 one-node gangs created after it wait too. Once its last pods come, it is placed first when
    the pool frees, ahead of every gang created after it."""
    async with pool(kube, count=4, gpu=8) as (_, pool_name):
        await create_group(kube, namespace, "filler", min_member=4, maxRunSeconds=30)
        await gang_pods(
            kube, namespace, "filler", 4, pool_name, group="filler", requests=WHOLE_NODE,
            annotations=finishing(8),
        )  # fmt: skip
        await wait_group(kube, namespace, "filler", phase=c.Phase.RUNNING)

        await create_group(kube, namespace, "big", min_member=4)
        await gang_pods(
            kube, namespace, "big", 1, pool_name, group="big", requests=WHOLE_NODE,
            annotations=finishing(1),
        )  # fmt: skip
        await wait_for(
            lambda: _reason_is(kube, namespace, "big", c.Reason.NOT_ENOUGH_TASKS),
            30,
            "the big gang to be refused short of members",
        )
        for i in range(4):
            await create_group(kube, namespace, f"small{i}", min_member=1)
            await gang_pods(
                kube, namespace, f"small{i}", 1, pool_name, group=f"small{i}",
                requests=WHOLE_NODE, annotations=finishing(1),
            )  # fmt: skip
        rest = [f"big-{i}" for i in range(1, 4)]  # the last members come after the small gangs
        for name in rest:
            await create_pod(
                kube, namespace, name, group="big", requests=WHOLE_NODE,
                scheduler=c.SCHEDULER_NAME, nodeSelector={"pool": pool_name},
                annotations=finishing(1),
            )  # fmt: skip

        await wait_group(kube, namespace, "big", timeout=45, phase=c.Phase.FINISHED)
        for i in range(4):
            await wait_group(kube, namespace, f"small{i}", timeout=45, phase=c.Phase.FINISHED)
        big_start = min(started(p) for p in await pods_of(kube, namespace, "big"))
        small_starts = [
            started(p) for i in range(4) for p in await pods_of(kube, namespace, f"small{i}")
        ]
        assert all(s >= big_start for s in small_starts), (big_start, small_starts)


async def _reason_is(kube: KubeClient, namespace: str, group: str, reason: str) -> bool:
    conditions = (await group_status(kube, namespace, group)).get("conditions") or []
    return any(x["type"] == "Unschedulable" and x.get("reason") == reason for x in conditions)
