"""What the scheduling core is asked (a `GangRequest`) and what it answers (placement or refusal).

These live in their own module because both the queue (which orders requests) and placement
(which decides them) need them, and neither should import the other. They hold raw pod dicts,
not parsed models: the core reads only the few fields kube-scheduler reads, and the adapters
hand over exactly what the apiserver sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from podgroup_operator.api.keys import GroupKey
from podgroup_operator.constants import GangMode, Reason
from podgroup_operator.scheduling.snapshot import NO_UNDO, Undo
from podgroup_operator.scheduling.volumes import VolumeClaim, VolumeDecision


class PreemptionPolicy(StrEnum):
    """`PriorityClass.preemptionPolicy`: may this gang evict lower-priority gangs?"""

    PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
    NEVER = "Never"


@dataclass(frozen=True)
class GangRequest:
    """One PodGroup waiting for placement, with its pending members.

    `already_bound` members (bound or running, placed in an earlier cycle or by anyone) count
    toward `min_member`. `bound_uids` names those of them the snapshot knows, so their requests
    can be counted back when `min_resources` is compared with the cluster's free capacity.
    `satisfied_before` is the "once satisfied" latch: a gang that has already run whole gets
    its replacements placed one by one, without the all-or-nothing barrier.
    """

    namespace: str
    name: str
    min_member: int
    pending: Sequence[Mapping[str, Any]] = ()
    uid: str = ""
    mode: GangMode = GangMode.STRICT
    already_bound: int = 0
    bound_uids: frozenset[str] = frozenset()
    satisfied_before: bool = False
    min_resources: Mapping[str, int] | None = None
    """Milli-units per resource, or None."""
    priority: int = 0
    """The members' `spec.priority` (resolved from their PriorityClass at admission)."""
    created: datetime | None = None
    last_failure: datetime | None = None
    claims: Mapping[tuple[str, str], VolumeClaim] = field(default_factory=dict)
    """The members' PersistentVolumeClaims by (namespace, name), each resolved with its
    StorageClass (`volumes.volume_claim`). A member mounting a claim missing here waits."""
    preemption_policy: PreemptionPolicy = PreemptionPolicy.PREEMPT_LOWER_PRIORITY
    """The members' `spec.preemptionPolicy`; Never means the gang waits instead of evicting."""

    @property
    def key(self) -> GroupKey:
        return (self.namespace, self.name)

    @property
    def label(self) -> str:
        """`namespace/name`, as messages name a group."""
        return f"{self.namespace}/{self.name}"


_POD_TERM_LISTS = (
    "requiredDuringSchedulingIgnoredDuringExecution",
    "preferredDuringSchedulingIgnoredDuringExecution",
)


def pod_terms(requests: Sequence[GangRequest]) -> int:
    """The pod affinity, anti-affinity and topology spread terms of the requests' waiting
    members, each list counted once however many members hold it.

    Why: a decision's cost grows with these terms times the pods already placed (each term
    finds the domains its selector's pods occupy), not only with the members: one member with
    100 required pod-affinity terms among 20,000 pods took 2.2 s on 5,000 nodes, and one with
    500 terms 10.3 s, on the event loop, longer than the leader may go without renewing its
    Lease. The scheduler decides such gangs in its worker thread (`DECIDE_IN_THREAD_TERM_PODS`).
    A template's members share their lists in the informers' stores (`adapters/slim.py`), so
    they count once; lists not shared count for each member, which only errs towards the thread.
    """
    seen: set[int] = set()
    total = 0
    for request in requests:
        for pod in request.pending:
            spec = pod.get("spec") or {}
            affinity = spec.get("affinity") or {}
            lists = [spec.get("topologySpreadConstraints")]
            for kind in ("podAffinity", "podAntiAffinity"):
                terms = affinity.get(kind) or {}
                lists.extend(terms.get(key) for key in _POD_TERM_LISTS)
            for terms in lists:
                if terms and id(terms) not in seen:
                    seen.add(id(terms))
                    total += len(terms)
    return total


@dataclass(frozen=True)
class Binding:
    """One decision: this pod goes to this node."""

    namespace: str
    pod: str
    pod_uid: str
    node: str
    volumes: tuple[VolumeDecision, ...] = ()
    """What to do for the pod's unbound claims before binding it (see `VolumeDecision`)."""


@dataclass(frozen=True)
class Placement:
    """The gang fits: bind these pods. The snapshot already holds them as assumed.

    Call `undo` if binding fails (the API write is refused); otherwise the assumption stands
    until the bound pods arrive through the watch and replace it. `unplaced` names pending
    members beyond minMember that did not fit this time.
    """

    gang: GroupKey
    bindings: tuple[Binding, ...]
    unplaced: tuple[str, ...] = ()
    undo: Undo = field(default=NO_UNDO, compare=False, repr=False)


@dataclass(frozen=True)
class Refusal:
    """The gang does not fit now; `message` says by how much, so a person can act on it.

    `partial` is only ever non-empty for NonStrict gangs: members that fit are kept assumed in
    the snapshot (bind them, and they count as `already_bound` next cycle); `undo` releases them.
    """

    gang: GroupKey
    reason: Reason
    message: str
    partial: tuple[Binding, ...] = ()
    undo: Undo = field(default=NO_UNDO, compare=False, repr=False)


@dataclass(frozen=True)
class GangGroupPlacement:
    """Every PodGroup of a gang group fits; one placement each, undone together by `undo`."""

    placements: tuple[Placement, ...]
    undo: Undo = field(default=NO_UNDO, compare=False, repr=False)

    @property
    def bindings(self) -> tuple[Binding, ...]:
        return tuple(b for p in self.placements for b in p.bindings)
