"""The elastic quota tree's use, on the snapshot: every pod holding a node charged to its quota.

`QuotaState` is the snapshot's concern for ElasticQuota (scheduling/elastic/): when a tree is
set, every pod the snapshot holds (bound, assumed or held) is charged to the quota the tree
says it belongs to (`QuotaTree.quota_of`: its label, else its namespace's one quota), and
uncharged when it goes. Since the snapshot's undos put pods back and take assumed ones out
through the same two hooks (`add`, `remove`), admitting a gang, placing it and simulating a
reclaim are one transaction with one undo: what the quota uses is always the sum of the pods
the snapshot holds, never a count kept aside.

Setting a tree (`set_tree`) rebuilds the use from the snapshot's pods, so a quota created,
re-parented or deleted, and a restarted operator, find exactly the use the pods make. Without
a tree (no ElasticQuota in the cluster) `add` and `remove` return at once: the hot path pays
one attribute test per batch of pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from podgroup_operator.api.elastic_quota import QuotaKey, pod_quota_ref
from podgroup_operator.scheduling.elastic.tree import QuotaTree
from podgroup_operator.scheduling.elastic.usage import Member, QuotaUsage
from podgroup_operator.scheduling.snapshot_nodes import PodEntry


class QuotaState:
    """The quota tree (None: no ElasticQuota) and its use by the pods the snapshot holds."""

    def __init__(self, pods: Mapping[str, PodEntry]) -> None:
        self._pods = pods
        self.tree: QuotaTree | None = None
        self.usage: QuotaUsage | None = None
        self._quota_cache: dict[tuple[str, str | None], QuotaKey | None] = {}
        """(namespace, the quota a pod's label names or None) -> its quota in the tree."""

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

    def quota_of(self, namespace: str, labels: Mapping[str, str] | None) -> QuotaKey | None:
        """The quota a pod (or gang) of `namespace` with `labels` is charged to; None without a
        tree, or when no quota governs it. Cached per namespace and label value."""
        tree = self.tree
        if tree is None:
            return None
        ref = pod_quota_ref(labels)
        cache_key = (namespace, None if ref is None else str(ref))
        try:
            return self._quota_cache[cache_key]
        except KeyError:
            found = self._quota_cache[cache_key] = tree.quota_of(namespace, labels)
            return found

    def add(self, entries: Iterable[PodEntry]) -> None:
        """Charge pods that came to hold a node (a pod charged already counts once)."""
        usage = self.usage
        if usage is None:
            return
        for entry in entries:
            info = entry.info
            quota = self.quota_of(info.namespace, info.labels)
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
