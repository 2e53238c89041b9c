"""How many binds may be in flight: as many as the API server answers quickly, no more.

On a control plane whose CPU is saturated, a write's latency is the number of writes in flight
over the rate the server completes them (Little's law), and our binds, the kubelets' status
writes and our own PodGroup status PATCHes all wait in that one queue, so no fixed number of binds
in flight suits every machine (docs/decisions/007-bind-pacing.md). The pacer raises the number
while the binds' median latency stays under a target and lowers it when it goes over: the
gradient idea of Netflix's concurrency-limits (the limit scaled by how far the latency is from
where it should be), on the latency of the binds themselves. It cannot make a saturated API
server faster.

Each decision reads the answers of the last WINDOW_SECONDS, not of the last period alone: the
answers come in waves that the binds in flight do not cause, and a limit that chased each wave
would swing between its floor and ceiling (see WINDOW_SECONDS).

Pure: the caller times each bind and reports it (`observe`); no clock is read here.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

PERIOD_SECONDS = 0.5
"""How often the limit moves: once per this much time. Binds come back in bursts on a saturated
control plane, and a decision per round trip of binds chases the bursts down to the floor
(docs/decisions/007-bind-pacing.md)."""
WINDOW_SECONDS = 2.0
"""How far back the answers a decision reads go: the last four periods'. The medians of half a
second swing with the waves of answers, and the limit with them
(docs/decisions/007-bind-pacing.md)."""
GAIN = PERIOD_SECONDS / WINDOW_SECONDS
"""The power of target / median a decision moves the limit by. Successive windows overlap, so
the same answers are read by WINDOW_SECONDS / PERIOD_SECONDS decisions: each moves a quarter of
the way (in proportion), and together they move as far as one decision on those answers would."""
MIN_SAMPLES = 8
"""Answers in the window a decision takes at least: fewer say too little about the queue."""
MOST_GROWTH = 1.5
"""The most a decision multiplies the limit by (answers far under the target)."""
MOST_CUT = 0.75
"""The least a decision multiplies the limit by (answers far over the target)."""


@dataclass
class BindPacer:
    """The number of binds allowed in flight, from `floor` to `ceiling`, starting at `floor`."""

    floor: int
    ceiling: int
    target_seconds: float
    limit: int = 0
    _window: deque[tuple[float, float]] = field(default_factory=deque, repr=False)
    _since: float | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.floor <= self.ceiling:
            raise ValueError(
                f"bind pacing needs 1 <= floor <= ceiling, got {self.floor} and {self.ceiling}"
            )
        if self.target_seconds <= 0:
            raise ValueError(f"bind pacing needs a positive target, got {self.target_seconds}")
        self.limit = min(max(self.limit or self.floor, self.floor), self.ceiling)

    def observe(self, seconds: float, now: float) -> int:
        """One bind answered `seconds` after it was sent, at time `now` (any monotonic clock);
        returns the limit, which moves at most once per PERIOD_SECONDS.

        The move is proportional to how far the median answer of the last WINDOW_SECONDS is
        from the target: the limit times (target / median) ** GAIN, within MOST_CUT and
        MOST_GROWTH. With latency about proportional to the writes in flight, that aims
        straight at the number whose median is the target, and settles there instead of
        swinging around it. The median, not the mean: one bind that waited on a conflict's
        re-read says nothing about the queue. Answers older than the window are dropped, so a
        decision needs MIN_SAMPLES answers within it.
        """
        if self._since is None:
            self._since = now
        self._window.append((now, seconds))
        if now - self._since < PERIOD_SECONDS:
            return self.limit
        while self._window[0][0] < now - WINDOW_SECONDS:
            self._window.popleft()
        if len(self._window) < MIN_SAMPLES:
            return self.limit
        median = statistics.median(answer for _, answer in self._window)
        self._since = now
        factor = MOST_GROWTH if median <= 0 else (self.target_seconds / median) ** GAIN
        factor = min(MOST_GROWTH, max(MOST_CUT, factor))
        self.limit = min(self.ceiling, max(self.floor, round(self.limit * factor)))
        return self.limit
