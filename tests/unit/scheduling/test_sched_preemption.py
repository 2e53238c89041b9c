"""Gang preemption plans: whole victim gangs, lower priority only, PDBs, cheapest first."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from podgroup_operator.constants import PodPhase
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.scheduling.gang import GangRequest, Placement, PreemptionPolicy
from podgroup_operator.scheduling.placement import place_group
from podgroup_operator.scheduling.preemption import (
    PreemptionPlan,
    PreemptionRefusal,
    disruption_budget,
    plan_preemption,
)
from podgroup_operator.scheduling.resources import node_allocatable, pod_requests
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.builders import node, pod
from tests.unit.scheduling.helpers import gang, members, uid_of


def running(
    name: str, on: str, cpu: str, priority: int, group: str | None = None, **kwargs: Any
) -> dict[str, Any]:
    return pod(
        name,
        node=on,
        requests={"cpu": cpu},
        priority=priority,
        group=group,
        phase=PodPhase.RUNNING,
        **kwargs,
    )


def build(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> Snapshot:
    return Snapshot.build(nodes, pods, gang_of=group_key_of)


def high(count: int, cpu: str = "8", priority: int = 100, **kwargs: Any) -> GangRequest:
    return gang("high", members("high", count, requests={"cpu": cpu}), priority=priority, **kwargs)


def budget(name: str, labels: dict[str, str], allowed: int) -> Any:
    return disruption_budget(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed},
        }
    )


def plan(result: PreemptionPlan | PreemptionRefusal) -> PreemptionPlan:
    assert isinstance(result, PreemptionPlan), result
    return result


def test_a_gang_that_fits_gets_an_empty_plan_with_its_nominations() -> None:
    snapshot = build([node("n0"), node("n1")], [running("low", "n0", "8", 0)])
    result = plan(plan_preemption(high(1), snapshot))
    assert result.empty
    assert [b.node for b in result.nominations] == ["n1"]
    assert "fits without preemption" in result.message


def test_victim_gangs_are_evicted_whole_even_where_the_room_is_not_needed() -> None:
    pods = [
        running("low-0", "n0", "8", 0, group="low"),
        running("low-1", "n1", "4", 0, group="low"),
    ]
    snapshot = build([node("n0"), node("n1")], pods)
    before = (snapshot.state(), snapshot.index_state())
    result = plan(plan_preemption(high(1), snapshot))
    [victim] = result.victims
    assert victim.gang == ("default", "low")
    assert sorted(p.name for p in victim.pods) == ["low-0", "low-1"]
    assert {p.node for p in victim.pods} == {"n0", "n1"}
    assert [b.node for b in result.nominations] == ["n0"]
    assert "preempting 1 lower-priority gang(s) (2 pod(s))" in result.message
    assert (snapshot.state(), snapshot.index_state()) == before


def test_equal_or_higher_priority_is_never_a_victim() -> None:
    pods = [running("same", "n0", "8", 100), running("above", "n1", "8", 200)]
    snapshot = build([node("n0"), node("n1")], pods)
    result = plan_preemption(high(1), snapshot)
    assert isinstance(result, PreemptionRefusal)
    assert "would still not make room" in result.message


def test_a_gang_with_one_high_priority_pod_is_not_a_victim_at_all() -> None:
    pods = [
        running("mixed-0", "n0", "8", 0, group="mixed"),
        running("mixed-1", "n1", "1", 500, group="mixed"),
        running("lone", "n1", "7", 0),
    ]
    snapshot = build([node("n0"), node("n1")], pods)
    result = plan(plan_preemption(high(1, cpu="7"), snapshot))
    assert [v.label for v in result.victims] == ["default/lone"]


def test_preemption_policy_never_waits() -> None:
    snapshot = build([node("n0")], [running("low", "n0", "8", 0)])
    result = plan_preemption(high(1, preemption_policy=PreemptionPolicy.NEVER), snapshot)
    assert isinstance(result, PreemptionRefusal)
    assert "preemptionPolicy is Never" in result.message


def test_lowest_priority_victims_are_chosen_first() -> None:
    pods = [running("mid", "n0", "8", 50), running("low", "n1", "8", 10)]
    snapshot = build([node("n0"), node("n1")], pods)
    result = plan(plan_preemption(high(1), snapshot))
    assert [v.label for v in result.victims] == ["default/low"]
    assert [b.node for b in result.nominations] == ["n1"]


def test_a_node_costs_what_is_left_to_evict_after_its_own_reprieve() -> None:
    """n0 holds a pod of priority 100 beside two of priority 10; n1 one pod of priority 50.
    Freeing n0 whole would evict priority 100, but the 100 can stay (3 CPUs free without it),
    so n0 costs 10 and is chosen, as kube-scheduler chooses it: reprieve on each candidate
    node before nodes are compared. Keyed before reprieve, n1 (50) was chosen."""
    pods = [
        running("keep", "n0", "1", 100),
        running("low-a", "n0", "1500m", 10),
        running("low-b", "n0", "1500m", 10),
        running("mid", "n1", "4", 50),
    ]
    snapshot = build([node("n0", cpu=4), node("n1", cpu=4)], pods)
    result = plan(plan_preemption(high(1, cpu="2", priority=1000), snapshot))
    assert sorted(v.label for v in result.victims) == ["default/low-a", "default/low-b"]
    assert [b.node for b in result.nominations] == ["n0"]


def test_fewer_victim_pods_are_preferred() -> None:
    many = [running(f"small-{i}", "n0", "1", 0) for i in range(8)]
    snapshot = build([node("n0"), node("n1")], [*many, running("one", "n1", "8", 0)])
    result = plan(plan_preemption(high(1), snapshot))
    assert [v.label for v in result.victims] == ["default/one"]


def test_pods_of_other_schedulers_are_victims_by_their_priority() -> None:
    theirs = running("theirs", "n0", "8", 0, scheduler="default-scheduler")
    snapshot = build([node("n0")], [theirs])
    result = plan(plan_preemption(high(1), snapshot))
    [victim] = result.victims
    assert victim.gang is None
    assert victim.pods[0].uid == uid_of(theirs)


def test_budgets_steer_away_from_protected_pods_but_do_not_block() -> None:
    pods = [
        running("db", "n0", "8", 0, labels={"app": "db"}),
        running("batch", "n1", "8", 0, labels={"app": "batch"}),
    ]
    snapshot = build([node("n0"), node("n1")], pods)
    protected = [budget("db", {"app": "db"}, 0)]
    result = plan(plan_preemption(high(1), snapshot, protected))
    assert [v.label for v in result.victims] == ["default/batch"]
    assert result.budget_violations == 0
    both = plan(plan_preemption(high(2), snapshot, protected))
    assert sorted(v.label for v in both.victims) == ["default/batch", "default/db"]
    assert both.budget_violations == 1
    assert "1 eviction(s) exceed a PodDisruptionBudget" in both.message


def test_room_left_by_terminating_pods_needs_no_victims() -> None:
    leaving = running("leaving", "n0", "8", 0, deleting=True)
    snapshot = build([node("n0")], [leaving])
    result = plan(plan_preemption(high(1), snapshot))
    assert result.empty
    assert result.waiting_for == 1
    assert "once terminating pods are gone" in result.message


def test_a_gang_group_preempts_for_all_of_its_gangs() -> None:
    snapshot = build(
        [node("n0"), node("n1")], [running("a", "n0", "8", 0), running("b", "n1", "8", 0)]
    )
    first = gang("first", members("first", 1, requests={"cpu": "8"}), priority=100)
    second = gang("second", members("second", 1, requests={"cpu": "8"}), priority=100)
    result = plan(plan_preemption([first, second], snapshot))
    assert sorted(v.label for v in result.victims) == ["default/a", "default/b"]
    assert sorted(b.pod for b in result.nominations) == ["first-0", "second-0"]


def test_reprieve_gives_back_victims_the_gang_does_not_need() -> None:
    # Freeing n0 removes both gangs there; the gang needs only 5 cpu, so the bigger
    # one is given back if the smaller suffices.
    pods = [
        running("big", "n0", "5", 0, group="big"),
        running("small", "n0", "3", 0, group="small"),
    ]
    snapshot = build([node("n0")], pods)
    result = plan(plan_preemption(high(1, cpu="3"), snapshot))
    assert [v.label for v in result.victims] == ["default/small"]


def test_planning_needs_to_know_gangs() -> None:
    snapshot = Snapshot.build([node("n0")], [running("low", "n0", "8", 0)])
    with pytest.raises(ValueError, match="gang_of"):
        plan_preemption(high(1), snapshot)


# --- properties ----------------------------------------------------------------------------------
@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    count = draw(st.integers(1, 5))
    nodes = [node(f"n{i}", cpu=draw(st.integers(4, 8))) for i in range(count)]
    free = {f"n{i}": node_allocatable(n)["cpu"] for i, n in enumerate(nodes)}
    pods: list[dict[str, Any]] = []
    for g in range(draw(st.integers(0, 16))):
        size = draw(st.integers(1, 4))
        priority = draw(st.sampled_from([0, 5, 10, 50]))
        grouped = draw(st.booleans())
        for j in range(size):
            cpu = draw(st.integers(1, 4))
            target = f"n{draw(st.integers(0, count - 1))}"
            if free[target] < cpu * 1000:
                continue
            free[target] -= cpu * 1000
            pods.append(
                running(
                    f"g{g}-{j}",
                    target,
                    str(cpu),
                    priority + (draw(st.integers(0, 1)) * 45 if j else 0),
                    group=f"g{g}" if grouped else None,
                    labels={"app": f"a{g % 2}"},
                )
            )
    return nodes, pods


@given(
    clusters(),
    st.integers(1, 3),
    st.integers(1, 4),
    st.sampled_from([0, 10, 50, 100, 100, 100]),
    st.sampled_from(list(PreemptionPolicy)),
    st.integers(-1, 2),
)
def test_plans_are_whole_lower_priority_and_leave_no_node_over_capacity(
    cluster: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    size: int,
    cpu: int,
    priority: int,
    policy: PreemptionPolicy,
    allowed: int,
) -> None:
    nodes, pods = cluster
    snapshot = build(nodes, pods)
    request = gang(
        "high",
        members("high", size, requests={"cpu": str(cpu)}),
        priority=priority,
        preemption_policy=policy,
    )
    budgets = [budget("a0", {"app": "a0"}, allowed)] if allowed >= 0 else []
    before = (snapshot.state(), snapshot.index_state())
    fits_now = place_group(request, snapshot)
    if isinstance(fits_now, Placement):
        fits_now.undo()
    result = plan_preemption(request, snapshot, budgets)
    assert (snapshot.state(), snapshot.index_state()) == before
    if isinstance(fits_now, Placement):
        assert isinstance(result, PreemptionPlan)
        assert result.empty
    if isinstance(result, PreemptionRefusal):
        event("refused")
        return
    event("plan with victims" if result.victims else "empty plan")
    if policy is PreemptionPolicy.NEVER:
        assert result.empty
    by_uid = {uid_of(p): p for p in pods}
    evicted: set[str] = set()
    for victim in result.victims:
        uids = {p.uid for p in victim.pods}
        # Whole gangs: every pod of the victim's gang (or the lone pod) is evicted.
        unit = ("gang", *victim.gang) if victim.gang else ("pod", "default", victim.pods[0].uid)
        assert uids == set(snapshot.pod_index.units()[unit])
        # Strictly lower priority, every pod of it.
        assert all(by_uid[u]["spec"].get("priority", 0) < priority for u in uids)
        evicted |= uids
    # After evicting the victims and binding the nominations, no node is over capacity.
    assert len(result.nominations) >= request.min_member
    used: dict[str, int] = {}
    for raw in pods:
        if uid_of(raw) not in evicted:
            name = raw["spec"]["nodeName"]
            used[name] = used.get(name, 0) + pod_requests(raw)["cpu"]
    members_by_uid = {uid_of(p): p for p in request.pending}
    for binding in result.nominations:
        used[binding.node] = (
            used.get(binding.node, 0) + pod_requests(members_by_uid[binding.pod_uid])["cpu"]
        )
    for raw in nodes:
        name = raw["metadata"]["name"]
        assert used.get(name, 0) <= node_allocatable(raw)["cpu"]


def test_preemption_cannot_help_a_gang_with_unsupported_constraints() -> None:
    snapshot = build([node("n0")], [running("low", "n0", "8", 0)])
    odd = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {}, "topologyKey": "zone", "matchLabelKeys": ["rev"]}
            ]
        }
    }
    request = gang("high", members("high", 1, requests={"cpu": "8"}, affinity=odd), priority=100)
    result = plan_preemption(request, snapshot)
    assert isinstance(result, PreemptionRefusal)
    assert "preemption cannot help" in result.message
    assert "matchLabelKeys" in result.message


def test_gangs_spanning_nodes_free_adjacent_nodes_with_the_fewest_victims() -> None:
    # Gang g runs one 1-cpu pod on each of nodes g..g+7 (mod 20): every node holds 8 gangs.
    # Freeing 3 adjacent nodes evicts 10 gangs; any 3 scattered nodes would evict more.
    count = 20
    pods = [
        running(f"low-{g:02d}-{j}", f"n{(g + j) % count:02d}", "1", 0, group=f"low-{g:02d}")
        for g in range(count)
        for j in range(8)
    ]
    snapshot = build([node(f"n{i:02d}") for i in range(count)], pods)
    result = plan(plan_preemption(high(3), snapshot))
    assert len(result.victims) == 10
    assert all(len(v.pods) == 8 for v in result.victims)
    nominated = sorted(int(b.node[1:]) for b in result.nominations)
    assert nominated == [nominated[0], nominated[0] + 1, nominated[0] + 2]


ANTI_EVERYONE = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
}


def hostnamed(name: str) -> dict[str, Any]:
    return node(name, labels={"kubernetes.io/hostname": name})


def test_a_node_blocked_by_a_lower_priority_pods_anti_affinity_is_freed_of_it() -> None:
    """n1 has the room, but its lone pod's anti-affinity shuts every pod out of it: as
    kube-scheduler does per node (every lower-priority pod out, then the filters), that pod is
    the victim. Counted by resources alone, n1 looked free already, and the plan was refused."""
    pods = [
        running("big", "n0", "8", 0),
        running("hermit", "n1", "100m", 0, labels={"app": "hermit"}, affinity=ANTI_EVERYONE),
    ]
    snapshot = build([hostnamed("n0"), hostnamed("n1")], pods)
    before = (snapshot.state(), snapshot.index_state())

    result = plan(plan_preemption(high(2, cpu="7"), snapshot))

    assert sorted(v.label for v in result.victims) == ["default/big", "default/hermit"]
    assert sorted(b.node for b in result.nominations) == ["n0", "n1"]
    assert (snapshot.state(), snapshot.index_state()) == before


def test_a_host_port_held_at_lower_priority_is_evicted_and_a_needless_victim_given_back() -> None:
    """Both nodes have the room; the member's host port is taken on n0 by a low pod. Given
    back by resources alone (the reprieve's arithmetic), the port holder would stay and the
    plan would nominate a node the member cannot use."""
    port = [{"containerPort": 80, "hostPort": 80}]
    main = {"name": "main", "image": "sim", "ports": port, "resources": {"requests": {"cpu": "1"}}}
    pods = [
        running("porter", "n0", "100m", 0, containers=[{**main, "name": "p"}]),
        running("bystander", "n0", "100m", 0),
        running("other", "n1", "100m", 0, containers=[{**main, "name": "q"}]),
    ]
    snapshot = build([hostnamed("n0"), hostnamed("n1")], pods)
    request = gang("high", members("high", 2, containers=[main]), priority=100)

    result = plan(plan_preemption(request, snapshot))

    assert sorted(v.label for v in result.victims) == ["default/other", "default/porter"]
    assert sorted(b.node for b in result.nominations) == ["n0", "n1"]
