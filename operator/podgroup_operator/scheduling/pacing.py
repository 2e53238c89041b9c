"""How many binds may be in flight: as many as the API server answers quickly, no more.

Why adaptive: on a control plane whose CPU is saturated, a write's latency is the number of
writes in flight over the rate the server completes them (Little's law), and our binds, the
kubelets' status writes and our own PodGroup status PATCHes all wait in that one queue. A fixed
number of binds in flight is right for one machine only. Measured with `bench scale` (backlog
1,000 x 10, 100 sim nodes, paired with kube-scheduler): on a 2-core machine with room, a fixed
32 binds in flight bound 0.74 and 0.75x kube-scheduler's rate with status convergence p50 at 90
and 85 ms, and a fixed 128 (with the writer process) 1.13 and 1.26x at 108 and 116 ms; on the
same machine held to 1.1 CPUs by a cgroup quota, 32 gave 0.71x at 172 ms, and 128 gave 0.90x
at 366 ms with p99 over 2 s and every pod Running later than with kube-scheduler. Paced: 0.93
and 1.25x at 127 and 122 ms on the first, 0.92 and 0.76x at 190 and 181 ms on the second
(docs/perf-log/scale.md). So the pacer raises the number while the binds' median latency stays
under a
target and lowers it when it goes over: the gradient idea of Netflix's concurrency-limits (the limit
scaled by how far the latency is from where it should be), on the latency of the binds
themselves, which wait in the queue a status PATCH will wait in. It cannot make a saturated API
server faster: on a day when it answered in waves whatever the number in flight, paced binds went
no faster than a fixed 32 (median 285 against 292 pods/s over three paired runs each;
docs/perf-log/scale.md). The target was 0.2 s in those runs; later ones, with room, bound 0.83x
kube-scheduler's rate at the median at 0.2 s and 1.00x at 0.3 s, status still under 200 ms at
the median; it is 0.4 s now (constants).

Each decision reads the answers of the last WINDOW_SECONDS, not of the last period alone: the
answers come in waves that the binds in flight do not cause, and a limit that chased each wave
swung between its floor and ceiling and bound slower (see WINDOW_SECONDS).

Pure: the caller times each bind and reports it (`observe`); no clock is read here.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

PERIOD_SECONDS = 0.5
"""How often the limit moves: once per this much time, from the binds answered in it. Binds come
back in bursts on a saturated control plane (in one probed run at 128 in flight, one second's
median was 90 ms and the next 330 ms, again and again); a decision per round trip of binds chased
those bursts down to the floor and bound 483 pods/s where 128 fixed bound 759."""
WINDOW_SECONDS = 2.0
"""How far back the answers a decision reads go: the last four periods'. Why: on a 2-core machine
with room (1,000 x 10 backlog, 0.3 s target, eight runs of `bench scale` each way, alternated in
the same hour, operator alone), decided on each half second's answers alone, the medians swung
from 90 to 871 ms after the first 2.5 s and the limit with them, from 48 to 256; read over 2 s,
the medians stayed between 171 and 516 ms and the limit between 143 and 256. That bound 575 to
702 pods/s (median 617) against 420 to 668 (median 533), with status convergence p50 156 to 185
ms against 103 to 181 (docs/perf-log/scale.md, "Reading the binds over two seconds")."""
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
