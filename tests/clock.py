"""The tests' time: a fixed start, and a clock the test moves by hand.

The operator's controllers take a `clock` callable (time is injected, never read); unit tests
hand them a `Clock` and `advance` it, so nothing waits for time to pass.
"""

from __future__ import annotations

import datetime as dt

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, start: dt.datetime = T0) -> None:
        self.now = start

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)
