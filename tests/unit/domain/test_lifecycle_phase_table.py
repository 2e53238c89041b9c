"""The whole phase table (see phase_table.STORIES), and what latching keeps and what it reports."""

from __future__ import annotations

import pytest

from podgroup_operator.constants import Phase
from podgroup_operator.domain.lifecycle import compute_status
from tests.unit.domain.lifecycle_helpers import at, gang, members, phases, story
from tests.unit.domain.phase_table import STORIES


@pytest.mark.parametrize(
    ("min_member", "steps"),
    [(min_member, steps) for _, min_member, steps in STORIES],
    ids=[name for name, _, _ in STORIES],
)
def test_phase_table(min_member: int, steps: list[tuple[str, Phase]]) -> None:
    results = story(gang(min_member), [letters for letters, _ in steps])
    assert phases(results) == [phase for _, phase in steps]


def test_a_latched_group_still_reports_its_counters() -> None:
    finished, later = story(gang(3), ["SSS", "SSSRRF"])
    assert later.status.phase is Phase.FINISHED
    assert (later.status.running, later.status.succeeded, later.status.failed) == (2, 3, 1)
    assert later.status.conditions == finished.status.conditions
    assert later.status.completion_time == finished.status.completion_time
    assert later.events == ()


def test_raising_min_member_without_a_loss_returns_running_to_pending_not_unknown() -> None:
    """Unknown means the gang lost a member; a stricter spec is no loss."""
    running = story(gang(2), ["RR"])[-1]
    stricter = compute_status(gang(3), members("RR"), running.status, at(10))
    assert stricter.status.phase is Phase.PENDING
