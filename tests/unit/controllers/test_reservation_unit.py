"""The scheduler's reservations (controllers/reservations.py over scheduling/reservation.py):
the head gang reserves when refused for room, a later gang backfills only within its
maxRunSeconds and gets a Backfilled Event, the metrics follow, and a placed head releases."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator import metrics
from podgroup_operator.adapters.kube import EVENTS, PODS
from tests.clock import T0
from tests.unit.controllers.test_gang_scheduler_unit import (  # decisions_in: each test twice
    NS,
    Harness,
    decisions_in,  # noqa: F401
)


def running_since(h: Harness, group: str, seconds: int) -> None:
    """The group's status says it became Running at T0 + `seconds` (as the reconciler writes)."""
    body = h.groups.get((NS, group))[0]
    body = {
        **body,
        "status": {
            "phase": "Running",
            "runningTime": (T0 + dt.timedelta(seconds=seconds)).isoformat(),
        },
    }
    body["metadata"] = {**body["metadata"], "resourceVersion": f"rv-{group}-running"}
    h.groups.put((NS, group), body)
    h.scheduler.on_group((NS, group))


async def test_the_head_reserves_a_short_gang_backfills_and_a_gang_without_a_limit_waits() -> None:
    h = Harness()
    for i in range(3):
        h.add_node(f"n{i}", cpu=4)
    h.add_group("first", min_member=1, maxRunSeconds=100)
    h.add_pods("first", 1, cpu=4)
    await h.scheduler.cycle()
    h.watch_catches_up()
    running_since(h, "first", 0)
    backfills = metrics.BACKFILLS._value.get()

    h.add_group("big", min_member=3)
    h.add_pods("big", 3, cpu=4)
    h.add_group("short", min_member=1, maxRunSeconds=50)
    h.add_pods("short", 1, cpu=4)
    h.add_group("endless", min_member=1)
    h.add_pods("endless", 1, cpu=4)
    await h.scheduler.cycle()

    big = h.verdicts_for("big")[-1]
    assert not big.placed and "holds a reservation of 3 node(s) (n0, n1, n2)" in big.message
    assert "estimated start 2026-03-01T12:01:40+00:00" in big.message  # T0 + 100 s
    assert metrics.RESERVATIONS_HELD._value.get() == 1
    assert h.verdicts_for("short")[-1].placed
    assert metrics.BACKFILLS._value.get() == backfills + 1
    endless = h.verdicts_for("endless")[-1]
    assert not endless.placed
    assert f"the nodes reserved for {NS}/big are not used" in endless.message
    await h.scheduler.reservations.stop()  # the Event's task is awaited or cancelled
    posted = [e for e in h.fake.objects(EVENTS, NS) if e.get("reason") == c.Reason.BACKFILLED]
    assert posted and "reserved for default/big" in posted[0]["message"]


async def test_a_placed_head_releases_its_reservation() -> None:
    h = Harness()
    h.add_node("n0", cpu=4)
    h.add_node("n1", cpu=4)
    h.add_group("first", min_member=1, maxRunSeconds=100)
    h.add_pods("first", 1, cpu=4)
    await h.scheduler.cycle()
    h.watch_catches_up()
    h.add_group("big", min_member=2)
    h.add_pods("big", 2, cpu=4)
    await h.scheduler.cycle()
    assert h.scheduler.reservations.book.of((NS, "big")) is not None

    bound = h.fake.get_object(PODS, "first-0", NS)
    assert bound is not None
    h.scheduler.on_pod("DELETED", bound)
    await h.scheduler.cycle()
    assert h.verdicts_for("big")[-1].placed
    assert not h.scheduler.reservations.book
    assert metrics.RESERVATIONS_HELD._value.get() == 0


async def test_a_gang_that_fits_nowhere_plans_once_until_the_nodes_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = Harness()
    h.add_node("n0", cpu=4)
    plans: list[object] = []
    real = h.scheduler.reservations.plan

    def counted(request: Any, running: Any) -> Any:
        plans.append(request.key)
        return real(request, running)

    monkeypatch.setattr(h.scheduler.reservations, "plan", counted)
    h.add_group("huge", min_member=2)
    h.add_pods("huge", 2, cpu=4)
    for second in (0, 1.5, 4):  # each past the backoff of the refusals before
        h.clock.now = T0 + dt.timedelta(seconds=second)
        await h.scheduler.cycle()
    assert len(h.verdicts_for("huge")) == 3 and plans == [(NS, "huge")]
    assert not h.scheduler.reservations.book
    h.add_node("n1", cpu=4)  # now it fits: placed without a plan
    await h.scheduler.cycle()
    assert h.verdicts_for("huge")[-1].placed


async def test_a_namespace_being_deleted_gives_back_what_its_gangs_reserved() -> None:
    """Its gangs are not decided while binds there are refused (`GangQueue.leaving`): a
    reservation of theirs would keep the room freed from every other namespace's gangs."""
    h = Harness()
    h.add_node("n0", cpu=4)
    h.add_node("n1", cpu=4)
    h.add_group("first", min_member=1, maxRunSeconds=100)
    h.add_pods("first", 1, cpu=4)
    await h.scheduler.cycle()
    h.watch_catches_up()
    h.add_group("big", min_member=2)
    h.add_pods("big", 2, cpu=4)
    await h.scheduler.cycle()
    assert metrics.RESERVATIONS_HELD._value.get() == 1

    h.scheduler._namespace_leaving(NS)

    assert metrics.RESERVATIONS_HELD._value.get() == 0
    assert not h.scheduler.reservations.book
