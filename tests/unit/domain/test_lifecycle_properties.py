"""Invariants over arbitrary member histories, beyond the hand-written stories."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from podgroup_operator.constants import Phase
from podgroup_operator.domain.lifecycle import compute_status, status_patch
from tests.unit.domain.lifecycle_helpers import at, gang, members, story

_histories = st.lists(st.text(alphabet="PBRSFDU", max_size=6), min_size=1, max_size=6)


@settings(derandomize=True)
@given(min_member=st.integers(min_value=1, max_value=4), steps=_histories)
def test_every_history_is_idempotent_latching_and_consistent(
    min_member: int, steps: list[str]
) -> None:
    group = gang(min_member)
    results = story(group, steps)
    terminal_seen: Phase | None = None
    before: Phase | None = None
    for result, letters in zip(results, steps, strict=True):
        status = result.status
        # Recomputing with the result as previous, even much later, writes nothing.
        again = compute_status(group, members(letters), status, at(10_000))
        assert status_patch(status, again.status) is None
        assert again.events == ()
        # Terminal phases latch.
        if terminal_seen is not None:
            assert status.phase is terminal_seen
        elif status.phase is not None and status.phase.terminal:
            terminal_seen = status.phase
            assert status.completion_time is not None
        # Counters agree with each other and with the phase.
        assert status.running + status.succeeded <= status.scheduled
        if status.phase is Phase.RUNNING:
            assert status.running + status.succeeded >= min_member
        if status.phase is Phase.UNKNOWN:
            assert status.running > 0 and status.running + status.succeeded < min_member
        # Exactly one event when, and only when, the phase changed.
        assert len(result.events) == (0 if status.phase is before else 1)
        before = status.phase
