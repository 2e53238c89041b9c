"""The elastic quota tree decides gang admission, borrowing, fair share and reclaim targets from
normalized specs and bound members alone; these examples pin each rule with its numbers."""

from __future__ import annotations

from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.api.elastic_quota import QuotaKey, QuotaRef, QuotaSpec, normalize
from podgroup_operator.scheduling.elastic.admission import admit, occupancies
from podgroup_operator.scheduling.elastic.fairshare import borrow_order, fair_shares, share
from podgroup_operator.scheduling.elastic.queueing import (
    WaitingGang,
    candidates,
    position,
    quota_queue,
)
from podgroup_operator.scheduling.elastic.reclaim import (
    old_enough,
    over_fair_share,
    over_min,
    reclaim_problems,
    reclaim_targets,
)
from podgroup_operator.scheduling.elastic.tree import QuotaTree, build_tree
from podgroup_operator.scheduling.elastic.usage import Member, QuotaUsage

GPU = "nvidia.com/gpu"
A: QuotaKey = ("ml", "team-a")
B: QuotaKey = ("ml", "team-b")
ORG: QuotaKey = ("org", "org-ml")
OTHER: QuotaKey = ("org", "org-web")


def gpus(n: int) -> dict[str, int]:
    return {GPU: n * 1000}


def spec(
    key: QuotaKey,
    min_: int | None = None,
    max_: int | None = None,
    *,
    guarantee: int | None = None,
    weight: int = 1,
    parent: QuotaKey | None = None,
) -> QuotaSpec:
    return QuotaSpec(
        key=key,
        min=gpus(min_) if min_ is not None else {},
        max=gpus(max_) if max_ is not None else {},
        guarantee=gpus(guarantee) if guarantee else {},
        weight=weight,
        parent=QuotaRef(*parent) if parent else None,
    )


def using(tree: QuotaTree, **per_quota: int) -> QuotaUsage:
    """Usage with one 1-GPU member per GPU used; keyword names pick A, B, ORG or OTHER."""
    keys = {"a": A, "b": B, "org": ORG, "other": OTHER}
    members = [
        Member(f"{name}-{i}", keys[name], gpus(1))
        for name, count in per_quota.items()
        for i in range(count)
    ]
    return QuotaUsage.of(tree, members)


def test_a_quota_borrows_idle_min_of_its_sibling() -> None:
    tree = build_tree([spec(A, 4, 10), spec(B, 4, 8)])
    usage = using(tree, a=4)
    assert admit(tree, usage, A, gpus(3)).fits
    refused = admit(tree, usage, A, gpus(5))
    assert not refused.fits
    assert refused.message() == (
        "quota ml/team-a: needs 5 nvidia.com/gpu; uses 4 of min 4, max 10; "
        "4 borrowable from ml/team-b"
    )


def test_a_guarantee_is_never_lent() -> None:
    tree = build_tree([spec(A, 4, 8), spec(B, 4, 8, guarantee=3)])
    usage = using(tree, a=4)
    assert admit(tree, usage, A, gpus(1)).fits
    assert not admit(tree, usage, A, gpus(2)).fits
    assert occupancies(tree, usage)[B] == gpus(3)


def test_a_koordinator_quota_that_does_not_lend_lends_nothing() -> None:
    def koord(name: str, lend: str) -> dict[str, Any]:
        return {
            "metadata": {
                "namespace": "ml",
                "name": name,
                "labels": {c.LABEL_KOORD_ALLOW_LENT: lend},
            },
            "spec": {"min": {GPU: 4}, "max": {GPU: 8}},
        }

    tree = build_tree([normalize(koord("team-a", "true")), normalize(koord("team-b", "false"))])
    usage = using(tree, a=4)
    refused = admit(tree, usage, A, gpus(1))
    assert not refused.fits
    assert refused.shorts[0].available == 0


def test_max_holds_at_every_level_of_a_three_level_tree() -> None:
    top: QuotaKey = ("org", "company")
    tree = build_tree(
        [
            spec(top, 16, 20),
            spec(ORG, 8, 10, parent=top),
            spec(OTHER, 8, parent=top),
            spec(A, 4, 9, parent=ORG),
            spec(B, 4, parent=ORG),
        ],
        capacity=gpus(24),
    )
    assert tree.problems == []
    assert tree.path(A) == [A, ORG, top]
    empty = using(tree)
    assert admit(tree, empty, A, gpus(9)).fits
    by_leaf = admit(tree, empty, A, gpus(10))
    assert by_leaf.shorts[0].limited_by == A and by_leaf.shorts[0].at_max
    assert admit(tree, empty, B, gpus(10)).fits
    by_org = admit(tree, empty, B, gpus(11))
    assert not by_org.fits
    assert by_org.shorts[0].limited_by == ORG
    assert "ancestor org/org-ml is at its max" in by_org.message()
    usage = QuotaUsage.of(tree, [Member(f"o{i}", OTHER, gpus(1)) for i in range(12)])
    by_top = admit(tree, usage, B, gpus(9))
    assert not by_top.fits
    assert by_top.shorts[0].available == gpus(8)[GPU]  # company's max 20 less org-web's 12
    assert by_top.shorts[0].limited_by == ("org", "company")


def test_a_bare_parent_resolves_in_its_namespace_then_cluster_wide() -> None:
    tree = build_tree(
        [
            QuotaSpec(key=ORG, min=gpus(8)),
            QuotaSpec(key=A, min=gpus(4), parent=QuotaRef(None, "org-ml")),
            QuotaSpec(key=B, min=gpus(4), parent=QuotaRef("org", "org-ml")),
        ]
    )
    assert tree.problems == []
    assert tree.nodes[ORG].children == [A, B]
    assert tree.quota_of("ml", {c.LABEL_KOORD_QUOTA_NAME: "org-ml"}) == ORG
    assert tree.quota_of("ml", {c.LABEL_ELASTIC_QUOTA: "team-b"}) == B
    assert tree.quota_of("ml", None) is None  # two quotas in ml: the pod must name one
    assert tree.quota_of("org", None) == ORG


def test_an_incoherent_tree_lists_its_problems_and_still_decides() -> None:
    tree = build_tree(
        [
            QuotaSpec(key=ORG, min=gpus(4), is_parent=False),
            QuotaSpec(key=A, min=gpus(4), guarantee=gpus(3), parent=QuotaRef("org", "org-ml")),
            QuotaSpec(key=B, min=gpus(4), parent=QuotaRef("org", "org-ml")),
            QuotaSpec(key=("x", "lost"), parent=QuotaRef(None, "nowhere")),
            QuotaSpec(key=("x", "p"), parent=QuotaRef("y", "q")),
            QuotaSpec(key=("y", "q"), parent=QuotaRef("x", "p")),
            QuotaSpec(key=("x", "dup"), parent=QuotaRef(None, "twin")),
            QuotaSpec(key=("y", "twin")),
            QuotaSpec(key=("z", "twin")),
        ]
    )
    text = "\n".join(tree.problems)
    assert "org/org-ml spec.min: its children's mins add up to 8 nvidia.com/gpu" in text
    assert "raise its min or lower theirs" in text
    assert "is marked not a parent" in text
    assert "x/lost spec.parent: no quota 'nowhere'" in text
    assert "the parents loop" in text
    assert "x/dup spec.parent: 'twin' names 2 quotas" in text
    assert tree.nodes[("x", "lost")].parent is None
    assert tree.nodes[("x", "p")].parent is None and tree.nodes[("y", "q")].parent is None
    assert tree.nodes[ORG].guarantee == gpus(3)  # a child's guarantee is its parent's too


def test_resources_no_quota_names_are_not_governed() -> None:
    tree = build_tree([spec(A, 1, 1)])
    verdict = admit(tree, using(tree), A, {GPU: 1000, "cpu": 64_000, "memory": 1 << 40})
    assert verdict.fits
    assert verdict.request == gpus(1)


def test_scheduler_plugins_683_b_gets_its_one_gpu_back() -> None:
    """5 GPUs; A min 4 max 5 uses all 5; B min 1 max 5 asks for 1: B may reclaim exactly the 1
    A borrowed, and after it A is at its min and B fits."""
    tree = build_tree([spec(A, 4, 5), spec(B, 1, 5)])
    assert tree.capacity == gpus(5)
    usage = using(tree, a=5)
    blocked = admit(tree, usage, B, gpus(1))
    assert not blocked.fits
    assert "1 of its min in use by others (reclaimable)" in blocked.message()
    assert over_min(tree, usage) == {A: gpus(1)}
    assert reclaim_targets(tree, usage, B, gpus(1)) == {A: gpus(1)}
    assert reclaim_problems(tree, usage, B, {A: gpus(1)}) == []
    assert reclaim_problems(tree, usage, B, {A: gpus(2)})  # would put A below its min
    usage.release("a-0")
    assert admit(tree, usage, B, gpus(1)).fits
    usage.bind(Member("b-0", B, gpus(1)))
    assert reclaim_targets(tree, usage, A, gpus(1)) == {}  # A at its min: nothing to take back


def test_reclaim_takes_only_what_the_min_promises_and_never_from_its_own_path() -> None:
    tree = build_tree(
        [spec(ORG, 8), spec(A, 4, parent=ORG), spec(B, 4, parent=ORG), spec(OTHER, 8)]
    )
    usage = using(tree, a=1, b=8, org=0, other=7)
    # A may take back 3 (its min 4 less the 1 it uses); B borrowed 4 from A: the 3 come from B.
    assert reclaim_targets(tree, usage, A, gpus(6)) == {B: gpus(3)}
    assert reclaim_problems(tree, usage, A, {ORG: gpus(1)}) != []
    assert reclaim_problems(tree, usage, A, {OTHER: gpus(1)}) != []  # org-web is below its min


def test_reclaim_targets_list_the_most_over_their_share_first() -> None:
    tree = build_tree([spec(A, 4), spec(B, 2, weight=1), spec(OTHER, 2, weight=1)])
    usage = QuotaUsage.of(
        tree,
        [Member(f"b{i}", B, gpus(1)) for i in range(3)]
        + [Member(f"o{i}", OTHER, gpus(1)) for i in range(5)],
    )
    targets = reclaim_targets(tree, usage, A, gpus(4))
    assert list(targets) == [OTHER, B]
    assert targets == {OTHER: gpus(3), B: gpus(1)}


def test_the_surplus_is_shared_by_weight() -> None:
    tree = build_tree([spec(A, 0, weight=3), spec(B, 0, weight=1)], capacity=gpus(8))
    fair = fair_shares(tree, {A: gpus(8), B: gpus(8)})
    assert fair == {A: gpus(6), B: gpus(2)}
    assert fair_shares(tree, {A: gpus(1), B: gpus(8)}) == {A: gpus(1), B: gpus(7)}
    usage = QuotaUsage.of(tree, [Member("b", B, gpus(2)), Member("a", A, gpus(5))])
    assert over_fair_share(tree, usage, fair_shares(tree, {A: gpus(5), B: gpus(8)})) == {}
    # A (weight 3) at 5 of its fair 6 goes before B (weight 1) at its fair 2.
    assert borrow_order(tree, usage, {A: gpus(1), B: gpus(1)}) == [A, B]


def test_fair_share_gives_each_its_min_first_then_the_rest_by_dominant_share() -> None:
    tree = build_tree(
        [
            QuotaSpec(key=A, min={GPU: 2000, "cpu": 8000}),
            QuotaSpec(key=B, min={GPU: 2000, "cpu": 8000}),
        ]
    )
    fair = fair_shares(tree, {A: {GPU: 4000, "cpu": 2000}, B: {GPU: 1000, "cpu": 16_000}})
    assert fair == {A: {GPU: 3000, "cpu": 2000}, B: {GPU: 1000, "cpu": 14_000}}


def test_ties_go_by_key_and_never_flip() -> None:
    tree = build_tree([spec(B, 0), spec(A, 0)], capacity=gpus(4))
    usage = using(tree, a=1, b=1)
    assert share(tree, usage.of_quota(A), A) == share(tree, usage.of_quota(B), B)
    orders = {tuple(borrow_order(tree, usage, {B: gpus(1), A: gpus(1)})) for _ in range(5)}
    assert orders == {(A, B)}


def test_usage_counts_a_member_once_and_follows_a_new_tree() -> None:
    tree = build_tree([spec(ORG, 8), spec(A, 4, parent=ORG)])
    usage = QuotaUsage(tree)
    assert usage.bind(Member("p", A, gpus(2)))
    assert not usage.bind(Member("p", A, gpus(2)))
    assert not usage.bind(Member("q", ("ml", "nope"), gpus(2)))
    assert usage.of_quota(ORG) == gpus(2)
    flat = build_tree([spec(ORG, 8), spec(A, 4)])
    moved = usage.rebuilt(flat)
    assert moved.of_quota(ORG) == {} and moved.of_quota(A) == gpus(2)
    assert usage.release("p") and not usage.release("p")
    assert usage.of_quota(ORG) == {} and usage.of_quota(A) == {}


@pytest.mark.parametrize("gang", [2, 3, 4])
def test_a_gang_is_admitted_whole_or_not_at_all(gang: int) -> None:
    known = build_tree([spec(A, 2, 3)], capacity=gpus(8))
    assert admit(known, using(known), A, gpus(gang)).fits is (gang <= 3)
    # Capacity unknown: the roots' mins are the pool (scheduler-plugins' aggregate rule).
    unknown = build_tree([spec(A, 2, 3)])
    assert admit(unknown, using(unknown), A, gpus(gang)).fits is (gang <= 2)


def test_a_quota_that_holds_quotas_takes_no_gang_of_its_own() -> None:
    tree = build_tree(
        [QuotaSpec(key=ORG, min=gpus(8), is_parent=True), spec(A, 4, parent=ORG)],
    )
    verdict = admit(tree, using(tree), ORG, gpus(1))
    assert not verdict.fits
    assert verdict.message() == (
        "quota org/org-ml holds quotas, not pods (is-parent: true); charge the gang to one of "
        "its children (ml/team-a)"
    )
    assert admit(tree, using(tree), A, gpus(1)).fits


def test_a_gang_younger_than_its_quotas_min_run_time_is_not_reclaimable() -> None:
    tree = build_tree([QuotaSpec(key=A, min=gpus(1), min_run_seconds=600), spec(B, 1)])
    assert not old_enough(tree, A, 599.5)
    assert old_enough(tree, A, 600)
    assert old_enough(tree, B, 0)  # scheduler-plugins' meaning: reclaimable at once


GANGS = [
    WaitingGang("low-old", 0, "2026-01-01T00:00:00Z"),
    WaitingGang("high-new", 10, "2026-01-03T00:00:00Z"),
    WaitingGang("low-new", 0, "2026-01-02T00:00:00Z"),
    WaitingGang("high-twin", 10, "2026-01-03T00:00:00Z"),
]


def test_priority_order_tries_every_gang_and_strict_fifo_only_its_head() -> None:
    by_priority = quota_queue(c.QueueingStrategy.PRIORITY, GANGS)
    assert [g.key for g in by_priority] == ["high-new", "high-twin", "low-old", "low-new"]
    assert candidates(c.QueueingStrategy.PRIORITY, by_priority) == by_priority
    fifo = quota_queue(c.QueueingStrategy.STRICT_FIFO, GANGS)
    assert [g.key for g in fifo] == ["low-old", "low-new", "high-new", "high-twin"]
    assert [g.key for g in candidates(c.QueueingStrategy.STRICT_FIFO, fifo)] == ["low-old"]
    assert position(fifo, "high-new") == (3, 4)
    assert position(fifo, "gone") is None
    assert quota_queue(c.QueueingStrategy.PRIORITY, reversed(GANGS)) == by_priority


def test_a_borrower_past_its_fair_share_is_named_with_the_excess() -> None:
    tree = build_tree([spec(A, 0), spec(B, 0)], capacity=gpus(8))
    usage = using(tree, a=7)
    fair = fair_shares(tree, {A: gpus(8), B: gpus(8)})
    assert fair == {A: gpus(4), B: gpus(4)}
    assert over_fair_share(tree, usage, fair) == {A: gpus(3)}


def test_koordinator_shared_weights_divide_each_resource_by_its_own_weights() -> None:
    def koord(key: QuotaKey, weights: str) -> QuotaSpec:
        return normalize(
            {
                "apiVersion": f"{c.KOORD_QUOTA_GROUP}/v1alpha1",
                "metadata": {
                    "namespace": key[0],
                    "name": key[1],
                    "annotations": {c.ANNOTATION_KOORD_SHARED_WEIGHT: weights},
                },
                "spec": {"min": {GPU: 0}, "max": {GPU: 8}},
            }
        )

    tree = build_tree(
        [koord(A, '{"nvidia.com/gpu": 3}'), koord(B, '{"nvidia.com/gpu": 1}')],
        capacity=gpus(8),
    )
    assert fair_shares(tree, {A: gpus(8), B: gpus(8)}) == {A: gpus(6), B: gpus(2)}


def test_a_guarantee_deep_in_the_tree_is_held_all_the_way_up() -> None:
    """team-a's guarantee of 1 sits under org-ml; team-b's use of org-ml's other GPU must not let
    org-web borrow team-a's guarantee at the top."""
    tree = build_tree(
        [
            spec(ORG, 2, 2),
            spec(A, 1, 1, guarantee=1, parent=ORG),
            spec(B, 0, parent=ORG),
            spec(OTHER, 0),
        ]
    )
    usage = using(tree, b=1)
    assert occupancies(tree, usage)[ORG] == gpus(2)
    assert not admit(tree, usage, OTHER, gpus(1)).fits
    assert admit(tree, usage, A, gpus(1)).fits


def test_a_refusal_names_only_the_lenders_that_could_help() -> None:
    """org-web's idle GPUs are no help to team-a while org-ml, above it, is at its max; team-b's
    idle min beyond its guarantee is."""
    tree = build_tree(
        [
            spec(ORG, 64, 64),
            spec(A, 48, 64, parent=ORG),
            spec(B, 16, guarantee=8, parent=ORG),
            spec(OTHER, 32),
        ]
    )
    usage = QuotaUsage.of(
        tree,
        [Member(f"a{i}", A, gpus(1)) for i in range(40)]
        + [Member(f"b{i}", B, gpus(1)) for i in range(4)],
    )
    assert admit(tree, usage, A, gpus(16)).fits
    assert admit(tree, usage, A, gpus(17)).message() == (
        "quota ml/team-a: needs 17 nvidia.com/gpu; uses 40 of min 48, max 64; "
        "8 borrowable from ml/team-b"
    )


def test_a_borrower_beside_an_idle_guarantee_gives_back_what_it_borrowed() -> None:
    """team-a (min 2) uses 1; org-ml's other child holds 1 guaranteed (idle) and team-b beside
    that uses 1 more: org-ml holds 2 of its min 1, so team-a may take team-b's GPU back."""
    top: QuotaKey = ("org", "company")
    kept: QuotaKey = ("ml", "kept")
    tree = build_tree(
        [
            spec(top, 3),
            spec(A, 2, 2, parent=top),
            spec(ORG, 1, parent=top),
            spec(kept, 1, 1, guarantee=1, parent=ORG),
            spec(B, 0, parent=ORG),
        ]
    )
    usage = using(tree, a=1, b=1)
    assert not admit(tree, usage, A, gpus(1)).fits
    assert over_min(tree, usage) == {ORG: gpus(1), B: gpus(1)}
    assert reclaim_targets(tree, usage, A, gpus(1)) == {B: gpus(1)}
