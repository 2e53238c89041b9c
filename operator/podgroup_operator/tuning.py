"""Tuning knobs: the defaults and bounds of `run` options that trade speed for load.

Apart from `constants.py` (names the API and its users agree on) because these are
numbers an operator may change with a flag, not names: changing one changes no contract.
"""

BIND_CONCURRENCY = 32
"""Binds in flight when the pacer starts, and the fewest it goes down to (scheduling/pacing.py;
`run --bind-concurrency N` fixes the number instead). More binds in flight bind faster and delay
the kubelets' and our own status writes (docs/decisions/007-bind-pacing.md)."""
BIND_CONCURRENCY_CEILING = 256
"""The most binds in flight the pacer allows; each holds a connection
(docs/decisions/007-bind-pacing.md)."""
BIND_LATENCY_TARGET_SECONDS = 0.4
"""Where the pacer holds the median bind latency of its window. A status PATCH waits in the same
queue as a bind, so a higher target binds faster where the API server has room and delays status
where it has none (docs/decisions/007-bind-pacing.md)."""
BIND_CONCURRENCY_AUTO = "auto"
"""`run --bind-concurrency auto`: the pacer chooses (the default)."""
MAX_BIND_CONCURRENCY = 1024
"""The most `run --bind-concurrency` accepts: each bind in flight holds a connection."""
NONSTRICT_HOLD_SECONDS = 30
"""How long a NonStrict gang's members are held in the scheduler's memory, never bound, before
the hold is released so that other gangs may use the room (`run --nonstrict-hold-seconds`;
scheduling/holds.py, docs/decisions/018-nonstrict-hold-cap.md)."""
RESERVATION_TIMEOUT_SECONDS = 300
"""How long the head gang's reservation holds nodes while its start is unknown (a gang running
there declares no maxRunSeconds): then it is released and the gang waits as any other
(`run --reservation-timeout`; scheduling/reservation.py, docs/concepts/reservation.md)."""
MAX_RESERVATION_TIMEOUT_SECONDS = 86400
"""The most `run --reservation-timeout` accepts: a day; longer keeps nodes idle for a gang whose
start nobody can tell."""
MAX_NONSTRICT_HOLD_SECONDS = 3600
"""The most `run --nonstrict-hold-seconds` accepts: longer holds keep others off room for
longer than any gang should wait unseen."""
