"""Reclaim targets: how much a quota below its min may take back, from whom, and the no-loop rule.

This module answers "how much", never "which gangs": choosing the victims (whole gangs, or whole
sub-groups, by simulating the reclaimer's placement on what they free) is the candidate search's
job. The seam is `reclaim_targets` (per victim quota, the most that may be taken from it) and
`reclaim_problems` (whether a set of takes, all together, is allowed).

Rules, per governed resource, for a reclaimer R and a victim V whose lowest common ancestor is L
(the tree's top when they share no root), with a = R's ancestor-or-self just below L and b = V's.
What a quota holds (usage.held_by) is its subtree's use, idle guarantees counted as held, since
no one else may use them:

- R takes back only what its min promises: after the take, R and every quota on its path below
  L hold at most their min;
- V loses only what it borrowed: after the take, V and every quota on its path below L hold at
  least their min, and V loses no more than its own members use;
- R never takes from its own ancestors or descendants (that is priority preemption, not reclaim).

No-loop invariant: a reclaim is allowed only if afterwards a's weighted share (fairshare.share,
over what it holds) is at most b's, and strictly less unless a is within its min. Shares only
grow with what is held, so for b (or anything under it) to take back from a afterwards, b's
share would have to be at most a's after b gains and a loses, which the first reclaim's
inequality forbids; and since a ends
within its min while a victim's side must stay at or above its min, nothing under a can be
taken back until a borrows again. So no pair of quotas reclaims back and forth, and every
reclaim moves use from above a min to within one, which bounds the use moved by the sum of the
mins until demand changes.
"""

from __future__ import annotations

from collections.abc import Mapping

from podgroup_operator.api.elastic_quota import Milli, QuotaKey
from podgroup_operator.scheduling.elastic.fairshare import share
from podgroup_operator.scheduling.elastic.tree import QuotaTree, add, label, pos, render, sub
from podgroup_operator.scheduling.elastic.usage import QuotaUsage, held_by


def _split(tree: QuotaTree, r: QuotaKey, v: QuotaKey) -> tuple[list[QuotaKey], list[QuotaKey]]:
    """R's path and V's path strictly below their lowest common ancestor."""
    r_path = tree.path(r)
    v_path = tree.path(v)
    common = set(r_path) & set(v_path)
    return [k for k in r_path if k not in common], [k for k in v_path if k not in common]


def _related(tree: QuotaTree, a: QuotaKey, b: QuotaKey) -> bool:
    return a in tree.path(b) or b in tree.path(a)


def over_min(tree: QuotaTree, usage: QuotaUsage) -> dict[QuotaKey, Milli]:
    """Every quota holding more than its min, and by how much: what others may reclaim from it
    (from its subtree's members)."""
    held = held_by(tree, usage.own)
    out = {}
    for key in tree.walk():
        over = pos(sub(held[key], tree.nodes[key].min))
        if over:
            out[key] = over
    return out


def over_fair_share(
    tree: QuotaTree, usage: QuotaUsage, fair: Mapping[QuotaKey, Mapping[str, int]]
) -> dict[QuotaKey, Milli]:
    """Every quota using more than max(min, fair share), and by how much (fairshare.fair_shares
    gives `fair`): the first to lose what they borrowed."""
    out = {}
    for key in tree.walk():
        floor = {
            n: max(tree.nodes[key].min.get(n, 0), fair.get(key, {}).get(n, 0))
            for n in usage.of_quota(key)
        }
        over = pos(sub(usage.of_quota(key), floor))
        if over:
            out[key] = over
    return out


def old_enough(tree: QuotaTree, quota: QuotaKey, ran_seconds: float) -> bool:
    """Whether a gang of `quota` that has run `ran_seconds` (the caller's clock) may be reclaimed:
    its quota's `minRunSeconds` has passed."""
    return ran_seconds >= tree.nodes[quota].spec.min_run_seconds


def claim(
    tree: QuotaTree, usage: QuotaUsage, reclaimer: QuotaKey, need: Mapping[str, int]
) -> Milli:
    """The part of `need` the reclaimer's min promises it: what it may reclaim at most."""
    room = pos(sub(tree.nodes[reclaimer].min, usage.of_quota(reclaimer)))
    return pos({n: min(a, room.get(n, 0)) for n, a in tree.governs(need).items()})


def reclaim_targets(
    tree: QuotaTree, usage: QuotaUsage, reclaimer: QuotaKey, need: Mapping[str, int]
) -> dict[QuotaKey, Milli]:
    """Per victim quota, the most the reclaimer may take from it alone (see the module's rules),
    victims most over their share first, then by key. Empty when the reclaimer is at its min."""
    wanted = claim(tree, usage, reclaimer, need)
    if not wanted:
        return {}
    held = held_by(tree, usage.own)
    found: list[tuple[object, QuotaKey, Milli]] = []
    for victim in tree.walk():
        if _related(tree, reclaimer, victim) or not usage.own_of(victim):
            continue
        r_side, v_side = _split(tree, reclaimer, victim)
        limit = dict(wanted)
        for z in r_side:
            room = sub(tree.nodes[z].min, held[z])
            limit = {n: min(a, room.get(n, 0)) for n, a in limit.items()}
        limit = {n: min(a, usage.own_of(victim).get(n, 0)) for n, a in limit.items()}
        for y in v_side:
            excess = sub(held[y], tree.nodes[y].min)
            limit = {n: min(a, excess.get(n, 0)) for n, a in limit.items()}
        limit = pos(limit)
        if not limit or reclaim_problems(tree, usage, reclaimer, {victim: limit}):
            continue
        top = v_side[-1]
        found.append((-share(tree, held[top], top), victim, limit))
    found.sort(key=lambda item: (item[0], item[1]))
    return {victim: limit for _, victim, limit in found}


def reclaim_problems(
    tree: QuotaTree, usage: QuotaUsage, reclaimer: QuotaKey, taken: Mapping[QuotaKey, Milli]
) -> list[str]:
    """Why these takes, all together, are not an allowed reclaim (empty: allowed). The check the
    victim choice must pass: its gangs' requests summed per victim quota."""
    problems: list[str] = []
    own: dict[QuotaKey, Milli] = dict(usage.own)
    total: Milli = {}
    for victim, amount in taken.items():
        if _related(tree, reclaimer, victim):
            problems.append(f"{label(victim)}: on the reclaimer's own path; that is preemption")
            continue
        if any(a > usage.own_of(victim).get(n, 0) for n, a in amount.items()):
            problems.append(f"{label(victim)}: its members use less than {render(amount)}")
        own[victim] = sub(own.get(victim, {}), amount)
        total = add(total, amount)
    own[reclaimer] = add(own.get(reclaimer, {}), total)
    after = held_by(tree, own)
    for victim in taken:
        if _related(tree, reclaimer, victim):
            continue
        r_side, v_side = _split(tree, reclaimer, victim)
        for y in v_side:
            below = pos(sub(tree.nodes[y].min, after[y]))
            if any(n in taken[victim] for n in below):
                problems.append(f"{label(y)}: would fall below its min by {render(below)}")
        for z in r_side:
            over = pos(sub(after[z], tree.nodes[z].min))
            if any(n in taken[victim] for n in over):
                problems.append(f"{label(z)}: would hold {render(over)} beyond its min")
        a, b = r_side[-1], v_side[-1]
        share_a, share_b = share(tree, after[a], a), share(tree, after[b], b)
        if share_a > share_b or (share_a == share_b and share_a > 0):
            problems.append(
                f"{label(a)} would end with a weighted share {float(share_a):.4f}, not below "
                f"{label(b)}'s {float(share_b):.4f}: a reclaim back would follow"
            )
    return sorted(set(problems))
