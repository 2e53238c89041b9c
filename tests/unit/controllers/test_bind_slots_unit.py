"""Slots for binds in flight: a semaphore whose limit the pacer moves while binds are held."""

from __future__ import annotations

import asyncio

import pytest

from podgroup_operator.controllers.pacing import Slots


async def hold(slots: Slots, entered: list[int], release: asyncio.Event, number: int) -> None:
    async with slots:
        entered.append(number)
        await release.wait()


async def one_holder_two_waiting(
    slots: Slots, entered: list[int], release: asyncio.Event
) -> list[asyncio.Task[None]]:
    """Three tasks on one slot: 0 holds it, 1 and 2 wait in that order."""
    tasks = [asyncio.create_task(hold(slots, entered, release, n)) for n in range(3)]
    await turns()
    return tasks


async def turns(count: int = 3) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def test_no_more_than_the_limit_hold_at_once_and_the_rest_enter_in_order() -> None:
    slots, entered, release = Slots(2), [], asyncio.Event()
    tasks = [asyncio.create_task(hold(slots, entered, release, n)) for n in range(5)]
    await turns()
    assert entered == [0, 1] and slots.held == 2 and slots.waiting == 3
    release.set()
    await asyncio.gather(*tasks)
    assert entered == [0, 1, 2, 3, 4] and slots.held == 0


async def test_raising_the_limit_lets_waiters_in_at_once() -> None:
    slots, entered, release = Slots(1), [], asyncio.Event()
    tasks = [asyncio.create_task(hold(slots, entered, release, n)) for n in range(4)]
    await turns()
    assert entered == [0]
    slots.limit = 3
    await turns()
    assert entered == [0, 1, 2] and slots.held == 3
    release.set()
    await asyncio.gather(*tasks)


async def test_lowering_the_limit_interrupts_nobody_and_holds_newcomers_until_below_it() -> None:
    slots, entered = Slots(3), []
    releases = [asyncio.Event() for _ in range(5)]
    tasks = [asyncio.create_task(hold(slots, entered, releases[n], n)) for n in range(5)]
    await turns()
    assert entered == [0, 1, 2]
    slots.limit = 1
    assert slots.held == 3  # the three binds in flight go on
    releases[0].set()
    releases[1].set()
    await turns()
    assert entered == [0, 1, 2] and slots.held == 1  # still one held: at the new limit
    releases[2].set()
    await turns()
    assert entered == [0, 1, 2, 3] and slots.held == 1
    releases[3].set()
    releases[4].set()
    await asyncio.gather(*tasks)
    assert entered == [0, 1, 2, 3, 4] and slots.held == 0


async def test_a_cancelled_waiter_gives_up_its_place_and_takes_no_slot() -> None:
    slots, entered, release = Slots(1), [], asyncio.Event()
    first, cancelled, last = await one_holder_two_waiting(slots, entered, release)
    cancelled.cancel()
    await turns()
    assert slots.waiting == 1
    release.set()
    await asyncio.gather(first, last)
    assert entered == [0, 2] and slots.held == 0


async def test_a_waiter_cancelled_after_its_slot_was_granted_hands_the_slot_on() -> None:
    slots, entered, release = Slots(1), [], asyncio.Event()
    first, granted, last = await one_holder_two_waiting(slots, entered, release)
    slots.limit = 2  # grants `granted` its slot at once, before it runs again
    granted.cancel()
    await turns()
    assert entered == [0, 2] and slots.held == 2  # the slot went on to `last`
    release.set()
    await asyncio.gather(first, last)
    assert granted.cancelled() and slots.held == 0


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_under_one_is_refused(limit: int) -> None:
    with pytest.raises(ValueError, match=f"at least 1, got {limit}"):
        Slots(limit)
    slots = Slots(1)
    with pytest.raises(ValueError, match=f"at least 1, got {limit}"):
        slots.limit = limit
