"""ElasticQuota on the snapshot: each quota's use is the sum of the pods held, through every
change and undo, and placement admits a gang whole against it before placing anything."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from podgroup_operator import constants as c
from podgroup_operator.api.elastic_quota import QuotaKey, QuotaRef, QuotaSpec, member_quota_ref
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.scheduling.elastic.tree import QuotaTree, build_tree
from podgroup_operator.scheduling.gang import Placement, Refusal
from podgroup_operator.scheduling.placement import place_gang_group, place_group, try_place
from podgroup_operator.scheduling.quota_admission import gang_charge, gang_quota
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.builders import node, pod
from tests.unit.scheduling.helpers import GPU, gang, members

A: QuotaKey = ("team-a", "a")
B: QuotaKey = ("team-b", "b")
ORG: QuotaKey = ("org", "org")


def gpus(n: int) -> dict[str, int]:
    return {GPU: n * 1000}


def quota(
    key: QuotaKey,
    min_: int,
    max_: int | None = None,
    *,
    parent: QuotaKey | None = None,
    guarantee: int = 0,
) -> QuotaSpec:
    return QuotaSpec(
        key=key,
        min=gpus(min_),
        max=gpus(max_) if max_ is not None else {},
        guarantee=gpus(guarantee) if guarantee else {},
        parent=QuotaRef(*parent) if parent else None,
    )


def gpu_nodes(count: int, per_node: int = 4) -> list[dict[str, Any]]:
    return [node(f"n{i}", extended={GPU: per_node}) for i in range(count)]


def gpu_pods(group: str, count: int, namespace: str, gpus_each: int = 1) -> list[dict[str, Any]]:
    return members(group, count, namespace, requests={GPU: gpus_each, "cpu": "100m"})


def bound(name: str, namespace: str, on: str, gpus_each: int = 1, **kw: Any) -> dict[str, Any]:
    return pod(
        name,
        namespace,
        node=on,
        phase=c.PodPhase.RUNNING,
        requests={GPU: gpus_each, "cpu": "100m"},
        **kw,
    )


def used(snapshot: Snapshot, key: QuotaKey) -> int:
    usage = snapshot.quotas.usage
    assert usage is not None
    return usage.of_quota(key).get(GPU, 0) // 1000


def tree_of(snapshot: Snapshot, *specs: QuotaSpec) -> QuotaTree:
    capacity = {GPU: sum(n.allocatable.get(GPU, 0) for n in snapshot.nodes.values())}
    return build_tree(specs, capacity)


# --- the snapshot's use -------------------------------------------------------------------------
def test_no_tree_charges_nothing_and_costs_nothing() -> None:
    snapshot = Snapshot.build(gpu_nodes(1), [bound("p", "team-a", "n0")])
    assert snapshot.quotas.tree is None
    assert snapshot.quotas.usage is None
    assert snapshot.quotas.state() == ()


def test_setting_a_tree_charges_the_pods_already_held_and_follows_binds_and_deletions() -> None:
    first = bound("p0", "team-a", "n0")
    snapshot = Snapshot.build(gpu_nodes(2), [first, bound("p1", "team-b", "n1", 2)])
    snapshot.quotas.set_tree(tree_of(snapshot, quota(A, 4), quota(B, 4)))
    assert (used(snapshot, A), used(snapshot, B)) == (1, 2)
    later = bound("p2", "team-a", "n1", 3)
    snapshot.add_pod(later)
    assert used(snapshot, A) == 4
    snapshot.remove_pod(first)
    assert used(snapshot, A) == 3
    finished = {**later, "status": {**later["status"], "phase": c.PodPhase.SUCCEEDED}}
    snapshot.add_pod(finished)
    assert used(snapshot, A) == 0


def test_a_pod_names_its_quota_by_label_across_namespaces() -> None:
    labelled = bound("p", "elsewhere", "n0", 2, labels={c.LABEL_ELASTIC_QUOTA: "team-a/a"})
    snapshot = Snapshot.build(gpu_nodes(1), [labelled, bound("q", "nowhere", "n0")])
    snapshot.quotas.set_tree(tree_of(snapshot, quota(A, 4)))
    assert used(snapshot, A) == 2


def test_assume_and_its_undo_and_simulated_removal_move_the_use_exactly() -> None:
    other = bound("p0", "team-b", "n0", 2)
    snapshot = Snapshot.build(gpu_nodes(2), [other], gang_of=group_key_of)
    snapshot.quotas.set_tree(tree_of(snapshot, quota(A, 4), quota(B, 4)))
    before = snapshot.index_state()
    placed = place_group(gang("g", gpu_pods("g", 3, "team-a"), namespace="team-a"), snapshot)
    assert isinstance(placed, Placement)
    assert used(snapshot, A) == 3
    placed.undo()
    assert used(snapshot, A) == 0
    undo = snapshot.simulate_removal([str(other["metadata"]["uid"])])
    assert used(snapshot, B) == 0
    undo()
    assert snapshot.index_state() == before


def test_a_new_tree_rebuilds_the_use_from_the_pods() -> None:
    snapshot = Snapshot.build(gpu_nodes(1), [bound("p0", "team-a", "n0", 2)])
    snapshot.quotas.set_tree(tree_of(snapshot, quota(A, 4)))
    child = quota(A, 2, parent=ORG)
    snapshot.quotas.set_tree(tree_of(snapshot, quota(ORG, 4), child))
    assert (used(snapshot, A), used(snapshot, ORG)) == (2, 2)
    snapshot.quotas.set_tree(None)
    assert snapshot.quotas.usage is None


# --- admission in placement ---------------------------------------------------------------------
def test_a_gang_past_its_max_is_refused_whole_for_quota_not_for_nodes() -> None:
    snapshot = Snapshot.build(gpu_nodes(2), [], gang_of=group_key_of)
    snapshot.quotas.set_tree(tree_of(snapshot, quota(A, 2, 3), quota(B, 6)))
    before = snapshot.index_state()
    outcome = place_group(gang("g", gpu_pods("g", 4, "team-a"), namespace="team-a"), snapshot)
    assert isinstance(outcome, Refusal)
    assert outcome.reason is c.Reason.WAITING_FOR_QUOTA
    assert outcome.message.startswith("quota team-a/a: needs 4 nvidia.com/gpu; uses 0 of min 2")
    assert "max 3" in outcome.message
    assert snapshot.index_state() == before


def test_a_gang_borrows_idle_min_of_another_quota() -> None:
    snapshot = Snapshot.build(gpu_nodes(2), [], gang_of=group_key_of)
    snapshot.quotas.set_tree(tree_of(snapshot, quota(A, 2), quota(B, 6)))
    outcome = place_group(gang("g", gpu_pods("g", 5, "team-a"), namespace="team-a"), snapshot)
    assert isinstance(outcome, Placement)
    assert used(snapshot, A) == 5


def test_a_guarantee_is_never_lent() -> None:
    snapshot = Snapshot.build(gpu_nodes(2), [], gang_of=group_key_of)
    snapshot.quotas.set_tree(tree_of(snapshot, quota(A, 2), quota(B, 6, guarantee=4)))
    refused = place_group(gang("g", gpu_pods("g", 5, "team-a"), namespace="team-a"), snapshot)
    assert isinstance(refused, Refusal)
    assert refused.reason is c.Reason.WAITING_FOR_QUOTA
    fits = place_group(gang("h", gpu_pods("h", 4, "team-a"), namespace="team-a"), snapshot)
    assert isinstance(fits, Placement)


def test_the_second_gang_of_a_gang_group_sees_the_first_charged() -> None:
    snapshot = Snapshot.build(gpu_nodes(2), [], gang_of=group_key_of)
    snapshot.quotas.set_tree(tree_of(snapshot, quota(A, 4, 4), quota(B, 4)))
    first = gang("g1", gpu_pods("g1", 3, "team-a"), namespace="team-a")
    second = gang("g2", gpu_pods("g2", 2, "team-a"), namespace="team-a")
    before = snapshot.index_state()
    outcome = place_gang_group([first, second], snapshot)
    assert isinstance(outcome, Refusal)
    assert outcome.reason is c.Reason.WAITING_FOR_QUOTA
    assert "needs 2 nvidia.com/gpu; uses 3 of min 4, max 4" in outcome.message
    assert snapshot.index_state() == before


def test_what_ifs_pass_the_quota_too() -> None:
    snapshot = Snapshot.build(gpu_nodes(2), [], gang_of=group_key_of)
    snapshot.quotas.set_tree(tree_of(snapshot, quota(A, 1, 1), quota(B, 7)))
    assert try_place([gang("g", gpu_pods("g", 2, "team-a"), namespace="team-a")], snapshot) is None


def test_min_resources_charge_where_they_ask_more_than_the_members() -> None:
    snapshot = Snapshot.build(gpu_nodes(2), [], gang_of=group_key_of)
    snapshot.quotas.set_tree(tree_of(snapshot, quota(A, 3, 3), quota(B, 5)))
    request = gang("g", gpu_pods("g", 2, "team-a"), namespace="team-a", min_resources={GPU: 4000})
    assert gang_charge(request, snapshot)[GPU] == 4000
    assert gang_quota(request, snapshot) == A
    outcome = place_group(request, snapshot)
    assert isinstance(outcome, Refusal)
    assert outcome.reason is c.Reason.WAITING_FOR_QUOTA


def test_a_three_level_tree_holds_every_max_on_the_path() -> None:
    leaf: QuotaKey = ("team-a", "a")
    mid: QuotaKey = ("org", "mid")
    snapshot = Snapshot.build(gpu_nodes(2), [], gang_of=group_key_of)
    specs = (
        quota(ORG, 6, 6),
        quota(mid, 4, 4, parent=ORG),
        quota(leaf, 2, parent=mid),
        quota(B, 2),
    )
    snapshot.quotas.set_tree(tree_of(snapshot, *specs))
    refused = place_group(gang("g", gpu_pods("g", 5, "team-a"), namespace="team-a"), snapshot)
    assert isinstance(refused, Refusal)
    assert "ancestor org/mid is at its max" in refused.message
    placed = place_group(gang("h", gpu_pods("h", 4, "team-a"), namespace="team-a"), snapshot)
    assert isinstance(placed, Placement)
    assert (used(snapshot, leaf), used(snapshot, mid), used(snapshot, ORG)) == (4, 4, 4)


# --- a PodGroup naming its members' quota ---------------------------------------------------------
def test_a_group_ref_charges_its_members_and_a_change_charges_them_again() -> None:
    """Members naming no quota follow their PodGroup's label; a member's own label wins."""
    members_ = [bound(f"m{i}", "other", "n0", group="g") for i in range(2)]
    own = bound("m2", "other", "n1", 3, group="g", labels={c.LABEL_ELASTIC_QUOTA: "b"})
    snapshot = Snapshot.build(gpu_nodes(2), [*members_, own], gang_of=group_key_of)
    snapshot.quotas.set_tree(tree_of(snapshot, quota(A, 4), quota(B, 4)))
    assert (used(snapshot, A), used(snapshot, B)) == (0, 3)  # "other" has no quota of its own
    snapshot.quotas.set_group_ref(("other", "g"), QuotaRef(None, "a"))
    assert (used(snapshot, A), used(snapshot, B)) == (2, 3)
    snapshot.quotas.set_group_ref(("other", "g"), QuotaRef(None, "b"))
    assert (used(snapshot, A), used(snapshot, B)) == (0, 5)
    snapshot.quotas.set_group_ref(("other", "g"), None)
    assert (used(snapshot, A), used(snapshot, B)) == (0, 3)
    assert snapshot.quotas.group_refs == {}


def test_group_refs_set_before_a_tree_are_used_when_it_comes() -> None:
    snapshot = Snapshot.build(
        gpu_nodes(1), [bound("m", "other", "n0", 2, group="g")], gang_of=group_key_of
    )
    snapshot.quotas.set_group_ref(("other", "g"), QuotaRef(None, "a"))
    assert snapshot.quotas.usage is None
    snapshot.quotas.set_tree(tree_of(snapshot, quota(A, 4)))
    assert used(snapshot, A) == 2


def test_admission_charges_a_gang_to_its_group_ref_and_the_undo_takes_it_back() -> None:
    snapshot = Snapshot.build(gpu_nodes(2), [], gang_of=group_key_of)
    snapshot.quotas.set_tree(tree_of(snapshot, quota(A, 2, 2), quota(B, 4, 4)))
    snapshot.quotas.set_group_ref(("team-a", "g"), QuotaRef(None, "b"))
    before = snapshot.index_state()
    request = gang("g", gpu_pods("g", 3, "team-a"), namespace="team-a")
    assert gang_quota(request, snapshot) == B
    placed = place_group(request, snapshot)  # over team-a's max 2, within b's 4
    assert isinstance(placed, Placement)
    assert (used(snapshot, A), used(snapshot, B)) == (0, 3)
    placed.undo()
    assert snapshot.index_state() == before
    labelled = members(
        "g", 3, "team-a", requests={GPU: 1, "cpu": "100m"}, labels={c.LABEL_ELASTIC_QUOTA: "a"}
    )
    refused = place_group(gang("g", labelled, namespace="team-a"), snapshot)
    assert isinstance(refused, Refusal)  # the members' own label wins: a's max 2
    assert refused.reason is c.Reason.WAITING_FOR_QUOTA
    assert refused.message.startswith("quota team-a/a:")


# --- the accounting property --------------------------------------------------------------------
_NAMESPACES = ("team-a", "team-b", "other")

steps = st.lists(
    st.one_of(
        st.tuples(st.just("bind"), st.sampled_from(_NAMESPACES), st.integers(0, 3)),
        st.tuples(st.just("delete"), st.integers(0, 30), st.just(0)),
        st.tuples(st.just("tree"), st.integers(0, 2), st.just(0)),
        st.tuples(st.just("assume"), st.sampled_from(_NAMESPACES), st.integers(1, 3)),
        st.tuples(st.just("undo"), st.just(""), st.just(0)),
        st.tuples(st.just("member"), st.sampled_from(_NAMESPACES), st.integers(0, 3)),
        st.tuples(st.just("ref"), st.sampled_from(_NAMESPACES), st.integers(0, 3)),
    ),
    max_size=40,
)


_REFS = (None, QuotaRef(None, "a"), QuotaRef(None, "b"), QuotaRef(None, "org"))
"""What a PodGroup's label may name: nothing, a leaf of either tree, a parent or no quota."""


def _trees(snapshot: Snapshot) -> list[QuotaTree | None]:
    return [
        tree_of(snapshot, quota(A, 4), quota(B, 4)),
        tree_of(snapshot, quota(ORG, 8), quota(A, 2, parent=ORG), quota(B, 2, parent=ORG)),
        None,
    ]


@settings(max_examples=150, deadline=None)
@given(steps)
def test_used_is_always_the_sum_of_the_pods_held(script: list[tuple[str, Any, int]]) -> None:
    """After any sequence of binds, deletions, assumptions and their undos, tree changes (a
    restart is a new tree over the same pods) and PodGroups coming to name another quota, each
    quota uses exactly what its pods hold, each charged by `member_quota_ref`."""
    snapshot = Snapshot.build(gpu_nodes(3, 8), [], gang_of=group_key_of)
    snapshot.quotas.set_tree(_trees(snapshot)[0])
    live: list[dict[str, Any]] = []
    undos = []
    refs: dict[tuple[str, str], QuotaRef] = {}
    for number, (op, arg, amount) in enumerate(script):
        if op == "bind":
            raw = bound(f"p{number}", str(arg), f"n{number % 3}", amount)
            live.append(raw)
            snapshot.add_pod(raw)
        elif op == "member":  # a member of the namespace's gang "shared"; some name b
            labels = {c.LABEL_ELASTIC_QUOTA: "b"} if number % 3 == 0 else {}
            raw = bound(
                f"p{number}", str(arg), f"n{number % 3}", amount, group="shared", labels=labels
            )
            live.append(raw)
            snapshot.add_pod(raw)
        elif op == "ref":
            key = (str(arg), "shared")
            ref = _REFS[amount]
            snapshot.quotas.set_group_ref(key, ref)
            if ref is None:
                refs.pop(key, None)
            else:
                refs[key] = ref
        elif op == "delete" and live:
            snapshot.remove_pod(live.pop(int(arg) % len(live)))
        elif op == "tree":
            snapshot.quotas.set_tree(_trees(snapshot)[int(arg)])
        elif op == "assume":
            if amount % 2 == 0:  # this gang's PodGroup names quota b
                refs[(str(arg), f"g{number}")] = _REFS[2]
                snapshot.quotas.set_group_ref((str(arg), f"g{number}"), _REFS[2])
            request = gang(f"g{number}", gpu_pods(f"g{number}", amount, str(arg)), namespace=arg)
            outcome = place_group(request, snapshot)
            if isinstance(outcome, Placement):
                undos.append(outcome.undo)
        elif op == "undo" and undos:
            undos.pop()()
        usage = snapshot.quotas.usage
        tree = snapshot.quotas.tree
        if usage is None or tree is None:
            continue
        expected: dict[QuotaKey, int] = {}
        for uid in [u for n in snapshot.nodes.values() for u in n.pods]:
            entry = snapshot.pod(uid)
            assert entry is not None
            info = entry.info
            group_ref = refs.get(info.gang) if info.gang is not None else None
            key = tree.quota_for(info.namespace, member_quota_ref(info.labels, group_ref))
            for k in tree.path(key) if key is not None else ():
                expected[k] = expected.get(k, 0) + entry.info.request.get(GPU, 0)
        actual = {k: v.get(GPU, 0) for k, v in usage.used.items() if v.get(GPU, 0)}
        assert actual == {k: v for k, v in expected.items() if v}


def test_members_beyond_min_member_wait_when_only_min_member_fits_the_quota() -> None:
    snapshot = Snapshot.build(gpu_nodes(2), [], gang_of=group_key_of)
    snapshot.quotas.set_tree(tree_of(snapshot, quota(A, 2, 2), quota(B, 6)))
    request = gang("g", gpu_pods("g", 4, "team-a"), namespace="team-a", min_member=2)
    outcome = place_group(request, snapshot)
    assert isinstance(outcome, Placement)
    assert len(outcome.bindings) == 2
    assert used(snapshot, A) == 2
    three = gang("h", gpu_pods("h", 4, "team-a"), namespace="team-a", min_member=3)
    refused = place_group(three, snapshot)
    assert isinstance(refused, Refusal) and refused.reason is c.Reason.WAITING_FOR_QUOTA
    assert "needs 4 nvidia.com/gpu" in refused.message
