"""The preemption planner: the greedy what-if search over nodes of scheduling/preemption.py's
module docstring (steps 1 to 4), for gangs without a domain to search, or inside one domain."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from podgroup_operator.api.keys import GroupKey, pod_uid
from podgroup_operator.api.models import PodGroupSpec
from podgroup_operator.api.subgroups import group_minimum_holds, sub_group_of, top_part
from podgroup_operator.scheduling.gang import Binding, GangRequest
from podgroup_operator.scheduling.placement import try_place
from podgroup_operator.scheduling.podinfo import PodInfo
from podgroup_operator.scheduling.resources import Resources, copies_that_fit, pod_requests
from podgroup_operator.scheduling.shapes import shape_feasibility, shape_groups
from podgroup_operator.scheduling.snapshot import Snapshot, Undo
from podgroup_operator.scheduling.victims import DisruptionBudget, Victim, VictimGang

__all__ = ["WINDOW", "Planner"]

Unit = tuple[str, ...]
"""What is evicted together: ("gang", namespace, name), ("pod", namespace, uid), or
("sub-group", namespace, name, sub-group) of a gang repaired by sub-group (`_Split`)."""

WINDOW = 32
"""Nodes evaluated exactly (in lower-bound order) before the cheapest of them is freed."""


@dataclass
class _Candidate:
    """A victim unit: its pods, priority, and the budgets it would spend."""

    unit: Unit
    pods: list[PodInfo]
    nodes: set[str]
    priority: int
    where: dict[str, str] = field(default_factory=dict)
    """Pod UID -> its node (kept, since chosen victims leave the snapshot)."""
    budgets: dict[int, int] = field(default_factory=dict)
    """Budget index -> how many of its pods that budget covers."""


_Key = tuple[int, int, float, str]


def _gang(unit: Unit) -> tuple[str, str, str]:
    """The gang unit a gang's or a sub-group's unit belongs to."""
    return ("gang", unit[1], unit[2])


@dataclass
class _Split:
    """A victim gang whose restart policy repairs a broken leaf sub-group alone
    (`domain.restart.repairs_sub_groups`): its sub-groups may be taken one by one, as long as
    the group's own minimum still holds without them (`group_minimum_holds`, the restart
    policy's own test); past that, the whole gang is taken, since its restart would end it
    (docs/decisions/016-preemption-takes-whole-sub-groups.md)."""

    spec: PodGroupSpec
    leaf: dict[str, str]
    """Pod UID -> the leaf sub-group (instance) it is in; members outside every one absent."""
    top: dict[str, str]
    """Leaf sub-group -> the direct part of the group it is in."""
    parts: int
    """The group's direct parts, as the restart policy counts them."""
    members: int
    """Its pods on nodes when the plan began."""
    sizes: dict[str, int]
    """Leaf sub-group -> its pods on nodes."""
    priority: int
    """The highest priority among all its pods: a sub-group is a victim only when the gang is."""
    taken: set[str] = field(default_factory=set)

    def may_take(self, leaf: str) -> bool:
        """Whether the group's minimum still holds with `leaf` taken too."""
        taken = self.taken | {leaf}
        return group_minimum_holds(
            self.spec.min_member,
            self.spec.min_sub_group,
            live=self.members - sum(self.sizes[name] for name in taken),
            parts=self.parts,
            whole=self.parts - len({self.top[name] for name in taken}),
        )


def _reprieve_rank(candidate: _Candidate) -> tuple[int, int, int, Unit]:
    """Victims are given back in this order: the highest priority first, then those that
    would spend the most disruption budget, then the biggest (kube-scheduler's reprieve)."""
    return (
        -candidate.priority,
        -sum(candidate.budgets.values()),
        -len(candidate.pods),
        candidate.unit,
    )


class Planner:
    """One planning run: the greedy search of the module docstring, as a what-if."""

    def __init__(
        self,
        gangs: Sequence[GangRequest],
        snapshot: Snapshot,
        budgets: Sequence[DisruptionBudget],
        repairs: Mapping[GroupKey, PodGroupSpec],
    ) -> None:
        self.gangs = gangs
        self.snapshot = snapshot
        self.budgets = budgets
        self.repairs = repairs
        """Specs of the gangs whose sub-groups may be taken alone (`_Split`)."""
        self.splits: dict[Unit, _Split | None] = {}
        self.priority = min(g.priority for g in gangs)
        self.own: set[Unit] = {("gang", *g.key) for g in gangs}
        self.undos: list[Undo] = []
        self.chosen: dict[Unit, Undo] = {}
        self.order: list[Unit] = []
        self.remaining = [b.disruptions_allowed for b in budgets]
        self.shapes: list[tuple[tuple[tuple[str, int], ...], int]] = []
        self.needed = 0
        self.feasible: list[str] = []
        self.units: dict[Unit, _Candidate | None] = {}
        self.slots: dict[str, list[int]] = {}
        """Feasible node -> copies of each shape that fit now."""
        self.room: list[int] = []
        self.version: dict[str, int] = {}
        self.bounds: list[tuple[_Key, int]] = []
        """(lower bound of a node's key, version) for every node worth freeing."""
        self.leaving: dict[str, str] = {}
        """Terminating pods (UID -> node), taken out of the what-if for free."""
        self.blocking: set[Unit] = set()
        """Units taken out by `_free_blockers`: in the way for more than their resources."""

    # --- setup -----------------------------------------------------------------------------------
    def prepare(self) -> None:  # noqa: PLR0915
        snapshot = self.snapshot
        wanted: dict[tuple[tuple[str, int], ...], int] = {}
        feasible: set[str] = set()
        for gang in self.gangs:
            for shape, count in shape_groups(gang):
                if shape.unsupported is not None:
                    continue
                wanted[shape.request] = wanted.get(shape.request, 0) + count
                feasibility = shape_feasibility(snapshot, shape.constraints, gang)
                allowed = feasibility.allowed
                for node_class in feasibility.classes:
                    feasible.update(
                        name for _, name in node_class.order if allowed is None or name in allowed
                    )
            self.needed += max(
                1 if gang.satisfied_before else gang.min_member - gang.already_bound, 0
            )
        self.shapes = sorted(wanted.items())
        self.needed = min(self.needed, sum(c for _, c in self.shapes))
        self.feasible = sorted(feasible)
        leaving = snapshot.pod_index.terminating()
        if leaving:
            for uid in leaving:
                entry = snapshot.pod(uid)
                if entry is not None:
                    self.leaving[uid] = entry.node
            self.undos.append(snapshot.simulate_removal(leaving))
        # One tight pass over the feasible nodes: the room each has now, and the lower bound of
        # what freeing it would cost, from its priority counts alone (no pod is read): with the
        # reprieve (`_key`) its victims may be as few as one pod of its lowest lower priority,
        # and it gains at most what an empty node holds.
        nodes = snapshot.nodes
        requests = [request for request, _ in self.shapes]
        room = [0] * len(requests)
        priority = self.priority
        empty: dict[int, tuple[Mapping[str, int], int]] = {}
        bounds = self.bounds
        single = requests[0] if len(requests) == 1 else None
        first, least = single[0] if single else ("", 0)
        for name in self.feasible:
            state = nodes[name]
            free = state.free
            if single is not None:
                # One shape (the usual gang): most nodes are full and fail on the first resource.
                held = 0 if free.get(first, 0) < least else copies_that_fit(single, free)
                self.slots[name] = [held]
                room[0] += held
            else:
                slots = [copies_that_fit(request, free) for request in requests]
                self.slots[name] = slots
                held = 0
                for index, copies in enumerate(slots):
                    room[index] += copies
                    held += copies
            lowest = None
            for level in state.priorities:
                if level < priority and (lowest is None or level < lowest):
                    lowest = level
            if lowest is None:
                continue
            # Nodes of one class usually share their allocatable: compute "an empty node holds"
            # once per class, checking equality (cheap) rather than trusting it.
            assert state.node_class is not None
            memo = empty.get(state.node_class.id)
            if memo is not None and memo[0] == state.allocatable:
                most = memo[1]
            else:
                most = sum(copies_that_fit(request, state.allocatable) for request in requests)
                empty[state.node_class.id] = (state.allocatable, most)
            if most > held:
                self.version[name] = 0
                bounds.append(((lowest, 0, 1 / (most - held), name), 0))
        self.room = room

    def _candidate(self, unit: Unit) -> _Candidate | None:
        """The unit as a victim, or None when it may not be evicted (cached per run)."""
        if unit in self.units:
            return self.units[unit]
        candidate: _Candidate | None = None
        gang = _gang(unit) if unit[0] == "sub-group" else unit
        if gang not in self.own:
            snapshot = self.snapshot
            infos = []
            where: dict[str, str] = {}
            split = self.splits.get(gang) if unit[0] == "sub-group" else None
            for uid in snapshot.pod_index.units().get((gang[0], gang[1], gang[2]), ()):
                if split is not None and split.leaf.get(uid) != unit[3]:
                    continue
                entry = snapshot.pod(uid)
                if entry is not None:
                    infos.append(entry.info)
                    where[uid] = entry.node
            priority = max((i.priority for i in infos), default=self.priority)
            eligible = priority if split is None else split.priority
            if infos and eligible < self.priority:
                candidate = _Candidate(unit, infos, set(where.values()), priority, where)
                for index, budget in enumerate(self.budgets):
                    covered = sum(1 for i in infos if budget.covers(i))
                    if covered:
                        candidate.budgets[index] = covered
        self.units[unit] = candidate
        return candidate

    # --- room accounting -------------------------------------------------------------------------
    def _copies(self, free: Mapping[str, int]) -> list[int]:
        return [copies_that_fit(request, free) for request, _ in self.shapes]

    def _estimate(self) -> int:
        """Members the free room on feasible nodes could hold (optimistic, per shape)."""
        return sum(
            min(room, count) for room, (_, count) in zip(self.room, self.shapes, strict=True)
        )

    def _violations(self, units: Iterable[_Candidate]) -> int:
        remaining = list(self.remaining)
        count = 0
        for candidate in units:
            for index, covered in candidate.budgets.items():
                before = remaining[index]
                remaining[index] -= covered
                count += min(covered, max(0, covered - max(before, 0)))
        return count

    def _key(self, name: str) -> tuple[_Key, list[_Candidate]] | None:
        """What freeing the node would add to the plan, or None when it gains no member.

        As kube-scheduler does on each candidate node, every lower-priority unit on the node
        is taken out, then the most expensive are given back (`_reprieve_rank`) while the node
        still gains what the gangs lack: so a node holding one pod of priority 100 beside
        enough room held at priority 10 costs 10, not 100. Keyed by all of them, a search
        preferred a node whose victims' top priority was lower before reprieve, and evicted a
        higher-priority pod than kube-scheduler would (tests/integration/
        test_kube_scheduler_agreement.py)."""
        state = self.snapshot.nodes[name]
        freed: dict[Unit, dict[str, int]] = {}
        candidates: dict[Unit, _Candidate] = {}
        split = bool(self.repairs)
        for info in self.snapshot.node_pods(name):
            unit = self._unit_of(info) if split else info.unit
            candidate = self.units[unit] if unit in self.units else self._candidate(unit)
            if candidate is None:
                continue
            candidates[unit] = candidate
            held = freed.setdefault(unit, {})
            for resource, amount in info.request.items():
                held[resource] = held.get(resource, 0) + amount
        if not candidates:
            return None
        free = dict(state.free)
        for held in freed.values():
            for resource, amount in held.items():
                if resource in free:
                    free[resource] += amount
        base = sum(self.slots[name])
        gain = sum(self._copies(free)) - base
        if gain <= 0:
            return None
        wanted = min(gain, max(1, self.needed - self._estimate()))
        new: list[_Candidate] = []
        for candidate in sorted(candidates.values(), key=_reprieve_rank):
            kept = dict(free)
            for resource, amount in freed[candidate.unit].items():
                if resource in kept:
                    kept[resource] -= amount
            kept_gain = sum(self._copies(kept)) - base
            if kept_gain >= wanted:
                free, gain = kept, kept_gain  # given back: the node still gains enough
            else:
                new.append(candidate)
        pods = sum(len(c.pods) for c in new)
        key = (max(c.priority for c in new), self._violations(new), pods / gain, name)
        return key, new

    def _unit_of(self, info: PodInfo) -> Unit:
        """What evicting this pod takes with it: its sub-group, when its gang is repaired by
        sub-group and the group's minimum holds without it too (`_Split`); else `info.unit`."""
        unit = info.unit
        if unit[0] != "gang" or (unit[1], unit[2]) not in self.repairs or unit in self.chosen:
            return unit
        split = self._split(unit)
        leaf = None if split is None else split.leaf.get(info.uid)
        if split is None or leaf is None or not split.may_take(leaf):
            return unit
        return ("sub-group", unit[1], unit[2], leaf)

    def _split(self, unit: Unit) -> _Split | None:
        """The gang's sub-groups as the plan began (cached per run), None when no pod of it is
        in one."""
        if unit in self.splits:
            return self.splits[unit]
        spec = self.repairs[(unit[1], unit[2])]
        subs = spec.sub_groups or []
        leaf: dict[str, str] = {}
        top: dict[str, str] = {}
        sizes: dict[str, int] = {}
        members = 0
        priority = -(2**31)
        tops = {sub.name for sub in subs if sub.parent is None and not sub.match_label_keys}
        for uid in self.snapshot.pod_index.units().get(_gang(unit), ()):
            entry = self.snapshot.pod(uid)
            if entry is None:
                continue
            members += 1
            priority = max(priority, entry.info.priority)
            name = sub_group_of(entry.info.labels, subs).name
            part = top_part(entry.info.labels, subs)
            if name is None or part is None:
                continue
            leaf[uid] = name
            top[name] = part
            tops.add(part)
            sizes[name] = sizes.get(name, 0) + 1
        split = _Split(spec, leaf, top, len(tops), members, sizes, priority) if leaf else None
        self.splits[unit] = split
        return split

    def _choose(self, candidate: _Candidate) -> _Candidate | None:
        """Take the unit out of the what-if; returns what was taken. A sub-group the group's
        minimum no longer allows with those taken already takes its whole gang instead, its
        sub-groups taken so far merged in (`_whole`)."""
        unit = candidate.unit
        if unit[0] == "sub-group":
            gang = _gang(unit)
            split = self.splits[gang]
            assert split is not None
            if not split.may_take(unit[3]) or gang in self.chosen:
                whole = self._whole(gang)
                if whole is None or whole.unit in self.chosen:
                    return None
                candidate = whole
            else:
                split.taken.add(unit[3])
        elif unit in self.splits and self.splits[unit] is not None:
            whole = self._whole(unit)
            if whole is None:
                return None
            candidate = whole
        self._remove(candidate)
        return candidate

    def _whole(self, gang: Unit) -> _Candidate | None:
        """The whole gang as one victim, after giving back the sub-groups of it taken so far
        (so its candidate holds every pod)."""
        split = self.splits[gang]
        assert split is not None
        if split.taken:
            for leaf in sorted(split.taken):
                unit = ("sub-group", gang[1], gang[2], leaf)
                self.chosen.pop(unit)()
                self.order.remove(unit)
                for index, covered in self._known(unit).budgets.items():
                    self.remaining[index] += covered
            split.taken.clear()
            self.units.pop(gang, None)
        return self._candidate(gang)

    def _remove(self, candidate: _Candidate) -> None:
        snapshot = self.snapshot
        self.chosen[candidate.unit] = snapshot.simulate_removal(i.uid for i in candidate.pods)
        self.order.append(candidate.unit)
        for index, covered in candidate.budgets.items():
            self.remaining[index] -= covered
        nodes = snapshot.nodes
        for name in candidate.nodes:
            old = self.slots.get(name)
            if old is None or name not in nodes:
                continue
            slots = self._copies(nodes[name].free)
            self.slots[name] = slots
            for index, copies in enumerate(slots):
                self.room[index] += copies - old[index]

    # --- the search ------------------------------------------------------------------------------
    def search(self) -> tuple[Binding, ...] | None:  # noqa: PLR0915
        """Greedy with a window: nodes wait in `bounds` under a lower bound of their key; up to
        `WINDOW` of the lowest are evaluated exactly into `exact` before the cheapest exact one
        is freed (at once when its key is below every remaining bound). Nodes touched by a freed
        victim are re-evaluated, so a partly freed neighbour competes with its true cost."""
        bounds = self.bounds
        exact: list[tuple[_Key, int]] = []
        heapq.heapify(bounds)
        evaluated = 0
        next_try = 0
        if self.leaving and self._estimate() >= self.needed:
            # Terminating pods alone may make room: then nobody needs to be evicted.
            placed = try_place(self.gangs, self.snapshot)
            if placed is not None:
                return placed
        while True:
            while bounds and self.version.get(bounds[0][0][3]) != bounds[0][1]:
                heapq.heappop(bounds)
            while exact and self.version.get(exact[0][0][3]) != exact[0][1]:
                heapq.heappop(exact)
            if exact and (not bounds or exact[0][0] <= bounds[0][0] or evaluated >= WINDOW):
                key, version = heapq.heappop(exact)
                name = key[3]
                found = self._key(name)  # freed victims may have changed it
                if found is None:
                    self.version.pop(name, None)
                    continue
                if found[0] != key:
                    heapq.heappush(exact, (found[0], version))
                    continue
                self.version.pop(name, None)
                evaluated = 0
                touched: set[str] = set()
                for candidate in found[1]:
                    if candidate.unit not in self.chosen:
                        taken = self._choose(candidate)
                        touched |= taken.nodes if taken is not None else set()
                for other in sorted(touched):
                    if other not in self.version:
                        continue
                    stamp = self.version[other] + 1
                    fresh = self._key(other)
                    if fresh is None:
                        del self.version[other]
                    else:
                        self.version[other] = stamp
                        heapq.heappush(exact, (fresh[0], stamp))
                estimate = self._estimate()
                if estimate >= self.needed and (estimate >= next_try or not (bounds or exact)):
                    placed = try_place(self.gangs, self.snapshot)
                    if placed is not None:
                        return placed
                    next_try = max(estimate * 2, estimate + 1)
            elif bounds:
                key, version = heapq.heappop(bounds)
                name = key[3]
                found = self._key(name)
                evaluated += 1
                if found is None:
                    self.version.pop(name, None)
                else:
                    heapq.heappush(exact, (found[0], version))
            else:
                break
        if self.chosen:
            placed = try_place(self.gangs, self.snapshot)
            if placed is not None:
                return placed
        return self._free_blockers()

    def _free_blockers(self) -> tuple[Binding, ...] | None:
        """The last resort, as kube-scheduler judges each node: every lower-priority unit on
        each usable node that has room for a member by resources, and may shut that room, is
        taken out, and placement tried once more.

        The search counts room by resources, so a node whose room a lower-priority pod shuts
        (its anti-affinity, a host port it holds) looks free already and is never freed by it;
        kube-scheduler finds such victims by running every filter with the node's lower-priority
        pods out, and so does this. Victims taken here are given back only where placement still
        succeeds without them (`reprieve`). Reached only when the search failed."""
        nodes = self.snapshot.nodes
        # A pod shuts a member out by its own anti-affinity, host ports or volumes; any pod may,
        # by its labels, when the member has anti-affinity or spread terms. (A required pod
        # affinity is never met by evicting: kube-scheduler does not preempt for it either.)
        anyone = any(
            shape.inter_pod.anti_affinity or shape.inter_pod.spread
            for gang in self.gangs
            for shape, _ in shape_groups(gang)
        )
        for name in self.feasible:
            if name not in nodes or not any(self.slots.get(name, ())):
                continue
            for info in list(self.snapshot.node_pods(name)):
                if not (anyone or info.ports or info.anti_affinity or info.claims or info.disks):
                    continue
                candidate = self._candidate(self._unit_of(info) if self.repairs else info.unit)
                if candidate is None or candidate.unit in self.chosen:
                    continue
                taken = self._choose(candidate)
                if taken is not None:
                    self.blocking.add(taken.unit)
        if not self.blocking:
            return None
        return try_place(self.gangs, self.snapshot)

    def reprieve(self, placed: tuple[Binding, ...]) -> tuple[Binding, ...]:
        """Give back victim gangs, most expensive first, when the planned placement still fits
        without evicting them.

        The placement stays fixed, so for gangs without pod-to-pod constraints the test is
        exact arithmetic on the nodes the placement uses; otherwise (or when the victim has
        anti-affinity of its own) placement is tried again with the victim back.
        """
        ranked = sorted(self.order, key=lambda u: _reprieve_rank(self._known(u)))
        simple = all(
            shape.inter_pod.empty and shape.unsupported is None
            for gang in self.gangs
            for shape, _ in shape_groups(gang)
        )
        requests = {pod_uid(pod): pod_requests(pod) for gang in self.gangs for pod in gang.pending}
        given_back = False
        for unit in ranked:
            candidate = self._known(unit)
            if (
                simple
                and unit not in self.blocking
                and not any(i.anti_affinity for i in candidate.pods)
            ):
                # Exact for resources with the placement fixed; no snapshot change needed.
                if self._still_fits(placed, requests, candidate):
                    self.chosen.pop(unit)()
                    given_back = True
                continue
            self.chosen.pop(unit)()
            again = try_place(self.gangs, self.snapshot)
            if again is None:
                self.chosen[unit] = self.snapshot.simulate_removal(i.uid for i in candidate.pods)
            else:
                placed = again
                given_back = True
        if not given_back:
            return placed
        final = try_place(self.gangs, self.snapshot)
        return final if final is not None else placed

    def _still_fits(
        self,
        placed: Sequence[Binding],
        requests: Mapping[str, Resources],
        candidate: _Candidate,
    ) -> bool:
        """Would the placed members still fit if this victim stayed (placement fixed)?"""
        back: dict[str, Resources] = {}
        nodes = self.snapshot.nodes
        for info in candidate.pods:
            node = candidate.where.get(info.uid)
            if node is None or node not in nodes:
                continue
            per_node = back.setdefault(node, {})
            for resource, amount in info.request.items():
                per_node[resource] = per_node.get(resource, 0) + amount
        need: dict[str, Resources] = {}
        for binding in placed:
            if binding.node in back:
                per_node = need.setdefault(binding.node, {})
                for resource, amount in requests.get(binding.pod_uid, {}).items():
                    per_node[resource] = per_node.get(resource, 0) + amount
        for name, per_node in need.items():
            free = nodes[name].free
            returned = back[name]
            for resource, amount in per_node.items():
                if resource in free and free[resource] - returned.get(resource, 0) < amount:
                    return False
        return True

    def _known(self, unit: Unit) -> _Candidate:
        candidate = self.units[unit]
        assert candidate is not None
        return candidate

    def restore(self) -> None:
        for undo in self.chosen.values():
            undo()
        self.chosen.clear()
        for undo in reversed(self.undos):
            undo()
        self.undos.clear()

    # --- the answer ------------------------------------------------------------------------------
    def victims(self) -> tuple[VictimGang, ...]:
        remaining = [b.disruptions_allowed for b in self.budgets]
        out: list[VictimGang] = []
        units = sorted(self.chosen, key=lambda u: (self._known(u).priority, u))
        for unit in units:
            candidate = self._known(unit)
            violations = 0
            for index, covered in candidate.budgets.items():
                before = remaining[index]
                remaining[index] -= covered
                violations += min(covered, max(0, covered - max(before, 0)))
            pods = tuple(
                sorted(
                    (
                        Victim(i.namespace, i.name, i.uid, candidate.where.get(i.uid, ""))
                        for i in candidate.pods
                    ),
                    key=lambda v: (v.namespace, v.name, v.uid),
                )
            )
            gang = (unit[1], unit[2]) if unit[0] != "pod" else None
            sub_group = unit[3] if unit[0] == "sub-group" else None
            out.append(VictimGang(gang, candidate.priority, pods, violations, sub_group))
        return tuple(out)
