"""`QuotaUsage.held`, kept along one path at each bind and release, is always what `held_by`
computes over the whole tree (admission reads it instead of walking the tree per decision)."""

from __future__ import annotations

from collections.abc import Hashable

from hypothesis import given, settings

from podgroup_operator.api.elastic_quota import QuotaRef, QuotaSpec
from podgroup_operator.scheduling.elastic.admission import occupancies
from podgroup_operator.scheduling.elastic.tree import build_tree
from podgroup_operator.scheduling.elastic.usage import Member, QuotaUsage, held_by
from tests.unit.scheduling.test_sched_elastic_quota_properties import CPU, GPU, OPS, UNIT, trees


@given(specs=trees(), ops=OPS)
@settings(max_examples=150, deadline=None)
def test_held_is_always_held_by_over_the_whole_tree(
    specs: list[QuotaSpec], ops: list[tuple[str, int, int, int]]
) -> None:
    tree = build_tree(specs)
    keys = sorted(tree.nodes)
    usage = QuotaUsage(tree)
    live: dict[Hashable, Member] = {}
    for op, uid, pick, size in ops:
        if op == "bind":
            member = Member(uid, keys[pick % len(keys)], {GPU: size * UNIT, CPU: size * 500})
            if usage.bind(member):
                live[uid] = member
        elif op == "delete":
            usage.release(uid)
            live.pop(uid, None)
        else:  # a restart, or a tree change: the use is rebuilt from the members
            usage = QuotaUsage.of(tree, list(live.values()))
        assert usage.held == held_by(tree, usage.own)
        assert occupancies(tree, usage) is usage.held


def test_a_guarantee_is_held_before_any_member_binds_and_after_the_last_goes() -> None:
    parent = QuotaSpec(key=("org", "org"), min={GPU: 8 * UNIT})
    child = QuotaSpec(
        key=("a", "a"),
        min={GPU: 4 * UNIT},
        guarantee={GPU: 2 * UNIT},
        parent=QuotaRef("org", "org"),
    )
    tree = build_tree([parent, child])
    usage = QuotaUsage(tree)
    assert usage.held[("org", "org")] == {GPU: 2 * UNIT}
    usage.bind(Member("p", ("a", "a"), {GPU: 3 * UNIT}))
    assert usage.held[("org", "org")] == usage.held[("a", "a")] == {GPU: 3 * UNIT}
    usage.release("p")
    assert (
        usage.held
        == held_by(tree, usage.own)
        == {("org", "org"): {GPU: 2 * UNIT}, ("a", "a"): {GPU: 2 * UNIT}}
    )
