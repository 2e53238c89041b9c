"""Leader election against the real API server, from a Lease that others left behind.

The two-replica tests (test_own_cluster.py) prove the hand-overs between our own replicas; these
prove that a Lease written by hand or by another tool cannot keep every replica from leading.
Each case once did: the API server refuses a `leaseTransitions` of 2^31 (an int32), which every
take-over of a Lease left at 2^31-1 wrote, and a `leaseDurationSeconds` of 2^31-1 was believed
for its 68 years.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import LEASES, KubeClient
from podgroup_operator.api.times import parse_time, rfc3339_micro
from podgroup_operator.controllers.leader import LeaderElector, Timing
from podgroup_operator.domain.leadership import MAX_TRANSITIONS
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.scheduling.gang import GangRequest
from podgroup_operator.scheduling.placement import Placement, place_group
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.builders import node, pod

NAME = "leader"
TIMING = Timing(
    lease_seconds=10, renew_deadline_seconds=8, retry_seconds=0.2, longest_lease_seconds=3
)
"""The production lease and deadline (a renewal slowed by a loaded CI machine must not end the
leading this test checks), a short believed lease (what a stale one is cut to)."""
INT32_MAX = 2**31 - 1


async def lease_left_by_another_tool(
    kube: KubeClient, namespace: str, *, lease_seconds: int, transitions: int
) -> None:
    now = rfc3339_micro(dt.datetime.now(dt.UTC))
    spec = {
        "holderIdentity": "stale-tool",
        "leaseDurationSeconds": lease_seconds,
        "leaseTransitions": transitions,
        "acquireTime": now,
        "renewTime": now,
    }
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": NAME, "namespace": namespace},
        "spec": spec,
    }
    await kube.create(LEASES, body, namespace)


@pytest.mark.parametrize(
    ("lease_seconds", "transitions", "after"),
    [(1, MAX_TRANSITIONS, 0), (INT32_MAX, 7, 8), (INT32_MAX, INT32_MAX, 0)],
    ids=["last-transition", "overlong", "both"],
)
async def test_a_lease_left_by_another_tool_is_taken_once_its_holder_stops_renewing(
    kube: KubeClient, namespace: str, lease_seconds: int, transitions: int, after: int
) -> None:
    await lease_left_by_another_tool(
        kube, namespace, lease_seconds=lease_seconds, transitions=transitions
    )
    elector = LeaderElector(
        kube, namespace=namespace, name=NAME, identity="replica-a", timing=TIMING
    )
    stopped = asyncio.Event()

    async def on_started() -> None:
        return None

    async def on_stopped() -> None:
        stopped.set()

    task = asyncio.create_task(elector.run(on_started, on_stopped))
    try:
        await asyncio.wait_for(elector.leading.wait(), 30)
        spec = (await kube.get(LEASES, NAME, namespace))["spec"]
        assert spec["holderIdentity"] == "replica-a"
        assert spec["leaseTransitions"] == after
        assert spec["leaseDurationSeconds"] == TIMING.lease_seconds
    finally:
        await elector.release()
        await asyncio.wait_for(task, 10)
    assert stopped.is_set()
    assert (await kube.get(LEASES, NAME, namespace))["spec"]["holderIdentity"] == ""


def costly_decision() -> tuple[GangRequest, Snapshot]:
    """One member with 1,000 required pod-affinity terms over 2,000 placed pods on 500 nodes:
    a placement of about a second on this 2-core machine, every term walked over every pod (a
    term matching every pod; the three topologies defeat any sharing between terms)."""
    topologies = ["kubernetes.io/hostname", "zone", "rack"]
    nodes = [
        node(f"n{i}", cpu=64, memory="256Gi", labels={"zone": f"z{i % 10}", "rack": f"r{i % 100}"})
        for i in range(500)
    ]
    placed = [
        pod(
            f"p{i}",
            f"ns{i % 20}",
            requests={"cpu": "10m"},
            node=f"n{i % 500}",
            phase=c.PodPhase.RUNNING,
            labels={"app": f"a{i % 50}"},
        )
        for i in range(2_000)
    ]
    terms = [
        {
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
            "topologyKey": topologies[i % 3],
            "namespaces": [f"ns{j}" for j in range(20)],
        }
        for i in range(1_000)
    ]
    member = pod(
        "costly-0",
        "ns0",
        group="costly",
        requests={"cpu": "1"},
        affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}},
    )
    request = GangRequest(namespace="ns0", name="costly", uid="u", min_member=1, pending=[member])
    return request, Snapshot.build(nodes, placed, gang_of=group_key_of)


async def test_a_leader_keeps_its_lease_while_the_worker_thread_decides_past_its_deadline(
    kube: KubeClient, namespace: str
) -> None:
    """The scheduler decides a large or costly gang in its worker thread (scheduler.py `_pure`)
    so that the event loop, and with it the leader's renewals, goes on meanwhile: a decision of
    seconds on the loop would stop the leader from renewing for longer than its renew deadline,
    and it would give up leading (two schedulers, once another replica took over).

    Here the thread decides again and again for one and a half renew deadlines, with the
    production timing against the real API server, and every renewal is read back from the
    Lease: the leader must renew throughout (never a deadline between two renewals) and still
    lead at the end."""
    timing = Timing()
    request, snapshot = costly_decision()
    elector = LeaderElector(kube, namespace=namespace, name=NAME, identity="busy", timing=timing)
    stopped = asyncio.Event()

    async def on_started() -> None:
        return None

    async def on_stopped() -> None:
        stopped.set()

    def decide_until(end: float) -> int:
        decisions = 0
        while time.monotonic() < end:
            assert isinstance(place_group(request, snapshot), Placement)
            decisions += 1
        return decisions

    task = asyncio.create_task(elector.run(on_started, on_stopped))
    thread = ThreadPoolExecutor(1, thread_name_prefix="podgroup-decision")
    try:
        await asyncio.wait_for(elector.leading.wait(), 30)
        started = dt.datetime.now(dt.UTC)
        end = time.monotonic() + 1.5 * timing.renew_deadline_seconds
        deciding = asyncio.get_running_loop().run_in_executor(thread, decide_until, end)
        renewals: set[str] = set()
        while not deciding.done():
            spec = (await kube.get(LEASES, NAME, namespace))["spec"]
            assert spec["holderIdentity"] == "busy"
            renewals.add(spec["renewTime"])
            await asyncio.wait([deciding], timeout=0.5)
        decisions = await deciding
        ended = dt.datetime.now(dt.UTC)
        spec = (await kube.get(LEASES, NAME, namespace))["spec"]
        renewals.add(spec["renewTime"])
        assert elector.leading.is_set() and not stopped.is_set()
        assert spec["holderIdentity"] == "busy"
        assert decisions >= 2, "the thread must have decided over and over"
        times = sorted(parse_time(t) for t in renewals)
        last_before = max(t for t in times if t <= started)  # it led, so it renewed before
        moments = [last_before, *[t for t in times if t > started], ended]
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(moments)]
        assert max(gaps) < timing.renew_deadline_seconds, (gaps, decisions)
        assert len(times) >= 3, times
    finally:
        await elector.release()
        await asyncio.wait_for(task, 10)
        thread.shutdown()
