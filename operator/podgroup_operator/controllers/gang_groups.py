"""Gang groups: the PodGroups a gang is decided together with, and the PodGroup models.

A PodGroup's `spec.gangGroup` names the PodGroups that start together. `GangGroups` joins the
lists of the PodGroups named (`joined`, following an entry of another namespace only with
consent: domain/gang_groups.py), says why such a gang group cannot be decided (a partner whose
spec does not validate, too many joined, a partner decided this cycle and not placed), gathers the
requests decided as one (`assemble`) and says whom a refusal holds back (`held_with`).
`ParsedGroups` parses each PodGroup once per resourceVersion, for these and for the scheduler.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import NamedTuple

from pydantic import ValidationError

from podgroup_operator import constants as c
from podgroup_operator.adapters.informers import Index
from podgroup_operator.api.keys import GroupKey, gang_group_key
from podgroup_operator.api.limits import MAX_GANG_GROUP, summarize
from podgroup_operator.api.models import PodGroup
from podgroup_operator.api.validation import stored_podgroup_errors
from podgroup_operator.controllers.scheduler_queue import GangQueue, RequestOf
from podgroup_operator.domain.gang_groups import (
    NO_TRUST,
    GangGroupTrust,
    consents,
    entry_of,
)
from podgroup_operator.domain.lifecycle import invalid_spec_message
from podgroup_operator.scheduling.gang import GangRequest


class ParsedGroups:
    """PodGroup models by key, parsed once per resourceVersion."""

    def __init__(self, groups: Index) -> None:
        self.groups = groups
        """Index view: (namespace, name) -> PodGroup bodies (at most one)."""
        self._parsed: dict[GroupKey, tuple[str | None, PodGroup | None, str | None]] = {}

    def get(self, key: GroupKey) -> PodGroup | None:
        """The group's model, parsed once per resourceVersion (every cycle asks for every
        waiting group; parsing each time was the cycle's main cost under a backlog); None when
        there is none, or its spec does not validate (`problem`)."""
        body = next(iter(self.groups.get(key, [])), None)
        if body is None:
            self._parsed.pop(key, None)
            return None
        version = (body.get("metadata") or {}).get("resourceVersion")
        cached = self._parsed.get(key)
        if cached is not None and cached[0] == version and version:
            return cached[1]
        problem = None
        try:
            group: PodGroup | None = PodGroup.model_validate(body)
        except ValidationError as exc:
            group = None
            problem = invalid_spec_message(stored_podgroup_errors(body, exc))
        self._parsed[key] = (version, group, problem)
        return group

    def problem(self, key: GroupKey) -> str | None:
        """What is wrong with the group's stored spec, when `get` found it does not validate."""
        self.get(key)
        cached = self._parsed.get(key)
        return None if cached is None else cached[2]

    def forget(self, key: GroupKey) -> None:
        """The group changed: parse it again when next asked."""
        self._parsed.pop(key, None)


class Joined(NamedTuple):
    """A gang's joined lists (`GangGroups.joined`)."""

    listed: list[str]
    """The entries followed, in the order first named."""
    lacking: tuple[GroupKey, str] | None
    """The first entry not followed for want of consent: (the group listing it, the entry)."""


class GangGroups:
    """The gang groups of a cycle: which PodGroups are decided together, and when they wait."""

    def __init__(
        self, parsed: ParsedGroups, queue: GangQueue, trust: GangGroupTrust = NO_TRUST
    ) -> None:
        self._parsed = parsed
        self._queue = queue
        self.trust = trust
        """Namespaces whose PodGroups join one another's gang groups without listing back."""
        self.placed_now: set[GroupKey] = set()
        """Groups placed in the current cycle (see `partner_not_placed`)."""

    def joined(self, key: GroupKey, group: PodGroup | None) -> Joined:
        """The group's gangGroup, joined with the lists of the PodGroups it names, and theirs in
        turn, in the order first named; at most MAX_GANG_GROUP entries (see `too_joined`).

        Lists that disagree (x lists [x, w], z lists [z, x]) still start x with w; Koordinator's
        gangs likewise wait for every gang their partners wait for
        (docs/decisions/011-scheduler-queue-under-a-backlog.md). An entry naming another
        namespace is followed only with consent (`domain.gang_groups.consents`); the first one
        without it is `lacking`, and the gang waits for it."""
        if group is None or not group.spec.gang_group:
            return Joined([], None)
        listed: list[str] = []
        seen: set[str] = set()
        lacking: tuple[GroupKey, str] | None = None
        todo: deque[tuple[GroupKey, list[str]]] = deque([(key, list(group.spec.gang_group))])
        while todo and len(listed) <= MAX_GANG_GROUP:
            lister, entries = todo.popleft()
            for entry in entries:
                if entry in seen:
                    continue
                named = gang_group_key(entry)
                partner = group if named == key else self._parsed.get(named)
                their_list = None if partner is None else (partner.spec.gang_group or [])
                if not consents(lister, named, their_list, self.trust):
                    lacking = lacking or (lister, entry)
                    continue
                seen.add(entry)
                listed.append(entry)
                if their_list and named != lister:
                    todo.append((named, list(their_list)))
        return Joined(listed, lacking)

    def held_with(self, key: GroupKey, gang_group: Sequence[GangRequest]) -> set[GroupKey]:
        """The groups of `gang_group` (assembled for `key`) that a refusal of it holds back: `key`
        and those whose own joined lists name `key`. The others were pulled in by a list that is
        not theirs; refused, they are decided on their own, and the refusal says nothing to them.
        """
        entry = entry_of(key)
        return {key} | {
            r.key for r in gang_group if entry in self.joined(r.key, self._parsed.get(r.key)).listed
        }

    @staticmethod
    def too_joined(listed: list[str]) -> str | None:
        """Why a gang group cannot be decided when its joined lists (`listed`, from `joined`)
        name more than MAX_GANG_GROUP PodGroups, the most one list may name; else None."""
        if len(listed) <= MAX_GANG_GROUP:
            return None
        return (
            f"the gangGroup lists of this PodGroup and of those it names join more than "
            f"{MAX_GANG_GROUP} PodGroups ({summarize(listed)}); make the lists agree and name "
            f"at most {MAX_GANG_GROUP}"
        )

    def partner_not_placed(
        self, key: GroupKey, listed: list[str], decided: set[GroupKey]
    ) -> tuple[c.Reason, str] | None:
        """(reason, message) when a PodGroup of the gang's joined lists (`listed`, from
        `joined`) was decided this cycle with a gang group of its own and not placed: this
        gang waits with it. None otherwise.

        With lists that disagree (x lists [x, w], z lists [z, x]), x may be decided first with a
        gang group of its own; z, whose list says they start together, must then wait with it
        (docs/decisions/011-scheduler-queue-under-a-backlog.md). Lists that agree decide every
        listed gang at once and never come here."""
        for entry in listed:
            partner = gang_group_key(entry)
            if partner == key or partner not in decided or partner in self.placed_now:
                continue
            state = self._queue.waiting.get(partner)
            reason = state.reason if state is not None and state.reason else None
            said = (state.message if state is not None else None) or ""
            return (
                reason or c.Reason.NOT_ENOUGH_RESOURCES,
                f"gang group member PodGroup {entry} was not placed with its own gangGroup, "
                f"which lists other PodGroups than this one's: {said}",
            )
        return None

    def invalid_partner(self, listed: list[str]) -> str | None:
        """What is wrong with the first PodGroup of the gang's joined lists (`listed`, from
        `joined`) whose spec does not validate, or None. Without it the gang group waited in
        silence for a partner the queue never offers (`GangScheduler._queued`)."""
        for entry in listed:
            if (problem := self._parsed.problem(gang_group_key(entry))) is not None:
                return f"gang group member PodGroup {entry}: {problem}"
        return None

    def assemble(
        self,
        request: GangRequest,
        listed: list[str],
        request_of: RequestOf,
        decided: set[GroupKey],
    ) -> list[GangRequest] | None:
        """This request plus every other PodGroup of its joined lists (`listed`, from
        `joined`: its `gangGroup` and theirs) that is waiting too; None when a partner with
        pending pods is not up for a decision this cycle (binds in flight, a restart's grace,
        its namespace being left): deciding without it would bind part of the gang group.

        A partner backing off is decided with it: the gang group is decided as one, so it is
        due when any of its members is, and starts soon after its last pods come
        (docs/decisions/011-scheduler-queue-under-a-backlog.md).

        A listed group already placed this cycle (one decided and not placed has had this gang
        refused: `partner_not_placed`), or already placed before (minMember members bound), is
        left out; one that does not exist yet, or whose pods are not all there, makes the whole
        gang group wait.
        """
        if len(listed) <= 1:
            return [request]
        members = [request]
        for entry in listed:
            key = namespace, name = gang_group_key(entry)
            if key == request.key or key in decided:
                continue
            if (partner_request := request_of(key) or request_of(key, partner=True)) is not None:
                members.append(partner_request)
            elif key in self._queue.pending:
                return None
            elif (partner := self._parsed.get(key)) is None:
                members.append(
                    GangRequest(namespace=namespace, name=name, min_member=1, pending=())
                )
            elif len(bound := self._queue.bound_members(key)) < partner.spec.min_member:
                # Its pods are not there yet: the gang group waits for them (NotEnoughTasks).
                members.append(
                    GangRequest(
                        namespace=namespace,
                        name=name,
                        min_member=partner.spec.min_member,
                        already_bound=len(bound),
                        bound_uids=frozenset(bound),
                    )
                )
        return members
