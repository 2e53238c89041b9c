"""Carries out the restart policy's plan: records it in status, deletes and recreates members.

The restart policy decides (`domain.restart.plan_restart`: Restart, Resume, Fail, Refuse, Wait
or Nothing, over signed restart records, domain/restart_records.py); `Restarts` does what the
plan says for one group, in the order that makes a crash harmless (see domain/restart.py):
the plan's status first, written by the status reconciler's writer with a resourceVersion
precondition, then deletes with UID preconditions, then creations, all in the group's own
namespace. A record the plan refuses is cleared, with its Event, and nothing else is done for it.

It keeps what a restart of bare members needs beyond the store: their bodies from when a
reconcile first saw them (`bare`), and how many the gang ran with (`ran_with`). The record
key is read from its Secret when a plan first needs it (adapters/record_key.py); while it
cannot be had, the group's restart waits and is tried again in RECORD_KEY_RETRY_SECONDS, and its
status goes on being written (a restart cannot be recorded or checked without the key; the rest
of the status needs none).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator import metrics
from podgroup_operator.adapters.kube import PODS, ApiError, KubeClient
from podgroup_operator.adapters.record_key import RecordKeyError, SecretRecordKey
from podgroup_operator.api.keys import GroupKey
from podgroup_operator.api.models import PodGroup
from podgroup_operator.controllers.clock import MonotonicClock
from podgroup_operator.controllers.narrator import Narrator
from podgroup_operator.domain.membership import Pod
from podgroup_operator.domain.restart import (
    Fail,
    Nothing,
    Refuse,
    Restart,
    Resume,
    Wait,
    bare_members,
    lost_members,
    plan_restart,
    restart_progress,
)
from podgroup_operator.domain.scheduling_status import (
    Preempted,
    Verdict,
    preempted_since,
    timed_out_since,
)

logger = logging.getLogger(__name__)

RETRY_MARGIN_SECONDS = 0.05
"""A restart plan's wait is taken up this long after it ends, so the plan finds it over."""
RECORD_KEY_RETRY_SECONDS = 10.0
"""How soon a group whose restart step waited for the record key's Secret is tried again."""

WriteStatus = Callable[[GroupKey, dict[str, Any], dict[str, Any]], Awaitable[dict[str, Any] | None]]
"""The status reconciler's writer: merge-patch status over the version read (None if someone
wrote in between)."""


class Restarts:
    """The restart step of the status reconciler (controllers/status.py): `step` carries out
    the group's plan; `touch` asks for the group to be reconciled again (a wait's end, the
    record key's retry)."""

    def __init__(
        self,
        kube: KubeClient,
        record_key: SecretRecordKey,
        narrator: Narrator,
        monotonic: MonotonicClock,
        *,
        write_status: WriteStatus,
        touch: Callable[[GroupKey], None],
    ) -> None:
        self.kube = kube
        self.record_key = record_key
        """Signs the restart records this step writes and checks those it reads
        (domain/restart_records.py); read from its Secret when a plan first needs it."""
        self.narrator = narrator
        self.monotonic = monotonic
        self.write_status = write_status
        self.touch = touch
        self._key_problem: str | None = None
        """The last reason the record key could not be had, logged once (`_record_key_missing`)."""
        self.bare: dict[GroupKey, dict[str, Pod]] = {}
        """The bodies of the bare members of each RestartGang group, by name, from when a
        reconcile first sees them (`domain.restart.bare_members`): a restart recreates the ones
        gone, whoever deleted them."""
        self.ran_with: dict[GroupKey, int] = {}
        """How many bare members each RestartGang group had when last computed Running (those
        failed or being deleted included): a restart recreates up to that many."""

    def forget(self, key: GroupKey) -> None:
        """The group is gone: nothing of it is kept."""
        self.bare.pop(key, None)
        self.ran_with.pop(key, None)

    def keep_bare(self, key: GroupKey, group: PodGroup, pods: list[dict[str, Any]]) -> None:
        """Keep the bodies of a RestartGang group's bare members (see `bare`); forget them
        for a group without that policy, or a terminal one."""
        policy = group.spec.policy
        phase = group.status.phase
        if (
            policy is None
            or policy.action is not c.PolicyAction.RESTART_GANG
            or (phase is not None and c.Phase(phase).terminal)
        ):
            self.forget(key)
            return
        self.bare.setdefault(key, {}).update(bare_members(key, pods))

    def ran(self, key: GroupKey, members: list[Any]) -> None:
        """The group computes Running over `members`: a restart brings back as many bare
        members as it has now. Members being deleted or failed count: a Running gang that loses
        one still computes Running until it is gone, and what it lost is what a restart brings
        back."""
        if key in self.bare:
            self.ran_with[key] = len(bare_members(key, members))

    async def step(
        self,
        key: GroupKey,
        group: PodGroup,
        body: dict[str, Any],
        pods: list[dict[str, Any]],
        now: dt.datetime,
        *,
        preempted: Preempted | None,
        verdict: Verdict | None,
    ) -> bool:
        """Carry out the restart policy's plan; True when it wrote status (the reconcile ends).

        `preempted` and `verdict` are the scheduler's facts on the group (a preemption, a
        schedule timeout): the plan charges no restart for a preemption and restarts a gang
        held partly bound past its timeout."""
        if group.spec.policy is None and not restart_progress(group.status).active:
            return False
        try:
            record_key = await self.record_key.get()
        except (ApiError, RecordKeyError) as exc:
            self._record_key_missing(key, exc)
            return False
        plan = plan_restart(
            group,
            pods,
            now,
            record_key=record_key,
            preempted_at=preempted_since(group.status, preempted),
            timed_out_at=timed_out_since(verdict),
            lost=lost_members(self.bare.get(key, {}), pods),
            ran_with=self.ran_with.get(key),
        )
        if isinstance(plan, Nothing):
            return False
        if isinstance(plan, Wait):
            self._retry_at(key, plan.until, now)
            if plan.status_patch is None:
                return False
        patch = plan.status_patch  # every plan but Nothing has one (maybe None)
        updated = body
        if patch is not None:
            written = await self.write_status(key, body, patch)
            if written is None:
                return True
            updated = written
        if isinstance(plan, Restart):
            metrics.RESTARTS.inc()
        if isinstance(plan, Restart | Fail | Refuse) and plan.event is not None:
            self.narrator.narrate(updated, plan.event.type, plan.event.reason, plan.event.message)
            log = logger.warning if isinstance(plan, Refuse) else logger.info
            log("PodGroup %s/%s: %s", *key, plan.event.message)
        delete = () if isinstance(plan, Wait | Refuse) else plan.delete
        recreate = plan.recreate if isinstance(plan, Restart | Resume) else ()
        for member in delete:
            try:
                await self.kube.delete(PODS, member.name, key[0], uid=member.uid)
            except ApiError as exc:
                if not (exc.not_found or exc.conflict):
                    raise
        for pod in recreate:
            try:
                await self.kube.create(PODS, pod, key[0])
            except ApiError as exc:
                if not (exc.conflict or exc.namespace_terminating):
                    raise
        return patch is not None

    def _record_key_missing(self, key: GroupKey, exc: Exception) -> None:
        """The record key's Secret can be neither read nor made: the group's restart step waits
        and is tried again in RECORD_KEY_RETRY_SECONDS. Said once per distinct problem, not
        once per group."""
        problem = f"{exc}"
        if problem != self._key_problem:
            self._key_problem = problem
            logger.warning(
                "restart policies wait: the restart records' key cannot be had (%s); give the "
                "operator get on that Secret and create on Secrets in its namespace "
                "(deploy/base/rbac.yaml)",
                problem,
            )
        self.monotonic.call_later(RECORD_KEY_RETRY_SECONDS, self.touch, key)

    def _retry_at(self, key: GroupKey, until: dt.datetime, now: dt.datetime) -> None:
        """Touch the group when a restart plan's wait (wall-clock `until`) is over."""
        delay = max(0.0, (until - now).total_seconds())
        self.monotonic.call_later(delay + RETRY_MARGIN_SECONDS, self.touch, key)
