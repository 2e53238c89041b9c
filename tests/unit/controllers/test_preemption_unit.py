"""Preemption carried out by the live scheduler, over the in-memory API server.

The harness is the gang scheduler's (events fed by hand, cycles run by hand); the watch's view of
deletions is delivered only when a test says so, which is how "victims still terminating" is
held still: the scheduler must neither evict again nor let another gang take the room. Every test
runs twice, deciding and planning on the event loop and in the scheduler's worker thread
(`decisions_in`).
"""

from __future__ import annotations

from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import PODS
from podgroup_operator.controllers.preemption import NOMINATION_SECONDS, budgets_of
from podgroup_operator.domain.scheduling_status import Preempted
from podgroup_operator.scheduling.snapshot import pod_uid
from tests.unit.controllers.test_gang_scheduler_unit import (  # noqa: F401 (an autouse fixture)
    NS,
    Harness,
    decisions_in,
)

Body = dict[str, Any]


def running_gang(h: Harness, name: str, count: int, node: str, priority: int) -> list[Body]:
    """A PodGroup whose members are already bound to `node` (as the watch would show them)."""
    h.add_group(name, min_member=count)
    return [
        h.add_pod(f"{name}-{i}", group=name, cpu=2, node=node, priority=priority)
        for i in range(count)
    ]


def deletes(h: Harness) -> list[Body]:
    return [r.body for r in h.fake.request_log if r.method == "DELETE"]


def deliver_deletions(h: Harness, pods: list[Body]) -> None:
    """The watch reports the victims gone."""
    for body in pods:
        h.scheduler.on_pod("DELETED", body)


def preempted_facts(h: Harness) -> list[tuple[tuple[str, str], Preempted]]:
    facts: list[tuple[tuple[str, str], Preempted]] = []
    h.scheduler.preemption.on_preempted = lambda key, fact: facts.append((key, fact))
    return facts


async def test_a_higher_priority_gang_evicts_the_lowest_whole_gang_and_then_binds() -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    low = running_gang(h, "low", 2, "n1", priority=1)
    mid = running_gang(h, "mid", 2, "n1", priority=5)
    facts = preempted_facts(h)
    h.add_group("high", min_member=2)
    h.add_pods("high", 2, cpu=2, priority=10)

    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()

    # Exactly the lowest-priority gang, whole, each pod with its UID as a precondition.
    assert sorted(b["preconditions"]["uid"] for b in deletes(h)) == sorted(map(pod_uid, low))
    assert {p["metadata"]["name"] for p in h.fake.objects(PODS, NS)} >= {"mid-0", "mid-1"}
    # The preemptor's members are nominated to the node; nothing of it is bound yet.
    for i in range(2):
        stored = h.fake.get_object(PODS, f"high-{i}", NS)
        assert stored is not None and stored["status"]["nominatedNodeName"] == "n1"
    assert h.binds() == 0
    # Events on both sides, naming the other; the victim's fact goes to the status writer.
    assert "low" in h.fake.events(involved="high", reason=c.Reason.PREEMPTING)[0]["message"]
    assert "high" in h.fake.events(involved="low", reason=c.Reason.PREEMPTED)[0]["message"]
    assert len(h.fake.events(involved="low-0", reason=c.Reason.PREEMPTED)) == 1
    assert facts and facts[0][0] == (NS, "low") and facts[0][1].by == f"{NS}/high"
    assert mid  # untouched

    deliver_deletions(h, low)
    await h.scheduler.cycle()

    assert sorted(h.bound_pods("high")) == ["high-0", "high-1"]
    assert len(deletes(h)) == 2


async def test_no_second_plan_and_no_room_taken_while_victims_terminate() -> None:
    h = Harness()
    h.add_node("n1", cpu=4)
    low = running_gang(h, "low", 2, "n1", priority=1)
    h.add_group("high", min_member=2)
    h.add_pods("high", 2, cpu=2, priority=10)
    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()
    assert len(deletes(h)) == 2

    # The victims' capacity comes back one pod at a time; a low-priority gang of one that
    # would fit in it waits, and the preemptor never plans (nor evicts) again meanwhile.
    h.add_pod("intruder", cpu=2, priority=0)
    deliver_deletions(h, low[:1])
    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()
    assert len(deletes(h)) == 2
    assert h.bound_pods() == []
    assert h.node_of("intruder") is None

    deliver_deletions(h, low[1:])
    await h.scheduler.cycle()
    assert sorted(h.bound_pods("high")) == ["high-0", "high-1"]
    assert h.node_of("intruder") is None


async def test_equal_priority_never_preempts() -> None:
    h = Harness()
    h.add_node("n1", cpu=4)
    running_gang(h, "first", 2, "n1", priority=10)
    h.add_group("second", min_member=2)
    h.add_pods("second", 2, cpu=2, priority=10)

    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()

    assert deletes(h) == []
    (verdict,) = h.verdicts_for("second")
    assert verdict.reason == c.Reason.NOT_ENOUGH_RESOURCES
    assert "no preemption" in verdict.message


async def test_preemption_policy_never_waits_instead() -> None:
    h = Harness()
    h.add_node("n1", cpu=4)
    running_gang(h, "low", 2, "n1", priority=1)
    h.add_group("polite", min_member=2)
    h.add_pods("polite", 2, cpu=2, priority=10, preemptionPolicy="Never")

    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()

    assert deletes(h) == []
    (verdict,) = h.verdicts_for("polite")
    assert "preemptionPolicy is Never" in verdict.message


def test_a_v1beta1_budget_with_an_empty_selector_protects_nothing() -> None:
    def pdb(selector: dict[str, Any] | None) -> Body:
        spec: Body = {"minAvailable": 1}
        if selector is not None:
            spec["selector"] = selector
        return {
            "metadata": {"name": "b", "namespace": NS},
            "spec": spec,
            "status": {"disruptionsAllowed": 0},
        }

    labelled = pdb({"matchLabels": {"app": "a"}})
    assert len(budgets_of([pdb({}), pdb(None), labelled], v1beta1=True)) == 1
    assert len(budgets_of([pdb({}), labelled], v1beta1=False)) == 2


async def test_a_nomination_whose_victims_never_go_expires_and_the_gang_plans_again() -> None:
    h = Harness()
    h.add_node("n1", cpu=4)
    running_gang(h, "low", 2, "n1", priority=1)
    h.add_group("high", min_member=2, scheduleTimeoutSeconds=600)
    h.add_pods("high", 2, cpu=2, priority=10)
    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()
    assert len(deletes(h)) == 2

    # The watch never shows the victims gone (a stuck kubelet): within the nomination the gang
    # waits; after it, it plans again (and the second round of deletions finds nothing left).
    h.clock.advance(NOMINATION_SECONDS - 1)
    decided = len(h.verdicts_for("high"))
    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()
    assert len(deletes(h)) == 2
    assert len(h.verdicts_for("high")) > decided  # decided again, and waited
    assert "waiting for 2 evicted pod(s)" in h.verdicts_for("high")[-1].message
    h.clock.advance(2)
    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()
    assert len(deletes(h)) == 4
    assert h.scheduler.preemption.nominations[(NS, "high")].victims == set()


async def test_a_gang_group_preempts_for_all_its_gangs_and_binds_them_together() -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    low = running_gang(h, "low", 2, "n1", priority=1)
    keep = running_gang(h, "keep", 2, "n1", priority=1)
    members = ["default/a", "default/b"]
    for name in ("a", "b"):
        h.add_group(name, min_member=1, gangGroup=members)
        h.add_pods(name, 1, cpu=2, priority=10)

    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()

    # Room for both gangs (4 cpu) needs exactly one victim gang; both gangs say so.
    victims = {b["preconditions"]["uid"] for b in deletes(h)}
    assert victims in ({pod_uid(p) for p in low}, {pod_uid(p) for p in keep})
    for name in ("a", "b"):
        assert len(h.fake.events(involved=name, reason=c.Reason.PREEMPTING)) == 1
    assert h.binds() == 0

    deliver_deletions(h, [p for p in low + keep if pod_uid(p) in victims])
    await h.scheduler.cycle()

    assert sorted(h.bound_pods("a") + h.bound_pods("b")) == ["a-0", "b-0"]
    assert len(deletes(h)) == 2


async def test_a_higher_priority_gang_takes_a_lower_preemptors_held_room_never_its_pods() -> None:
    h = Harness()
    h.add_node("n1", cpu=4)
    low = running_gang(h, "low", 2, "n1", priority=1)
    h.add_group("mid", min_member=2, scheduleTimeoutSeconds=600)
    mid = h.add_pods("mid", 2, cpu=2, priority=5)
    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()
    assert sorted(b["preconditions"]["uid"] for b in deletes(h)) == sorted(map(pod_uid, low))

    # Before the victims are gone, a gang above both arrives: the room held for "mid" is not
    # "mid"'s to keep, and mid's pending pods are never victims.
    h.add_group("high", min_member=2)
    h.add_pods("high", 2, cpu=2, priority=10)
    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()
    deleted = {b["preconditions"]["uid"] for b in deletes(h)}
    assert not deleted & {pod_uid(p) for p in mid}
    assert (NS, "mid") not in h.scheduler.preemption.nominations

    deliver_deletions(h, low)
    await h.scheduler.cycle()
    assert sorted(h.bound_pods("high")) == ["high-0", "high-1"]
    assert h.bound_pods("mid") == []


def scoped_gang(h: Harness, parts: int, phase: c.Phase, **spec: Any) -> list[Body]:
    """A low-priority gang repaired by sub-group: `parts` sub-groups of 2 members of 2 cpu,
    sub-group s<i> bound to node n<i> (4 cpu, added here); the group's phase as given."""
    for i in range(parts):
        h.add_node(f"n{i}", cpu=4)
    h.add_group(
        "low",
        subGroups=[{"name": f"s{i}", "minMember": 2} for i in range(parts)],
        policy={"action": "RestartGang", "scope": "SubGroup"},
        status={"phase": phase},
        **spec,
    )
    return [
        h.add_pod(
            f"low-s{i}-{j}",
            group="low",
            cpu=2,
            node=f"n{i}",
            priority=1,
            labels={c.LABEL_SUB_GROUP: f"s{i}"},
        )
        for i in range(parts)
        for j in range(2)
    ]


async def test_a_sub_group_scoped_victim_loses_one_whole_sub_group_and_is_told_which() -> None:
    """A running gang whose policy repairs a sub-group alone (scope SubGroup, 2 of 3 enough):
    the preemptor takes the one sub-group on the node it needs; the others are not touched,
    and the victim's fact and Event name the sub-group."""
    h = Harness()
    low = scoped_gang(h, 3, c.Phase.RUNNING, min_member=4, minSubGroup=2)
    facts = preempted_facts(h)
    h.add_group("high", min_member=1)
    h.add_pods("high", 1, cpu=4, priority=10)

    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()

    [(key, fact)] = facts
    assert key == (NS, "low") and len(fact.sub_groups) == 1
    [sub] = fact.sub_groups
    taken = [p for p in low if p["metadata"]["labels"][c.LABEL_SUB_GROUP] == sub]
    assert sorted(b["preconditions"]["uid"] for b in deletes(h)) == sorted(map(pod_uid, taken))
    assert f"sub-group {sub} of {NS}/low is evicted whole (2 pod(s))" in fact.message
    [event] = h.fake.events(involved="low", reason=c.Reason.PREEMPTED)
    assert f"sub-group {sub}" in event["message"]
    assert "the other sub-groups keep running" in event["message"]

    deliver_deletions(h, taken)
    await h.scheduler.cycle()
    assert h.bound_pods("high") == ["high-0"]


async def test_a_victim_not_running_whole_is_evicted_whole_whatever_its_scope() -> None:
    """The same kind of gang before it ever ran whole (Pending): its restart policy would not
    repair a sub-group alone, so preemption takes all of it."""
    h = Harness()
    low = scoped_gang(h, 2, c.Phase.PENDING, min_member=2, minSubGroup=1)
    facts = preempted_facts(h)
    h.add_group("high", min_member=1)
    h.add_pods("high", 1, cpu=4, priority=10)

    await h.scheduler.cycle()
    await h.scheduler.preemption.settled()

    [(_, fact)] = facts
    assert fact.sub_groups == ()
    assert sorted(b["preconditions"]["uid"] for b in deletes(h)) == sorted(map(pod_uid, low))
