"""What each ElasticQuota's `status` says: a pure function of the tree, its use and the gangs
waiting, so the controller only compares and writes (controllers/elastic_quotas.py).

Per quota, per governed resource (amounts in milli-units):

- `used`: its subtree's members (usage.used), scheduler-plugins' field;
- `borrowed`: used beyond its min (lent to it by others);
- `lent`: its idle min (beyond its guarantee, which is never lent) that its siblings hold beyond
  theirs now, at most: what others use of it;
- `fair_share`: its demand up to its min, plus its weighted part of the rest now, its demand
  being what it would use if its waiting gangs were served (fairshare.fair_shares);
- `gangs_waiting`: gangs charged to it waiting for a placement;
- `min`, `max`, `guarantee`: what the scheduler reads, normalized (Koordinator's keys
  applied), so `status` alone says every number the quota is decided by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from podgroup_operator.api.elastic_quota import Milli, QuotaKey
from podgroup_operator.api.quantity import format_milli
from podgroup_operator.scheduling.elastic.fairshare import fair_shares
from podgroup_operator.scheduling.elastic.tree import QuotaTree, add, pos, sub
from podgroup_operator.scheduling.elastic.usage import QuotaUsage, held_by


@dataclass(frozen=True)
class QuotaStatus:
    """One quota's numbers (milli-units per governed resource)."""

    used: Milli = field(default_factory=dict)
    borrowed: Milli = field(default_factory=dict)
    lent: Milli = field(default_factory=dict)
    fair_share: Milli = field(default_factory=dict)
    gangs_waiting: int = 0
    min: Milli = field(default_factory=dict)
    max: Milli = field(default_factory=dict)
    guarantee: Milli = field(default_factory=dict)

    def to_api(self) -> dict[str, Any]:
        """The `status` body (`api.elastic_quota.ElasticQuotaStatus`'s fields): resource lists
        as quantities, every governed resource present, zeros included, so the stored status
        compares equal to the next one computed and a merge patch replaces each list whole."""
        return {
            "used": render_list(self.used),
            "borrowed": render_list(self.borrowed),
            "lent": render_list(self.lent),
            "fairShare": render_list(self.fair_share),
            "gangsWaiting": self.gangs_waiting,
            "min": render_list(self.min),
            "max": render_list(self.max),
            "guarantee": render_list(self.guarantee),
        }


def render_list(amounts: Mapping[str, int]) -> dict[str, str]:
    """Milli-units as a ResourceList (`{"cpu": "1500m", "nvidia.com/gpu": "4"}`), zeros kept."""
    return {name: format_milli(amount, name) for name, amount in sorted(amounts.items())}


def quota_statuses(
    tree: QuotaTree,
    usage: QuotaUsage,
    waiting: Mapping[QuotaKey, int],
    waiting_demand: Mapping[QuotaKey, Mapping[str, int]],
) -> dict[QuotaKey, QuotaStatus]:
    """Every quota's status (see the module docstring). `waiting`: gangs waiting per quota;
    `waiting_demand`: what they would charge, summed per quota."""
    held = held_by(tree, usage.own)
    demand = {
        key: add(usage.own_of(key), tree.governs(waiting_demand.get(key, {}))) for key in tree.nodes
    }
    fair = fair_shares(tree, demand)
    out: dict[QuotaKey, QuotaStatus] = {}
    for key, node in tree.nodes.items():
        used = {n: usage.of_quota(key).get(n, 0) for n in tree.governed}
        borrowed = pos(sub(used, node.min))
        idle = pos(sub(node.min, held[key]))  # held counts the guarantee: never lent
        others = {n: 0 for n in tree.governed}
        for sibling in tree.siblings(key):
            over = pos(sub(held[sibling], tree.nodes[sibling].min))
            others = add(others, over)
        lent = {n: min(idle.get(n, 0), others.get(n, 0)) for n in tree.governed}
        out[key] = QuotaStatus(
            used=used,
            borrowed={n: borrowed.get(n, 0) for n in tree.governed},
            lent=lent,
            fair_share={n: fair.get(key, {}).get(n, 0) for n in tree.governed},
            gangs_waiting=waiting.get(key, 0),
            min=dict(node.min),
            max=dict(node.spec.max),
            guarantee=dict(node.spec.guarantee),
        )
    return out
