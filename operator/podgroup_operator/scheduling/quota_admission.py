"""A gang's ElasticQuota admission, on the snapshot placement runs on: whole, before placement.

`quota_refusal` is the first step of every placement (`placement.place_group`, so gang groups,
what-ifs, preemption and reclaim plans pass it too): the gang's charge (`gang_charge`) must fit
its quota at every level of the tree (`elastic.admission.admit`) against what the quotas use now
(`snapshot.quotas`: the pods held, assumed ones included). A gang that does not fit is refused
with `Reason.WAITING_FOR_QUOTA` and the admission's message, never with a lack of nodes.

The charge rule (docs/decisions/029-elastic-quota-in-the-scheduler.md): per resource, the
requests of the members placement would place now (every pending member), or what
`minResources` asks beyond what the gang's bound members hold, whichever is more. Bound members
are charged already, as pods the snapshot holds. When every pending member does not fit but
the ones the gang needs now do (`within_quota`), only those are placed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from podgroup_operator.api.elastic_quota import Milli, QuotaKey
from podgroup_operator.constants import Reason
from podgroup_operator.scheduling.elastic.admission import QuotaVerdict, admit
from podgroup_operator.scheduling.gang import GangRequest, Refusal
from podgroup_operator.scheduling.resources import pod_requests
from podgroup_operator.scheduling.snapshot import Snapshot


def gang_labels(gang: GangRequest) -> Mapping[str, str]:
    """The labels that name a gang's quota: its first pending member's (a gang's members are
    stamped from one template; a member naming another quota is charged with its gang)."""
    for pod in gang.pending:
        return (pod.get("metadata") or {}).get("labels") or {}
    return {}


def gang_quota(gang: GangRequest, snapshot: Snapshot) -> QuotaKey | None:
    """The quota the gang is charged to (`api.elastic_quota.member_quota_ref`: its first
    pending member's label, else its PodGroup's); None when no quota governs it (or no tree
    is set)."""
    if snapshot.quotas.tree is None:
        return None
    return snapshot.quotas.quota_of(gang.namespace, gang_labels(gang), gang.key)


def gang_charge(gang: GangRequest, snapshot: Snapshot) -> Milli:
    """What admitting the gang charges its quota (see the module docstring for the rule)."""
    charge: Milli = {}
    for pod in gang.pending:
        for name, amount in pod_requests(pod).items():
            charge[name] = charge.get(name, 0) + amount
    if gang.min_resources and not gang.satisfied_before:
        held: Milli = {}
        for uid in gang.bound_uids:
            for name, amount in (snapshot.pod_request(uid) or {}).items():
                held[name] = held.get(name, 0) + amount
        for name, amount in gang.min_resources.items():
            charge[name] = max(charge.get(name, 0), amount - held.get(name, 0))
    return charge


def quota_verdict(gang: GangRequest, snapshot: Snapshot) -> QuotaVerdict | None:
    """The gang's quota decision now; None when no quota governs it."""
    quotas = snapshot.quotas
    tree, usage = quotas.tree, quotas.usage
    if tree is None or usage is None or not gang.pending:
        return None
    quota = gang_quota(gang, snapshot)
    if quota is None:
        return None
    return admit(tree, usage, quota, gang_charge(gang, snapshot))


def quota_refusal(gang: GangRequest, snapshot: Snapshot, *, quiet: bool = False) -> Refusal | None:
    """The gang's refusal by its quota (`Reason.WAITING_FOR_QUOTA`), or None when it fits or
    no quota governs it. `quiet`: no message (a what-if asks many times)."""
    verdict = quota_verdict(gang, snapshot)
    if verdict is None or verdict.fits:
        return None
    return Refusal(gang.key, Reason.WAITING_FOR_QUOTA, "" if quiet else verdict.message())


def within_quota(gang: GangRequest, snapshot: Snapshot) -> GangRequest | None:
    """The gang with only the members it needs now (minMember's worth, or one replacement once
    satisfied) when all its pending members do not fit its quota but those do; None when
    there is nothing to trim or that does not fit either. The members beyond wait, and are
    placed as replacements when the quota has room. A gang with sub-groups is not trimmed
    (its members are spread over its leaves' minimums)."""
    if gang.sub_groups is not None:
        return None
    needed = 1 if gang.satisfied_before else gang.min_member - gang.already_bound
    if needed <= 0 or needed >= len(gang.pending):
        return None
    trimmed = replace(gang, pending=tuple(gang.pending[:needed]))
    return trimmed if quota_refusal(trimmed, snapshot, quiet=True) is None else None
