"""A pod outside any gang is a gang of one, judged by its own pod: its priority orders the
queue, makes it a preemptor or a victim, and its `preemptionPolicy` is honoured.

The harness is the gang scheduler's over the in-memory API server (events fed by hand, cycles
run by hand); every test runs deciding on the event loop and in the worker thread.
"""

from __future__ import annotations

from podgroup_operator import constants as c
from podgroup_operator.scheduling.snapshot import pod_uid
from tests.unit.controllers.test_gang_scheduler_unit import (  # noqa: F401 (an autouse fixture)
    NS,
    Harness,
    decisions_in,
)
from tests.unit.controllers.test_preemption_unit import (
    deletes,
    deliver_deletions,
    preempted_facts,
    running_gang,
)


async def test_a_lone_pod_is_decided_before_a_lower_priority_podgroup_created_earlier() -> None:
    h = Harness()
    h.add_node("n1", cpu=2)
    h.add_group("pg", min_member=2)
    h.add_pods("pg", 2, cpu=1, priority=100, created="2026-01-01T00:00:00Z")
    h.add_pod("server", cpu=2, priority=1000, created="2026-01-01T01:00:00Z")

    await h.scheduler.cycle()

    assert h.node_of("server") == "n1"
    assert h.bound_pods("pg-") == []
    (verdict,) = h.verdicts_for("pg")
    assert verdict.reason == c.Reason.NOT_ENOUGH_RESOURCES


async def test_a_lone_pod_of_higher_priority_preempts_a_gang_whole_and_is_named() -> None:
    h = Harness()
    h.add_node("n1", cpu=4)
    gang = running_gang(h, "pg", 2, "n1", priority=100)
    facts = preempted_facts(h)
    h.add_pod("server", cpu=2, priority=1000)

    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()

    assert sorted(b["preconditions"]["uid"] for b in deletes(h)) == sorted(map(pod_uid, gang))
    assert facts and facts[0][0] == (NS, "pg")
    assert facts[0][1].by == f"{NS}/pod:server"
    assert "priority 1000 over 100" in facts[0][1].message

    deliver_deletions(h, gang)
    await h.scheduler.cycle()
    assert h.node_of("server") == "n1"


async def test_a_lone_pod_of_lower_priority_never_preempts_a_gang() -> None:
    h = Harness()
    h.add_node("n1", cpu=4)
    running_gang(h, "pg", 2, "n1", priority=100)
    h.add_pod("batch", cpu=2, priority=10)

    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()

    assert deletes(h) == []
    (verdict,) = h.verdicts_for("pod:batch")
    assert "no preemption" in verdict.message
    assert "priority below 10" in verdict.message


async def test_a_lone_pod_with_preemption_policy_never_waits_instead() -> None:
    h = Harness()
    h.add_node("n1", cpu=4)
    running_gang(h, "pg", 2, "n1", priority=100)
    h.add_pod("polite", cpu=2, priority=1000, preemptionPolicy="Never")

    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()

    assert deletes(h) == []
    (verdict,) = h.verdicts_for("pod:polite")
    assert "preemptionPolicy is Never" in verdict.message


async def test_a_bound_lone_pod_is_a_victim_by_its_own_priority() -> None:
    h = Harness()
    h.add_node("n1", cpu=4)
    high = h.add_pod("daemon", cpu=2, priority=1000, node="n1")
    low = h.add_pod("batch", cpu=2, priority=10, node="n1")
    h.add_group("pg", min_member=1)
    h.add_pods("pg", 1, cpu=2, priority=100)

    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()

    assert [b["preconditions"]["uid"] for b in deletes(h)] == [pod_uid(low)]
    assert pod_uid(high) not in {b["preconditions"]["uid"] for b in deletes(h)}


async def test_a_lone_preemptors_room_is_held_from_lower_priority_gangs() -> None:
    """While its victims terminate, the room freed is the lone pod's: a gang of lower priority
    that would fit there is not placed, and the lone pod is bound once they are gone."""
    h = Harness()
    h.add_node("n1", cpu=4)
    gang = running_gang(h, "pg", 2, "n1", priority=100)
    h.add_pod("server", cpu=4, priority=1000)
    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()
    assert len(deletes(h)) == 2

    h.add_group("late", min_member=1)
    h.add_pods("late", 1, cpu=2, priority=500)
    deliver_deletions(h, gang)
    await h.scheduler.cycle()

    assert h.node_of("server") == "n1"
    assert h.bound_pods("late-") == []
