"""Leader election on a Lease: campaign, lead while renewing, hand over on a clean stop.

Our own election: the maintained implementations are tied to their own clients (client-go's
`tools/leaderelection`; `kubernetes_asyncio.leaderelection` needs kubernetes_asyncio's ApiClient),
and the election is small once its decisions are pure (`domain/leadership.py`). This module does
the I/O and the timing: read the Lease, decide, write it with a resourceVersion precondition
(a 409 means somebody else wrote first: read again), and call back when leading starts and stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import JSON, LEASES, ApiError, KubeClient
from podgroup_operator.controllers.clock import LOOP_CLOCK, MonotonicClock, sleep, timeout
from podgroup_operator.domain.leadership import (
    LONGEST_LEASE_SECONDS,
    LeaseRecord,
    Step,
    decide,
    released,
)
from podgroup_operator.logs import describe, truncate

logger = logging.getLogger(__name__)

Callback = Callable[[], Awaitable[None]]
RELEASE_ATTEMPTS = 5


def default_identity() -> str:
    """The pod's name in a cluster (deploy/ sets POD_NAME), else host, pid and a random tag."""
    return (
        os.environ.get("POD_NAME") or f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    )


@dataclass(frozen=True)
class Timing:
    """Shorter than client-go's 15/10/2 s, so that a replica killed without a hand-over is
    replaced within 15 s (lease plus one retry), and one that stops cleanly within about 1 s.
    The cost is one GET and PUT a second from the leader and one GET a second per follower."""

    lease_seconds: float = 12.0
    renew_deadline_seconds: float = 8.0
    retry_seconds: float = 1.0
    longest_lease_seconds: float = LONGEST_LEASE_SECONDS
    """Another holder's lease is believed for at most this long (domain/leadership.py)."""


def _stood_still(late: float) -> str:
    """What a timer that fired `late` seconds after its time says of this process: past a
    second, its event loop did not run for that long."""
    if late <= 1.0:
        return ""
    return (
        f": this process stood still for {late:.1f}s (stopped, paused, starved of CPU, or its "
        "event loop held)"
    )


class LeaderElector:
    """Campaigns for one Lease; `leading` is set while this replica leads."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        namespace: str,
        name: str,
        identity: str | None = None,
        timing: Timing = Timing(),
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        monotonic: MonotonicClock = LOOP_CLOCK,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.timing = timing
        self.clock = clock
        """Wall-clock time: what the Lease records, and when its record was seen changing."""
        self.monotonic = monotonic
        """Times the retries, the renew deadline and each attempt's budget."""
        self.leading = asyncio.Event()
        self.transitions = 0
        """Times this replica started leading."""
        self._seen: LeaseRecord | None = None
        self._seen_at: dt.datetime | None = None
        self._version: str | None = None
        self._released = False
        self._overlong: tuple[str, int] | None = None
        self._held_since: float | None = None
        """Monotonic time at which the last successful attempt (campaign or renewal) began."""
        self._watch_refused = False
        self._freed = asyncio.Event()
        """Set by the campaign's watch when it sees the Lease with no holder (or gone)."""
        self._freed_lease: JSON | None = None
        """The Lease as the campaign's watch saw it freed: the next attempt decides on it
        instead of reading it again (`_attempt`)."""

    async def run(self, on_started: Callback, on_stopped: Callback) -> None:
        """Campaign, lead, and campaign again after losing the lease, until `release()`."""
        while not self._released:
            watching = asyncio.create_task(self._watch_for_release())
            try:
                while not await self._try():
                    if self._released:
                        return
                    await self._released_or_retry()
            finally:
                watching.cancel()
                await asyncio.gather(watching, return_exceptions=True)
                self._freed_lease = None  # stale by the next campaign
            self.leading.set()
            self.transitions += 1
            logger.info("leading as %s (lease %s/%s)", self.identity, self.namespace, self.name)
            try:
                await on_started()
                await self._renew_until_lost()
            finally:
                self.leading.clear()
                await on_stopped()
            if not self._released:
                logger.warning("lost the lease %s/%s; campaigning again", self.namespace, self.name)

    @property
    def version(self) -> str | None:
        """The resourceVersion of the Lease as this replica last read or wrote it; right after
        it took the Lease, the version of that write: later than every change the previous
        holder saw answered before it released or stopped renewing."""
        return self._version

    def holds(self) -> bool:
        """True while this replica leads on a hold younger than the renew deadline: what the
        leader's writes ask before they go out (`adapters.kube.FencedTransport`).

        The hold counts from when the last successful attempt *began*: the write it made is
        no older than that, so the others cannot take the Lease over before `lease_seconds`
        from then, and the margin between the two deadlines is left to writes in flight. Read
        at each write rather than left to the elector: after a pause of the whole process, the
        elector gives up leading only once it has tried to renew, a few turns of the event
        loop after the scheduler has resumed sending what it decided before the pause."""
        held = self._held_since
        return (
            self.leading.is_set()
            and held is not None
            and self.monotonic.now() - held < self.timing.renew_deadline_seconds
        )

    async def release(self) -> None:
        """Stop campaigning and hand the lease over at once: the next candidate need not wait
        it out. Call it after the leader's work has stopped (the run loop then ends)."""
        self._released = True
        if not self.leading.is_set():
            return
        self.leading.clear()
        # The Lease as this replica last wrote or read it, with its resourceVersion: the first
        # write needs no read before it: a round trip counts in a hand-over's 2 s
        # (docs/decisions/009-leader-hand-over.md). Anything written since (a renewal in
        # flight, another holder) makes it a conflict, and then it is read.
        current = self._seen if self._version is not None else None
        for _ in range(RELEASE_ATTEMPTS):
            try:
                async with timeout(self.monotonic, self.timing.renew_deadline_seconds):
                    if current is None:
                        current = await self._read()
                    if current is None or current.holder != self.identity:
                        return
                    await self._write(released(current, self.clock()))
                logger.info("released the lease %s/%s", self.namespace, self.name)
                return
            except ApiError as exc:
                if not exc.conflict:
                    logger.warning("lease not released (it will expire): %s", describe(exc))
                    return
                current = None  # a renewal in flight wrote first: read again
            except Exception as exc:  # no answer in time, or the transport failed: stop anyway
                logger.warning("lease not released (it will expire): %s", describe(exc))
                return
        logger.warning("lease not released after %d conflicts (it will expire)", RELEASE_ATTEMPTS)

    # --- the steps -----------------------------------------------------------------------------
    async def _released_or_retry(self) -> None:
        """Wait for the retry period, or less: until the campaign's watch sees the Lease freed."""
        with contextlib.suppress(TimeoutError):
            async with timeout(self.monotonic, self.timing.retry_seconds):
                await self._freed.wait()
        self._freed.clear()

    async def _watch_for_release(self) -> None:
        """While campaigning, watch the Lease and wake the campaign when its holder releases it
        (or it is deleted), instead of at the next retry.

        A retry period is too long for a hand-over's 2 s (docs/decisions/009-leader-hand-over.md).
        The reads every retry period stay: they take over from a holder that stopped without
        releasing, and they go on should this watch fail (it is only a shortcut: it
        starts again after a retry period; a refusal is logged once, other ends at debug)."""
        selector = f"metadata.name={self.name}"
        while not self._released:
            try:
                async for event, lease in self.kube.watch(
                    LEASES, self.namespace, field_selector=selector
                ):
                    if event == c.WatchEventType.DELETED:
                        self._freed_lease = None  # created anew: the attempt reads first
                        self._freed.set()
                    elif (
                        event in (c.WatchEventType.ADDED, c.WatchEventType.MODIFIED)
                        and not LeaseRecord.from_spec(lease.get("spec")).holder
                    ):
                        self._freed_lease = lease
                        self._freed.set()
            except ApiError as exc:
                # Refused (RBAC without the `watch` verb, say): the reads still take over,
                # a retry period late. Said once; the rest of the ends are routine.
                if not self._watch_refused:
                    self._watch_refused = True
                    logger.warning(
                        "lease %s/%s: cannot watch it (%s); a release is seen at the next read",
                        self.namespace,
                        self.name,
                        describe(exc),
                    )
            except Exception as exc:
                logger.debug("lease %s/%s: watch ended: %s", self.namespace, self.name, exc)
            await sleep(self.monotonic, self.timing.retry_seconds)

    async def _renew_until_lost(self) -> None:
        """Renew every retry period; stop leading once the renew deadline passes unrenewed.

        Each attempt gets only the time left before that deadline, as client-go's renew
        context does: a request that hangs (an API server under load, a half-open connection)
        would otherwise keep this replica leading for as long as the client's own timeout
        (60 s), long after the others may take the lease (`lease_seconds`): two schedulers.
        """
        clock = self.monotonic
        while not self._released:
            slept_from = clock.now()
            await sleep(clock, self.timing.retry_seconds)
            # From the start of the last successful attempt, as `holds` counts: the elector
            # gives up leading when the leader's writes stop going out, not a renewal later.
            held = self._held_since if self._held_since is not None else clock.now()
            left = self.timing.renew_deadline_seconds - (clock.now() - held)
            if left <= 0:
                logger.warning(
                    "lease %s/%s last held %.1fs ago, past the renew deadline (%.0fs)%s",
                    self.namespace,
                    self.name,
                    clock.now() - held,
                    self.timing.renew_deadline_seconds,
                    _stood_still(clock.now() - slept_from - self.timing.retry_seconds),
                )
                return
            if not await self._try(deadline=left) and not self.holds():
                return

    async def _try(self, deadline: float | None = None) -> bool:
        """Read, decide, write, within `deadline` seconds (campaigning: the renew deadline);
        True when we hold the lease afterwards.

        Any failure is one failed attempt, never the end of the election: a connection
        refused while the API server restarts, or a timeout, once ended `run` (the one
        campaign of the replica), so a replica that met one never led again.
        """
        if self._released:
            return False
        began = self.monotonic.now()
        budget = self.timing.renew_deadline_seconds if deadline is None else deadline
        try:
            async with timeout(self.monotonic, budget):
                held = await self._attempt()
        except TimeoutError:
            logger.warning(
                "lease %s/%s: no answer within the renew deadline%s",
                self.namespace,
                self.name,
                _stood_still(self.monotonic.now() - began - budget),
            )
            return False
        except ApiError as exc:
            if not exc.conflict:
                logger.warning("lease %s/%s: %s", self.namespace, self.name, describe(exc))
            return False
        except Exception as exc:  # the transport's own errors: connection refused, reset, ...
            logger.warning("lease %s/%s: %s", self.namespace, self.name, describe(exc))
            return False
        if held:
            self._held_since = began
        return held

    async def _attempt(self) -> bool:
        """One read-decide-write of the Lease; raises what the client raises.

        The read is skipped when the campaign's watch has just seen the Lease freed: that
        object, with its resourceVersion, is as good as a read, and one round trip less to a
        loaded API server is that much less of a hand-over. Were it stale already, the write
        is refused as a conflict and the next attempt reads."""
        freed, self._freed_lease = self._freed_lease, None
        current = self._observe(freed) if freed is not None else await self._read()
        if self._released:
            return False  # released while we read: never take it back
        now = self.clock()
        decision = decide(
            current,
            self.identity,
            now=now,
            observed_at=self._seen_at,
            lease_seconds=int(self.timing.lease_seconds),
            longest_lease_seconds=int(self.timing.longest_lease_seconds),
        )
        if decision.step is Step.WAIT or decision.record is None:
            return False
        await self._write(decision.record)
        return True

    async def _read(self) -> LeaseRecord | None:
        try:
            body = await self.kube.get(LEASES, self.name, self.namespace)
        except ApiError as exc:
            if exc.not_found:
                self._version = None
                return None
            raise
        return self._observe(body)

    def _observe(self, body: JSON) -> LeaseRecord:
        """The Lease as read or watched: its record, its resourceVersion for the next write,
        and when its record last changed (expiry is judged from then, on our clock)."""
        record = LeaseRecord.from_spec(body.get("spec"))
        if record != self._seen:
            self._seen, self._seen_at = record, self.clock()
        overlong = (record.holder, record.lease_seconds)
        if record.holder != self.identity and overlong != self._overlong:
            self._overlong = overlong  # said once per holder and duration, not per renewal
            if record.lease_seconds > self.timing.longest_lease_seconds:
                logger.warning(
                    "lease %s/%s: %s holds it for %ds; taken over if not renewed within %ds",
                    self.namespace,
                    self.name,
                    truncate(record.holder, 100),
                    record.lease_seconds,
                    self.timing.longest_lease_seconds,
                )
        self._version = body["metadata"].get("resourceVersion")
        return record

    async def _write(self, record: LeaseRecord) -> None:
        metadata = {"name": self.name, "namespace": self.namespace}
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": record.to_spec(),
        }
        if self._version is None:
            written = await self.kube.create(LEASES, body, self.namespace)
        else:
            metadata["resourceVersion"] = self._version
            written = await self.kube.replace(LEASES, self.name, body, self.namespace)
        self._version = written["metadata"].get("resourceVersion")
        self._seen, self._seen_at = record, self.clock()
