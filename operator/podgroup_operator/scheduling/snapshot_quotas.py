"""The elastic quota tree's use, on the snapshot: every pod holding a node charged to its quota.

`QuotaState` is the snapshot's concern for ElasticQuota (scheduling/elastic/): when a tree is
set, every pod the snapshot holds (bound, assumed or held) is charged to the quota the tree
says it belongs to (`api.elastic_quota.member_quota_ref`: its label, else its PodGroup's label,
else its namespace's one quota), and uncharged when it goes. The PodGroups' labels are kept in
`group_refs` (gang key -> the quota its PodGroup names; fed by the scheduler from PodGroup
events, `set_group_ref`); a gang whose PodGroup comes to name another quota has its held pods
charged again at once, so the use stays the sum of what the pods are charged to.

Since the snapshot's undos put pods back and take assumed ones out through the same two hooks
(`add`, `remove`), admitting a gang, placing it and simulating a reclaim are one transaction
with one undo: what the quota uses is always the sum of the pods the snapshot holds, never a
count kept aside.

Setting a tree (`set_tree`) rebuilds the use from the snapshot's pods, so a quota created,
re-parented or deleted, and a restarted operator, find exactly the use the pods make. Without
a tree (no ElasticQuota in the cluster) `add` and `remove` return at once: the hot path pays
one attribute test per batch of pods; with one, a pod of a gang costs one dict lookup more,
and none while no PodGroup names a quota.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from podgroup_operator.api.elastic_quota import QuotaKey, QuotaRef, member_quota_ref
from podgroup_operator.api.keys import GroupKey
from podgroup_operator.scheduling.elastic.tree import QuotaTree
from podgroup_operator.scheduling.elastic.usage import Member, QuotaUsage
from podgroup_operator.scheduling.podinfo import PodInfo
from podgroup_operator.scheduling.snapshot_nodes import PodEntry

GangUnits = Mapping[tuple[str, str, str], set[str]]
"""The snapshot's held pods by unit (`PodIndex.units`): ("gang", namespace, name) -> UIDs."""


class QuotaState:
    """The quota tree (None: no ElasticQuota) and its use by the pods the snapshot holds."""

    def __init__(self, pods: Mapping[str, PodEntry], units: GangUnits | None = None) -> None:
        self._pods = pods
        self._units: GangUnits = units if units is not None else {}
        self.tree: QuotaTree | None = None
        self.usage: QuotaUsage | None = None
        self.group_refs: dict[GroupKey, QuotaRef] = {}
        """Gang key -> the quota its PodGroup's label names (groups naming none are absent)."""
        self._quota_cache: dict[tuple[str, QuotaRef | None], QuotaKey | None] = {}
        """(namespace, the quota a pod or its group names, or None) -> its quota in the tree."""

    def set_tree(self, tree: QuotaTree | None) -> None:
        """Use `tree` from now on (None: no quota governs anything), its use rebuilt from the
        snapshot's pods."""
        self.tree = tree
        self._quota_cache = {}
        if tree is None:
            self.usage = None
            return
        self.usage = QuotaUsage(tree)
        self.add(self._pods.values())

    def set_group_ref(self, gang: GroupKey, ref: QuotaRef | None) -> None:
        """The PodGroup `gang` now names quota `ref` by its label (None: none, or it is gone).
        Its held pods that name no quota themselves are charged again to the new quota."""
        if self.group_refs.get(gang) == ref:
            return
        if ref is None:
            del self.group_refs[gang]
        else:
            self.group_refs[gang] = ref
        if self.usage is None:
            return
        uids = self._units.get(("gang", *gang)) or ()
        entries = [self._pods[uid] for uid in uids if uid in self._pods]
        self.remove(entries)
        self.add(entries)

    def quota_of(
        self, namespace: str, labels: Mapping[str, str] | None, gang: GroupKey | None = None
    ) -> QuotaKey | None:
        """The quota a pod (or gang) of `namespace` with `labels`, member of `gang`, is charged
        to (`member_quota_ref`); None without a tree, or when no quota governs it. Cached per
        namespace and reference."""
        tree = self.tree
        if tree is None:
            return None
        refs = self.group_refs
        ref = member_quota_ref(labels, refs.get(gang) if refs and gang is not None else None)
        cache_key = (namespace, ref)
        try:
            return self._quota_cache[cache_key]
        except KeyError:
            found = self._quota_cache[cache_key] = tree.quota_for(namespace, ref)
            return found

    def pod_quota(self, info: PodInfo) -> QuotaKey | None:
        """The quota a pod the snapshot holds is charged to (`quota_of` with its gang)."""
        return self.quota_of(info.namespace, info.labels, info.gang)

    def add(self, entries: Iterable[PodEntry]) -> None:
        """Charge pods that came to hold a node (a pod charged already counts once)."""
        usage = self.usage
        if usage is None:
            return
        for entry in entries:
            info = entry.info
            quota = self.quota_of(info.namespace, info.labels, info.gang)
            if quota is not None:
                usage.bind(Member(info.uid, quota, info.request))

    def remove(self, entries: Iterable[PodEntry]) -> None:
        """Uncharge pods that no longer hold a node."""
        usage = self.usage
        if usage is None:
            return
        for entry in entries:
            usage.release(entry.info.uid)

    def state(self) -> tuple[object, ...]:
        """The use per quota in a comparable form: what an undo must restore (tests)."""
        if self.usage is None:
            return ()
        return tuple(
            (key, tuple(sorted(amounts.items())))
            for key, amounts in sorted(self.usage.used.items())
            if amounts
        )
