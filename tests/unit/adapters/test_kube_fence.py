"""`FencedTransport`: the leader's writes go out only while its replica holds the Lease.

Reads and watches are a follower's as much as a leader's, so only writes are fenced; a refused
write reaches no API server.
"""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import PODS, FencedError, FencedTransport, KubeClient
from tests.builders import pod
from tests.fakes import FakeApiServer


async def test_writes_go_out_only_while_allowed_and_reads_always() -> None:
    fake = FakeApiServer()
    (stored,) = fake.seed(pod("p", "ns"))
    allowed = True
    fence = FencedTransport(fake, lambda: allowed, "this replica no longer leads")
    kube = KubeClient(fence)

    await kube.patch(PODS, "p", {"metadata": {"labels": {"a": "1"}}}, "ns")
    allowed = False
    writes = len(fake.writes)
    with pytest.raises(FencedError, match=r"PATCH .*/pods/p not sent: this replica no longer"):
        await kube.patch(PODS, "p", {"metadata": {"labels": {"a": "2"}}}, "ns")
    with pytest.raises(FencedError):
        await kube.bind("ns", "p", "n1", stored["metadata"]["uid"])
    with pytest.raises(FencedError):
        await kube.delete(PODS, "p", "ns")
    assert len(fake.writes) == writes, "a refused write must reach no API server"
    assert fence.refused == 3
    assert (await kube.get(PODS, "p", "ns"))["metadata"]["labels"]["a"] == "1"
    assert [p["metadata"]["name"] for p in (await kube.list(PODS, "ns"))["items"]] == ["p"]


async def test_a_refused_event_is_dropped_quietly(caplog: pytest.LogCaptureFixture) -> None:
    """`narrate` is best effort: a fenced Event is no reason to fail the decision it narrates,
    nor news for the log (the runtime counts refused writes once)."""
    caplog.set_level(logging.DEBUG)
    fake = FakeApiServer()
    (stored,) = fake.seed(pod("p", "ns"))
    kube = KubeClient(FencedTransport(fake, lambda: False, "no lease"))
    now = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    await kube.narrate(
        stored, event_type=c.EventType.NORMAL, reason=c.Reason.PREEMPTED, message="m", now=now
    )
    assert not fake.writes
    assert not caplog.records, caplog.text


async def test_closing_a_fenced_client_leaves_the_shared_transport_open() -> None:
    fake = FakeApiServer()
    await KubeClient(FencedTransport(fake, lambda: True, "")).close()
    assert not fake.closed
