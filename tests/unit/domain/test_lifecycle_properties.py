"""Invariants over arbitrary member histories, beyond the hand-written stories."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from podgroup_operator.api.models import PodGroupStatus, RestartPolicy
from podgroup_operator.constants import Phase, PolicyAction
from podgroup_operator.domain.lifecycle import compute_status, outlook, status_patch
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


@settings(derandomize=True)
@given(
    min_member=st.integers(min_value=1, max_value=4),
    steps=_histories,
    restart=st.booleans(),
)
def test_the_outlook_is_the_phase_and_counts_compute_status_reports(
    min_member: int, steps: list[str], restart: bool
) -> None:
    """The status reconciler decides from `outlook` alone to hold a first status back; that is
    only sound if it never disagrees with the full computation, whatever the previous status."""
    group = gang(min_member)
    if restart:
        group = group.model_copy(
            update={"spec": group.spec.model_copy(update={"policy": _restart_policy()})}
        )
    previous = PodGroupStatus()
    for second, letters in enumerate(steps):
        pods = members(letters)
        seen = outlook(group, pods, previous)
        status = compute_status(group, pods, previous, at(second)).status
        assert seen.phase is status.phase
        counts = seen.counts
        assert (counts.running, counts.succeeded, counts.failed, counts.scheduled) == (
            status.running,
            status.succeeded,
            status.failed,
            status.scheduled,
        )
        previous = status


def _restart_policy() -> RestartPolicy:
    return RestartPolicy.model_validate({"action": PolicyAction.RESTART_GANG})
