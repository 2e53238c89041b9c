"""The injected monotonic clock (controllers/clock.py): its fake (tests/clock.py) against the
event loop's, and `sleep` and `timeout` counted on it."""

from __future__ import annotations

import asyncio

import pytest

from podgroup_operator.controllers.clock import LOOP_CLOCK, MonotonicClock, sleep, timeout
from tests.clock import Clock, FakeMonotonicClock
from tests.waiting import until


def schedule(clock: MonotonicClock, ran: list[str]) -> None:
    """Timers due in a different order from the one they are set in, one of them cancelled."""
    clock.call_later(0.002, ran.append, "late")
    clock.call_later(-1, ran.append, "overdue")  # runs as if due now
    clock.call_later(0.001, ran.append, "early")
    clock.call_later(0.0015, ran.append, "cancelled").cancel()


async def test_the_fake_runs_timers_as_the_event_loop_does() -> None:
    """The same timers on both clocks run in the same order, and none that was cancelled."""
    real: list[str] = []
    schedule(LOOP_CLOCK, real)
    await until(lambda: len(real) == 3, "the event loop's timers")
    fake: list[str] = []
    clock = FakeMonotonicClock()
    schedule(clock, fake)
    clock.advance(0.01)
    assert fake == real == ["overdue", "early", "late"]


def test_a_timer_a_timer_sets_runs_within_the_same_advance_when_due() -> None:
    clock = FakeMonotonicClock()
    start = clock.now()
    ran: list[float] = []
    clock.call_later(1, lambda: clock.call_later(1, lambda: ran.append(clock.now())))
    clock.advance(3)
    assert ran == [start + 2]  # at its own due time, not the advance's end


def test_a_timer_sees_both_test_clocks_at_its_due_time() -> None:
    clock = Clock()
    seen: list[tuple[float, float]] = []
    start_wall, start = clock.now, clock.monotonic.now()
    clock.monotonic.call_later(
        3, lambda: seen.append(((clock.now - start_wall).total_seconds(), clock.monotonic.now()))
    )
    clock.advance(2)
    assert seen == []
    clock.advance(5)
    assert seen == [(3.0, start + 3)]
    assert clock.monotonic.now() == start + 7 and clock.monotonic.pending == []


async def test_sleep_and_timeout_count_on_the_clock_they_are_given() -> None:
    clock = FakeMonotonicClock()
    sleeping = asyncio.create_task(sleep(clock, 5))
    await asyncio.sleep(0)
    clock.advance(4.9)
    await asyncio.sleep(0)
    assert not sleeping.done()
    clock.advance(0.1)
    await asyncio.wait_for(sleeping, 1)

    async def hangs() -> None:
        async with timeout(clock, 2):
            await asyncio.Event().wait()

    hanging = asyncio.create_task(hangs())
    await asyncio.sleep(0)
    clock.advance(2)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(hanging, 1)
    async with timeout(clock, 2):
        pass  # a block that ends in time raises nothing, and its timer is cancelled
    assert clock.pending == []
