"""The waiting gangs of each ElasticQuota, per scheduling cycle: their order, the strict FIFO
rule, a gang's position, and what the quotas' status counts as waiting.

`QuotaQueues.refresh` is called with the cycle's queue entries; with no quota tree on the
snapshot it forgets everything and costs nothing else. Each entry is charged to the quota its
first waiting member names, else its PodGroup names (`QuotaState.quota_of`, cached per
namespace), and each quota's entries are ordered by its strategy
(`elastic.queueing.quota_queue`). A `StrictFIFO` quota's gangs behind its head are held back
(`held_back`) and only its head is decided: a blocked head holds back its own quota, never
another quota's gangs, which keep their places in the scheduler's queue.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from podgroup_operator.adapters.kube import JSON
from podgroup_operator.api.elastic_quota import Milli, QuotaKey
from podgroup_operator.api.keys import GroupKey
from podgroup_operator.constants import QueueingStrategy
from podgroup_operator.controllers.scheduler_queue import QueueEntry
from podgroup_operator.scheduling.elastic.queueing import WaitingGang, position, quota_queue
from podgroup_operator.scheduling.elastic.tree import label
from podgroup_operator.scheduling.resources import pod_requests
from podgroup_operator.scheduling.snapshot import Snapshot


def _labels(waiting: list[JSON]) -> dict[str, str]:
    for pod in waiting:
        return dict((pod.get("metadata") or {}).get("labels") or {})
    return {}


class QuotaQueues:
    """Each quota's waiting gangs in its order, as of the last `refresh`."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.quota_of: dict[GroupKey, QuotaKey] = {}
        self.queues: dict[QuotaKey, list[WaitingGang]] = {}
        self._waiting: dict[GroupKey, list[JSON]] = {}

    def refresh(self, entries: Iterable[QueueEntry]) -> None:
        """Charge the cycle's waiting gangs to their quotas and order each quota's queue."""
        quotas = self.snapshot.quotas
        self.quota_of, self.queues, self._waiting = {}, {}, {}
        if quotas.tree is None:
            return
        gangs: dict[QuotaKey, list[WaitingGang]] = {}
        for entry in entries:
            if not entry.waiting:
                continue
            quota = quotas.quota_of(entry.namespace, _labels(entry.waiting), entry.key)
            if quota is None:
                continue
            self.quota_of[entry.key] = quota
            self._waiting[entry.key] = entry.waiting
            created = entry.created.isoformat() if entry.created is not None else ""
            gangs.setdefault(quota, []).append(WaitingGang(entry.key, entry.priority, created))
        tree = quotas.tree
        for quota, waiting in gangs.items():
            self.queues[quota] = quota_queue(tree.nodes[quota].spec.queueing, waiting)

    def held_back(self, key: GroupKey) -> str | None:
        """Why a gang is not decided this cycle (behind the head of its StrictFIFO quota), or
        None: it may be decided."""
        quota = self.quota_of.get(key)
        tree = self.snapshot.quotas.tree
        if quota is None or tree is None or quota not in tree.nodes:
            return None
        if tree.nodes[quota].spec.queueing is not QueueingStrategy.STRICT_FIFO:
            return None
        queue = self.queues.get(quota) or []
        if not queue or queue[0].key == key:
            return None
        head = cast(GroupKey, queue[0].key)
        return f"quota {label(quota)} is StrictFIFO: waiting behind its head {head[0]}/{head[1]}"

    def position_text(self, key: GroupKey) -> str:
        """`; position 3 of 7 in quota ns/team-a`, or "" for a gang of no quota."""
        quota = self.quota_of.get(key)
        if quota is None:
            return ""
        found = position(self.queues.get(quota) or [], key)
        if found is None:
            return ""
        return f"; position {found[0]} of {found[1]} in quota {label(quota)}"

    def waiting(self) -> tuple[dict[QuotaKey, int], dict[QuotaKey, Milli]]:
        """Gangs waiting per quota, and what their waiting members request, summed."""
        counts: dict[QuotaKey, int] = {}
        demand: dict[QuotaKey, Milli] = {}
        for key, quota in self.quota_of.items():
            counts[quota] = counts.get(quota, 0) + 1
            total = demand.setdefault(quota, {})
            for pod in self._waiting.get(key, ()):
                for name, amount in pod_requests(pod).items():
                    total[name] = total.get(name, 0) + amount
        return counts, demand
