"""Quota reclaim chooses whole gangs (or whole sub-groups) of quotas that borrowed, by simulating
the reclaimer's placement and quota admission on what they free; never below a victim quota's
min, never a gang younger than its quota's minRunSeconds, at most 1.25x where the cluster allows."""

from __future__ import annotations

from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from podgroup_operator import constants as c
from podgroup_operator.api.elastic_quota import QuotaKey, QuotaRef, QuotaSpec
from podgroup_operator.api.keys import GroupKey
from podgroup_operator.api.models import PodGroupSpec
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.scheduling.elastic.reclaim import reclaim_problems
from podgroup_operator.scheduling.elastic.tree import build_tree
from podgroup_operator.scheduling.gang import GangRequest, Placement, Refusal
from podgroup_operator.scheduling.placement import place_group
from podgroup_operator.scheduling.preemption import plan_preemption
from podgroup_operator.scheduling.reclaim import plan_reclaim, preemption_quota_problems
from podgroup_operator.scheduling.snapshot import Snapshot
from podgroup_operator.scheduling.victims import PreemptionPlan, PreemptionRefusal
from tests.builders import node, pod
from tests.unit.scheduling.helpers import GPU, gang, members

A: QuotaKey = ("team-a", "a")
B: QuotaKey = ("team-b", "b")


def gpus(n: int) -> dict[str, int]:
    return {GPU: n * 1000}


def quota(key: QuotaKey, min_: int, max_: int | None = None, run: int = 0) -> QuotaSpec:
    return QuotaSpec(key=key, min=gpus(min_), max=gpus(max_) if max_ else {}, min_run_seconds=run)


def running(group: str, count: int, namespace: str, on: str, **kw: Any) -> list[dict[str, Any]]:
    return [
        pod(
            f"{group}-{i}",
            namespace,
            group=group,
            node=on,
            phase=c.PodPhase.RUNNING,
            requests={GPU: 1, "cpu": "100m"},
            **kw,
        )
        for i in range(count)
    ]


def cluster(gpus_total: int, pods: list[dict[str, Any]], *specs: QuotaSpec) -> Snapshot:
    snapshot = Snapshot.build([node("n0", extended={GPU: gpus_total})], pods, gang_of=group_key_of)
    snapshot.quotas.set_tree(build_tree(specs, {GPU: gpus_total * 1000}))
    return snapshot


def waiting(name: str, count: int, namespace: str = "team-b") -> GangRequest:
    return gang(
        name, members(name, count, namespace, requests={GPU: 1, "cpu": "100m"}), namespace=namespace
    )


def old(_: Any) -> float:
    return 3600.0


def plan(result: PreemptionPlan | PreemptionRefusal) -> PreemptionPlan:
    assert isinstance(result, PreemptionPlan), result
    return result


def test_scheduler_plugins_683_b_gets_its_one_gpu_back() -> None:
    """5 GPUs; A (min 4, max 5) runs a 4-GPU and a 1-GPU gang; B (min 1) waits for quota, and
    reclaims exactly A's 1-GPU gang; the snapshot is as it was afterwards."""
    pods = running("a4", 4, "team-a", "n0") + running("a1", 1, "team-a", "n0")
    snapshot = cluster(5, pods, quota(A, 4, 5), quota(B, 1, 5))
    request = waiting("b1", 1)
    refused = place_group(request, snapshot)
    assert isinstance(refused, Refusal) and refused.reason is c.Reason.WAITING_FOR_QUOTA
    before = snapshot.index_state()
    result = plan(plan_reclaim(request, snapshot, old))
    assert [v.gang for v in result.victims] == [("team-a", "a1")]
    assert [len(v.pods) for v in result.victims] == [1]
    assert len(result.nominations) == 1
    assert "reclaiming for quota team-b/b" in result.message
    assert snapshot.index_state() == before


def test_reclaim_reads_quotas_from_podgroup_labels_for_victims_and_reclaimer() -> None:
    """The 683 shape with every pod in a namespace of no quota: A's gangs and B's gang are
    charged through their PodGroups' labels (`QuotaState.group_refs`) alone, and reclaim takes
    A's 1-GPU gang for B as when the pods carried the labels."""
    pods = running("a4", 4, "shared", "n0") + running("a1", 1, "shared", "n0")
    snapshot = cluster(5, pods, quota(A, 4, 5), quota(B, 1, 5))
    for name in ("a4", "a1"):
        snapshot.quotas.set_group_ref(("shared", name), QuotaRef(None, "a"))
    snapshot.quotas.set_group_ref(("shared", "b1"), QuotaRef(None, "b"))
    request = waiting("b1", 1, namespace="shared")
    refused = place_group(request, snapshot)
    assert isinstance(refused, Refusal) and refused.reason is c.Reason.WAITING_FOR_QUOTA
    result = plan(plan_reclaim(request, snapshot, old))
    assert [v.gang for v in result.victims] == [("shared", "a1")]
    assert "reclaiming for quota team-b/b" in result.message


def test_a_victim_gang_goes_whole_and_the_takes_pass_the_no_loop_check() -> None:
    """Of A's two 2-GPU gangs, the one of lower priority goes, both its pods."""
    pods = running("base", 2, "team-a", "n0", priority=10) + running("extra", 2, "team-a", "n0")
    snapshot = cluster(4, pods, quota(A, 2), quota(B, 2))
    result = plan(plan_reclaim(waiting("b2", 2), snapshot, old))
    [victim] = result.victims
    assert victim.gang == ("team-a", "extra") and victim.sub_group is None
    assert len(victim.pods) == 2
    tree, usage = snapshot.quotas.tree, snapshot.quotas.usage
    assert tree is not None and usage is not None
    assert reclaim_problems(tree, usage, B, {A: gpus(2)}) == []


def test_never_below_a_victim_quotas_min() -> None:
    """A's only gang holds 5 GPUs for a min of 4: taking it would put A below its min."""
    snapshot = cluster(5, running("a5", 5, "team-a", "n0"), quota(A, 4, 5), quota(B, 1, 5))
    result = plan_reclaim(waiting("b1", 1), snapshot, old)
    assert isinstance(result, PreemptionRefusal)
    assert result.message.startswith("no reclaim")


def test_a_young_gang_is_spared_until_its_quotas_min_run_seconds() -> None:
    pods = running("base", 2, "team-a", "n0", priority=10) + running("extra", 2, "team-a", "n0")
    snapshot = cluster(4, pods, quota(A, 2, run=600), quota(B, 2))
    young = plan_reclaim(waiting("b2", 2), snapshot, lambda key: 30.0)
    assert isinstance(young, PreemptionRefusal)
    assert "2 gang(s) spared: younger than their quota's minRunSeconds" in young.message
    grown = plan(plan_reclaim(waiting("b2", 2), snapshot, lambda key: 600.0))
    assert [v.gang for v in grown.victims] == [("team-a", "extra")]


def test_the_reclaimer_never_takes_beyond_its_min() -> None:
    """B (min 1) needs 1 GPU but A's only borrowed gang holds 2: taking it would give B more
    than its min promises, so nothing is reclaimed."""
    pods = running("base", 2, "team-a", "n0") + running("pair", 2, "team-a", "n0")
    snapshot = cluster(4, pods, quota(A, 2), quota(B, 1))
    result = plan_reclaim(waiting("b1", 1), snapshot, old)
    assert isinstance(result, PreemptionRefusal)


def test_evicted_resources_stay_within_one_and_a_quarter_of_the_charge() -> None:
    """B (min 4) needs 2 GPUs. The cheapest victim by age is A's youngest 3-GPU gang (1.5x); a
    2-GPU gang frees exactly what is needed, and is chosen instead."""
    pods = (
        running("base", 2, "team-a", "n0")
        + running("three", 3, "team-a", "n0")
        + running("two", 2, "team-a", "n0")
    )
    snapshot = cluster(7, pods, quota(A, 2), quota(B, 4))
    ages = {("team-a", "three"): 100.0, ("team-a", "two"): 200.0}
    result = plan(plan_reclaim(waiting("b2", 2), snapshot, lambda key: ages.get(key, 900.0)))
    assert [v.gang for v in result.victims] == [("team-a", "two")]
    evicted = sum(len(v.pods) for v in result.victims)
    assert evicted <= 1.25 * 2


def test_a_gang_repaired_by_sub_group_loses_one_sub_group() -> None:
    spec = PodGroupSpec.model_validate(
        {
            "minMember": 2,
            "subGroups": [{"name": f"s{i}", "minMember": 1} for i in range(3)],
            "minSubGroup": 2,
            "policy": {"action": "RestartGang", "scope": "SubGroup"},
        }
    )
    pods = [
        *running("base", 2, "team-a", "n0"),
        *(
            pod(
                f"split-{i}",
                "team-a",
                group="split",
                node="n0",
                phase=c.PodPhase.RUNNING,
                requests={GPU: 1, "cpu": "100m"},
                labels={c.LABEL_SUB_GROUP: f"s{i}"},
            )
            for i in range(3)
        ),
    ]
    snapshot = cluster(5, pods, quota(A, 2), quota(B, 3))
    result = plan(plan_reclaim(waiting("b1", 1), snapshot, old, {("team-a", "split"): spec}))
    [victim] = result.victims
    assert victim.gang == ("team-a", "split") and victim.sub_group is not None
    assert len(victim.pods) == 1


def test_a_planned_reclaim_lets_the_gang_fit_once_the_victims_are_gone() -> None:
    pods = running("a4", 4, "team-a", "n0") + running("a1", 1, "team-a", "n0")
    snapshot = cluster(5, pods, quota(A, 4, 5), quota(B, 1, 5))
    request = waiting("b1", 1)
    result = plan(plan_reclaim(request, snapshot, old))
    for victim in result.victim_pods:
        snapshot.remove_pod(victim.uid)
    assert isinstance(place_group(request, snapshot), Placement)


# --- the properties of every plan ---------------------------------------------------------------
QUOTAS: tuple[QuotaKey, ...] = (A, B, ("team-c", "c"))


@st.composite
def reclaim_cases(draw: st.DrawFn) -> tuple[Snapshot, GangRequest, dict[GroupKey, float], int]:
    """Three quotas on 12 GPUs (mins of 2 to 4, minRunSeconds 0 or 100), the cluster filled
    with running gangs of 1-3 GPUs of any quota, and a waiting gang of 1-3 GPUs."""
    mins = draw(st.lists(st.integers(2, 4), min_size=3, max_size=3))
    runs = draw(st.lists(st.sampled_from([0, 100]), min_size=3, max_size=3))
    specs = [quota(key, low, run=run) for key, low, run in zip(QUOTAS, mins, runs, strict=True)]
    pods: list[dict[str, Any]] = []
    ages: dict[GroupKey, float] = {}
    free = 12
    number = 0
    while free > draw(st.integers(0, 2)):
        size = min(free, draw(st.integers(1, 3)))
        free -= size
        namespace = draw(st.sampled_from(QUOTAS))[0]
        name = f"g{number}"
        number += 1
        pods += running(name, size, namespace, "n0", priority=draw(st.integers(0, 2)))
        ages[(namespace, name)] = draw(st.sampled_from([10.0, 1000.0]))
    waiter = draw(st.sampled_from(QUOTAS))[0]
    size = draw(st.integers(1, 3))
    return cluster(12, pods, *specs), waiting("w", size, waiter), ages, size


@settings(max_examples=200, deadline=None)
@given(reclaim_cases())
def test_every_plan_is_whole_allowed_old_enough_and_lets_the_gang_fit(
    case: tuple[Snapshot, GangRequest, dict[GroupKey, float], int],
) -> None:
    """Whatever the tree and the gangs: the snapshot is unchanged by planning; a plan takes
    whole gangs (every pod of each), none younger than its quota's minRunSeconds, passes the
    no-loop check (`reclaim_problems`) as a whole, and the gang fits once its victims are
    gone, with room the nominations name."""
    snapshot, request, ages, size = case
    before = (snapshot.state(), snapshot.index_state())
    result = plan_reclaim(request, snapshot, lambda key: ages.get(key, 0.0))
    assert (snapshot.state(), snapshot.index_state()) == before
    if isinstance(result, PreemptionRefusal):
        event("refused")
        return
    event(f"{len(result.victims)} victim(s)")
    tree, usage = snapshot.quotas.tree, snapshot.quotas.usage
    assert tree is not None and usage is not None
    takes: dict[QuotaKey, dict[str, int]] = {}
    units = snapshot.pod_index.units()
    for victim in result.victims:
        assert victim.gang is not None and victim.sub_group is None
        assert {p.uid for p in victim.pods} == units[("gang", *victim.gang)]
        quota_key = snapshot.quotas.quota_of(victim.gang[0], None)
        assert quota_key is not None
        assert ages[victim.gang] >= tree.nodes[quota_key].spec.min_run_seconds
        total = takes.setdefault(quota_key, {})
        total[GPU] = total.get(GPU, 0) + 1000 * len(victim.pods)
    assert (
        reclaim_problems(tree, usage, snapshot.quotas.quota_of(request.namespace, None) or A, takes)
        == []
    )
    assert len(result.nominations) == size
    for victim in result.victim_pods:
        snapshot.remove_pod(victim.uid)
    assert isinstance(place_group(request, snapshot), Placement)


def test_priority_preemption_never_takes_another_quota_below_its_min() -> None:
    """B's high-priority gang fits its quota but not the nodes (a pod of no quota holds 2
    GPUs): preempting A's gangs would take A, within its min, below it; A's gang beyond its
    min may go."""
    outside = pod(
        "outside",
        "free",
        node="n0",
        phase=c.PodPhase.RUNNING,
        requests={GPU: 2, "cpu": "1"},
        priority=1000,
    )
    pods = [outside, *running("a2", 2, "team-a", "n0")]
    snapshot = cluster(4, pods, quota(A, 2), quota(B, 2))
    request = gang(
        "b2",
        members("b2", 2, "team-b", requests={GPU: 1, "cpu": "100m"}, priority=100),
        namespace="team-b",
        priority=100,
    )
    result = plan_preemption(request, snapshot)
    assert isinstance(result, PreemptionPlan)
    assert preemption_quota_problems(request, snapshot, result.victims) == [
        "it would take quota team-a/a below its min by 2 nvidia.com/gpu"
    ]
    beyond = cluster(4, [outside, *running("a2", 2, "team-a", "n0")], quota(A, 0), quota(B, 2))
    result = plan_preemption(request, beyond)
    assert isinstance(result, PreemptionPlan)
    assert preemption_quota_problems(request, beyond, result.victims) == []
