"""What preemption answers: the gangs to evict (`VictimGang`), the plan (`PreemptionPlan`) or why
there is none (`PreemptionRefusal`), and the PodDisruptionBudgets it weighs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from podgroup_operator.api.keys import GroupKey
from podgroup_operator.scheduling.gang import Binding
from podgroup_operator.scheduling.podinfo import PodInfo
from podgroup_operator.scheduling.selectors import LabelSelector, parse_selector

__all__ = [
    "DisruptionBudget",
    "PreemptionPlan",
    "PreemptionRefusal",
    "Victim",
    "VictimGang",
    "disruption_budget",
]


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """A PodDisruptionBudget: pods it selects, and how many may go now."""

    namespace: str
    name: str
    selector: LabelSelector
    disruptions_allowed: int
    """`status.disruptionsAllowed`."""

    def covers(self, info: PodInfo) -> bool:
        return info.namespace == self.namespace and self.selector.matches(info.labels)


def disruption_budget(raw: Mapping[str, Any]) -> DisruptionBudget:
    """A raw policy/v1 PodDisruptionBudget as the model (an unreadable selector selects all,
    which only makes the planner more careful)."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    return DisruptionBudget(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        selector=parse_selector(spec.get("selector"), "spec.selector", strict=False),
        disruptions_allowed=int((raw.get("status") or {}).get("disruptionsAllowed") or 0),
    )


@dataclass(frozen=True, slots=True)
class Victim:
    namespace: str
    name: str
    uid: str
    node: str


@dataclass(frozen=True, slots=True)
class VictimGang:
    """A gang (or lone pod) to evict, with all of its pods."""

    gang: GroupKey | None
    """The PodGroup, or None for a pod outside any gang."""
    priority: int
    """The highest priority among its pods."""
    pods: tuple[Victim, ...]
    budget_violations: int = 0
    """Its pods that the PodDisruptionBudgets do not allow to be disrupted now."""
    sub_group: str | None = None
    """The one sub-group of the gang taken (its policy repairs it alone), or None: all of it."""

    @property
    def label(self) -> str:
        if self.gang is not None and self.sub_group is not None:
            return f"{self.gang[0]}/{self.gang[1]} sub-group {self.sub_group}"
        if self.gang is not None:
            return f"{self.gang[0]}/{self.gang[1]}"
        pod = self.pods[0]
        return f"{pod.namespace}/{pod.name}"


@dataclass(frozen=True)
class PreemptionPlan:
    """Evict `victims`, then the gang fits as `nominations` say (one binding per member).

    The controller deletes every victim pod (all pods of each victim gang), records the
    nominations so that lower-priority gangs do not take the room meanwhile, and places the gang
    again once the victims are gone. `waiting_for` counts terminating pods the plan relies on.
    """

    gangs: tuple[GroupKey, ...]
    victims: tuple[VictimGang, ...]
    nominations: tuple[Binding, ...]
    message: str
    waiting_for: int = 0
    reclaim_for: str | None = None
    """The quota (`namespace/name`) this plan takes back what others borrowed for, when it is a
    quota reclaim (scheduling/reclaim.py), not priority preemption."""

    @property
    def empty(self) -> bool:
        return not self.victims

    @property
    def victim_pods(self) -> tuple[Victim, ...]:
        return tuple(p for v in self.victims for p in v.pods)

    @property
    def budget_violations(self) -> int:
        return sum(v.budget_violations for v in self.victims)


@dataclass(frozen=True)
class PreemptionRefusal:
    """Preemption cannot help (or is not allowed); `message` says why."""

    gangs: tuple[GroupKey, ...]
    message: str
