"""Compact gangs for lifecycle tests: one letter per member pod (tests/pod_letters.py), so a
table row reads as a story."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from podgroup_operator.api.models import PodGroup, PodGroupStatus
from podgroup_operator.constants import ConditionType, Phase
from podgroup_operator.domain.conditions import find_condition
from podgroup_operator.domain.lifecycle import StatusResult, compute_status
from tests.builders import podgroup
from tests.clock import T0
from tests.pod_letters import members


def at(seconds: int) -> datetime:
    """T0 plus some seconds: each step of a story happens at its own time."""
    return T0 + timedelta(seconds=seconds)


def gang(min_member: int = 3, name: str = "gang", namespace: str = "default") -> PodGroup:
    return PodGroup.model_validate(podgroup(name, namespace, min_member=min_member))


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
