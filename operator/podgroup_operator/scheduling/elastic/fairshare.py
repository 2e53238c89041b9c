"""The weighted dominant share of a quota, and the fair share of the surplus among siblings.

A quota's weight is relative to its siblings': per resource, its weight over the sum of its
level's weights (our `weight` for every resource; Koordinator's `shared-weight` per resource).
Its share is the dominant one (DRF) of what it uses beyond its min, over the tree's capacity,
divided by that relative weight:

    share(q) = max over resources r of  (used_r - min_r)+ / capacity_r / weight_r(q)

so a quota within its min has share 0, and of two borrowers the one with the lower share is
served first. All arithmetic is exact (fractions of integer milli-units) and ties are broken by
the quota's key, so the same state always gives the same order: no flip between cycles.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from podgroup_operator.api.elastic_quota import Milli, QuotaKey
from podgroup_operator.scheduling.elastic.tree import QuotaTree, add, sub
from podgroup_operator.scheduling.elastic.usage import QuotaUsage

_UNIT = 1000
"""A weight of 1 in milli-units, so our weights and Koordinator's compare per resource."""


def weight(tree: QuotaTree, key: QuotaKey, resource: str) -> int:
    """A quota's own weight of a resource (milli): Koordinator's shared weight where it gives
    one, else its max of the resource where it gives shared weights for others, else weight."""
    spec = tree.nodes[key].spec
    if spec.shared_weight:
        return spec.shared_weight.get(resource) or spec.max.get(resource) or _UNIT
    return spec.weight * _UNIT


def relative_weight(tree: QuotaTree, key: QuotaKey, resource: str) -> Fraction:
    level = [key, *tree.siblings(key)]
    return Fraction(weight(tree, key, resource), sum(weight(tree, k, resource) for k in level))


def share(
    tree: QuotaTree, used: Mapping[str, int], key: QuotaKey, extra: Mapping[str, int] | None = None
) -> Fraction:
    """The weighted dominant share of `key` using `used` (plus `extra`), beyond its min."""
    total = add(used, extra or {})
    mins = tree.nodes[key].min
    best = Fraction(0)
    for name, amount in total.items():
        capacity = tree.capacity.get(name, 0)
        over = amount - mins.get(name, 0)
        if capacity <= 0 or over <= 0:
            continue
        best = max(best, Fraction(over, capacity) / relative_weight(tree, key, name))
    return best


def borrow_order(
    tree: QuotaTree, usage: QuotaUsage, requests: Mapping[QuotaKey, Mapping[str, int]]
) -> list[QuotaKey]:
    """Quotas with a gang waiting, in the order their gang should be tried: lowest weighted share
    after admitting it first, then by key."""
    return sorted(
        requests,
        key=lambda key: (share(tree, usage.of_quota(key), key, requests[key]), key),
    )


def fair_shares(
    tree: QuotaTree, demand: Mapping[QuotaKey, Mapping[str, int]]
) -> dict[QuotaKey, Milli]:
    """Each quota's fair share now: its demand up to its min, plus its weighted part of what is
    left at its level, by progressive filling over the dominant share (weighted DRF).

    `demand` is what the quota's own members would use if all were served (bound plus waiting);
    a subtree's demand is the sum, capped by max. Out of a parent's fair share come first its
    children's demands up to their mins (carved out of its min), then its own members', and the
    rest is divided among its children."""
    wants = _subtree_demand(tree, demand)
    fair: dict[QuotaKey, Milli] = {}
    _fill_level(tree, tree.roots, dict(tree.capacity), wants, fair)
    for key in tree.walk():
        node = tree.nodes[key]
        if node.children:
            carved: Milli = {}
            for child in node.children:
                mins = tree.nodes[child].min
                carved = add(carved, {n: min(a, mins.get(n, 0)) for n, a in wants[child].items()})
            left = sub(fair[key], carved)
            own = tree.governs(demand.get(key, {}))
            served = {n: max(0, min(own.get(n, 0), a)) for n, a in left.items()}
            pool = {n: a for n, a in sub(fair[key], served).items() if a > 0}
            _fill_level(tree, node.children, pool, wants, fair)
    return fair


def _subtree_demand(
    tree: QuotaTree, demand: Mapping[QuotaKey, Mapping[str, int]]
) -> dict[QuotaKey, Milli]:
    wants: dict[QuotaKey, Milli] = {}
    for key in reversed(list(tree.walk())):
        total = tree.governs(demand.get(key, {}))
        for child in tree.nodes[key].children:
            total = add(total, wants[child])
        caps = tree.nodes[key].spec.max
        wants[key] = {n: min(a, caps.get(n, a)) for n, a in total.items() if a > 0}
    return wants


def _fill_level(
    tree: QuotaTree,
    level: list[QuotaKey],
    pool: Milli,
    wants: Mapping[QuotaKey, Milli],
    fair: dict[QuotaKey, Milli],
) -> None:
    base = {
        key: {n: min(a, tree.nodes[key].min.get(n, 0)) for n, a in wants[key].items()}
        for key in level
    }
    surplus: dict[str, Fraction] = {n: Fraction(a) for n, a in pool.items()}
    for key in level:
        for n, a in base[key].items():
            surplus[n] = surplus.get(n, Fraction(0)) - a
    extra = {key: sub(wants[key], base[key]) for key in level}
    given = _progressive_fill(tree, extra, {n: max(a, Fraction(0)) for n, a in surplus.items()})
    for key in level:
        fair[key] = {
            n: base[key].get(n, 0) + int(given[key].get(n, 0)) for n in {*base[key], *given[key]}
        }


def _progressive_fill(
    tree: QuotaTree, extra: Mapping[QuotaKey, Milli], surplus: Mapping[str, Fraction]
) -> dict[QuotaKey, dict[str, Fraction]]:
    """Weighted DRF: every quota's want grows in proportion, its dominant share at the rate of
    its weight, until it is whole or a resource it wants runs out."""
    rate: dict[QuotaKey, Fraction] = {}
    for key, want in extra.items():
        dominant = max(
            (
                (Fraction(a, tree.capacity[n]), n)
                for n, a in want.items()
                if a > 0 and tree.capacity.get(n, 0) > 0
            ),
            default=None,
        )
        if dominant is not None:
            rate[key] = relative_weight(tree, key, dominant[1]) / dominant[0]
    given: dict[QuotaKey, dict[str, Fraction]] = {key: {} for key in extra}
    used: dict[str, Fraction] = {}
    active = sorted(rate)
    while active:
        limits: list[Fraction] = [1 / rate[key] for key in active]
        per_resource: dict[str, Fraction] = {}
        for key in active:
            for n, a in extra[key].items():
                if a > 0:
                    per_resource[n] = per_resource.get(n, Fraction(0)) + a * rate[key]
        exhausted: dict[str, Fraction] = {
            n: (surplus.get(n, Fraction(0)) - used.get(n, Fraction(0))) / speed
            for n, speed in per_resource.items()
        }
        t = min([*limits, *exhausted.values()])
        t = max(t, Fraction(0))
        stopped = {n for n, at in exhausted.items() if at <= t}
        still = []
        for key in active:
            fraction = min(Fraction(1), t * rate[key])
            whole = fraction >= 1
            blocked = any(extra[key].get(n, 0) > 0 for n in stopped)
            if whole or blocked:
                given[key] = {n: a * fraction for n, a in extra[key].items() if a > 0}
                for n, part in given[key].items():
                    used[n] = used.get(n, Fraction(0)) + part
            else:
                still.append(key)
        active = still
    return given
