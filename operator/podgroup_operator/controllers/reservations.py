"""The scheduler's reservations: the head gang of each priority holds nodes, later gangs backfill.

The rule is pure (scheduling/reservation.py, `ReservationBook`); this part feeds it what the
store knows and says what happened:

- when a gang may run until (`ends`): its `maxRunSeconds` or its members' declared limits,
  counted from now for a gang being placed;
- which gangs hold nodes and until when (`running`): each gang's pods in the snapshot, its end
  from the PodGroup's `status.runningTime` (else its members' earliest `startTime`) plus its
  limit; a pod of no gang, or a gang without a limit, may run for ever;
- a backfilled gang gets an Event on its PodGroup saying why it may run there, and the metrics
  count reservations held and backfills made.

Reservations live in memory: after a restart of the operator the head gang reserves again at its
first refusal (the queue order, by creation time, is the same).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable

from podgroup_operator import constants as c
from podgroup_operator import metrics, tuning
from podgroup_operator.adapters.informers import Index
from podgroup_operator.adapters.kube import KubeClient
from podgroup_operator.api.keys import GroupKey
from podgroup_operator.api.run_time import declared_run_seconds
from podgroup_operator.api.times import parse_time
from podgroup_operator.controllers.gang_groups import ParsedGroups
from podgroup_operator.domain.run_limit import run_started
from podgroup_operator.logs import truncate
from podgroup_operator.scheduling.gang import GangRequest
from podgroup_operator.scheduling.reservation import (
    Backfill,
    Reservation,
    ReservationBook,
    RunningGang,
    ends_at,
    plan_reservation,
)
from podgroup_operator.scheduling.snapshot import Snapshot

logger = logging.getLogger(__name__)

RESERVATION_TIMEOUT_SECONDS = float(tuning.RESERVATION_TIMEOUT_SECONDS)
"""How long a reservation whose start is unknown (a gang it waits for declares no limit) holds
its nodes (`run --reservation-timeout`)."""


class Reservations:
    """The reservation book with what feeds it (see the module docstring)."""

    def __init__(
        self,
        kube: KubeClient,
        snapshot: Snapshot,
        parsed: ParsedGroups,
        members: Index,
        *,
        clock: Callable[[], dt.datetime],
        timeout_seconds: float = RESERVATION_TIMEOUT_SECONDS,
    ) -> None:
        self.kube = kube
        self.snapshot = snapshot
        self.parsed = parsed
        self.members = members
        self.clock = clock
        self.timeout = dt.timedelta(seconds=timeout_seconds)
        self.book = ReservationBook()
        self._tasks: set[asyncio.Task[None]] = set()
        self._never: dict[GroupKey, tuple[int, int, int, int]] = {}
        """Gangs whose last plan found they fit nowhere even with every running gang gone, with
        what that plan saw (`_seen`): they plan again only once the nodes or the gang change,
        not at every refusal."""

    # --- what the book is fed -------------------------------------------------------------------
    def ends(self, request: GangRequest, now: dt.datetime) -> dt.datetime | None:
        """When the gang, placed now, is done at the latest; None when unknown. Only read while
        a reservation is held: without one, no decision pays for it."""
        if not self.book:
            return None
        group = self.parsed.get(request.key)
        spec_value = group.spec.max_run_seconds if group is not None else None
        return ends_at(now, declared_run_seconds(spec_value, request.pending))

    def running(self, now: dt.datetime) -> list[RunningGang]:
        """Every gang holding nodes, with its latest end (O(pods): read only when a head gang
        plans its reservation)."""
        uids: dict[GroupKey, list[str]] = {}
        lone: list[str] = []
        for name in self.snapshot.nodes:
            for info in self.snapshot.node_pods(name):
                if info.gang is None:
                    lone.append(info.uid)
                else:
                    uids.setdefault(info.gang, []).append(info.uid)
        gangs = [RunningGang(key, tuple(u), self._end_of(key, now)) for key, u in uids.items()]
        gangs.extend(RunningGang(("", uid), (uid,), None) for uid in lone)
        return gangs

    def _end_of(self, key: GroupKey, now: dt.datetime) -> dt.datetime | None:
        group = self.parsed.get(key)
        pods = self.members.get(key, [])
        limit = declared_run_seconds(group.spec.max_run_seconds if group else None, pods)
        if limit is None:
            return None
        start = run_started(group.status) if group is not None else None
        if start is None:
            starts = [
                t for p in pods if (t := parse_time((p.get("status") or {}).get("startTime")))
            ]
            start = min(starts, default=now)
        return ends_at(start, limit)

    # --- decisions ------------------------------------------------------------------------------
    def plan(self, request: GangRequest, running: list[RunningGang]) -> Reservation | None:
        """`plan_reservation` now (what the scheduler may run in its worker thread)."""
        return plan_reservation(request, self.snapshot, running, self.clock())

    def may_reserve(self, request: GangRequest) -> bool:
        """Whether a refusal of this gang plans a reservation (`ReservationBook.may_reserve`),
        unless its last plan found it fits nowhere and nothing it depends on changed since."""
        if self._never.get(request.key) == self._seen(request):
            return False
        return self.book.may_reserve(request)

    def _seen(self, request: GangRequest) -> tuple[int, int, int, int]:
        """What a plan that found no room depends on: the nodes and the gang's size."""
        return (
            self.snapshot.node_epoch,
            len(request.pending),
            request.min_member,
            request.already_bound,
        )

    def adopt(self, request: GangRequest, planned: Reservation | None) -> Reservation | None:
        """Book the planned reservation (`ReservationBook.adopt`), log it, count it."""
        if planned is None:
            self._never[request.key] = self._seen(request)
        else:
            self._never.pop(request.key, None)
        held = self.book.adopt(request, planned)
        self._count()
        if held is not None:
            logger.info("gang %s %s", request.label, held.describe(self.clock()))
        return held

    def placed(
        self, request: GangRequest, backfills: list[Backfill], ends: dt.datetime | None
    ) -> None:
        """The gang was placed: its own reservation goes; each reservation it backfills is
        counted and said in an Event on its PodGroup."""
        self.release(request.key)
        if not backfills or ends is None:
            return
        metrics.BACKFILLS.inc(len(backfills))
        body = next(iter(self.parsed.groups.get(request.key, [])), None)
        for backfill in backfills:
            message = backfill.describe(ends)
            logger.info("gang %s %s", request.label, message)
            if body is not None:
                self._spawn(self._event(body, message))

    def release(self, key: GroupKey) -> None:
        if self.book.release(key) is not None:
            self._count()

    def release_namespace(self, namespace: str) -> bool:
        """Release the reservations of `namespace`'s gangs (it is being deleted: they are not
        decided, so their reservations would only keep the room from the others); whether any
        was held."""
        held = [r.gang for r in self.book.by_priority.values() if r.gang[0] == namespace]
        for gang in held:
            self.release(gang)
        return bool(held)

    def forget(self, key: GroupKey) -> None:
        self.book.forget(key)
        self._never.pop(key, None)
        self._count()

    def expire(self, now: dt.datetime) -> bool:
        """Release the reservations of unknown start past the timeout; whether any went."""
        gone = self.book.expire(now, self.timeout)
        for reservation in gone:
            logger.info(
                "the reservation of gang %s/%s was released after %ds: nothing running on its "
                "nodes declares an end; it waits as any gang, and reserves again once it can "
                "with a known start",
                *reservation.gang,
                int(self.timeout.total_seconds()),
            )
        if gone:
            self._count()
        return bool(gone)

    def _count(self) -> None:
        metrics.RESERVATIONS_HELD.set(len(self.book.by_priority))

    # --- Events ---------------------------------------------------------------------------------
    def _spawn(self, coroutine: object) -> None:
        task = asyncio.ensure_future(coroutine)  # type: ignore[call-overload]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _event(self, body: dict[str, object], message: str) -> None:
        await self.kube.narrate(
            body,
            event_type=c.EventType.NORMAL,
            reason=c.Reason.BACKFILLED,
            message=truncate(message, c.EVENT_MESSAGE_LIMIT),
            now=self.clock(),
        )

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
