"""Whether a whole gang fits its quota, at every level of the tree, and why not, with numbers.

A gang is admitted whole or not at all: its request (its members' requests up to what placement
needs, or `minResources`) is checked once against the quota it is charged to and, through the
grants below, against every ancestor. What holds for an admitted gang, per governed resource:

- no quota on its path exceeds its `max`;
- each level's children, together, hold at most what their parent was granted, a child
  holding its use, or its guarantee where that is more, counted through its own children
  (`occupancies`): idle min beyond the guarantees is lent, a guarantee never;
- the roots, together, occupy at most the tree's capacity.

So a quota uses its own min first and borrows the rest from siblings (and their parents'
siblings) that lend; `fits` never says yes past a max or into a guarantee.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from podgroup_operator.api.elastic_quota import Milli, QuotaKey
from podgroup_operator.api.quantity import format_milli
from podgroup_operator.scheduling.elastic.tree import QuotaTree, label
from podgroup_operator.scheduling.elastic.usage import QuotaUsage, held_by


def occupancies(tree: QuotaTree, usage: QuotaUsage) -> dict[QuotaKey, Milli]:
    """What each quota holds against its siblings now (usage.held_by), as the usage keeps it
    (`QuotaUsage.held`; read it, never change it)."""
    return usage.held if usage.tree is tree else held_by(tree, usage.own)


def grants(
    tree: QuotaTree, held: Mapping[QuotaKey, Milli], usage: QuotaUsage, key: QuotaKey
) -> list[tuple[QuotaKey, Milli]]:
    """Root first, the most each quota on the path may hold in all (its subtree, its own pods
    included), per governed resource: its parent's grant less what the parent's own pods and
    its siblings hold, capped by its max."""
    out: list[tuple[QuotaKey, Milli]] = []
    pool: Milli = {name: tree.capacity.get(name, 0) for name in tree.governed}
    for x in reversed(tree.path(key)):
        parent = tree.nodes[x].parent
        taken: Milli = dict(usage.own_of(parent)) if parent is not None else {}
        for sibling in tree.siblings(x):
            for name, amount in held[sibling].items():
                taken[name] = taken.get(name, 0) + amount
        grant: Milli = {}
        for name in tree.governed:
            room = pool.get(name, 0) - taken.get(name, 0)
            cap = tree.nodes[x].max_of(name)
            grant[name] = room if cap is None else min(room, cap)
        out.append((x, grant))
        pool = grant
    return out


@dataclass(frozen=True)
class QuotaShort:
    """One resource a gang is short of in its quota, with the numbers its message names."""

    quota: QuotaKey
    resource: str
    needs: int
    uses: int
    min: int
    max: int | None
    available: int
    """What the quota could still take of the resource (its min left, and what it may borrow)."""
    limited_by: QuotaKey
    """The quota on the path whose max or grant binds (the quota itself, or an ancestor)."""
    at_max: bool
    """The binding limit is `limited_by`'s max (not what its siblings occupy)."""
    lenders: tuple[tuple[QuotaKey, int], ...]
    """Quotas beside the path that lend idle min of the resource now, and how much."""

    def message(self) -> str:
        """`quota ns/team-a: needs 16 nvidia.com/gpu; uses 40 of min 48, max 64; 8 borrowable
        from ns/org-ml`, plus the ancestor at its max when that is what binds."""
        r = self.resource
        limit = "no max" if self.max is None else f"max {format_milli(self.max, r)}"
        text = (
            f"quota {label(self.quota)}: needs {format_milli(self.needs, r)} {r}; uses "
            f"{format_milli(self.uses, r)} of min {format_milli(self.min, r)}, {limit}"
        )
        own_left = max(0, self.min - self.uses)
        borrowable = max(0, self.available - own_left)
        if self.lenders and borrowable:
            names = ", ".join(label(key) for key, _ in self.lenders)
            text += f"; {format_milli(borrowable, r)} borrowable from {names}"
        elif borrowable:
            text += f"; {format_milli(borrowable, r)} borrowable"
        if self.available < own_left:
            lent = own_left - self.available
            text += f"; {format_milli(lent, r)} of its min in use by others (reclaimable)"
        if self.limited_by != self.quota:
            why = "is at its max" if self.at_max else "has no more to lend"
            text += f"; ancestor {label(self.limited_by)} {why}"
        elif self.at_max:
            text += "; at its max"
        return text


@dataclass(frozen=True)
class QuotaVerdict:
    """A gang's quota decision: it fits, or the resources it is short of (in name order)."""

    quota: QuotaKey
    request: Milli
    shorts: tuple[QuotaShort, ...]
    refusal: str | None = None
    """A refusal that no amount of capacity lifts (a quota that holds children only)."""

    @property
    def fits(self) -> bool:
        return not self.shorts and self.refusal is None

    def message(self) -> str:
        if self.refusal is not None:
            return self.refusal
        return "; ".join(short.message() for short in self.shorts)


def admit(
    tree: QuotaTree, usage: QuotaUsage, quota: QuotaKey, request: Mapping[str, int]
) -> QuotaVerdict:
    """Whether `request` (a whole gang's) fits `quota` now, at every level; nothing changes."""
    need = tree.governs(request)
    if tree.nodes[quota].spec.is_parent is True:
        children = ", ".join(map(label, tree.nodes[quota].children)) or "none yet"
        return QuotaVerdict(
            quota,
            need,
            (),
            f"quota {label(quota)} holds quotas, not pods (is-parent: true); charge the gang to "
            f"one of its children ({children})",
        )
    held = occupancies(tree, usage)
    path_grants = grants(tree, held, usage, quota)
    node = tree.nodes[quota]
    used = usage.of_quota(quota)
    children_occupy: Milli = {}
    for child in node.children:
        for name, amount in held[child].items():
            children_occupy[name] = children_occupy.get(name, 0) + amount
    own = usage.own_of(quota)
    shorts = []
    for name in sorted(need):
        amount = need[name]
        if amount <= 0:
            continue
        available = (
            path_grants[-1][1].get(name, 0) - own.get(name, 0) - children_occupy.get(name, 0)
        )
        if amount <= available:
            continue
        limited_by, at_max = _binding(tree, usage, path_grants, name)
        shorts.append(
            QuotaShort(
                quota=quota,
                resource=name,
                needs=amount,
                uses=used.get(name, 0),
                min=node.min.get(name, 0),
                max=node.max_of(name),
                available=max(0, available),
                limited_by=limited_by,
                at_max=at_max,
                lenders=_lenders(tree, held, quota, name, limited_by, at_max),
            )
        )
    return QuotaVerdict(quota, need, tuple(shorts))


def _binding(
    tree: QuotaTree, usage: QuotaUsage, path_grants: list[tuple[QuotaKey, Milli]], name: str
) -> tuple[QuotaKey, bool]:
    """The quota on the path with the least room left of `name` and whether its max is what
    limits it; on a tie, one whose max limits it first, then the deepest."""
    best: tuple[int, bool, int, QuotaKey] | None = None
    for depth, (key, grant) in enumerate(path_grants):
        room = grant.get(name, 0) - usage.of_quota(key).get(name, 0)
        cap = tree.nodes[key].max_of(name)
        at_max = cap is not None and grant.get(name, 0) >= cap
        candidate = (room, not at_max, -depth, key)
        if best is None or candidate[:3] < best[:3]:
            best = candidate
    assert best is not None  # the path holds the quota itself
    return best[3], not best[1]


def _lenders(
    tree: QuotaTree,
    held: Mapping[QuotaKey, Milli],
    quota: QuotaKey,
    name: str,
    limited_by: QuotaKey,
    at_max: bool,
) -> tuple[tuple[QuotaKey, int], ...]:
    """Quotas with idle min the gang could borrow: beside its path up to the binding quota (not
    beside that one when its max binds, since nothing from outside it can help)."""
    out = []
    for x in tree.path(quota):
        if x == limited_by and at_max:
            break
        for sibling in tree.siblings(x):
            idle = tree.nodes[sibling].min.get(name, 0) - held[sibling].get(name, 0)
            if idle > 0:
                out.append((sibling, idle))
        if x == limited_by:
            break
    return tuple(out)
