"""Gangs with a restart policy, their member pods, and a small world that carries out plans.

Member pods are written one letter each (tests/pod_letters.py), as in the lifecycle tests, so a
test reads as a story; member i is named m<i> in every step.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from podgroup_operator.api.models import PodGroup, unpack_pods
from podgroup_operator.constants import SCHEDULER_NAME, Phase, PodPhase
from podgroup_operator.domain import restart
from podgroup_operator.domain.restart import (
    Fail,
    Refuse,
    Restart,
    RestartPlan,
    Resume,
    Wait,
    record_owner,
)
from podgroup_operator.domain.restart_records import RESTART_PODS_DIGEST, record_digest
from tests import pod_letters
from tests.builders import podgroup, uid
from tests.clock import T0
from tests.fakes import merge_patch


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


RECORD_KEY = bytes(range(32))
"""The operator's record key in these tests (domain/restart_records.py)."""


def plan_restart(group: PodGroup, member_pods: Any, now: datetime, **options: Any) -> RestartPlan:
    """`domain.restart.plan_restart` with the tests' record key."""
    return restart.plan_restart(group, member_pods, now, record_key=RECORD_KEY, **options)


def signed(group: PodGroup) -> PodGroup:
    """The group with the restart recorded in its status signed, as the operator signs it:
    for tests that write a record by hand (an operator's record found after a crash)."""
    status = group.status
    bodies = list(status.restart_pods)
    if status.restart_pods_packed:
        bodies += unpack_pods(status.restart_pods_packed)
    digest = record_digest(RECORD_KEY, record_owner(group), status.restarting_uids, bodies)
    return apply_status_patch(group, {"status": {RESTART_PODS_DIGEST: digest}})


POLICY = {"action": "RestartGang", "maxRestarts": 3, "backoffSeconds": 10, "maxBackoffSeconds": 300}
NO_BACKOFF = {**POLICY, "backoffSeconds": 0}


def gang(
    min_member: int = 3,
    *,
    policy: Mapping[str, Any] | None = POLICY,
    status: Mapping[str, Any] | None = None,
    name: str = "gang",
    **fields: Any,
) -> PodGroup:
    """A gang of `min_member`; extra keyword arguments are spec fields by their API names."""
    spec: dict[str, Any] = {} if policy is None else {"policy": dict(policy)}
    body = podgroup(name, min_member=min_member, status=dict(status or {}), **spec, **fields)
    return PodGroup.model_validate(body)


def running_status(**extra: Any) -> dict[str, Any]:
    """A status as the lifecycle writes it for a gang of three that ran whole at T0."""
    return {
        "phase": Phase.RUNNING,
        "running": 3,
        "scheduled": 3,
        "runningTime": iso(T0),
        **extra,
    }


def member(index: int, letter: str, *, group: str = "gang", **extra: Any) -> dict[str, Any]:
    """A member routed to the gang scheduler, as restart-policy gangs' members are."""
    return pod_letters.member(index, letter, group=group, scheduler=SCHEDULER_NAME, **extra)


def members(letters: str, *, group: str = "gang") -> list[dict[str, Any]]:
    return pod_letters.members(letters, group=group, scheduler=SCHEDULER_NAME)


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
    return PodGroup.model_validate(merge_patch(body, patch))


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
        if isinstance(plan, Restart | Fail | Refuse):
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
        if isinstance(plan, Refuse):
            self.write_status(plan)
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
