"""`KubeClient.narrate`, the best-effort Event post the status reconciler and the preemptor share.

An Event only narrates a decision another write already records, so an API refusal is logged
and swallowed; anything else still raises.
"""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import KubeClient
from tests.builders import pod
from tests.fakes import FakeApiServer

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


async def test_an_event_is_posted_at_the_given_time() -> None:
    fake = FakeApiServer()
    kube = KubeClient(fake)
    (stored,) = fake.seed(pod("p", "ns"))

    await kube.narrate(
        stored, event_type=c.EventType.NORMAL, reason=c.Reason.PREEMPTED, message="why", now=NOW
    )

    (event,) = fake.events(involved="p", reason=c.Reason.PREEMPTED)
    assert (event["type"], event["message"]) == (c.EventType.NORMAL, "why")
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2026-01-02T03:04:05Z"


async def test_a_refused_event_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeApiServer()
    kube = KubeClient(fake)
    (stored,) = fake.seed(pod("p", "ns"))
    fake.inject_error("POST", "/events", 403, "Forbidden", "namespace ns is being terminated")

    with caplog.at_level(logging.WARNING):
        await kube.narrate(
            stored, event_type=c.EventType.WARNING, reason=c.Reason.PREEMPTED, message="m", now=NOW
        )

    assert fake.events() == []
    assert "Event Preempted on p not posted: namespace ns is being terminated" in caplog.text


async def test_an_event_refused_because_the_namespace_is_being_deleted_is_no_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """It would have gone with the namespace; a big namespace's deletion logged dozens."""
    fake = FakeApiServer()
    kube = KubeClient(fake)
    (stored,) = fake.seed(pod("p", "ns"))
    fake.terminate_namespace("ns")

    with caplog.at_level(logging.DEBUG):
        await kube.narrate(
            stored,
            event_type=c.EventType.NORMAL,
            reason=c.Reason.PHASE_CHANGED,
            message="",
            now=NOW,
        )

    assert fake.count("POST", "/events") == 1 and fake.events() == []
    (record,) = [r for r in caplog.records if "not posted" in r.getMessage()]
    assert record.levelno == logging.DEBUG
