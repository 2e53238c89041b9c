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

import pytest

from podgroup_operator.adapters.kube import LEASES, KubeClient
from podgroup_operator.controllers.leader import LeaderElector, Timing
from podgroup_operator.domain.leadership import MAX_TRANSITIONS, MICRO_TIME

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
    now = dt.datetime.now(dt.UTC).strftime(MICRO_TIME)
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
