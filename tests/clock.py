"""The tests' time: a fixed start, and a clock the test moves by hand.

The operator's controllers take a `clock` callable for wall-clock time and a `MonotonicClock`
(controllers/clock.py) for their waits and timers; unit tests hand them a `Clock` and its
`monotonic` and `advance` them together, so no controller test waits for time to pass: a timer
runs, in the order of its due time, inside the `advance` that reaches it. Only what measures
the real event loop (`runtime.measure_loop_lag`) is tested on the real one.
"""

from __future__ import annotations

import datetime as dt
import heapq
import itertools
from collections.abc import Callable
from typing import Any

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
MONOTONIC_T0 = 1000.0
"""Where the fake monotonic time starts (any origin will do; not zero, so that no code can
mistake a time for "unset")."""


class FakeTimer:
    """A timer of `FakeMonotonicClock`; `cancel` keeps it from running."""

    def __init__(self, due: float, callback: Callable[..., object], args: tuple[Any, ...]) -> None:
        self.due = due
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeMonotonicClock:
    """A `MonotonicClock` whose time moves only by `advance`, which runs the timers it passes."""

    def __init__(
        self, start: float = MONOTONIC_T0, on_move: Callable[[float], None] = lambda _: None
    ) -> None:
        self.time = start
        self.on_move = on_move
        """Told each step time moves (in seconds), before the timers due then run."""
        self._timers: list[tuple[float, int, FakeTimer]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self.time

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> FakeTimer:
        timer = FakeTimer(self.time + max(0.0, delay), callback, args)
        heapq.heappush(self._timers, (timer.due, next(self._order), timer))
        return timer

    @property
    def pending(self) -> list[float]:
        """Due times of the timers not run nor cancelled, earliest first."""
        return sorted(t.due for _, _, t in self._timers if not t.cancelled)

    def advance(self, seconds: float) -> None:
        """Move time forward, running each timer due meanwhile at its due time, in order (a
        timer a callback sets is run too when it falls due within the same advance)."""
        until = self.time + seconds
        while self._timers and self._timers[0][0] <= until:
            due, _, timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._move_to(due)
            timer.callback(*timer.args)
        self._move_to(until)

    def _move_to(self, time: float) -> None:
        if time > self.time:
            self.on_move(time - self.time)
            self.time = time


class Clock:
    """A wall clock the test moves by hand, with the monotonic clock that moves with it."""

    def __init__(self, start: dt.datetime = T0) -> None:
        self.now = start
        self.monotonic = FakeMonotonicClock(on_move=self._move)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move both clocks forward; the monotonic clock's timers due meanwhile run, each
        seeing both clocks at its due time."""
        self.monotonic.advance(seconds)

    def _move(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)
