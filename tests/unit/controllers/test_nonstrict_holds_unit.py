"""NonStrict holds are bounded and visible (scheduling/holds.py through the gang scheduler).

A NonStrict gang that cannot fit holds the members that do fit in the scheduler's memory for at
most the hold cap (`run --nonstrict-hold-seconds`), whatever its scheduleTimeoutSeconds; its
condition names the nodes it holds, and another gang refused for that room names the holder.
The clock only moves when a test moves it.
"""

from __future__ import annotations

import datetime as dt

import pytest

from podgroup_operator import constants as c
from podgroup_operator import tuning
from podgroup_operator.domain.scheduling_status import Verdict
from tests.clock import T0
from tests.unit.controllers.test_gang_scheduler_unit import (  # decisions_in: each test twice
    NS,
    Harness,
    decisions_in,  # noqa: F401
)

CAP = tuning.NONSTRICT_HOLD_SECONDS
YEAR = 365 * 24 * 3600
UNTIL = "2026-03-01T12:00:30Z"
"""T0 plus the default cap, as messages write it."""


def last_refusal(h: Harness, group: str) -> Verdict:
    verdict = h.verdicts_for(group)[-1]
    assert not verdict.placed, verdict
    return verdict


def holder(h: Harness) -> None:
    """Two nodes of 4 cpu, and a NonStrict gang of 3 x 4 cpu with a one-year timeout: 2 fit."""
    h.add_node("n1", cpu=4)
    h.add_node("n2", cpu=4)
    h.add_group("big", min_member=3, mode="NonStrict", scheduleTimeoutSeconds=YEAR)
    h.add_pods("big", 3, cpu=4)


async def test_the_holders_condition_names_the_nodes_it_holds_and_until_when() -> None:
    h = Harness()
    holder(h)

    await h.scheduler.cycle()

    verdict = last_refusal(h, "big")
    assert verdict.reason is c.Reason.NOT_ENOUGH_RESOURCES
    assert f"holds 2 member(s) on n1, n2 until {UNTIL}" in verdict.message, verdict.message
    assert (h.cpu_free("n1"), h.cpu_free("n2")) == (0, 0)  # held, never bound
    assert h.binds() == 0


async def test_a_hold_keeps_its_start_when_the_gang_is_decided_again() -> None:
    h = Harness()
    holder(h)
    await h.scheduler.cycle()
    h.clock.advance(1)  # its backoff: decided again, the hold booked afresh
    await h.scheduler.cycle()

    assert len(h.verdicts_for("big")) == 2
    assert f"until {UNTIL}" in last_refusal(h, "big").message


async def test_another_gangs_refusal_names_the_holder_when_the_held_room_stopped_it() -> None:
    h = Harness()
    holder(h)
    await h.scheduler.cycle()
    h.add_group("small", min_member=2)
    h.add_pods("small", 2, cpu=1)

    await h.scheduler.cycle()

    message = last_refusal(h, "small").message
    assert "Insufficient cpu" in message, message
    assert f"held by NonStrict gang {NS}/big until {UNTIL}" in message, message
    assert "{cpu: 4} on n" in message, message
    assert h.bound_pods("small") == []


async def test_a_refusal_the_holds_did_not_cause_names_no_holder() -> None:
    h = Harness()
    holder(h)
    await h.scheduler.cycle()
    h.add_group("huge", min_member=2)
    h.add_pods("huge", 2, cpu=6)  # fits on no node, held or not

    await h.scheduler.cycle()

    message = last_refusal(h, "huge").message
    assert "Insufficient cpu" in message, message
    assert "held by" not in message, message


async def test_the_hold_is_released_at_the_cap_and_the_room_goes_to_the_gang_waiting() -> None:
    h = Harness()
    holder(h)
    await h.scheduler.cycle()
    h.add_group("small", min_member=2)
    h.add_pods("small", 2, cpu=1)
    await h.scheduler.cycle()
    assert h.bound_pods("small") == []

    # Both back off; the loop's next wake-up is the cap at the latest, not a later backoff.
    for at in (1, 3, 7, 15, 29):
        h.clock.now = T0 + dt.timedelta(seconds=at)
        await h.scheduler.cycle()
    assert h.bound_pods("small") == []
    assert h.scheduler._next_due() == pytest.approx(CAP - 29)  # their backoffs end at 31

    h.clock.now = T0 + dt.timedelta(seconds=CAP)
    await h.scheduler.cycle()

    assert sorted(h.bound_pods("small")) == ["small-0", "small-1"]
    assert h.verdicts_for("small")[-1] == Verdict(placed=True)
    assert h.bound_pods("big") == []  # never bound: it was held, then released


async def test_a_released_gang_holds_nothing_until_the_gangs_waiting_have_been_decided() -> None:
    h = Harness()
    holder(h)
    await h.scheduler.cycle()
    h.add_group("small", min_member=2)
    h.add_pods("small", 2, cpu=1)
    await h.scheduler.cycle()

    h.clock.now = T0 + dt.timedelta(seconds=CAP)
    await h.scheduler.cycle()  # the holder is decided first (by name): it rests

    message = last_refusal(h, "big").message
    assert f"its NonStrict hold was released at the {CAP}s cap" in message, message
    assert "keeping" not in message and "holds 2" not in message, message
    assert sorted(h.bound_pods("small")) == ["small-0", "small-1"]  # the room went there
    assert h.scheduler.holds.may_hold((NS, "big"), h.clock.now)  # the waiting one was decided
    h.watch_catches_up()
    h.clock.now += dt.timedelta(seconds=2)  # the holder's backoff: it holds what is left
    await h.scheduler.cycle()
    message = last_refusal(h, "big").message
    assert "holds 1 member(s) on " in message, message
    assert f"until {T0 + dt.timedelta(seconds=2 * CAP + 2):%Y-%m-%dT%H:%M:%SZ}" in message, message


async def test_two_nonstrict_gangs_holding_each_other_off_end_with_one_placed() -> None:
    """Each holds one node of the two it needs: at the first cap one is placed whole."""
    h = Harness()
    h.add_node("n1", cpu=4)
    h.add_group("a", min_member=2, mode="NonStrict", scheduleTimeoutSeconds=YEAR)
    h.add_pods("a", 2, cpu=4)
    await h.scheduler.cycle()  # a holds n1
    h.clock.now = T0 + dt.timedelta(seconds=5)
    h.add_node("n2", cpu=4)
    h.add_group("b", min_member=2, mode="NonStrict", scheduleTimeoutSeconds=YEAR)
    h.add_pods("b", 2, cpu=4)
    backoff = h.scheduler.queue.waiting[(NS, "a")]  # a backs off (16 s): b is decided alone
    backoff.failures, backoff.last_failure = 5, h.clock.now
    await h.scheduler.cycle()  # b holds n2
    assert "holds 1 member(s) on n2" in last_refusal(h, "b").message
    assert h.binds() == 0

    placed: list[str] = []
    for at in range(6, CAP + 6):
        h.clock.now = T0 + dt.timedelta(seconds=at)
        await h.scheduler.cycle()
        placed = [g for g in ("a", "b") if h.verdicts_for(g)[-1].placed]
        if placed:
            break
    # At a's cap: a rests (decided first, it holds nothing), b is decided with n1 free.
    assert (placed, at) == (["b"], CAP)
    assert len(h.bound_pods(f"{placed[0]}-")) == 2
