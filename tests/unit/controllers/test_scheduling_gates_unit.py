"""Scheduling gates on the scheduler harness: a gated pod is never bound, and its gang waits.

The dev cluster's API server (v1.20) drops `spec.schedulingGates` (a field it does not know), so
gates are tested here, on the in-memory API server behind the scheduler harness, with the pod
events delivered by hand as the watch would: a gated member is never bound, the gang says which
gate holds it (`SchedulingGated`, kube-scheduler's reason), and it is placed whole on the cycle
after its last gate is lifted.
"""

from __future__ import annotations

import copy
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.scheduling.gates import gated_message, scheduling_gates
from tests.builders import pod
from tests.unit.controllers.test_gang_scheduler_unit import NS, Harness
from tests.waiting import until

Body = dict[str, Any]
KUEUE = c.KUEUE_ADMISSION_GATE
QUOTA = "example.com/quota"


def gates(*names: str) -> list[dict[str, str]]:
    return [{"name": name} for name in names]


def lift(h: Harness, body: Body, *remaining: str, group: str | None = "gang") -> Body:
    """The gates of `body` become `remaining`: stored, indexed, and delivered as MODIFIED."""
    changed = copy.deepcopy(body)
    changed["spec"]["schedulingGates"] = gates(*remaining)
    if not remaining:
        del changed["spec"]["schedulingGates"]
    (stored,) = h.fake.seed(changed)
    if group is not None:
        h.members.put((NS, group), stored)
    h.scheduler.on_pod(c.WatchEventType.MODIFIED, stored)
    return stored


def gated_gang(h: Harness, *gated: str) -> list[Body]:
    """Node n1 (8 cpu), PodGroup `gang` of minMember 3, and its three pods: gang-0 and gang-1
    ungated, gang-2 with the gates `gated`."""
    h.add_node("n1", cpu=8)
    h.add_group("gang", min_member=3, scheduleTimeoutSeconds=30)
    free = h.add_pods("gang", 2, cpu=1)
    held = h.add_pod("gang-2", group="gang", cpu=1, schedulingGates=gates(*gated))
    return [*free, held]


def test_the_gates_of_a_pod_are_read_in_order() -> None:
    assert scheduling_gates(pod("p", schedulingGates=gates(KUEUE, QUOTA))) == (KUEUE, QUOTA)
    assert scheduling_gates(pod("p")) == ()
    assert scheduling_gates(pod("p", schedulingGates=[])) == ()


def test_the_message_names_each_gated_pod_and_its_gates_and_counts_the_rest() -> None:
    pods = [pod(f"p{i}", schedulingGates=gates(KUEUE)) for i in range(7)] + [pod("free")]
    message = gated_message(pods)
    assert message is not None
    assert message.startswith(f"waiting for scheduling gates (pod p0: {KUEUE}; pod p1: {KUEUE}")
    assert "pod p5" not in message and "and 2 more gated pods" in message
    assert "free" not in message
    assert gated_message([pod("free")]) is None


async def test_a_gang_with_a_gated_member_binds_nothing_and_names_the_gate() -> None:
    h = Harness()
    gated_gang(h, KUEUE)

    await h.scheduler.cycle()

    assert h.binds() == 0
    (verdict,) = h.verdicts_for("gang")
    assert (verdict.placed, verdict.reason) == (False, c.Reason.SCHEDULING_GATED)
    assert f"pod gang-2: {KUEUE}" in verdict.message
    assert "gang-0" not in verdict.message  # ungated members are not named
    # Nothing waits on a timer: the gang is woken by the event that lifts its last gate.
    assert h.scheduler.queue.waiting == {}
    assert h.scheduler._next_due() is None


async def test_the_gang_is_placed_whole_on_the_cycle_after_its_last_gate_is_lifted() -> None:
    h = Harness()
    held = gated_gang(h, KUEUE, QUOTA)[-1]
    await h.scheduler.cycle()

    held = lift(h, held, QUOTA)  # one of two gates lifted: still gated
    await h.scheduler.cycle()
    assert h.binds() == 0
    assert h.verdicts_for("gang")[-1].reason == c.Reason.SCHEDULING_GATED
    assert KUEUE not in h.verdicts_for("gang")[-1].message
    assert QUOTA in h.verdicts_for("gang")[-1].message

    lift(h, held)
    assert h.scheduler._wake.is_set()  # the update wakes the loop
    await h.scheduler.cycle()

    assert sorted(h.bound_pods()) == ["gang-0", "gang-1", "gang-2"]
    assert h.verdicts_for("gang")[-1].placed


async def test_a_gated_gang_does_not_time_out_and_is_due_at_once_when_ungated() -> None:
    """Kueue may hold a gang for hours: the wait (and its timeout and backoff) begins when the
    last gate goes, not when the pods were created."""
    h = Harness()
    held = gated_gang(h, KUEUE)[-1]
    for _ in range(5):
        await h.scheduler.cycle()
        h.clock.advance(61)  # past the gang's 30 s timeout, many backoffs long
    assert {v.reason for v in h.verdicts_for("gang")} == {c.Reason.SCHEDULING_GATED}

    lift(h, held)
    await h.scheduler.cycle()

    assert sorted(h.bound_pods()) == ["gang-0", "gang-1", "gang-2"]
    assert c.Reason.SCHEDULE_TIMEOUT not in {v.reason for v in h.verdicts_for("gang")}


async def test_a_gang_refused_before_a_gated_member_came_does_not_back_off_once_ungated() -> None:
    """Refused for want of members (backing off up to 60 s), then its last member comes gated:
    lifting the gate makes it due at once, not at the end of the old backoff."""
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("gang", min_member=3, scheduleTimeoutSeconds=3600)
    h.add_pods("gang", 2, cpu=1)
    for _ in range(7):
        await h.scheduler.cycle()
        h.clock.advance(61)
    assert h.verdicts_for("gang")[-1].reason == c.Reason.NOT_ENOUGH_TASKS
    held = h.add_pod("gang-2", group="gang", cpu=1, schedulingGates=gates(KUEUE))
    await h.scheduler.cycle()
    assert h.verdicts_for("gang")[-1].reason == c.Reason.SCHEDULING_GATED

    h.clock.advance(0.1)
    lift(h, held)
    await h.scheduler.cycle()

    assert sorted(h.bound_pods()) == ["gang-0", "gang-1", "gang-2"]


async def test_a_gated_pod_of_no_group_is_never_bound_until_its_gate_goes() -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    alone = h.add_pod("alone", cpu=1, schedulingGates=gates(QUOTA))
    h.add_pod("other", cpu=1)

    await h.scheduler.cycle()
    assert h.bound_pods() == ["other"]  # the ungated one is placed; the gated one waits

    lift(h, alone, group=None)
    await h.scheduler.cycle()

    assert sorted(h.bound_pods()) == ["alone", "other"]


async def test_the_running_scheduler_places_the_gang_as_soon_as_the_last_gate_goes() -> None:
    """The scheduler's own loop on the test's clock: after the gated refusal it has no timer
    (nothing is due), and the update lifting the gate has the gang placed after the settle."""
    h = Harness(fake_timers=True)
    timers = h.clock.monotonic
    held = gated_gang(h, KUEUE)[-1]
    h.scheduler.start()
    try:
        await until(lambda: bool(timers.pending), "the loop's settle")
        h.clock.advance(timers.pending[0] - timers.now())
        await until(lambda: bool(h.verdicts_for("gang")), "the gated verdict")
        await until(lambda: not timers.pending, "the loop waiting for an event, not a timer")
        assert h.binds() == 0

        lift(h, held)
        await until(lambda: bool(timers.pending), "the loop woken by the update")
        h.clock.advance(timers.pending[0] - timers.now())
        await until(lambda: len(h.bound_pods()) == 3, "the gang placed whole")
    finally:
        await h.scheduler.stop()
    assert h.verdicts_for("gang")[-1].placed


async def test_a_kueue_pod_group_waits_for_admission_and_is_placed_whole_when_admitted() -> None:
    """Kueue's plain-pod group of 3, each pod gated by `kueue.x-k8s.io/admission` (with the
    PodGroup the operator makes from the total count): nothing is bound while any gate is on,
    even with two of three lifted; Kueue lifting the last gate has the group placed whole."""
    h = Harness()
    h.add_node("n1", cpu=8)
    h.add_group("kq", min_member=3)
    labels = {c.LABEL_KUEUE_POD_GROUP_NAME: "kq"}
    annotations = {c.ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT: "3"}
    held = []
    for i in range(3):
        body = pod(
            f"kq-{i}",
            NS,
            labels=labels,
            annotations=annotations,
            requests={"cpu": 1},
            scheduler=c.SCHEDULER_NAME,
            schedulingGates=gates(KUEUE),
        )
        (stored,) = h.fake.seed(body)
        h.members.put((NS, "kq"), stored)
        h.scheduler.on_pod(c.WatchEventType.ADDED, stored)
        held.append(stored)
    await h.scheduler.cycle()
    assert h.verdicts_for("kq")[-1].reason == c.Reason.SCHEDULING_GATED

    for body in held[:2]:
        lift(h, body, group="kq")
    await h.scheduler.cycle()
    assert h.binds() == 0
    assert "pod kq-2: kueue.x-k8s.io/admission" in h.verdicts_for("kq")[-1].message

    lift(h, held[2], group="kq")
    await h.scheduler.cycle()

    assert sorted(h.bound_pods()) == ["kq-0", "kq-1", "kq-2"]
    assert h.verdicts_for("kq")[-1].placed
