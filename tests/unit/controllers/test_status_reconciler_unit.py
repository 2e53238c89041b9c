"""StatusReconciler over the in-memory API server: one write per change, none without one.

The reconciler reads groups and members from informer indexes and writes through `KubeClient`;
here the indexes are `FakeIndex`es the test fills (and leaves stale on purpose, as a lagging watch
would), and the client talks to `FakeApiServer`, whose request log shows every write.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    MERGE_PATCH,
    PODGROUPS,
    PODS,
    ApiError,
    FencedTransport,
    KubeClient,
)
from podgroup_operator.adapters.record_key import (
    RECORD_KEY_SECRET,
    SecretRecordKey,
    key_from_secret,
)
from podgroup_operator.adapters.webhook_tls import SECRETS
from podgroup_operator.api.backoff import Backoff
from podgroup_operator.api.models import PodGroup, PodGroupStatus
from podgroup_operator.constants import Phase
from podgroup_operator.controllers import status as status_module
from podgroup_operator.controllers.status import InvalidPodGroupError, StatusReconciler
from podgroup_operator.domain.lifecycle import compute_status
from podgroup_operator.domain.restart_records import RecordOwner, record_digest
from podgroup_operator.domain.scheduling_status import Preempted, Verdict
from podgroup_operator.domain.status_hold import CONTESTED_AFTER, CONTESTED_FIRST_SECONDS
from tests.builders import pod, podgroup
from tests.clock import T0, Clock
from tests.fakes import FakeApiServer, FakeIndex
from tests.kube_helpers import condition
from tests.waiting import until

NS = "default"
OPERATOR_NS = "podgroup-operator"
KEY = (NS, "gang")
STATUS_PATH = PODGROUPS.path(NS, "gang", "status")
EVENTS_PATH = "/api/v1/namespaces/default/events"

Body = dict[str, Any]


class Harness:
    """The reconciler with its two indexes and the fake API server behind its client."""

    def __init__(self, workers: int = 8, routine_workers: int | None = None) -> None:
        self.clock = Clock()
        self.fake = FakeApiServer(clock=self.clock)
        self.kube = KubeClient(self.fake)
        self.groups: FakeIndex[tuple[str, str], Body] = FakeIndex()
        self.members: FakeIndex[tuple[str, str], Body] = FakeIndex()
        self.reconciler = StatusReconciler(
            self.kube,
            self.groups,  # type: ignore[arg-type]  # kopf.Index is read as a Mapping
            self.members,  # type: ignore[arg-type]
            record_key=SecretRecordKey(self.kube, OPERATOR_NS),
            workers=workers,
            routine_workers=routine_workers,
            settle=0,  # no wall-clock wait for a burst to settle: tests drive the loop
            count_delay=0,  # every change written at once (the delay has its own test)
            clock=self.clock,
            monotonic=self.clock.monotonic,  # time moves only when the test advances it
        )

    async def reconcile(self, key: tuple[str, str] = KEY) -> None:
        """One reconcile, and the Events it narrates answered."""
        try:
            await self.reconciler.reconcile(key)
        finally:
            await self.reconciler.settled()

    def group(self, name: str = "gang", min_member: int = 2, **spec: Any) -> Body:
        """A PodGroup that exists in the API and has been seen by the index."""
        (stored,) = self.fake.seed(podgroup(name, NS, min_member=min_member, **spec))
        self.groups.put((NS, name), stored)
        return stored

    def pods(self, *bodies: Body, key: tuple[str, str] = KEY) -> list[Body]:
        for body in bodies:
            self.members.put(key, body)
        return list(bodies)

    def index_catches_up(self, key: tuple[str, str] = KEY) -> Body:
        """The watch delivers the API's current body of the group to the index."""
        current = self.fake.get_object(PODGROUPS, key[1], key[0])
        assert current is not None
        self.groups.put(key, current)
        return current

    def status(self, name: str = "gang") -> Body:
        stored = self.fake.get_object(PODGROUPS, name, NS)
        assert stored is not None
        return stored.get("status", {})

    def phase_events(self, name: str = "gang") -> list[Body]:
        return self.fake.events(involved=name, reason=c.Reason.PHASE_CHANGED)


def running(name: str, group: str = "gang") -> Body:
    return pod(name, group=group, phase=c.PodPhase.RUNNING, node="node-a")


def pending(name: str, group: str = "gang") -> Body:
    return pod(name, group=group)


async def settle(condition: Callable[[], bool] = lambda: False, rounds: int = 500) -> None:
    """Let background workers run: yield to the loop (never sleep) until `condition` holds."""
    for _ in range(rounds):
        if condition():
            return
        await asyncio.sleep(0)


# --- one write per change ------------------------------------------------------------------------


async def test_a_group_with_pods_gets_one_status_patch_with_phase_and_counts() -> None:
    h = Harness()
    group = h.group(min_member=2)
    h.pods(running("a"), running("b"), pending("c"))

    await h.reconcile(KEY)

    assert h.fake.requests == [("PATCH", STATUS_PATH), ("POST", EVENTS_PATH)]
    (patch,) = [r for r in h.fake.request_log if r.method == "PATCH"]
    assert patch.content_type == MERGE_PATCH
    # Only status, written over the version that was read (a precondition, see below).
    assert patch.body["metadata"] == {"resourceVersion": group["metadata"]["resourceVersion"]}
    assert set(patch.body) == {"status", "metadata"}
    status = h.status()
    assert status["phase"] == c.Phase.RUNNING
    counts = [status.get(k, 0) for k in ("running", "scheduled", "succeeded", "failed")]
    assert counts == [2, 2, 0, 0]  # zeros equal the defaults, so they are never written
    assert status["observedGeneration"] == 1
    assert status["runningTime"] == "2026-03-01T12:00:00Z"
    assert h.reconciler.writes == 1
    stored = h.fake.get_object(PODGROUPS, "gang", NS)
    assert stored is not None and stored["spec"] == group["spec"]


async def test_reconciling_again_without_a_change_sends_nothing() -> None:
    h = Harness()
    h.group(min_member=2)
    h.pods(running("a"), running("b"))
    await h.reconcile(KEY)
    h.fake.clear_requests()

    h.clock.advance(3600)
    await h.reconcile(KEY)  # the index still holds the body without status
    h.index_catches_up()
    await h.reconcile(KEY)  # the index holds our write

    assert h.fake.requests == []
    assert h.reconciler.writes == 1


async def test_only_the_changed_fields_are_patched() -> None:
    h = Harness()
    h.group(min_member=2)
    h.pods(running("a"), running("b"))
    await h.reconcile(KEY)
    h.index_catches_up()
    h.fake.clear_requests()

    h.pods(running("c"))
    await h.reconcile(KEY)

    (patch,) = h.fake.request_log
    # The counters, and the Unschedulable message that quotes them; nothing else.
    assert set(patch.body["status"]) == {"running", "scheduled", "conditions"}
    assert (patch.body["status"]["running"], patch.body["status"]["scheduled"]) == (3, 3)


async def test_a_phase_transition_emits_exactly_one_phase_changed_event() -> None:
    h = Harness()
    group = h.group(min_member=2)
    h.pods(pending("a"), pending("b"))
    await h.reconcile(KEY)
    assert [e["message"].split(":")[0] for e in h.phase_events()] == ["new -> Pending"]

    h.clock.advance(10)
    h.pods(running("a"), running("b"))
    await h.reconcile(KEY)
    await h.reconcile(KEY)

    events = h.phase_events()
    assert [e["message"].split(":")[0] for e in events] == ["new -> Pending", "Pending -> Running"]
    last = events[-1]
    assert last["type"] == c.EventType.NORMAL
    assert last["involvedObject"]["uid"] == group["metadata"]["uid"]
    assert last["involvedObject"]["kind"] == c.KIND
    assert last["firstTimestamp"] == "2026-03-01T12:00:10Z"
    assert h.status()["phase"] == c.Phase.RUNNING


async def test_a_count_change_without_a_phase_change_emits_no_event() -> None:
    h = Harness()
    h.group(min_member=2)
    h.pods(running("a"), running("b"))
    await h.reconcile(KEY)
    h.pods(running("c"))
    await h.reconcile(KEY)
    assert h.reconciler.writes == 2
    assert len(h.phase_events()) == 1


async def test_losing_the_gang_is_a_warning_event() -> None:
    h = Harness()
    h.group(min_member=2)
    a, b = h.pods(running("a"), running("b"))
    await h.reconcile(KEY)
    h.members.put(KEY, {**b, "status": {"phase": c.PodPhase.FAILED}})
    await h.reconcile(KEY)
    events = h.phase_events()
    assert [(e["type"], e["message"].split(":")[0]) for e in events] == [
        (c.EventType.NORMAL, "new -> Running"),
        (c.EventType.WARNING, "Running -> Unknown"),
    ]
    assert a  # the other member keeps running


# --- groups that are missing, deleted or invalid -------------------------------------------------


async def test_pods_that_arrive_before_their_group_are_not_warned_when_it_follows() -> None:
    """A PodGroup applied with its pods often reaches the API server after them: no Warning
    for a group that shows up within the delay."""
    h = Harness()
    h.reconciler.count_delay = 3600.0
    h.pods(pending("a"), pending("b"))
    await h.reconcile()
    h.group(min_member=2)
    await h.reconcile()
    assert h.fake.events(reason=c.Reason.MISSING_POD_GROUP) == []
    assert h.reconciler.writes == 0  # its first Pending waits for the scheduler, as ever


async def test_a_group_still_missing_after_the_delay_is_warned_about() -> None:
    h = Harness()
    h.reconciler.count_delay = 2.0
    h.pods(pending("a", group="ghost"), key=(NS, "ghost"))
    await h.reconcile((NS, "ghost"))
    h.reconciler.start()
    try:
        h.clock.advance(1.9)
        await settle()
        assert h.fake.events(reason=c.Reason.MISSING_POD_GROUP) == []
        h.clock.advance(0.1)  # the delay is over: its timer reconciles the group again
        await until(
            lambda: h.fake.events(reason=c.Reason.MISSING_POD_GROUP),
            "the MissingPodGroup warning",
            timeout=1.0,
        )
    finally:
        await h.reconciler.stop()
    (warning,) = h.fake.events(reason=c.Reason.MISSING_POD_GROUP)
    assert warning["involvedObject"]["name"] == "a"


async def test_a_pod_naming_a_missing_group_gets_one_warning_even_when_reconciled_twice() -> None:
    h = Harness()
    a, b = h.pods(pending("a", group="ghost"), pending("b", group="ghost"), key=(NS, "ghost"))

    await h.reconcile((NS, "ghost"))
    await h.reconcile((NS, "ghost"))

    warnings = h.fake.events(reason=c.Reason.MISSING_POD_GROUP)
    assert sorted(e["involvedObject"]["name"] for e in warnings) == ["a", "b"]
    assert {e["type"] for e in warnings} == {c.EventType.WARNING}
    assert {e["involvedObject"]["uid"] for e in warnings} == {
        a["metadata"]["uid"],
        b["metadata"]["uid"],
    }
    assert "ghost" in warnings[0]["message"]
    assert h.fake.count("PATCH") == 0


async def test_a_missing_group_warning_on_a_vanished_namespace_is_swallowed() -> None:
    h = Harness()
    h.pods(pending("a", group="ghost"), key=(NS, "ghost"))
    h.fake.inject_error("POST", EVENTS_PATH, 404, "NotFound", 'namespaces "default" not found')
    await h.reconcile((NS, "ghost"))
    assert h.fake.events() == []


async def test_a_404_on_the_patch_is_swallowed_when_the_group_was_deleted_meanwhile() -> None:
    h = Harness()
    h.group(min_member=1)
    h.pods(running("a"))
    await h.kube.delete(PODGROUPS, "gang", NS)  # the index has not heard of it yet
    h.fake.clear_requests()

    await h.reconcile(KEY)

    assert h.fake.requests == [("PATCH", STATUS_PATH)]
    assert h.reconciler.writes == 0
    assert h.fake.events() == []


async def test_other_api_errors_reach_the_worker_which_retries() -> None:
    h = Harness()
    h.group(min_member=1)
    h.pods(running("a"))
    h.fake.inject_error("PATCH", STATUS_PATH, 500)
    with pytest.raises(ApiError) as caught:
        await h.reconcile(KEY)
    assert caught.value.status == 500
    await h.reconcile(KEY)
    assert h.status()["phase"] == c.Phase.RUNNING
    assert len(h.phase_events()) == 1


async def test_an_invalid_group_says_so_in_its_status_once_until_it_is_fixed() -> None:
    """Its status says so, so that `kubectl get podgroups` shows a phase and reason, not
    only a Warning Event the API server drops after an hour."""
    h = Harness(workers=1)
    # Within the CRD's schema (a quantity string has no bound there), refused by our rules.
    (stored,) = h.fake.seed(podgroup("gang", NS, min_member=1, minResources={"memory": "1e18"}))
    h.groups.put(KEY, stored)
    h.pods(running("a"))

    await h.reconcile(KEY)

    status = h.status()
    assert status["phase"] == c.Phase.PENDING
    (condition,) = status["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        c.ConditionType.UNSCHEDULABLE,
        c.ConditionStatus.TRUE,
        c.Reason.INVALID_SPEC,
    )
    assert condition["message"].startswith(
        "the spec is not valid: spec.minResources.memory: '1e18' is too large"
    )
    (warning,) = h.fake.events(involved="gang", reason=c.Reason.INVALID_SPEC)
    assert warning["type"] == c.EventType.WARNING
    assert warning["message"] == condition["message"]
    assert h.reconciler.failures.count(KEY) == 0  # not a failure to retry: the fix is an event

    h.index_catches_up()
    h.fake.clear_requests()
    await h.reconcile(KEY)  # another pod event: nothing new to write or say
    assert h.fake.writes == []

    fixed = h.index_catches_up()
    fixed["spec"]["minResources"] = {"memory": "1Gi"}
    h.groups.put(KEY, fixed)
    await h.reconcile(KEY)

    status = h.status()
    assert status["phase"] == c.Phase.RUNNING
    (condition,) = [
        cond for cond in status["conditions"] if cond["type"] == c.ConditionType.UNSCHEDULABLE
    ]
    assert (condition["status"], condition["reason"]) == (
        c.ConditionStatus.FALSE,
        c.Reason.GANG_SCHEDULABLE,
    )
    assert len(h.fake.events(involved="gang", reason=c.Reason.INVALID_SPEC)) == 1


async def test_an_invalid_spec_is_reported_on_one_line_naming_each_field() -> None:
    h = Harness(workers=1)
    spec = {"minResources": {"memory": "1e18", "cpu": "2"}, "totalResources": {"cpu": "1"}}
    (stored,) = h.fake.seed(podgroup("gang", NS, min_member=1, **spec))
    h.groups.put(KEY, stored)
    await h.reconcile(KEY)
    (condition,) = h.status()["conditions"]
    message = condition["message"]
    assert "\n" not in message
    assert "spec.minResources.memory: '1e18' is too large" in message
    assert "spec.totalResources.cpu: 1 is below spec.minResources.cpu 2" in message


async def test_an_invalid_group_whose_status_the_api_server_refuses_is_reported_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A CRD tightened since the group was stored: the API server checks the whole object on a
    status write and refuses it (422, seen on the dev cluster; the fake checks the CRD in
    crds/ the same way). Only the Event is left, and one WARNING line without a traceback."""
    caplog.set_level(logging.DEBUG, logger=status_module.__name__)
    h = Harness(workers=1)
    (stored,) = h.fake.seed(podgroup("gang", NS, min_member=0))  # seeded: stored unchecked
    h.groups.put(KEY, stored)
    h.pods(running("a"))
    with pytest.raises(InvalidPodGroupError) as raised:
        await h.reconcile(KEY)
    assert str(raised.value).startswith(
        "status not written (the CRD's schema refuses the stored object): "
        "the spec is not valid: spec.minMember: must be >= 1"
    )
    h.reconciler.start()
    try:
        h.reconciler.touch(KEY)
        await settle(lambda: h.fake.events(involved="gang", reason=c.Reason.RECONCILE_FAILED))
        h.reconciler.touch(KEY)  # another pod event: the same cause is not reported again
        await settle(lambda: h.reconciler.failures.count(KEY) == 2)
        await h.reconciler.settled()
    finally:
        await h.reconciler.stop()
    (warning,) = h.fake.events(involved="gang", reason=c.Reason.RECONCILE_FAILED)
    assert "spec.minMember" in warning["message"]
    assert "status" not in h.fake.get_object(PODGROUPS, "gang", NS)
    (logged,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert logged.levelno == logging.WARNING
    assert logged.exc_info is None
    assert "spec.minMember" in logged.getMessage()
    assert "Fix the PodGroup" in logged.getMessage()


# A scheduler-plugins PodGroup migrated as it was: its phases are not this operator's.
MIGRATED_STATUS = {"phase": "Scheduling", "occupiedBy": "default/job", "scheduled": 1}


async def test_a_status_in_scheduler_plugins_phases_is_rewritten_at_once_and_said_once() -> None:
    """Such a group was refused whole ("status left alone") and its gang never scheduled: now
    the unreadable phase reads as absent and is replaced at once, without the wait a first
    status has, with one Warning naming the field."""
    h = Harness()
    h.reconciler.count_delay = 3600.0  # a held write never comes: this one is not held
    h.group(min_member=2, status=dict(MIGRATED_STATUS))
    h.pods(pending("a"), pending("b"))
    await h.reconcile()
    assert h.reconciler.writes == 1
    assert h.status()["phase"] == c.Phase.PENDING
    assert h.status()["occupiedBy"] == "default/job"  # what it could read stays
    assert h.status()["scheduled"] == 0  # and is brought up to date
    (warning,) = h.fake.events(involved="gang", reason=c.Reason.STATUS_REWRITTEN)
    assert warning["type"] == c.EventType.WARNING
    assert "status.phase: must be one of" in warning["message"]
    assert "not 'Scheduling'" in warning["message"]
    h.index_catches_up()
    await h.reconcile()
    assert h.reconciler.writes == 1
    assert len(h.fake.events(involved="gang", reason=c.Reason.STATUS_REWRITTEN)) == 1


async def test_an_unreadable_field_the_new_status_lacks_is_removed() -> None:
    """A reservation too large to read, on a group that reserves nothing: sent as null, since
    a status computed without it would otherwise leave the stored one as it is."""
    h = Harness()
    reserved = {"phase": "Pending", "reservation": {"reserved": {"cpu": "1e30"}}}
    h.group(min_member=2, status=reserved)
    h.pods(pending("a"), pending("b"))
    await h.reconcile()
    assert h.reconciler.writes == 1
    assert "reservation" not in h.status()
    (warning,) = h.fake.events(involved="gang", reason=c.Reason.STATUS_REWRITTEN)
    assert "status.reservation.reserved.cpu: '1e30' is too large" in warning["message"]


# --- the index lagging behind --------------------------------------------------------------------


async def test_the_reconciler_prefers_its_own_last_write_over_a_stale_index_entry() -> None:
    h = Harness()
    h.group(min_member=2)
    h.pods(pending("a"), pending("b"))
    await h.reconcile(KEY)  # new -> Pending
    h.pods(running("a"), running("b"))
    await h.reconcile(KEY)  # Pending -> Running, computed from our own write
    h.fake.clear_requests()

    # The index still holds the group as seeded, without any status: recomputing from it would
    # announce "new -> Running" a second time.
    await h.reconcile(KEY)

    assert h.fake.requests == []
    assert [e["message"].split(":")[0] for e in h.phase_events()] == [
        "new -> Pending",
        "Pending -> Running",
    ]


async def test_a_newer_index_entry_wins_over_our_last_write() -> None:
    h = Harness()
    h.group(min_member=2)
    h.pods(running("a"), running("b"))
    await h.reconcile(KEY)
    await h.kube.patch(PODGROUPS, "gang", {"spec": {"minMember": 3}}, NS)  # a user edits
    h.index_catches_up()

    await h.reconcile(KEY)

    status = h.status()
    assert (status["phase"], status["observedGeneration"]) == (c.Phase.PENDING, 2)
    assert [e["message"].split(":")[0] for e in h.phase_events()] == [
        "new -> Running",
        "Running -> Pending",
    ]


async def test_a_recreated_group_is_computed_from_scratch() -> None:
    h = Harness()
    h.group(min_member=1)
    h.pods(running("a"))
    await h.reconcile(KEY)
    await h.kube.delete(PODGROUPS, "gang", NS)
    h.groups.remove(KEY, next(iter(h.groups[KEY])))
    await h.reconcile(KEY)  # gone: the pod's group is missing now
    recreated = h.group(min_member=1)

    await h.reconcile(KEY)

    events = h.phase_events()
    assert [e["involvedObject"]["uid"] for e in events][-1] == recreated["metadata"]["uid"]
    assert [e["message"].split(":")[0] for e in events] == ["new -> Running", "new -> Running"]


# --- the queue -----------------------------------------------------------------------------------


def count_reconciles(reconciler: StatusReconciler) -> list[tuple[str, str]]:
    """Record the keys the workers reconcile (the real reconcile still runs)."""
    calls: list[tuple[str, str]] = []
    original = reconciler.reconcile

    async def recording(key: tuple[str, str]) -> None:
        calls.append(key)
        await original(key)

    reconciler.reconcile = recording  # type: ignore[method-assign]
    return calls


async def test_the_watch_echo_of_our_own_write_is_not_reconciled_again() -> None:
    """Every status PATCH comes back through the watch; recomputing it was a quarter of the
    reconciles under a backlog. Any other version of the group is reconciled as before."""
    h = Harness()
    h.group(min_member=1)
    h.pods(running("a"))
    await h.reconcile()
    assert h.reconciler.writes == 1
    echo = h.fake.get_object(PODGROUPS, "gang", NS)  # what the watch delivers next
    assert echo is not None
    assert h.reconciler.held == 1  # our write, until the watch brings it
    h.reconciler.group_changed(KEY, echo)
    assert h.reconciler.backlog == 0
    assert h.reconciler.held == 0  # the store has it now: no second copy per group
    version = int(echo["metadata"]["resourceVersion"]) + 1
    changed = {**echo, "metadata": {**echo["metadata"], "resourceVersion": str(version)}}
    h.reconciler.group_changed(KEY, changed)  # a spec edit, or another writer
    assert h.reconciler.backlog == 1


async def test_after_the_restart_step_writes_the_rest_of_the_status_follows_without_an_event() -> (
    None
):
    """The restart step writes first (here: the break's time, then a long backoff) and the
    reconcile ends; the watch echo of that write is skipped, so the reconciler queues the group
    itself for the phase to follow."""
    h = Harness()
    h.group(
        min_member=2, policy={"action": "RestartGang", "maxRestarts": 3, "backoffSeconds": 3600}
    )
    _, b = h.pods(running("a"), running("b"))
    await h.reconcile()
    h.index_catches_up()
    h.members.put(KEY, {**b, "status": {"phase": c.PodPhase.FAILED}})
    await h.reconcile()
    assert "lastFailureTime" in h.status()
    assert h.status()["phase"] == c.Phase.RUNNING  # only the restart's own write so far
    assert h.reconciler.backlog == 1  # the rest is queued with no event to bring it
    await h.reconcile()
    assert h.status()["phase"] == c.Phase.UNKNOWN


async def test_touch_dedupes_keys_that_are_already_queued() -> None:
    h = Harness(workers=1)
    h.group("gang", min_member=1)
    h.group("other", min_member=1)
    h.pods(running("a"))
    calls = count_reconciles(h.reconciler)
    for key in (KEY, KEY, (NS, "other"), KEY):
        h.reconciler.touch(key)
    h.reconciler.start()
    try:
        await settle(lambda: len(calls) == 2 and h.reconciler.writes == 2)
        await settle()
    finally:
        await h.reconciler.stop()
    assert calls == [KEY, (NS, "other")]
    assert h.fake.count("PATCH") == 2


async def test_a_touch_during_a_reconcile_queues_the_group_again() -> None:
    h = Harness(workers=1)
    h.group(min_member=2)
    h.pods(running("a"))
    calls = count_reconciles(h.reconciler)
    h.reconciler.touch(KEY)
    h.reconciler.start()
    try:
        await settle(lambda: h.fake.count("PATCH") == 1)  # the worker is inside reconcile
        h.pods(running("b"))
        h.reconciler.touch(KEY)
        await settle(lambda: h.reconciler.writes == 2)
        await settle()
    finally:
        await h.reconciler.stop()
    assert calls == [KEY, KEY]
    assert h.status()["phase"] == c.Phase.RUNNING


async def test_a_group_being_reconciled_is_not_taken_by_a_second_worker() -> None:
    """A touch while a worker awaits its PATCH queues the group again for after that reconcile,
    instead of letting a second worker compute from the same, soon stale, version."""
    h = Harness(workers=2)
    h.group(min_member=2)
    h.pods(running("a"), running("b"))
    in_flight = h.fake.hold("PATCH", STATUS_PATH)
    h.reconciler.touch(KEY)
    h.reconciler.start()
    try:
        await settle(lambda: h.fake.count("PATCH") == 1)  # worker 1 awaits its PATCH
        h.reconciler.touch(KEY)  # a pod event arrives meanwhile
        await settle()
        assert h.fake.count("PATCH") == 1  # nobody else works on the group meanwhile
        in_flight.set()
        await settle()
    finally:
        await h.reconciler.stop()
    assert len(h.phase_events()) == 1
    assert h.reconciler.writes == 1  # the re-run found nothing new to write
    assert h.fake.count("GET") == 0  # and no conflict to recover from
    assert h.status()["phase"] == c.Phase.RUNNING


async def test_a_concurrent_status_writer_is_not_overwritten() -> None:
    """Another writer's condition (the quota service's) survives our merge patch of the list."""
    h = Harness()
    h.group(min_member=2)
    h.pods(pending("a"), pending("b"))
    await h.reconcile(KEY)
    conditions = h.status()["conditions"]
    quota = {"type": c.ConditionType.QUOTA_RESERVED, "status": "True", "reason": "QuotaReserved"}
    await h.kube.patch_status(PODGROUPS, "gang", NS, {"conditions": [*conditions, quota]})
    h.pods(running("a"), running("b"))  # the index has seen neither write

    await h.reconcile(KEY)  # conflicts: re-reads, queues the group again
    assert h.reconciler.writes == 1
    assert h.fake.count("GET") == 1
    await h.reconcile(KEY)

    status = h.status()
    assert status["phase"] == c.Phase.RUNNING
    types = {cond["type"] for cond in status["conditions"]}
    assert {c.ConditionType.UNSCHEDULABLE, c.ConditionType.QUOTA_RESERVED} <= types
    assert len(h.phase_events()) == 2


# --- lightweight gangs -------------------------------------------------------------------------


def lightweight(name: str, gang: str = "lw", min_available: str = "2") -> Body:
    return pod(
        name,
        labels={c.LABEL_LIGHTWEIGHT_NAME: gang, c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE: min_available},
    )


async def test_a_lightweight_gang_gets_its_podgroup_created_once() -> None:
    h = Harness()
    h.pods(lightweight("a"), lightweight("b"), key=(NS, "lw"))
    await h.reconcile((NS, "lw"))
    await h.reconcile((NS, "lw"))  # the index has not seen it yet: 409, ignored

    created = h.fake.get_object(PODGROUPS, "lw", NS)
    assert created is not None
    assert created["spec"] == {"minMember": 2}
    assert created["metadata"]["labels"] == {c.LABEL_MANAGED_BY: c.OPERATOR_NAME}
    assert h.fake.count("POST", PODGROUPS.path(NS)) == 2
    assert h.fake.events(reason=c.Reason.MISSING_POD_GROUP) == []


async def test_a_lightweight_podgroup_goes_when_its_pods_are_gone() -> None:
    h = Harness()
    body = podgroup("lw", NS, min_member=2)
    body["metadata"]["labels"] = {c.LABEL_MANAGED_BY: c.OPERATOR_NAME}
    (group,) = h.fake.seed(body)
    h.groups.put((NS, "lw"), group)
    await h.reconcile((NS, "lw"))
    assert h.fake.get_object(PODGROUPS, "lw", NS) is None
    (delete,) = [r for r in h.fake.request_log if r.method == "DELETE"]
    assert delete.body["preconditions"] == {"uid": group["metadata"]["uid"]}


async def test_a_user_podgroup_without_pods_stays() -> None:
    h = Harness()
    h.group(min_member=2)
    await h.reconcile(KEY)
    assert h.fake.count("DELETE") == 0
    assert h.status()["phase"] == c.Phase.PENDING


# --- one group whose reconcile raises stops nobody else -------------------------------------------


async def test_a_failing_group_is_reported_once_and_retried_while_others_are_written() -> None:
    h = Harness(workers=1)
    h.reconciler.failures.backoff = Backoff(initial_seconds=1.0, max_seconds=1.0)
    h.group("poison", min_member=1)
    h.group(min_member=1)
    h.pods(running("p", group="poison"), key=(NS, "poison"))
    h.pods(running("a"))
    poison_status = PODGROUPS.path(NS, "poison", "status")
    h.fake.inject_error("PATCH", poison_status, 500, message="etcd is sad")
    h.reconciler.start()
    try:
        h.reconciler.touch((NS, "poison"))
        h.reconciler.touch(KEY)
        await settle(lambda: h.status().get("phase") == c.Phase.RUNNING)
        assert h.status()["phase"] == c.Phase.RUNNING
        assert h.fake.count("PATCH", poison_status) == 1  # failed, and backing off
        h.clock.advance(1.0)  # the backoff is over: the retry is due
        await until(
            lambda: h.status("poison").get("phase") == c.Phase.RUNNING,
            "poison to be Running",
            timeout=1.0,
        )
        (warning,) = h.fake.events(involved="poison", reason=c.Reason.RECONCILE_FAILED)
        assert warning["type"] == c.EventType.WARNING
        assert "etcd is sad" in warning["message"]
        assert h.fake.count("PATCH", poison_status) == 2  # the failed one, then the retry
        assert h.reconciler.failures.count((NS, "poison")) == 0  # recovered
    finally:
        await h.reconciler.stop()


async def test_a_write_refused_by_the_lease_fence_is_no_failure_of_the_group(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A replica that stopped leading (controllers/runtime.py fences its clients) must not
    blame the group: a traceback, a `ReconcileFailed` Event attempt and a retry for each
    group in flight once filled the woken leader's log (103 tracebacks on the dev cluster)."""
    caplog.set_level(logging.INFO)
    h = Harness(workers=1)
    holds = True
    h.reconciler.kube = KubeClient(FencedTransport(h.fake, lambda: holds, "not leading"))
    h.group(min_member=1)
    h.pods(running("a"))
    holds = False
    h.reconciler.start()
    try:
        h.reconciler.touch(KEY)
        await until(lambda: h.reconciler.last_done is not None, "the group to be reconciled once")
    finally:
        await h.reconciler.stop()
    assert not h.fake.writes
    assert h.reconciler.failures.count(KEY) == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


async def test_a_counters_only_change_waits_for_the_count_delay_a_phase_change_does_not() -> None:
    h = Harness()
    h.group(min_member=3)
    a, b, c_ = running("a"), pending("b"), pending("c")
    h.pods(a, b, c_)
    await h.reconcile()  # the first status, with no delay (its own wait has its own tests)
    assert (h.status()["phase"], h.status()["running"]) == (c.Phase.PENDING, 1)
    h.reconciler.count_delay = 3600.0  # longer than any test: a delayed write never comes
    writes = h.reconciler.writes

    h.pods({**b, "status": {"phase": c.PodPhase.RUNNING}, "spec": {**b["spec"], "nodeName": "n"}})
    await h.reconcile()
    assert h.reconciler.writes == writes  # only `running`/`scheduled` changed: it waits
    assert h.status()["running"] == 1

    h.pods({**c_, "status": {"phase": c.PodPhase.RUNNING}, "spec": {**c_["spec"], "nodeName": "n"}})
    await h.reconcile()
    assert h.reconciler.writes == writes + 1  # the phase changed: written at once, counts too
    assert (h.status()["phase"], h.status()["running"]) == (c.Phase.RUNNING, 3)


async def test_the_bind_completing_a_gang_waits_and_its_start_writes_scheduled_along() -> None:
    """Bound members, not started yet: `Scheduled` turning True waits like a count (one PATCH
    instead of two when the members start moments later), and goes out with `Running`."""
    h = Harness()
    h.group(min_member=2)
    a, b = h.pods(pending("a"), pending("b"))
    await h.reconcile()
    assert h.status()["phase"] == c.Phase.PENDING
    h.reconciler.count_delay = 3600.0
    writes = h.reconciler.writes

    bound = [{**p, "spec": {**p["spec"], "nodeName": "node-a"}} for p in (a, b)]
    h.pods(*bound)
    await h.reconcile()
    assert h.reconciler.writes == writes
    assert "Scheduled" not in {x["type"] for x in h.status()["conditions"]}

    h.pods(*({**p, "status": {"phase": c.PodPhase.RUNNING}} for p in bound))
    await h.reconcile()
    assert h.reconciler.writes == writes + 1
    status = h.status()
    assert (status["phase"], status["scheduled"], status["running"]) == (c.Phase.RUNNING, 2, 2)
    (scheduled,) = [x for x in status["conditions"] if x["type"] == c.ConditionType.SCHEDULED]
    assert (scheduled["status"], scheduled["reason"]) == (
        c.ConditionStatus.TRUE,
        c.Reason.GANG_SCHEDULED,
    )


async def test_a_refusal_after_the_pending_status_is_written_at_once() -> None:
    """Only progress waits: the scheduler's refusal is news and is written with no delay."""
    h = Harness()
    h.group(min_member=2)
    h.pods(pending("a"), pending("b"))
    await h.reconcile()  # the first status, Pending, with no delay
    assert h.status()["phase"] == c.Phase.PENDING
    h.reconciler.count_delay = 3600.0
    writes = h.reconciler.writes
    h.reconciler.verdicts[KEY] = Verdict(
        placed=False, reason=c.Reason.NOT_ENOUGH_RESOURCES, message="0 of 2 fit: cpu"
    )
    await h.reconcile()
    assert h.reconciler.writes == writes + 1
    (refused,) = [x for x in h.status()["conditions"] if x["type"] == "Unschedulable"]
    assert (refused["status"], refused["reason"]) == ("True", c.Reason.NOT_ENOUGH_RESOURCES)


async def new_group_of_two(count_delay: float) -> tuple[Harness, list[Body]]:
    """A new group (minMember 2) with two pending members, reconciled once with `count_delay`."""
    h = Harness()
    h.reconciler.count_delay = count_delay
    h.group(min_member=2)
    pods = h.pods(pending("a"), pending("b"))
    await h.reconcile()
    return h, pods


async def test_a_new_groups_first_pending_waits_for_the_schedulers_word() -> None:
    """A new group's first status waits for the scheduler's word, so that under a backlog it
    is not written twice (a bare `Pending`, then `Running` a second later, each a PATCH and an
    Event)."""
    h, _ = await new_group_of_two(count_delay=3600.0)  # a delayed write never comes
    assert h.reconciler.writes == 0
    h.reconciler.verdicts[KEY] = Verdict(placed=True)  # placed: its start is moments away
    await h.reconcile()
    assert h.reconciler.writes == 0
    assert h.status() == {}


async def test_a_new_groups_first_status_goes_out_at_once_when_the_scheduler_refuses_it() -> None:
    h, _ = await new_group_of_two(count_delay=3600.0)
    h.reconciler.verdicts[KEY] = Verdict(
        placed=False, reason=c.Reason.NOT_ENOUGH_RESOURCES, message="0 of 2 fit: cpu"
    )
    await h.reconcile()
    assert h.reconciler.writes == 1
    assert h.status()["phase"] == c.Phase.PENDING
    (refused,) = [x for x in h.status()["conditions"] if x["type"] == "Unschedulable"]
    assert (refused["reason"], refused["message"]) == (
        c.Reason.NOT_ENOUGH_RESOURCES,
        "0 of 2 fit: cpu",
    )


async def test_a_placed_gang_that_starts_is_first_written_running_one_patch_one_event() -> None:
    h, (a, b) = await new_group_of_two(count_delay=3600.0)
    h.reconciler.verdicts[KEY] = Verdict(placed=True)
    bound = bind(h, a, b)
    await h.reconcile()
    h.pods(*({**p, "status": {"phase": c.PodPhase.RUNNING}} for p in bound))
    await h.reconcile()
    await h.reconciler.settled()
    assert h.reconciler.writes == 1
    assert (h.status()["phase"], h.status()["running"]) == (c.Phase.RUNNING, 2)
    (event,) = h.fake.events(reason=c.Reason.PHASE_CHANGED)
    assert event["message"].startswith("new -> Running")


async def test_a_placed_groups_first_status_waits_past_the_count_delay_for_its_start() -> None:
    """Under a backlog the count delay ran out while a placed gang was binding: its `Pending`
    PATCH was in flight when the members started and held the `Running` write behind it."""
    h, (a, b) = await new_group_of_two(count_delay=2.0)  # the unjudged group's clock starts
    h.reconciler.binding_delay = h.reconciler.starting_delay = 3600.0
    h.reconciler.set_verdict(KEY, Verdict(placed=True))
    h.clock.advance(5.0)  # the count delay is over: an unplaced group would be written now
    bound = bind(h, a, b)
    await h.reconcile()
    assert h.reconciler.writes == 0
    h.pods(*({**p, "status": {"phase": c.PodPhase.RUNNING}} for p in bound))
    await h.reconcile()
    assert h.reconciler.writes == 1
    assert h.status()["phase"] == c.Phase.RUNNING


async def test_a_held_first_status_is_decided_without_computing_the_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While a placed gang binds and starts, each burst of member events reconciled it and
    computed a whole status that was then held back: a third of the operator's time under 128
    binds in flight. The phase and counts decide that now; the status is computed once, when
    it is written."""
    computed: list[tuple[str, str]] = []
    real = status_module.compute_status

    def counting(group: Any, *args: Any) -> Any:
        computed.append(group.key)
        return real(group, *args)

    monkeypatch.setattr(status_module, "compute_status", counting)
    h, (a, b) = await new_group_of_two(count_delay=3600.0)
    h.reconciler.set_verdict(KEY, Verdict(placed=True))
    bind(h, a)
    await h.reconcile()
    bound = bind(h, a, b)
    await h.reconcile()
    h.pods({**bound[0], "status": {"phase": c.PodPhase.RUNNING}})
    await h.reconcile()
    assert (h.reconciler.writes, computed) == (0, [])
    h.pods(*({**p, "status": {"phase": c.PodPhase.RUNNING}} for p in bound))
    await h.reconcile()
    assert (h.reconciler.writes, computed) == (1, [KEY])
    assert h.status()["phase"] == c.Phase.RUNNING


async def test_an_urgent_touch_is_reconciled_without_the_settle_a_routine_one_waits() -> None:
    """The member whose start completes a gang touches it urgently: the settle (20 ms by
    default) was a tenth of the status convergence median under a backlog."""
    h = Harness(workers=1)
    h.reconciler.settle = 3600.0
    h.group("gang", min_member=1)
    h.group("other", min_member=1)
    h.pods(running("a"))
    calls = count_reconciles(h.reconciler)
    h.reconciler.touch((NS, "other"))
    h.reconciler.touch(KEY, urgent=True)
    h.reconciler.start()
    try:
        await until(lambda: h.reconciler.writes == 1, "the urgent group written", timeout=2.0)
    finally:
        await h.reconciler.stop()
    assert calls == [KEY]
    assert h.reconciler.backlog == 1  # the routine touch still settles


async def test_routine_writes_wait_for_their_own_workers_and_urgent_ones_do_not() -> None:
    """Two routine groups and one routine worker: the second waits for the first's PATCH, while
    an urgent group's PATCH goes out beside it (a burst of first statuses must not share the API
    server's time with a gang turning Running)."""
    h = Harness(workers=4, routine_workers=1)
    for name in ("r1", "r2", "u"):
        h.group(name, min_member=1)
        h.pods(running(f"{name}-a", group=name))
    answer = h.fake.hold("PATCH", lambda request: True)
    h.reconciler.touch((NS, "r1"))
    h.reconciler.touch((NS, "r2"))
    h.reconciler.start()
    try:
        await settle(lambda: h.fake.count("PATCH") == 1)
        await settle()
        assert h.fake.count("PATCH") == 1  # r2 waits for the routine worker
        h.reconciler.touch((NS, "u"), urgent=True)
        await settle(lambda: h.fake.count("PATCH") == 2)
        assert h.fake.count("PATCH") == 2  # the urgent group did not wait
        answer.set()
        await settle(lambda: h.reconciler.writes == 3)
    finally:
        await h.reconciler.stop()
    assert h.reconciler.writes == 3
    assert all(h.status(name)["phase"] for name in ("r1", "r2", "u"))


async def test_conflicting_membership_keys_are_warned_once_per_pod_in_its_namespaces() -> None:
    """Checked as pod events arrive (no longer at every reconcile); `run -n` leaves other
    namespaces' pods to their own operator."""
    h = Harness()
    h.reconciler.namespaces = frozenset({NS})
    both = pod("both", group="by-label", group_annotation="by-annotation")
    elsewhere = pod("x", "team-b", group="by-label", group_annotation="by-annotation")
    for body in (both, both, elsewhere):
        h.reconciler.member_seen(body)
    await h.reconciler.settled()
    (warning,) = h.fake.events(reason=c.Reason.CONFLICTING_MEMBERSHIP)
    assert warning["involvedObject"]["name"] == "both"
    assert "by-annotation" in warning["message"]


def bind(h: Harness, *pods: Body) -> list[Body]:
    return h.pods(*({**p, "spec": {**p["spec"], "nodeName": "n"}} for p in pods))


async def written_by_the_timer(h: Harness, after: float) -> Body:
    """Run the workers, move the clock `after` seconds on, and wait for the one write the hold's
    timer brings then (none comes a moment before); the status written."""
    h.reconciler.start()
    try:
        await settle()  # what is queued is reconciled (and held) before time moves
        h.clock.advance(after - 0.01)
        await settle()
        assert h.reconciler.writes == 0, "written before its hold ended"
        h.clock.advance(0.01)
        await until(lambda: h.reconciler.writes == 1, "the delayed write")
    finally:
        await h.reconciler.stop()
    return h.status()


async def test_a_placed_group_whose_binds_never_come_gets_pending_after_the_binding_delay() -> None:
    h, _ = await new_group_of_two(count_delay=2.0)
    h.reconciler.binding_delay, h.reconciler.starting_delay = 60.0, 3600.0
    h.reconciler.set_verdict(KEY, Verdict(placed=True))
    status = await written_by_the_timer(h, after=60.0)  # from the placement
    assert status["phase"] == c.Phase.PENDING
    assert status.get("scheduled", 0) == 0


async def test_a_bound_group_that_does_not_start_gets_pending_after_the_starting_delay() -> None:
    """An image pull or a slow kubelet: the status still comes, counted from the binds."""
    h, (a, b) = await new_group_of_two(count_delay=2.0)
    h.reconciler.binding_delay, h.reconciler.starting_delay = 3600.0, 10.0
    h.reconciler.set_verdict(KEY, Verdict(placed=True))
    await h.reconcile()  # placed, binding: the binding clock runs
    h.clock.advance(12.0)  # longer than the starting delay, counted from the placement
    bind(h, a, b)
    await h.reconcile()
    assert h.reconciler.writes == 0  # the starting delay counts from the binds
    status = await written_by_the_timer(h, after=10.0)
    assert status["phase"] == c.Phase.PENDING
    assert status["scheduled"] == 2
    assert condition({"status": status}, c.ConditionType.SCHEDULED)["status"] == "True"


def placed_and_bound(h: Harness, name: str) -> list[Body]:
    """A new group of two whose members the gang scheduler placed and bound."""
    h.group(name, min_member=2)
    h.reconciler.set_verdict((NS, name), Verdict(placed=True))
    return h.pods(
        *(
            {**member, "spec": {**member["spec"], "nodeName": "n"}}
            for member in (pending(f"{name}-a", group=name), pending(f"{name}-b", group=name))
        ),
        key=(NS, name),
    )


def start_members(h: Harness, members: list[Body], name: str) -> None:
    h.pods(*({**p, "status": {"phase": c.PodPhase.RUNNING}} for p in members), key=(NS, name))


async def test_gangs_starting_slowly_lengthen_the_next_bound_gangs_wait_for_its_first_status() -> (
    None
):
    """A flood the kubelets work through: every gang takes long from bound to Running. One that
    took long (counted from its binds, though its own `Pending` went out when its wait ran out)
    makes the next bound gang's first status wait twice as long, at most `starting_longest`."""
    h = Harness()
    h.reconciler.count_delay = 2.0
    h.reconciler.binding_delay, h.reconciler.starting_delay = 3600.0, 4.0
    assert h.reconciler.starting_wait == 4.0  # nothing started yet: the fixed delay
    slow = placed_and_bound(h, "slow")
    await h.reconcile((NS, "slow"))
    h.reconciler.start()
    try:
        h.clock.advance(4.0)
        await until(lambda: h.reconciler.writes == 1, "the slow gang's Pending")
        assert h.status("slow")["phase"] == c.Phase.PENDING
        h.clock.advance(6.0)
        start_members(h, slow, "slow")  # 10 s after its binds
        h.reconciler.touch((NS, "slow"), urgent=True)
        await until(lambda: h.reconciler.writes == 2, "the slow gang's Running")
    finally:
        await h.reconciler.stop()
    assert h.status("slow")["phase"] == c.Phase.RUNNING
    assert h.reconciler.starting_wait == 2 * 10.0  # from the binds, not from its Pending write
    h.reconciler.starting_longest = 15.0
    assert h.reconciler.starting_wait == 15.0


async def test_a_bound_gangs_first_status_waits_longer_when_others_start_slowly_meanwhile() -> None:
    """The wait grows after the gang's own timer was set: the timer that runs out first finds
    it still waiting and sets another, and the `Pending` status comes when the longer wait ends."""
    h = Harness()
    h.reconciler.count_delay = 2.0
    h.reconciler.binding_delay, h.reconciler.starting_delay = 3600.0, 10.0
    slow = placed_and_bound(h, "slow")
    await h.reconcile((NS, "slow"))
    placed_and_bound(h, "next")
    await h.reconcile((NS, "next"))  # held: its timer runs out 10 s from now
    next_bound = h.clock.monotonic.now()
    h.clock.advance(8.0)
    start_members(h, slow, "slow")
    await h.reconcile((NS, "slow"))  # Running: a phase change is written at once
    assert h.status("slow")["phase"] == c.Phase.RUNNING
    assert h.reconciler.starting_wait == 16.0  # twice the 8 s the slow gang took
    h.reconciler.start()
    try:
        h.clock.advance(2.0)  # the first timer: still held, a later one is set
        await settle()
        h.clock.advance(5.99)
        await settle()
        assert h.reconciler.writes == 1  # the slow gang's Running only
        h.clock.advance(0.01)
        await until(lambda: h.reconciler.writes == 2, "the next gang's Pending")
    finally:
        await h.reconciler.stop()
    assert h.status("next")["phase"] == c.Phase.PENDING
    assert h.clock.monotonic.now() - next_bound == pytest.approx(16.0)


async def pending_group_placed(h: Harness) -> list[Body]:
    """A group of two whose `Pending` status was written while it queued, then placed; the
    count delay is 2 s from here on."""
    h.group(min_member=2)
    pods = h.pods(pending("a"), pending("b"))
    await h.reconcile()  # written at once (the harness's count delay is 0)
    assert h.status()["phase"] == c.Phase.PENDING
    h.reconciler.count_delay = 2.0
    h.reconciler.set_verdict(KEY, Verdict(placed=True))
    return pods


async def test_a_placed_pending_gangs_binds_and_starts_wait_for_its_running_write() -> None:
    """Its progress waits as a first status would: no count-only `Pending` write is in flight
    when the last member starts, and the `Running` write carries the counts."""
    h = Harness()
    h.reconciler.binding_delay = h.reconciler.starting_delay = 3600.0
    a, b = await pending_group_placed(h)
    writes = h.reconciler.writes
    bound = bind(h, a, b)
    await h.reconcile()
    h.clock.advance(3.0)  # past the count delay: an unplaced group's counts go out now
    await h.reconcile()  # awaited: whether it writes is decided here, not by a later timer
    assert h.reconciler.writes == writes
    h.pods({**bound[0], "status": {"phase": c.PodPhase.RUNNING}})
    await h.reconcile()
    assert h.reconciler.writes == writes
    h.pods({**bound[1], "status": {"phase": c.PodPhase.RUNNING}})
    await h.reconcile()
    assert h.reconciler.writes == writes + 1
    status = h.status()
    assert (status["phase"], status["scheduled"], status["running"]) == (c.Phase.RUNNING, 2, 2)


async def test_a_placed_pending_gang_not_starting_gets_its_counts_after_the_starting_delay() -> (
    None
):
    h = Harness()
    h.reconciler.binding_delay, h.reconciler.starting_delay = 3600.0, 10.0
    a, b = await pending_group_placed(h)
    bind(h, a, b)
    await h.reconcile()
    assert h.reconciler.writes == 1  # the first Pending only: the starting delay runs
    h.reconciler.writes = 0
    status = await written_by_the_timer(h, after=10.0)
    assert (status["phase"], status["scheduled"]) == (c.Phase.PENDING, 2)


async def test_an_unplaced_pending_groups_counts_still_wait_only_the_count_delay() -> None:
    """Members bound by another scheduler (no verdict of ours): the short delay, as before."""
    h = Harness()
    h.reconciler.binding_delay = h.reconciler.starting_delay = 3600.0
    h.group(min_member=2)
    a, b = h.pods(pending("a"), pending("b"))
    await h.reconcile()
    h.reconciler.count_delay = 2.0
    h.reconciler.writes = 0
    bind(h, a, b)
    await h.reconcile()
    assert h.reconciler.writes == 0
    status = await written_by_the_timer(h, after=2.0)
    assert (status["phase"], status["scheduled"]) == (c.Phase.PENDING, 2)


async def test_a_group_nobody_judges_gets_its_pending_status_after_the_delay() -> None:
    """Pods of another scheduler, or too few pods: no verdict ever comes, the status still does."""
    h, _ = await new_group_of_two(count_delay=2.0)
    assert h.reconciler.writes == 0
    status = await written_by_the_timer(h, after=2.0)
    assert status["phase"] == c.Phase.PENDING


async def test_invalid_gang_labels_get_one_warning_per_pod_and_no_podgroup() -> None:
    """`min-available: "99999999999999999999"` once made the operator try to create an invalid
    PodGroup every second, forever, and said nothing on the pod."""
    h = Harness()
    a, b = h.pods(
        lightweight("a", min_available="99999999999999999999"),
        lightweight("b", min_available="99999999999999999999"),
        key=(NS, "lw"),
    )
    for _ in range(3):
        await h.reconcile((NS, "lw"))

    assert h.fake.get_object(PODGROUPS, "lw", NS) is None
    assert h.fake.count("POST", PODGROUPS.path(NS)) == 0
    warnings = h.fake.events(reason=c.Reason.INVALID_GANG_LABELS)
    assert sorted(e["involvedObject"]["uid"] for e in warnings) == sorted(
        [a["metadata"]["uid"], b["metadata"]["uid"]]
    )
    assert {e["type"] for e in warnings} == {c.EventType.WARNING}
    message = warnings[0]["message"]
    assert f"{c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE}: 99999999999999999999 is too large" in message
    assert "must be at most 1000000" in message
    assert h.fake.events(reason=c.Reason.MISSING_POD_GROUP) == []


async def test_a_valid_pod_of_the_gang_still_makes_the_podgroup_and_the_bad_one_is_warned() -> None:
    h = Harness()
    bad, _ = h.pods(
        lightweight("a", min_available="0"), lightweight("b", min_available="2"), key=(NS, "lw")
    )
    await h.reconcile((NS, "lw"))
    created = h.fake.get_object(PODGROUPS, "lw", NS)
    assert created is not None and created["spec"] == {"minMember": 2}
    (warning,) = h.fake.events(reason=c.Reason.INVALID_GANG_LABELS)
    assert warning["involvedObject"]["uid"] == bad["metadata"]["uid"]
    assert f"{c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE}: must be >= 1" in warning["message"]


async def test_a_podgroup_refused_as_invalid_is_reported_once_and_not_retried() -> None:
    """A rule we do not check (an admission policy of the cluster, say) refuses the PodGroup:
    retrying cannot help, so the pods get one Warning and the reconcile ends quietly."""
    h = Harness()
    h.pods(lightweight("a"), key=(NS, "lw"))
    h.fake.inject_error("POST", PODGROUPS.path(NS), 422, "Invalid", "denied by policy X")
    await h.reconcile((NS, "lw"))
    await h.reconcile((NS, "lw"))  # creates it: the injected error was one-shot
    (warning,) = h.fake.events(reason=c.Reason.INVALID_GANG_LABELS)
    assert "the PodGroup made from them was refused: denied by policy X" in warning["message"]


async def test_a_condition_message_that_only_restates_counts_waits_with_them() -> None:
    """Pods of a gang created one by one: "3 member pods can run, fewer than minMember 10" then
    4, 5, ... changes only a message; it waits with the counts instead of a PATCH per pod."""
    h = Harness()
    h.group(min_member=10)
    h.pods(pending("a"), pending("b"), pending("c"))
    await h.reconcile()
    h.reconciler.count_delay = 3600.0
    condition = next(x for x in h.status()["conditions"] if x["type"] == "Unschedulable")
    assert condition["reason"] == c.Reason.NOT_ENOUGH_TASKS and condition["message"].startswith("3")
    writes = h.reconciler.writes
    h.pods(pending("d"))
    await h.reconcile()
    assert h.reconciler.writes == writes
    h.pods(*(pending(name) for name in "efghij"))  # ten: the reason changes, written at once
    await h.reconcile()
    assert h.reconciler.writes == writes + 1
    condition = next(x for x in h.status()["conditions"] if x["type"] == "Unschedulable")
    assert condition["reason"] == c.Reason.ENOUGH_TASKS


# --- preemption ----------------------------------------------------------------------------------


async def test_a_preempted_group_gets_a_condition_naming_its_preemptor() -> None:
    h = Harness()
    h.group(min_member=2)
    h.pods(running("a"), running("b"))
    h.reconciler.preempted[KEY] = Preempted("default/urgent", "priority 10 over 1", h.clock())
    await h.reconcile(KEY)

    (condition,) = [x for x in h.status()["conditions"] if x["type"] == c.ConditionType.PREEMPTED]
    assert condition["status"] == c.ConditionStatus.TRUE
    assert condition["reason"] == c.Reason.PREEMPTED
    assert "preempted by default/urgent" in condition["message"]


async def test_a_status_another_writer_keeps_changing_is_written_less_and_less_often() -> None:
    """A scheduler-plugins controller left running writes its phase back after each of ours:
    the two wrote 944 times each in 30 s on the dev cluster, two Events a round."""
    h = Harness()
    h.group(min_member=2)
    h.pods(running("a"), pending("b"))
    other = KubeClient(h.fake, field_manager="scheduler-plugins-controller")

    async def round_() -> None:
        """Our write (if any), then the other writer's, both seen by the index."""
        await h.reconcile()
        h.index_catches_up()
        await other.patch_status(PODGROUPS, "gang", NS, {"phase": "Scheduling"})
        h.index_catches_up()

    for _ in range(CONTESTED_AFTER + 1):
        await round_()
    writes = h.reconciler.writes
    (warning,) = h.fake.events(involved="gang", reason=c.Reason.STATUS_CONTESTED)
    assert warning["type"] == c.EventType.WARNING
    assert warning["message"].startswith("status.phase changed by another writer after each")
    # Each write now waits twice as long as the one before: 2 s, then 4 s...
    await round_()
    assert h.reconciler.writes == writes
    h.clock.advance(CONTESTED_FIRST_SECONDS)
    await round_()
    assert h.reconciler.writes == writes + 1
    h.clock.advance(CONTESTED_FIRST_SECONDS)
    await round_()
    assert h.reconciler.writes == writes + 1
    h.clock.advance(CONTESTED_FIRST_SECONDS)
    await h.reconcile()  # the other writer stopped: ours is written and stays
    h.index_catches_up()
    assert h.status()["phase"] == c.Phase.PENDING
    h.pods(running("b"))
    await h.reconcile()
    assert h.status()["phase"] == c.Phase.RUNNING  # no longer contested: written at once
    assert len(h.fake.events(involved="gang", reason=c.Reason.STATUS_CONTESTED)) == 1


async def test_a_field_another_writer_adds_that_we_never_write_is_no_contest() -> None:
    h = Harness()
    h.group(min_member=2)
    h.pods(running("a"), pending("b"))
    other = KubeClient(h.fake, field_manager="a-dashboard")
    for member in ("b", "c", "d", "e"):
        await h.reconcile()
        h.index_catches_up()
        await other.patch_status(PODGROUPS, "gang", NS, {"occupiedBy": f"{NS}/{member}"})
        h.index_catches_up()
        h.pods(running(member))
    await h.reconcile()
    assert h.fake.events(involved="gang", reason=c.Reason.STATUS_CONTESTED) == []
    assert h.status()["running"] == 5


# --- which member changes are urgent -------------------------------------------------------------
def started(body: Body) -> Body:
    """`body` Running on node-a: the same pod (uid) a moment later."""
    after = copy.deepcopy(body)
    after["spec"]["nodeName"] = "node-a"
    after["status"]["phase"] = c.PodPhase.RUNNING
    return after


def test_a_start_that_leaves_its_gang_short_is_not_urgent_and_the_completing_one_is() -> None:
    h = Harness()
    h.group(min_member=2)
    a, b = h.pods(pending("a"), pending("b"))
    a_runs = started(a)
    h.pods(a_runs)  # the store has the new version before the handlers see it
    assert h.reconciler.starts_short(KEY, a_runs, a)
    b_runs = started(b)
    h.pods(b_runs)
    assert not h.reconciler.starts_short(KEY, b_runs, b)  # minMember 2 now run


async def test_a_start_is_judged_by_the_groups_newest_phase_not_the_lagging_index() -> None:
    """The group ran, then lost a member: we wrote `Running`, then `Unknown`, and the index
    still holds the group as first seen (no status). A start that leaves it short can flip an
    `Unknown` group's phase, so it stays urgent, as it would once the watch caught up."""
    h = Harness()
    h.group(min_member=2)
    a, b = h.pods(running("a"), running("b"))
    await h.reconcile()
    assert h.status()["phase"] == c.Phase.RUNNING
    b_failed = copy.deepcopy(b)
    b_failed["status"]["phase"] = c.PodPhase.FAILED
    h.pods(b_failed)
    await h.reconcile()
    assert h.status()["phase"] == c.Phase.UNKNOWN
    assert next(iter(h.groups.get(KEY, []))).get("status") is None  # the index lags
    stopped = copy.deepcopy(a)
    stopped["status"]["phase"] = c.PodPhase.PENDING
    h.pods(stopped, b_failed)
    a_again = started(stopped)
    h.pods(a_again)
    assert not h.reconciler.starts_short(KEY, a_again, stopped)
    h.index_catches_up()
    assert not h.reconciler.starts_short(KEY, a_again, stopped)


def test_only_a_plain_start_of_a_known_gang_is_spared_urgency() -> None:
    h = Harness()
    h.group(min_member=3)
    (a,) = h.pods(pending("a"))
    a_runs = started(a)
    h.pods(a_runs)
    assert h.reconciler.starts_short(KEY, a_runs, a)
    assert not h.reconciler.starts_short(KEY, a_runs, None)  # first seen Running
    assert not h.reconciler.starts_short(KEY, a_runs, a_runs)  # no phase change
    failed = copy.deepcopy(a_runs)
    failed["status"]["phase"] = c.PodPhase.FAILED
    assert not h.reconciler.starts_short(KEY, failed, a_runs)
    leaving = copy.deepcopy(a_runs)
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    assert not h.reconciler.starts_short(KEY, leaving, a)
    assert not h.reconciler.starts_short((NS, "nobody"), a_runs, a)  # no PodGroup (yet)
    odd = Harness()
    odd.groups.put(KEY, podgroup("gang", NS, min_member="3"))  # type: ignore[arg-type]
    odd.pods(a_runs)
    assert not odd.reconciler.starts_short(KEY, a_runs, a)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(list(c.PodPhase)), min_size=1, max_size=6),
    st.integers(1, 6),
    st.sampled_from([None, Phase.PENDING, Phase.RUNNING, Phase.UNKNOWN]),
    st.integers(0, 5),
)
def test_a_start_spared_urgency_never_flips_the_groups_phase(
    phases: list[c.PodPhase], min_member: int, before: Phase | None, which: int
) -> None:
    """Whatever the members, the group's last phase and minMember: when `starts_short` says
    a member's start leaves the gang short, the phase computed after it is the phase computed
    before it (domain/lifecycle.py's table), so a routine touch loses nothing but time."""
    members = [
        pod(f"m{i}", group="gang", phase=phase, node=None if phase == c.PodPhase.PENDING else "n")
        for i, phase in enumerate(phases)
    ]
    pending_members = [m for m in members if m["status"]["phase"] == c.PodPhase.PENDING]
    assume(pending_members)
    old = pending_members[which % len(pending_members)]
    new = started(old)
    after = [new if m is old else m for m in members]
    h = Harness()
    h.group(min_member=min_member, status={"phase": before.value} if before else None)
    h.pods(*after)
    group = PodGroup.model_validate(podgroup("gang", NS, min_member=min_member))
    previous = PodGroupStatus(phase=before)
    if h.reconciler.starts_short(KEY, new, old):
        was = compute_status(group, members, previous, T0).status.phase
        now = compute_status(group, after, previous, T0).status.phase
        assert was == now


# --- bare members kept for a restart -------------------------------------------------------------

RESTART_GANG = {"action": "RestartGang", "maxRestarts": 3, "backoffSeconds": 0}


async def test_a_bare_member_deleted_outright_is_recreated_by_the_restart() -> None:
    """The body is kept from the first reconcile that sees the member, so a restart after it
    is gone whole (a taint manager's eviction, `kubectl delete`) brings it back."""
    h = Harness()
    h.group(min_member=3, policy=RESTART_GANG)
    a, b, gone = h.pods(running("a"), running("b"), running("c"))
    h.fake.seed(a, b)
    await h.reconcile()
    h.index_catches_up()
    assert h.status()["phase"] == c.Phase.RUNNING
    # Being deleted (the gang still computes Running), then gone.
    deleting = copy.deepcopy(gone)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    h.members.put(KEY, deleting)
    await h.reconcile()
    h.index_catches_up()
    h.members.remove(KEY, deleting)

    for _ in range(3):  # the break's time (if the backoff waits), then the restart itself
        await h.reconcile()
        h.index_catches_up()
        if h.status().get("restarts"):
            break

    assert h.status()["restarts"] == 1
    kept = h.status().get("restartPods") or []
    assert [body["metadata"]["name"] for body in kept] == ["a", "b", "c"]
    created = [r for r in h.fake.request_log if r.method == "POST" and r.path.endswith("/pods")]
    assert [r.body["metadata"]["name"] for r in created] == ["c"]  # its name is free


async def test_a_group_without_restart_gang_keeps_no_bodies() -> None:
    h = Harness()
    h.group(min_member=2)
    h.pods(running("a"), running("b"))
    await h.reconcile()
    assert KEY not in h.reconciler.restarts.bare


# --- restart records: signed, and refused when not the operator's own ---------------------------


def _privileged(namespace: str) -> Body:
    body = pod("root", namespace)
    body["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    return body


async def test_a_forged_restart_record_is_refused_cleared_and_nothing_is_created() -> None:
    """Bodies written into the status by someone else (another namespace, no signature):
    no pod anywhere, no delete, one Warning Event naming why, the record cleared."""
    h = Harness()
    group = h.group(min_member=2, policy=RESTART_GANG)
    a, b = h.pods(running("a"), running("b"))
    h.fake.seed(a, b)
    forged = {
        "restartingUIDs": [a["metadata"]["uid"]],
        "restartPods": [_privileged("kube-system"), _privileged(NS)],
    }
    group["status"] = forged
    (stored,) = h.fake.seed(group)
    h.groups.put(KEY, stored)

    await h.reconcile()

    assert [
        r for r in h.fake.request_log if r.method in ("POST", "DELETE") and "/pods" in r.path
    ] == []
    assert h.fake.get_object(PODS, "root", "kube-system") is None
    assert h.fake.get_object(PODS, "root", NS) is None
    (event,) = h.fake.events(involved="gang", reason=c.Reason.RESTART_RECORD_REFUSED)
    assert event["type"] == c.EventType.WARNING
    assert "namespace 'kube-system'" in event["message"]
    assert "restartPodsDigest is missing" in event["message"]
    status = h.status()
    assert not status.get("restartPods") and not status.get("restartingUIDs")

    h.index_catches_up()
    await h.reconcile()  # the group goes on: its status is computed, nothing refused again
    assert h.status()["phase"] == c.Phase.RUNNING
    assert len(h.fake.events(involved="gang", reason=c.Reason.RESTART_RECORD_REFUSED)) == 1


async def test_the_record_key_is_made_once_in_its_secret_and_signs_every_restart() -> None:
    h = Harness()
    h.group(min_member=2, policy=RESTART_GANG)
    a, b = h.pods(running("a"), pod("b", group="gang", phase=c.PodPhase.FAILED, node="node-a"))
    h.fake.seed(a, b)
    for _ in range(3):
        await h.reconcile()
        h.index_catches_up()
        if h.status().get("restarts"):
            break
    status = h.status()
    assert status["restarts"] == 1
    secret = h.fake.get_object(SECRETS, RECORD_KEY_SECRET, OPERATOR_NS)
    assert secret is not None
    key = key_from_secret(secret, OPERATOR_NS, RECORD_KEY_SECRET)
    group = PodGroup.model_validate(h.fake.get_object(PODGROUPS, "gang", NS))
    owner = RecordOwner(NS, "gang", group.metadata.uid or "")
    expected = record_digest(key, owner, status["restartingUIDs"], status["restartPods"])
    assert status["restartPodsDigest"] == expected
    secret_writes = [r for r in h.fake.request_log if "/secrets" in r.path and r.method != "GET"]
    assert len(secret_writes) == 1


async def test_without_the_record_key_the_status_goes_on_and_the_restart_waits_for_it() -> None:
    """The key's Secret cannot be read (the operator's Role lacks it): the group's status is
    still written, and its restart is taken up once the Secret can be read."""
    h = Harness()
    h.group(min_member=2, policy=RESTART_GANG)
    a, b = h.pods(running("a"), pod("b", group="gang", phase=c.PodPhase.FAILED, node="node-a"))
    h.fake.seed(a, b)
    secret_path = f"/namespaces/{OPERATOR_NS}/secrets/{RECORD_KEY_SECRET}"
    h.fake.inject_error("GET", secret_path, 403, "Forbidden", "secrets is forbidden")

    await h.reconcile()

    assert h.status()["failed"] == 1  # the status is written without the key
    assert not h.status().get("restarts")
    assert h.fake.get_object(SECRETS, RECORD_KEY_SECRET, OPERATOR_NS) is None
    for _ in range(3):  # readable now: the restart is recorded and signed
        h.index_catches_up()
        await h.reconcile()
        if h.status().get("restarts"):
            break
    status = h.status()
    assert status["restarts"] == 1 and status["restartPodsDigest"]
