"""Properties of the elastic quota tree over random trees, weights, demands and histories.

- Accounting: after any sequence of binds, deletions, restarts (use recomputed from the bound
  members) and tree changes, every quota's use is the sum of its subtree's bound members.
- No loops: gangs wait in their quotas; each round, in borrow order, a quota's head gang is
  admitted if it fits, else its quota reclaims (whole gangs, within `reclaim_targets`, checked
  by `reclaim_problems`, undone when the reclaimer would still not fit) or waits. Whatever the
  tree, the rounds end; no two quotas ever reclaim from each other both ways; the use moved by
  reclaims is at most the sum of the mins; admission never passes a max or the capacity, nor
  lends a guarantee; and at the end every quota whose next unit gang would keep it within its
  min has been served.
"""

from __future__ import annotations

import random
from collections.abc import Hashable

from hypothesis import given, settings
from hypothesis import strategies as st

from podgroup_operator.api.elastic_quota import QuotaKey, QuotaRef, QuotaSpec
from podgroup_operator.scheduling.elastic.admission import admit
from podgroup_operator.scheduling.elastic.fairshare import borrow_order, fair_shares
from podgroup_operator.scheduling.elastic.reclaim import reclaim_problems, reclaim_targets
from podgroup_operator.scheduling.elastic.tree import QuotaTree, add, build_tree
from podgroup_operator.scheduling.elastic.usage import Member, QuotaUsage

GPU = "nvidia.com/gpu"
CPU = "cpu"
UNIT = 1000


@st.composite
def trees(draw: st.DrawFn, *, depth: int = 3) -> list[QuotaSpec]:
    """Coherent trees of up to three levels: each parent's min covers its children's, each max
    at least its min, guarantees within the min, weights 1 to 4."""
    specs: list[QuotaSpec] = []
    counter = [0]

    def node(level: int, parent: QuotaKey | None) -> int:
        counter[0] += 1
        key = (f"ns{draw(st.integers(0, 2))}", f"q{counter[0]}")
        children = draw(st.integers(0, 2)) if level < depth - 1 else 0
        index = len(specs)
        specs.append(QuotaSpec(key=key))  # placeholder, filled once the children are known
        total = sum(node(level + 1, key) for _ in range(children))
        low = total + draw(st.integers(0, 3))
        high = low + draw(st.integers(0, 6)) if draw(st.integers(0, 2)) == 0 else None
        kept = draw(st.integers(0, low)) if draw(st.integers(0, 3)) == 0 else 0
        specs[index] = QuotaSpec(
            key=key,
            min={GPU: low * UNIT},
            max={GPU: high * UNIT} if high is not None else {},
            guarantee={GPU: kept * UNIT} if kept else {},
            weight=draw(st.integers(1, 4)),
            parent=QuotaRef(*parent) if parent else None,
        )
        return low

    for _ in range(draw(st.integers(1, 3))):
        node(0, None)
    # Trees where nobody can lend (a single quota) say little; they stay, but are rarer.
    if len(specs) == 1 and draw(st.booleans()):
        node(0, None)
    return specs


def subtree_sums(
    tree: QuotaTree, members: dict[Hashable, Member]
) -> dict[QuotaKey, dict[str, int]]:
    sums: dict[QuotaKey, dict[str, int]] = {}
    for member in members.values():
        if member.quota not in tree.nodes:
            continue
        for key in tree.path(member.quota):
            sums[key] = add(sums.get(key, {}), tree.governs(member.requests))
    return {key: {n: a for n, a in amounts.items() if a} for key, amounts in sums.items()}


OPS = st.lists(
    st.tuples(
        st.sampled_from(["bind", "bind", "bind", "delete", "restart", "reshape"]),
        st.integers(0, 30),
        st.integers(0, 3),
        st.integers(1, 4),
    ),
    max_size=60,
)


@given(specs=trees(), ops=OPS)
@settings(max_examples=150, deadline=None)
def test_used_is_always_the_sum_of_the_bound_members(
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
                live.setdefault(uid, member)
            else:
                assert uid in live
        elif op == "delete":
            assert usage.release(uid) is (live.pop(uid, None) is not None)
        elif op == "restart":
            usage = QuotaUsage.of(tree, list(live.values()))
        else:  # a quota loses its parent: the tree changes, the members stay
            flat = [
                QuotaSpec(key=s.key, min=s.min, max=s.max, guarantee=s.guarantee)
                if s.key == keys[pick % len(keys)]
                else s
                for s in specs
            ]
            tree = build_tree(flat)
            usage = usage.rebuilt(tree)
        expected = subtree_sums(tree, live)
        assert {k: v for k, v in usage.used.items() if v} == expected
        assert CPU not in {n for amounts in usage.used.values() for n in amounts}


Gangs = list[tuple[QuotaKey, int]]
Phase = tuple[Gangs, list[int]]
"""Gangs (quota, GPUs) arriving, and the running gangs that complete first (picks among them)."""


@st.composite
def worlds(draw: st.DrawFn, *, unit_gangs: bool) -> tuple[list[QuotaSpec], list[Phase]]:
    """A tree, and phases: gangs completing, then gangs arriving at quotas with no children."""
    specs = draw(trees())
    parents = {s.parent.name for s in specs if s.parent is not None}
    leaves = [s.key for s in specs if s.key[1] not in parents]
    sizes = st.just(1) if unit_gangs else st.integers(1, 3)
    phases: list[Phase] = []
    for _ in range(draw(st.integers(1, 4))):
        # A phase's gangs go to one or two quotas: the ones that come while others borrow.
        busy = draw(st.lists(st.sampled_from(leaves), min_size=1, max_size=2, unique=True))
        arrivals = [
            (quota, size)
            for quota in busy
            for size in draw(st.lists(sizes, min_size=1, max_size=30))
        ]
        phases.append((arrivals, draw(st.lists(st.integers(0, 1000), max_size=6))))
    return specs, phases


class Run:
    """Gangs waiting per quota, admitted in borrow order, reclaiming when below their min."""

    def __init__(self, specs: list[QuotaSpec]) -> None:
        self.tree = build_tree(specs)
        self.usage = QuotaUsage(self.tree)
        self.waiting: dict[QuotaKey, list[tuple[int, int]]] = {}
        self.next_uid = 0
        self.total_min = sum(s.min.get(GPU, 0) for s in specs)

    def phase(
        self, arrivals: Gangs, completions: list[int]
    ) -> tuple[list[tuple[QuotaKey, QuotaKey]], int]:
        """Complete, arrive, then admit and reclaim until nothing changes; the reclaims made
        (reclaimer, victim) and the GPUs they moved."""
        for pick in completions:
            running = sorted(self.usage.members, key=str)
            if running:
                self.usage.release(running[pick % len(running)])
        for quota, size in arrivals:
            self.waiting.setdefault(quota, []).append((self.next_uid, size))
            self.next_uid += 1
        reclaims: list[tuple[QuotaKey, QuotaKey]] = []
        moved = 0
        for _ in range(10 * (self.next_uid + 1)):
            changed, moved = self.round(reclaims, moved)
            assert moved <= self.total_min
            if not changed:
                return reclaims, moved
        raise AssertionError("admission and reclaim did not settle")

    def round(self, reclaims: list[tuple[QuotaKey, QuotaKey]], moved: int) -> tuple[bool, int]:
        tree, usage = self.tree, self.usage
        changed = False
        heads = {q: {GPU: queue[0][1] * UNIT} for q, queue in self.waiting.items() if queue}
        for quota in borrow_order(tree, usage, heads):
            uid, size = self.waiting[quota][0]
            request = {GPU: size * UNIT}
            if not admit(tree, usage, quota, request).fits:
                evicted = _reclaim(tree, usage, quota, request)
                if evicted is None:
                    continue
                assert admit(tree, usage, quota, request).fits
                for victim in evicted:
                    reclaims.append((quota, victim.quota))
                    moved += victim.requests[GPU]
                    gpus = victim.requests[GPU] // UNIT
                    self.waiting.setdefault(victim.quota, []).append((self.next_uid, gpus))
                    self.next_uid += 1
            usage.bind(Member(uid, quota, request))
            self.waiting[quota].pop(0)
            changed = True
        return changed, moved


def _reclaim(
    tree: QuotaTree, usage: QuotaUsage, quota: QuotaKey, request: dict[str, int]
) -> list[Member] | None:
    """Whole gangs within the targets, smallest first; undone (None) if the gang still would not
    fit: the one transaction with one undo the scheduler will make of it."""
    targets = reclaim_targets(tree, usage, quota, request)
    if not targets:
        return None
    chosen: list[Member] = []
    taken: dict[QuotaKey, dict[str, int]] = {}
    still = request[GPU]
    for victim, most in targets.items():
        room = most[GPU]
        gangs = sorted(
            (m for m in usage.members.values() if m.quota == victim),
            key=lambda m: (m.requests[GPU], str(m.uid)),
        )
        for member in gangs:
            if still <= 0:
                break
            size = member.requests[GPU]
            if size <= room:
                trial = {**taken, victim: add(taken.get(victim, {}), member.requests)}
                if reclaim_problems(tree, usage, quota, trial):
                    continue
                chosen.append(member)
                taken = trial
                room -= size
                still -= size
    if not chosen:
        return None
    assert reclaim_problems(tree, usage, quota, taken) == []
    for member in chosen:
        usage.release(member.uid)
    if admit(tree, usage, quota, request).fits:
        return chosen
    for member in chosen:
        usage.bind(member)
    return None


def _check_limits(tree: QuotaTree, usage: QuotaUsage) -> None:
    """No max passed, the capacity held, and no guarantee lent: every quota holding no quotas
    can take what is left of its guarantee at once, without reclaiming anything."""
    for key, node in tree.nodes.items():
        cap = node.max_of(GPU)
        assert cap is None or usage.of_quota(key).get(GPU, 0) <= cap
        left = node.guarantee.get(GPU, 0) - usage.of_quota(key).get(GPU, 0)
        if not node.children and left > 0:
            assert admit(tree, usage, key, {GPU: left}).fits, key
    assert sum(usage.of_quota(r).get(GPU, 0) for r in tree.roots) <= tree.capacity.get(GPU, 0)


@given(world=worlds(unit_gangs=True))
@settings(max_examples=200, deadline=None)
def test_reclaims_never_loop_and_every_quota_within_its_min_is_served(
    world: tuple[list[QuotaSpec], list[Phase]],
) -> None:
    specs, phases = world
    run = Run(specs)
    for arrivals, completions in phases:
        reclaims, _ = run.phase(arrivals, completions)
        _check_limits(run.tree, run.usage)
        pairs = set(reclaims)
        assert not {(a, b) for a, b in pairs if (b, a) in pairs}, reclaims
        for quota, queue in run.waiting.items():
            used = run.usage.of_quota(quota).get(GPU, 0)
            assert not queue or used + UNIT > run.tree.nodes[quota].min.get(GPU, 0), quota


@given(world=worlds(unit_gangs=False))
@settings(max_examples=200, deadline=None)
def test_reclaims_of_gangs_of_any_size_never_loop_and_stay_bounded(
    world: tuple[list[QuotaSpec], list[Phase]],
) -> None:
    specs, phases = world
    run = Run(specs)
    for arrivals, completions in phases:
        reclaims, moved = run.phase(arrivals, completions)
        _check_limits(run.tree, run.usage)
        pairs = set(reclaims)
        assert not {(a, b) for a, b in pairs if (b, a) in pairs}, reclaims
        assert moved <= run.total_min


@given(world=worlds(unit_gangs=False))
@settings(max_examples=100, deadline=None)
def test_without_completions_no_two_quotas_ever_reclaim_from_each_other(
    world: tuple[list[QuotaSpec], list[Phase]],
) -> None:
    """With no gang completing, a victim never falls below its min, so it never reclaims: no
    pair reverses over the whole history, not only within a phase."""
    specs, phases = world
    run = Run(specs)
    history: set[tuple[QuotaKey, QuotaKey]] = set()
    for arrivals, _ in phases:
        reclaims, _ = run.phase(arrivals, [])
        history |= set(reclaims)
    assert not {(a, b) for a, b in history if (b, a) in history}


@given(
    specs=trees(),
    demands=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 12), st.integers(0, 8))),
    seed=st.randoms(use_true_random=False),
)
@settings(max_examples=150, deadline=None)
def test_fair_shares_are_whole_bounded_and_independent_of_order(
    specs: list[QuotaSpec], demands: list[tuple[int, int, int]], seed: random.Random
) -> None:
    """Each quota's fair share is at most its demand (capped by max), at least its demand up to
    its min, the roots' shares fit the capacity, and neither the order of the specs nor of the
    demands changes a single number."""
    tree = build_tree(specs)
    keys = sorted(tree.nodes)
    demand: dict[QuotaKey, dict[str, int]] = {}
    for pick, gpu, cpu in demands:
        key = keys[pick % len(keys)]
        demand[key] = add(demand.get(key, {}), {GPU: gpu * UNIT, CPU: cpu * UNIT})
    fair = fair_shares(tree, demand)
    shuffled_specs = list(specs)
    seed.shuffle(shuffled_specs)
    shuffled_demand = list(demand.items())
    seed.shuffle(shuffled_demand)
    assert fair_shares(build_tree(shuffled_specs), dict(shuffled_demand)) == fair
    assert sum(fair[r].get(GPU, 0) for r in tree.roots) <= tree.capacity.get(GPU, 0)
    for key in tree.walk():
        wanted = tree.governs(demand.get(key, {})).get(GPU, 0) + sum(
            _subtree(tree, demand, child) for child in tree.nodes[key].children
        )
        cap = tree.nodes[key].max_of(GPU)
        wanted = wanted if cap is None else min(wanted, cap)
        assert fair[key].get(GPU, 0) <= wanted
        assert fair[key].get(GPU, 0) >= min(wanted, tree.nodes[key].min.get(GPU, 0))
        children = sum(fair[child].get(GPU, 0) for child in tree.nodes[key].children)
        assert children <= fair[key].get(GPU, 0)


def _subtree(tree: QuotaTree, demand: dict[QuotaKey, dict[str, int]], key: QuotaKey) -> int:
    total = demand.get(key, {}).get(GPU, 0) + sum(
        _subtree(tree, demand, child) for child in tree.nodes[key].children
    )
    cap = tree.nodes[key].max_of(GPU)
    return total if cap is None else min(total, cap)
