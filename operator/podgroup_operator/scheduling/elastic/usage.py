"""What each quota uses: the sum of the requests of its bound members, nothing remembered.

A quota's use is recomputed from the pods that are bound (`QuotaUsage.of`), and kept up to date
by adding and removing members as they bind and go (`bind`, `release`); both give the same
numbers, so a restarted operator, or a new leader, finds exactly the use the old one had. A
quota's `used` covers its whole subtree: a parent uses what its children use, plus its own
members. Only the resources the tree governs are counted.

What each quota holds against its siblings (`held_by`) is kept too (`QuotaUsage.held`), updated
along the member's path at each bind and release, so admission reads it instead of walking the
whole tree per decision; it always equals `held_by(tree, own)`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

from podgroup_operator.api.elastic_quota import Milli, QuotaKey
from podgroup_operator.scheduling.elastic.tree import QuotaTree, add, sub


@dataclass(frozen=True, slots=True)
class Member:
    """A bound pod (or a whole admitted gang) charged to a quota (slots: one per pod held)."""

    uid: Hashable
    quota: QuotaKey
    requests: Mapping[str, int]


@dataclass
class QuotaUsage:
    """Use per quota (subtree totals) and own use (members charged to the quota itself)."""

    tree: QuotaTree
    used: dict[QuotaKey, Milli] = field(default_factory=dict)
    own: dict[QuotaKey, Milli] = field(default_factory=dict)
    members: dict[Hashable, Member] = field(default_factory=dict)
    held: dict[QuotaKey, Milli] = field(init=False, repr=False)
    """`held_by(tree, own)`, kept up to date by `bind` and `release`."""

    def __post_init__(self) -> None:
        self.held = held_by(self.tree, self.own)

    @classmethod
    def of(cls, tree: QuotaTree, members: Iterable[Member]) -> QuotaUsage:
        """The use of the quotas from their bound members (members of unknown quotas skipped)."""
        usage = cls(tree)
        for member in members:
            usage.bind(member)
        return usage

    def bind(self, member: Member) -> bool:
        """Charge a member to its quota and every ancestor; False (nothing done) when its quota
        is not in the tree or it is charged already (a bind seen twice counts once)."""
        if member.quota not in self.tree.nodes or member.uid in self.members:
            return False
        amount = self.tree.governs(member.requests)
        self.members[member.uid] = member
        self.own[member.quota] = add(self.own.get(member.quota, {}), amount)
        for key in self.tree.path(member.quota):
            self.used[key] = add(self.used.get(key, {}), amount)
        self._rehold(member.quota)
        return True

    def release(self, uid: Hashable) -> bool:
        """Uncharge a member that ended or was deleted; False when it was not charged."""
        member = self.members.pop(uid, None)
        if member is None:
            return False
        amount = self.tree.governs(member.requests)
        self.own[member.quota] = _clean(sub(self.own[member.quota], amount))
        for key in self.tree.path(member.quota):
            self.used[key] = _clean(sub(self.used[key], amount))
        self._rehold(member.quota)
        return True

    def _rehold(self, quota: QuotaKey) -> None:
        """`held` again for the quota and its ancestors (`held_by`'s rule, along one path)."""
        for key in self.tree.path(quota):
            node = self.tree.nodes[key]
            total = dict(self.own.get(key, {}))
            for child in node.children:
                total = add(total, self.held[child])
            for name, amount in node.spec.guarantee.items():
                total[name] = max(total.get(name, 0), amount)
            self.held[key] = total

    def rebuilt(self, tree: QuotaTree) -> QuotaUsage:
        """The same members over a new tree (a quota created, re-parented or deleted)."""
        return QuotaUsage.of(tree, self.members.values())

    def of_quota(self, key: QuotaKey) -> Milli:
        return self.used.get(key, {})

    def own_of(self, key: QuotaKey) -> Milli:
        return self.own.get(key, {})


def held_by(tree: QuotaTree, own: Mapping[QuotaKey, Mapping[str, int]]) -> dict[QuotaKey, Milli]:
    """What each quota holds against its siblings, given its own members' use: that use plus
    what its children hold, or its own guarantee where that is more. Idle min beyond the
    guarantees is lent; a guarantee anywhere below is held all the way up, so no one outside
    ever borrows it."""
    held: dict[QuotaKey, Milli] = {}
    for key in reversed(list(tree.walk())):
        total = dict(own.get(key, {}))
        for child in tree.nodes[key].children:
            total = add(total, held[child])
        for name, amount in tree.nodes[key].spec.guarantee.items():
            total[name] = max(total.get(name, 0), amount)
        held[key] = total
    return held


def _clean(amounts: Milli) -> Milli:
    return {name: amount for name, amount in amounts.items() if amount}
