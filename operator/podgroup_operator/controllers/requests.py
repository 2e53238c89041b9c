"""Request building: a waiting group's queue entry and `GangRequest`, from the store.

The scheduler (controllers/scheduler.py) decides when a group is up for a decision (its wait,
backoff, timeout); this module turns what the informers hold for it, the PodGroup model and its
pending and bound member pods, into what the pure core decides (`scheduling.gang.GangRequest`):
its minimum, mode, resources, volume claims, Topology and sub-group tree. It writes nothing and
keeps nothing of its own between calls: the same store gives the same request.
"""

from __future__ import annotations

from collections.abc import Callable

from podgroup_operator import constants as c
from podgroup_operator.adapters.informers import Index
from podgroup_operator.adapters.kube import JSON
from podgroup_operator.api.keys import GroupKey, pod_uid
from podgroup_operator.api.models import PodGroup
from podgroup_operator.api.quantity import to_milli
from podgroup_operator.controllers.scheduler_queue import GangQueue, QueueEntry
from podgroup_operator.controllers.volumes import VolumeBinder
from podgroup_operator.scheduling.gang import GangRequest
from podgroup_operator.scheduling.queue import members_priority, pod_created
from podgroup_operator.scheduling.subgroups import sub_group_tree
from podgroup_operator.scheduling.topology import topology_of


def policy_acts(group: PodGroup) -> bool:
    """Whether the group has a restart policy that acts (RestartGang or FailGang)."""
    return group.spec.policy is not None and group.spec.policy.action != c.PolicyAction.NONE


class Requests:
    """Builds queue entries and requests over the scheduler's store and parts: `members` (the
    index of member pods by group), the queue (which members hold a node), the volume binder
    (members' claims) and `topology_levels` (a Topology's levels by name)."""

    def __init__(
        self,
        members: Index,
        queue: GangQueue,
        volumes: VolumeBinder,
        topology_levels: Callable[[str], tuple[str, ...] | None],
    ) -> None:
        self.members = members
        """Index view: (namespace, name) -> member pod bodies."""
        self.queue = queue
        self.volumes = volumes
        self.topology_levels = topology_levels
        """A Topology's levels by name, coarse to fine (None: no such Topology)."""

    def entry_of_one(self, key: GroupKey, waiting: list[JSON]) -> QueueEntry:
        """A pod of no group, a gang of one: its pod's priority, age and UID, as a PodGroup's
        members give theirs."""
        return QueueEntry(
            namespace=key[0],
            name=key[1],
            waiting=waiting,
            priority=members_priority(waiting),
            created=min(filter(None, map(pod_created, waiting)), default=None),
            uid=pod_uid(waiting[0]) if waiting else "",
        )

    def entry(self, key: GroupKey, waiting: list[JSON], group: PodGroup) -> QueueEntry:
        """A PodGroup's place in the queue: its members' priority, its age, its last failure,
        and whether it is partly bound (some members hold nodes, fewer than minMember).

        Its age is the PodGroup's creation time; for a gang declared on pod labels (a PodGroup
        the operator made after its pods came) its first member's, so that the gang is queued
        from when it was submitted. Both come from the API objects: a restart keeps them."""
        created = group.metadata.creation_timestamp
        if group.metadata.labels.get(c.LABEL_MANAGED_BY) == c.OPERATOR_NAME:
            first = min(
                filter(None, map(pod_created, self.members.get(key, []) or waiting)),
                default=None,
            )
            if first is not None and (created is None or first < created):
                created = first
        return QueueEntry(
            namespace=key[0],
            name=key[1],
            waiting=waiting,
            group=group,
            priority=members_priority(waiting),
            created=created,
            last_failure=group.status.last_failure_time,
            uid=group.metadata.uid or "",
            partly_bound=0 < len(self.queue.bound_members(key)) < group.spec.min_member,
        )

    def of_one(self, queued: QueueEntry) -> GangRequest:
        """The request of a gang of one (a pod of no group): minMember 1."""
        return GangRequest(
            namespace=queued.namespace,
            name=queued.name,
            uid=queued.uid,
            min_member=1,
            pending=queued.waiting,
            priority=queued.priority,
            created=queued.created,
            claims=self.volumes.claims_for(queued.waiting),
        )

    def of_group(self, queued: QueueEntry, group: PodGroup) -> GangRequest:
        """The request of a PodGroup's waiting members, with the members already bound (ours
        in flight too) counted toward its minimum and its sub-groups."""
        key, waiting = queued.key, queued.waiting
        bound = self.queue.bound_members(key)
        satisfied = group.status.phase in (c.Phase.RUNNING, c.Phase.UNKNOWN) and not policy_acts(
            group
        )
        return GangRequest(
            namespace=key[0],
            name=key[1],
            uid=queued.uid,
            min_member=group.spec.min_member,
            pending=waiting,
            mode=group.spec.mode or c.GangMode.STRICT,
            already_bound=len(bound),
            bound_uids=frozenset(bound),
            satisfied_before=satisfied,
            min_resources=(
                {k: to_milli(v) for k, v in group.spec.min_resources.items()}
                if group.spec.min_resources
                else None
            ),
            priority=queued.priority,
            created=queued.created,
            last_failure=queued.last_failure,
            claims=self.volumes.claims_for(waiting),
            topology=topology_of(group.spec.topology_constraint, self.topology_levels),
            sub_groups=sub_group_tree(
                group.spec,
                waiting,
                [m for m in self.members.get(key, []) if pod_uid(m) in bound],
                self.topology_levels,
                group.status.placement,
            ),
        )
