"""Compact gangs for lifecycle tests: one letter per member pod, so a table row reads as a story.

Letters: P pending (unbound), B pending but bound to a node, R running, S succeeded, F failed,
D running and being deleted, U pod phase Unknown (node unreachable).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from podgroup_operator.api.models import PodGroup, PodGroupStatus
from podgroup_operator.constants import ConditionType, Phase, PodPhase
from podgroup_operator.domain.conditions import find_condition
from podgroup_operator.domain.lifecycle import StatusResult, compute_status
from tests.builders import pod, podgroup

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)

_LETTERS: dict[str, dict[str, Any]] = {
    "P": {"phase": PodPhase.PENDING},
    "B": {"phase": PodPhase.PENDING, "node": "node-a"},
    "R": {"phase": PodPhase.RUNNING, "node": "node-a"},
    "S": {"phase": PodPhase.SUCCEEDED, "node": "node-a"},
    "F": {"phase": PodPhase.FAILED, "node": "node-a"},
    "D": {"phase": PodPhase.RUNNING, "node": "node-a", "deleting": True},
    "U": {"phase": PodPhase.UNKNOWN, "node": "node-a"},
}


def at(seconds: int) -> datetime:
    """T0 plus some seconds: each step of a story happens at its own time."""
    return T0 + timedelta(seconds=seconds)


def gang(min_member: int = 3, name: str = "gang", namespace: str = "default") -> PodGroup:
    return PodGroup.model_validate(podgroup(name, namespace, min_member=min_member))


def members(letters: str, group: str = "gang", namespace: str = "default") -> list[dict[str, Any]]:
    """One member pod per letter, named m0, m1, ... in the group's namespace."""
    return [
        pod(f"m{index}", namespace, group=group, **_LETTERS[letter])
        for index, letter in enumerate(letters)
    ]


def story(group: PodGroup, steps: Sequence[str]) -> list[StatusResult]:
    """Compute the status after each step, feeding each result back as the previous status."""
    previous = PodGroupStatus()
    results = []
    for second, letters in enumerate(steps):
        result = compute_status(group, members(letters), previous, at(second))
        results.append(result)
        previous = result.status
    return results


def phases(results: Sequence[StatusResult]) -> list[Phase | None]:
    return [result.status.phase for result in results]


def unschedulable(status: PodGroupStatus) -> Any:
    """The Unschedulable condition, asserted present."""
    condition = find_condition(status.conditions, ConditionType.UNSCHEDULABLE)
    assert condition is not None, status.conditions
    return condition
