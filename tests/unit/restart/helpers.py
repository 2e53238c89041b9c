"""Gangs with a restart policy, their member pods, and a small world that carries out plans.

Member pods are written one letter each, as in the lifecycle tests, so a test reads as a story:
P pending, R running, S succeeded, F failed (crashed), E evicted (Failed, reason Evicted),
O rejected by the kubelet (Failed, reason OutOfcpu), D running and being deleted,
U pod phase Unknown, and `-` for a member that is gone. Member i is named m<i> in every step.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import Field

from podgroup_operator.api.models import PodGroup, PodGroupStatus
from podgroup_operator.constants import SCHEDULER_NAME, Phase, PodPhase
from podgroup_operator.domain.restart import (
    Fail,
    Restart,
    RestartPlan,
    Resume,
    Wait,
    plan_restart,
)
from tests.builders import pod, podgroup, uid
from tests.fakes import merge_patch

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


class FutureStatus(PodGroupStatus):
    """PodGroupStatus with the two fields the restart policy needs; api/models.py is to gain
    them (see domain/restart.py), and then this subclass only repeats them."""

    restarting_uids: list[str] = Field(default_factory=list, alias="restartingUIDs")
    restart_pods: list[dict[str, Any]] = Field(default_factory=list)


class FuturePodGroup(PodGroup):
    status: FutureStatus = Field(default_factory=FutureStatus)


POLICY = {"action": "RestartGang", "maxRestarts": 3, "backoffSeconds": 10, "maxBackoffSeconds": 300}
NO_BACKOFF = {**POLICY, "backoffSeconds": 0}


def gang(
    min_member: int = 3,
    *,
    policy: Mapping[str, Any] | None = POLICY,
    status: Mapping[str, Any] | None = None,
    name: str = "gang",
) -> PodGroup:
    spec: dict[str, Any] = {} if policy is None else {"policy": dict(policy)}
    body = podgroup(name, min_member=min_member, status=dict(status or {}), **spec)
    return FuturePodGroup.model_validate(body)


def running_status(**extra: Any) -> dict[str, Any]:
    """A status as the lifecycle writes it for a gang of three that ran whole at T0."""
    return {
        "phase": Phase.RUNNING,
        "running": 3,
        "scheduled": 3,
        "runningTime": iso(T0),
        **extra,
    }


_LETTERS: dict[str, dict[str, Any]] = {
    "P": {"phase": PodPhase.PENDING},
    "R": {"phase": PodPhase.RUNNING, "node": "node-a"},
    "S": {"phase": PodPhase.SUCCEEDED, "node": "node-a"},
    "F": {"phase": PodPhase.FAILED, "node": "node-a"},
    "E": {"phase": PodPhase.FAILED, "node": "node-a"},
    "O": {"phase": PodPhase.FAILED, "node": "node-a"},
    "D": {"phase": PodPhase.RUNNING, "node": "node-a", "deleting": True},
    "U": {"phase": PodPhase.UNKNOWN, "node": "node-a"},
}
_REASONS = {"E": "Evicted", "O": "OutOfcpu"}


def member(index: int, letter: str, *, group: str = "gang", **extra: Any) -> dict[str, Any]:
    body = pod(f"m{index}", group=group, scheduler=SCHEDULER_NAME, **_LETTERS[letter], **extra)
    if letter in _REASONS:
        body["status"]["reason"] = _REASONS[letter]
    return body


def members(letters: str, *, group: str = "gang") -> list[dict[str, Any]]:
    return [
        member(index, letter, group=group) for index, letter in enumerate(letters) if letter != "-"
    ]


def owned(body: dict[str, Any], kind: str = "Job", name: str = "trainer") -> dict[str, Any]:
    """The pod with a controlling owner reference."""
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch/v1",
            "kind": kind,
            "name": name,
            "uid": "owner-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return body


def apply_status_patch(group: PodGroup, patch: Mapping[str, Any] | None) -> PodGroup:
    """The group as re-read after the status patch (merged as the apiserver merges it, the
    fake's `merge_patch`): through JSON, as the operator reads it."""
    if patch is None:
        return group
    body = group.model_dump(mode="json", by_alias=True, exclude_none=True)
    return FuturePodGroup.model_validate(merge_patch(body, patch))


@dataclass
class World:
    """A group and its pods; carries out plans as the handler would, step by step."""

    group: PodGroup
    pods: list[dict[str, Any]]
    events: list[Any] = field(default_factory=list)

    def plan(self, now: datetime) -> RestartPlan:
        return plan_restart(self.group, self.pods, now)

    def write_status(self, plan: RestartPlan) -> None:
        patch = getattr(plan, "status_patch", None)
        self.group = apply_status_patch(self.group, patch)
        if isinstance(plan, Restart | Fail):
            self.events.append(plan.event)

    def delete(self, plan: Restart | Resume | Fail) -> None:
        """Deletes with UID preconditions: the pod gets a deletionTimestamp (graceful)."""
        refs = set(plan.delete)
        for body in self.pods:
            meta = body["metadata"]
            if (meta["namespace"], meta["name"], meta["uid"]) in refs:
                meta["deletionTimestamp"] = "2026-03-01T00:00:00Z"
                body["status"]["phase"] = PodPhase.FAILED  # the kubelet kills it

    def finish_deletions(self) -> None:
        self.pods = [p for p in self.pods if not p["metadata"].get("deletionTimestamp")]

    def create(self, plan: Restart | Resume) -> None:
        taken = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.pods}
        for body in plan.recreate:
            key = (body["metadata"]["namespace"], body["metadata"]["name"])
            if key in taken:
                continue  # 409 AlreadyExists: success
            created = copy.deepcopy(body)
            created["metadata"]["uid"] = uid()
            created["status"] = {"phase": PodPhase.PENDING}
            self.pods.append(created)

    def carry_out(self, plan: RestartPlan) -> None:
        """Everything the handler does for the plan, deletions left graceful."""
        if isinstance(plan, Wait):
            self.group = apply_status_patch(self.group, plan.status_patch)
            return
        if isinstance(plan, Restart | Resume | Fail):
            self.write_status(plan)
            self.delete(plan)
            if isinstance(plan, Restart | Resume):
                self.create(plan)

    def run_all(self, phase: str = PodPhase.RUNNING) -> None:
        for body in self.pods:
            body["status"]["phase"] = phase
            body["spec"]["nodeName"] = "node-b"

    def set_phase(self, phase: Phase, **status: Any) -> None:
        """What the lifecycle writes meanwhile (only the fields the restart policy reads)."""
        patch = {"status": {"phase": phase, **{k: iso(v) for k, v in status.items()}}}
        self.group = apply_status_patch(self.group, patch)

    def restarts(self) -> int:
        return self.group.status.restarts
