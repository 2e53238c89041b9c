"""The quota-reservation ledger: who holds which part of a namespace's ResourceQuota.

A gang is all-or-nothing, but Kubernetes' ResourceQuota admits pods one at a time.
Half a gang can be admitted, the other half refused because unrelated pods ate the rest of the
quota in between, and the half-gang then holds quota it can never use. A PodGroup with
`spec.totalResources` reserves its whole footprint up front; the admission webhook uses this
ledger to (1) admit the PodGroup only when the namespace's free quota covers it, (2) cap its
members at the reservation, and (3) keep every other pod out of quota that is reserved but not
yet used. Kubernetes' own quota admission still enforces the hard limits; this ledger only
protects reservations.

The ledger is pure arithmetic over what the API already holds, so it can be rebuilt at any time:

- ResourceQuota objects (raw dicts). The limit of a resource is the minimum `spec.hard` over the
  namespace's quotas, since Kubernetes enforces each quota independently. `status.used` is not
  read: it counts members and non-members alike and lags; usage is recomputed from pods with the
  rule Kubernetes uses (pods not Succeeded/Failed, by their requests).
- PodGroups, as `GroupReservation`s: `spec.totalResources` is the reservation (the webhook admits
  the spec before it is stored, so the stored spec *is* the durable record), held while the group
  is neither Finished nor Failed nor being deleted.
- Pods, as `PodUsage`s: requests in milli-units (computed by the scheduling layer, which knows
  init containers and overhead) and the key of the group they belong to (resolved by the
  membership module). Taking both as inputs keeps this module independent of those rules.

Scope, deliberately narrow:

- Only `requests` are reserved. Quota keys map from pod resource names: cpu -> `requests.cpu` and
  `cpu`; memory -> `requests.memory` and `memory`; ephemeral-storage -> `requests.ephemeral-storage`
  and `ephemeral-storage`; `hugepages-*` and extended resources X -> `requests.X`; pods -> `pods`
  (one per pod). `limits.*`, `count/*`, storage and object counts are ignored.
- Quotas with `scopes` or a `scopeSelector` are ignored: they apply to a subset of pods (priority
  class, BestEffort, terminating...) that would need per-pod evaluation. Ignoring them can only
  make this webhook more permissive; Kubernetes still enforces them.

Concurrency is the adapter's job, and the design serves it: the webhook serialises admissions per
namespace and records each admitted reservation in the ledger before answering, so the next
admission sees it even before the PodGroup is stored. Every mutation (`add_reservation`,
`release`, `remove_group`, `add_pod`, `remove_pod`) is O(resources), decisions are O(groups x
resources), and `Ledger.build` replays the same mutations, so an incrementally maintained ledger
and a rebuilt one agree by construction.

All arithmetic is in integer milli-units (`to_milli`), so sums are exact.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from podgroup_operator.api.keys import GroupKey, pod_uid
from podgroup_operator.api.models import PodGroupStatus, Reservation
from podgroup_operator.api.quantity import (
    QuantityError,
    coverage_errors,
    format_milli,
    parse_quantity,
    to_milli,
)
from podgroup_operator.api.times import parse_time, rfc3339
from podgroup_operator.constants import ConditionStatus, ConditionType, Phase, PodPhase, Reason
from podgroup_operator.domain.conditions import set_condition

PODS = "pods"
"""The pod-count resource: every live pod uses one."""
_ONE_POD = to_milli(1)
_MAX_NAMED_HOLDERS = 5
"""Messages name at most this many reserving groups, so a busy namespace stays readable."""

_NATIVE_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", PODS})
"""Pod resource names a ResourceQuota can track without the `requests.` prefix."""
_NON_POD_REQUEST_KEYS = frozenset({"requests.storage"})
"""`requests.*` quota keys that count PersistentVolumeClaims, not pods."""


def quota_keys(resource: str) -> tuple[str, ...]:
    """The ResourceQuota `spec.hard` keys that limit a pod resource's requests."""
    if resource == PODS:
        return (PODS,)
    if resource in _NATIVE_RESOURCES:
        return (f"requests.{resource}", resource)
    return (f"requests.{resource}",)


def resource_for_quota_key(key: str) -> str | None:
    """The pod resource a quota key limits, or None for keys outside this ledger's scope."""
    if key in _NATIVE_RESOURCES:
        return key
    if key.startswith("requests.") and key not in _NON_POD_REQUEST_KEYS:
        return key.removeprefix("requests.")
    return None


@dataclass(frozen=True)
class QuotaLimit:
    """One unscoped ResourceQuota, reduced to its hard limits per pod resource (milli-units)."""

    name: str
    hard: Mapping[str, int]

    @classmethod
    def from_object(cls, quota: Mapping[str, Any]) -> QuotaLimit | None:
        """Parse a raw ResourceQuota; None when it is scoped (see the module docstring).

        When one quota names both `requests.cpu` and `cpu`, both are enforced, so the smaller
        counts. Unparsable values cannot come from the apiserver and are skipped.
        """
        spec = quota.get("spec") or {}
        if spec.get("scopes") or spec.get("scopeSelector"):
            return None
        hard: dict[str, int] = {}
        for key, value in (spec.get("hard") or {}).items():
            resource = resource_for_quota_key(key)
            if resource is None:
                continue
            try:
                milli = to_milli(value)
            except QuantityError:
                continue
            hard[resource] = min(milli, hard.get(resource, milli))
        return cls(name=str((quota.get("metadata") or {}).get("name", "")), hard=hard)


@dataclass(frozen=True)
class GroupReservation:
    """A PodGroup as the ledger sees it: its totalResources (milli-units) and whether it holds them.

    `total` is None for a group without `spec.totalResources`; such a group reserves nothing and
    its members are ordinary usage. `active` is False once the group is Finished, Failed or
    being deleted: the reservation is released, and members that still run count as ordinary
    usage from then on.
    """

    key: GroupKey
    total: Mapping[str, int] | None
    active: bool = True

    @property
    def reserves(self) -> bool:
        return self.active and self.total is not None

    @classmethod
    def from_podgroup(cls, body: Mapping[str, Any]) -> GroupReservation:
        """Read a raw PodGroup; quantities were validated by the CRD schema when it was stored."""
        metadata = body.get("metadata") or {}
        spec_total = (body.get("spec") or {}).get("totalResources")
        phase = (body.get("status") or {}).get("phase")
        terminal = phase in (Phase.FINISHED, Phase.FAILED)
        return cls(
            key=(str(metadata.get("namespace", "default")), str(metadata.get("name", ""))),
            total=None if spec_total is None else total_milli(spec_total),
            active=not terminal and not metadata.get("deletionTimestamp"),
        )


@dataclass(frozen=True)
class PodUsage:
    """A pod as the ledger sees it: its requests (milli-units), its group, and whether it is live.

    `uid` is any stable identity (the uid, or namespace/name before one exists). `requests` uses
    pod resource names ("cpu", "nvidia.com/gpu"); the pod count is added by `usage`, so callers
    need not include "pods". Pods in phase Succeeded or Failed use no quota, as in Kubernetes.
    """

    uid: str
    group_key: GroupKey | None
    requests: Mapping[str, int]
    live: bool = True

    @property
    def usage(self) -> dict[str, int]:
        """Requests plus one pod, or nothing for a terminated pod."""
        if not self.live:
            return {}
        return {**self.requests, PODS: _ONE_POD}

    @classmethod
    def from_pod(
        cls, pod: Mapping[str, Any], group_key: GroupKey | None, requests: Mapping[str, int]
    ) -> PodUsage:
        """Read identity and liveness from a raw pod; requests and membership come from callers."""
        phase = (pod.get("status") or {}).get("phase")
        uid = pod_uid(pod)
        return cls(
            uid=str(uid),
            group_key=group_key,
            requests=dict(requests),
            live=phase not in (PodPhase.SUCCEEDED, PodPhase.FAILED),
        )


@dataclass(frozen=True)
class Decision:
    """An admission answer: allowed exactly when there are no errors.

    Each error names the field or resource, the amounts, and how to fix it, so the webhook can
    return them verbatim; warnings are admitted but worth telling the user (admission warnings).
    """

    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.errors


def total_milli(spec_total: Mapping[str, str | int]) -> dict[str, int]:
    """`spec.totalResources` in milli-units; raises QuantityError on malformed quantities."""
    return {name: to_milli(value) for name, value in spec_total.items()}


def _add(target: dict[str, int], amounts: Mapping[str, int], sign: int = 1) -> None:
    for name, milli in amounts.items():
        target[name] = target.get(name, 0) + sign * milli


def _q(milli: int, resource: str) -> str:
    return format_milli(milli, resource)


class Ledger:
    """Quota limits, reservations and live usage of one namespace, kept as running sums.

    Mutable on purpose: the webhook adapter updates one ledger per namespace as admissions and
    watch events arrive (see the module docstring); `copy()` gives a scratch ledger for what-ifs.
    """

    def __init__(self, quotas: Iterable[QuotaLimit] = ()) -> None:
        self._quotas: list[QuotaLimit] = []
        self._hard: dict[str, tuple[int, str]] = {}
        self._groups: dict[GroupKey, GroupReservation] = {}
        self._pods: dict[str, PodUsage] = {}
        self._used: dict[str, int] = {}
        self._group_used: dict[GroupKey, dict[str, int]] = {}
        self.set_quotas(quotas)

    @classmethod
    def build(
        cls,
        quotas: Iterable[Mapping[str, Any]],
        groups: Iterable[GroupReservation],
        pods: Iterable[PodUsage],
    ) -> Ledger:
        """Reconstruct the ledger from raw ResourceQuotas, PodGroups and pods of one namespace."""
        parsed = (QuotaLimit.from_object(quota) for quota in quotas)
        ledger = cls(quota for quota in parsed if quota is not None)
        for group in groups:
            ledger.add_reservation(group)
        for pod in pods:
            ledger.add_pod(pod)
        return ledger

    def copy(self) -> Ledger:
        return copy.deepcopy(self)

    # --- mutations --------------------------------------------------------------------------------

    def set_quotas(self, quotas: Iterable[QuotaLimit]) -> None:
        """Replace the limits; the binding (smallest) quota per resource is kept for messages."""
        self._quotas = sorted(quotas, key=lambda quota: quota.name)
        self._hard = {}
        for quota in self._quotas:
            for resource, milli in quota.hard.items():
                if resource not in self._hard or milli < self._hard[resource][0]:
                    self._hard[resource] = (milli, quota.name)

    def add_reservation(self, group: GroupReservation) -> None:
        """Record a group (new or changed); an inactive one is known but reserves nothing."""
        self._groups[group.key] = group

    def release(self, key: GroupKey) -> None:
        """Release a group's reservation (Finished or Failed); its running members stay counted."""
        group = self._groups.get(key)
        if group is not None:
            self._groups[key] = GroupReservation(key=key, total=group.total, active=False)

    def remove_group(self, key: GroupKey) -> None:
        """Forget a deleted group; its remaining members become ordinary usage."""
        self._groups.pop(key, None)

    def add_pod(self, pod: PodUsage) -> None:
        """Record a pod, replacing any earlier version with the same uid (phase changes)."""
        self.remove_pod(pod.uid)
        self._pods[pod.uid] = pod
        _add(self._used, pod.usage)
        if pod.group_key is not None:
            _add(self._group_used.setdefault(pod.group_key, {}), pod.usage)

    def remove_pod(self, uid: str) -> None:
        """Forget a deleted pod."""
        pod = self._pods.pop(uid, None)
        if pod is None:
            return
        _add(self._used, pod.usage, -1)
        if pod.group_key is not None:
            _add(self._group_used[pod.group_key], pod.usage, -1)

    # --- queries ----------------------------------------------------------------------------------

    @property
    def tracked(self) -> frozenset[str]:
        """Pod resource names some unscoped ResourceQuota of the namespace limits."""
        return frozenset(self._hard)

    def hard(self, resource: str) -> tuple[int, str] | None:
        """The effective limit of a resource and the quota that sets it, or None if untracked."""
        return self._hard.get(resource)

    def group(self, key: GroupKey) -> GroupReservation | None:
        return self._groups.get(key)

    def pod(self, uid: str) -> PodUsage | None:
        return self._pods.get(uid)

    def members_used(self, key: GroupKey) -> dict[str, int]:
        """Summed requests (and pod count) of a group's live members."""
        return {name: milli for name, milli in self._group_used.get(key, {}).items() if milli}

    def holders(self, resource: str, exclude: GroupKey | None = None) -> list[GroupReservation]:
        """Active groups reserving a resource, by key."""
        return [
            group
            for key, group in sorted(self._groups.items())
            if key != exclude and group.reserves and group.total and resource in group.total
        ]

    def free(self, resource: str, exclude: GroupKey | None = None) -> int | None:
        """Quota left for pods outside reservations, or None when no quota tracks the resource.

        hard - live usage of every pod - reserved-but-unused part of every active reservation.
        With `exclude`, that group's reservation and its members' usage are left out, which is
        what remains for the group itself. A group whose members exceed its reservation (possible
        for members created before it) counts what they use, never less.
        """
        limit = self._hard.get(resource)
        if limit is None:
            return None
        free = limit[0] - self._used.get(resource, 0)
        if exclude is not None:
            free += self._group_used.get(exclude, {}).get(resource, 0)
        for group in self.holders(resource, exclude):
            assert group.total is not None  # holders() only returns reserving groups
            used = self._group_used.get(group.key, {}).get(resource, 0)
            free -= max(group.total[resource] - used, 0)
        return free


# --- validation -----------------------------------------------------------------------------------


def validate_total_resources(
    spec_total: Mapping[str, str | int],
    min_resources: Mapping[str, str | int] | None,
    tracked: Iterable[str] = (),
) -> list[str]:
    """Ledger-specific errors in `spec.totalResources`, each with its field path and a fix.

    The pydantic model already refuses malformed and negative quantities; they are checked again
    here because the webhook may call this on a raw body, and an error beats a crash. Errors:
    names a reservation cannot mean (`gpu`, `requests.cpu`, `limits.cpu`), which are neither
    native pod resources, nor extended (with a slash), nor tracked by a quota (`tracked`, usually
    `Ledger.tracked`); and amounts below `minResources`. A known name that no quota tracks is not
    an error but a warning from `admit_group` (it still caps the members).
    """
    errors: list[str] = []
    tracked = frozenset(tracked)
    amounts: dict[str, Any] = {}
    for name, value in spec_total.items():
        path = f"spec.totalResources.{name}"
        try:
            amount = parse_quantity(value)
        except QuantityError as exc:
            errors.append(f"{path}: {exc}")
            continue
        if amount < 0:
            errors.append(f"{path}: must be >= 0, got {value!r}; reserve a non-negative amount")
            continue
        amounts[name] = amount
        if name.startswith(("requests.", "limits.")):
            bare = name.split(".", 1)[1]
            errors.append(
                f"{path}: totalResources uses pod resource names, not quota keys; write "
                f"{bare!r} instead of {name!r} (only requests are reserved, limits are not)"
            )
        elif not (
            name in _NATIVE_RESOURCES
            or name.startswith("hugepages-")
            or "/" in name
            or name in tracked
        ):
            errors.append(
                f"{path}: unknown resource {name!r}; use cpu, memory, ephemeral-storage, pods, "
                "hugepages-<size> or a qualified extended resource such as 'nvidia.com/gpu'"
            )
    # Names already reported as malformed or negative are not reported again as too small.
    minimum = {
        n: v for n, v in (min_resources or {}).items() if n in amounts or n not in spec_total
    }
    errors.extend(coverage_errors({n: spec_total[n] for n in amounts}, minimum))
    return errors


# --- decisions ------------------------------------------------------------------------------------


def _holder_names(holders: list[GroupReservation], ledger: Ledger, resource: str) -> str:
    parts = []
    for group in holders[:_MAX_NAMED_HOLDERS]:
        assert group.total is not None
        used = ledger.members_used(group.key).get(resource, 0)
        parts.append(
            f"{group.key[1]} ({_q(group.total[resource], resource)} reserved, "
            f"{_q(used, resource)} used)"
        )
    if len(holders) > _MAX_NAMED_HOLDERS:
        parts.append(f"and {len(holders) - _MAX_NAMED_HOLDERS} more")
    return ", ".join(parts)


def _free_text(free: int, resource: str) -> str:
    if free >= 0:
        return f"{resource} {_q(free, resource)} free"
    return f"{resource} 0 free (already {_q(-free, resource)} over)"


def _check_reservation(
    ledger: Ledger, key: GroupKey, total: Mapping[str, int], old: Mapping[str, int] | None
) -> Decision:
    """Shared by create and update: the reservation `total` replaces `old` (None: none held)."""
    errors: list[str] = []
    warnings: list[str] = []
    used = ledger.members_used(key)
    name = key[1]
    for resource, amount in sorted(total.items()):
        path = f"spec.totalResources.{resource}"
        member_use = used.get(resource, 0)
        previous = old.get(resource) if old is not None else None
        if amount == previous:
            continue  # unchanged: never block an unrelated edit of the PodGroup
        if amount < member_use:
            errors.append(
                f"{path}: {_q(amount, resource)} is below the {_q(member_use, resource)} "
                f"{resource} that live members of PodGroup {name} already request; keep "
                f"{path} >= {_q(member_use, resource)} or delete members first"
            )
            continue
        limit = ledger.hard(resource)
        if limit is None:
            warnings.append(
                f"{path}: no ResourceQuota in namespace {key[0]} tracks {resource}; the "
                "reservation caps the members but protects nothing from other pods"
            )
            continue
        if previous is not None and amount < previous:
            continue  # a decrease needs no free quota
        free = ledger.free(resource, exclude=key)
        assert free is not None  # the resource is tracked
        if amount <= free:
            continue
        hard, quota = limit
        short = amount - free
        holders = ledger.holders(resource, exclude=key)
        if previous is None:
            free_now = free  # the group's own members move inside its reservation
            what = f"PodGroup {name} needs {_q(amount, resource)}"
        else:
            held = max(previous, member_use)
            free_now = free - held
            what = (
                f"raising PodGroup {name}'s reservation from {_q(previous, resource)} to "
                f"{_q(amount, resource)} needs {_q(amount - held, resource)} more"
            )
        fixes = [f"lower {path} to at most {_q(max(free, 0), resource)}"]
        if holders:
            fixes.append(
                f"wait for PodGroup(s) {_holder_names(holders, ledger, resource)} to finish "
                "and release their reservations"
            )
        fixes.append(
            f"raise {'/'.join(quota_keys(resource))} (now "
            f"{_q(hard, resource)}) in ResourceQuota '{quota}'"
        )
        errors.append(
            f"{path}: quota '{quota}' has {_free_text(free_now, resource)}, {what}: short "
            f"{_q(short, resource)} {resource}; " + ", or ".join(fixes)
        )
    return Decision(errors=tuple(errors), warnings=tuple(warnings))


def admit_group(ledger: Ledger, key: GroupKey, total: Mapping[str, int] | None) -> Decision:
    """May a PodGroup be created with this `totalResources` (milli-units)?

    Admitted when, for every resource a quota tracks, the namespace's free quota (without this
    group) covers the reservation, and the group's existing live members (pods may precede their
    group) fit in it. Without totalResources nothing is reserved and the answer is yes.
    """
    if not total:
        return Decision()
    return _check_reservation(ledger, key, total, old=None)


def admit_group_update(ledger: Ledger, key: GroupKey, total: Mapping[str, int] | None) -> Decision:
    """May a PodGroup's `totalResources` change to `total` (milli-units)?

    An increase is checked like a create, but only the increase must be free; a decrease may not
    go below what live members already request; an unchanged amount always passes, even when
    the quota was lowered since (Kubernetes keeps existing usage over a lowered quota too).
    Removing totalResources releases the reservation and always passes. A Finished or Failed
    group holds no reservation and gains none, so any change passes with a warning.
    """
    group = ledger.group(key)
    if group is None:
        return admit_group(ledger, key, total)
    if not group.active:
        if not total:
            return Decision()
        return Decision(
            warnings=(
                f"spec.totalResources: PodGroup {key[1]} is finished; its reservation was "
                "released and this change reserves nothing",
            )
        )
    if not total:
        return Decision()
    return _check_reservation(ledger, key, total, old=group.total or {})


def admit_pod(ledger: Ledger, pod: PodUsage) -> Decision:
    """May this pod be created (or updated)?

    A resource its group reserves must fit in the reservation: live members' requests plus the
    pod's, compared as totals. Every other resource the pod requests (all of them for a pod
    outside any reservation) must fit in the quota that is free outside reservations, so that no
    pod eats into what active groups reserved. When no group reserves a resource, this webhook
    leaves it to Kubernetes' own quota admission. Terminated pods use no quota and pass.
    """
    if not pod.live:
        return Decision()
    if ledger.pod(pod.uid) is not None:  # an update: judge the new version in place of the old
        ledger = ledger.copy()
        ledger.remove_pod(pod.uid)
    group = ledger.group(pod.group_key) if pod.group_key is not None else None
    reserved = group.total if group is not None and group.reserves and group.total else {}
    errors: list[str] = []
    for resource, amount in sorted(pod.usage.items()):
        if resource in reserved:
            assert group is not None
            name = group.key[1]
            total = ledger.members_used(group.key).get(resource, 0) + amount
            if total > reserved[resource]:
                errors.append(
                    f"{resource}: exceeds PodGroup {name} reservation: {resource} "
                    f"{_q(total, resource)} > {_q(reserved[resource], resource)} reserved "
                    f"(live members request {_q(total - amount, resource)}, this pod "
                    f"{_q(amount, resource)}); raise spec.totalResources.{resource} of "
                    f"PodGroup {name}, lower the pod's {resource} request, or wait for "
                    "members to finish"
                )
            continue
        holders = ledger.holders(resource)
        free = ledger.free(resource)
        if not holders or free is None or amount <= free:
            continue
        limit = ledger.hard(resource)
        assert limit is not None  # free is not None
        hard, quota = limit
        errors.append(
            f"{resource}: pod requests {_q(amount, resource)} but quota '{quota}' has "
            f"{_free_text(free, resource)} outside reservations ({_q(hard, resource)} hard) "
            f"because PodGroup(s) {_holder_names(holders, ledger, resource)} hold it; wait "
            f"for them to finish, lower the pod's {resource} request, or raise "
            f"{'/'.join(quota_keys(resource))} in ResourceQuota '{quota}'"
        )
    return Decision(errors=tuple(errors))


def reservation_status(ledger: Ledger, key: GroupKey) -> Reservation | None:
    """`status.reservation` of a group: what it holds and what live members use of it.

    None when the group holds nothing (no totalResources, released, or unknown). `used` lists the
    same resources as `reserved`, zero included, so the two read side by side.
    """
    group = ledger.group(key)
    if group is None or not group.reserves or group.total is None:
        return None
    used = ledger.members_used(key)
    return Reservation(
        reserved={name: _q(milli, name) for name, milli in sorted(group.total.items())},
        used={name: _q(used.get(name, 0), name) for name in sorted(group.total)},
    )


# --- the durable record ---------------------------------------------------------------------------
#
# A record besides the PodGroups themselves, because the webhook answers before the apiserver stores
# the PodGroup, so between "allowed" and "stored" a reservation exists nowhere but in the memory
# of the replica that admitted it. Another replica (or this one after a restart) would not see it
# and could admit a second group into the same quota. So each admitted reservation is written to a
# per-namespace record (the adapter keeps it in a ConfigMap, written with a resourceVersion
# precondition) *before* the webhook answers. The record names each group with the uid the
# apiserver gave it at admission and a deadline: an entry whose group still does not exist after
# the deadline was never stored (another webhook refused it, the apiserver failed, or the
# operator died before answering) and is dropped. An entry is also dropped when its group becomes
# Finished or Failed, is deleted, or loses totalResources: that is the release, done once.

RECORD_GRACE = timedelta(seconds=20)
"""How long an admitted reservation may wait for its PodGroup to appear in the API.

Longer than the webhook timeout (10 s), after which the apiserver gives up on the request anyway,
so a group that is stored at all is stored well within it."""


@dataclass(frozen=True)
class RecordEntry:
    """One admitted reservation in the durable record: whose it is, how much, and until when its
    group must appear (milli-units in memory; readable quantities in JSON)."""

    uid: str | None
    total: Mapping[str, int]
    deadline: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "total": {name: _q(milli, name) for name, milli in sorted(self.total.items())},
            "deadline": rfc3339(self.deadline),
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> RecordEntry:
        """Parse one entry; raises ValueError (or QuantityError, a ValueError) when malformed."""
        deadline = parse_time(raw["deadline"])
        if deadline is None:
            raise ValueError(f"deadline: {raw['deadline']!r} is not an RFC 3339 time")
        uid = raw.get("uid")
        return cls(
            uid=str(uid) if uid else None,
            total=total_milli(raw.get("total") or {}),
            deadline=deadline,
        )


def parse_record(raw: Mapping[str, Any]) -> dict[str, RecordEntry]:
    """Group name -> entry from the record's JSON; malformed entries (hand edits) are skipped."""
    entries: dict[str, RecordEntry] = {}
    for name, value in raw.items():
        try:
            entries[str(name)] = RecordEntry.from_json(value)
        except (KeyError, TypeError, ValueError):
            continue
    return entries


def render_record(entries: Mapping[str, RecordEntry]) -> dict[str, Any]:
    return {name: entry.to_json() for name, entry in sorted(entries.items())}


@dataclass(frozen=True)
class ObservedGroup:
    """A PodGroup as last seen in the API (or its tombstone once deleted)."""

    uid: str | None
    total: Mapping[str, int] | None
    phase: str | None = None
    deleting: bool = False
    deleted: bool = False

    @property
    def active(self) -> bool:
        return not (self.deleted or self.deleting or self.phase in (Phase.FINISHED, Phase.FAILED))

    @classmethod
    def from_podgroup(cls, body: Mapping[str, Any], *, deleted: bool = False) -> ObservedGroup:
        metadata = body.get("metadata") or {}
        spec_total = (body.get("spec") or {}).get("totalResources")
        try:
            total = None if spec_total is None else total_milli(spec_total)
        except (QuantityError, AttributeError):
            total = None  # the CRD schema refuses these; a hand-edited object reserves nothing
        return cls(
            uid=metadata.get("uid"),
            total=total,
            phase=(body.get("status") or {}).get("phase"),
            deleting=bool(metadata.get("deletionTimestamp")),
            deleted=deleted,
        )


def _same_group(entry: RecordEntry, observed: ObservedGroup) -> bool:
    return entry.uid is None or observed.uid is None or entry.uid == observed.uid


def effective_reservation(
    key: GroupKey, entry: RecordEntry | None, observed: ObservedGroup | None
) -> GroupReservation | None:
    """What the ledger should hold for a group, given the record and what the API shows.

    The record decides *whether and how much* is reserved; the observed object only decides when
    it stops being held. An entry whose group is not visible yet (or is visible as an older
    namesake) reserves: the group is on its way. A group without an entry reserves nothing, even
    with totalResources (created before the namespace opted in): its members are ordinary usage.
    """
    if entry is not None:
        if observed is not None and _same_group(entry, observed):
            return GroupReservation(key=key, total=entry.total, active=observed.active)
        return GroupReservation(key=key, total=entry.total, active=True)
    if observed is None or observed.deleted:
        return None
    return GroupReservation(key=key, total=None, active=observed.active)


def release_reason(
    name: str, entry: RecordEntry, observed: ObservedGroup | None, now: datetime
) -> str | None:
    """Why the entry must leave the record now, or None while it still holds.

    `observed` None means the group is not visible; past the deadline the adapter confirms that
    with a read before dropping the entry, since a watch may lag.
    """
    if observed is not None and _same_group(entry, observed):
        if observed.deleted:
            return f"PodGroup {name} was deleted"
        if observed.deleting:
            return f"PodGroup {name} is being deleted"
        if observed.phase in (Phase.FINISHED, Phase.FAILED):
            return f"PodGroup {name} is {observed.phase}"
        if observed.total is None:
            return f"PodGroup {name} no longer sets totalResources"
        return None
    if now >= entry.deadline:
        return f"PodGroup {name} (uid {entry.uid}) was never stored or no longer exists"
    return None


def reservation_condition(
    ledger: Ledger, key: GroupKey, released: str | None
) -> tuple[ConditionStatus, Reason, str] | None:
    """The QuotaReserved condition a group should show, or None to leave conditions alone.

    True while the group holds its reservation; False with QuotaReleased (and the release's
    reason) once released; None for a group that never held one.
    """
    reservation = reservation_status(ledger, key)
    if reservation is not None and reservation.reserved is not None:
        reserved = ", ".join(f"{name}: {value}" for name, value in reservation.reserved.items())
        used = ", ".join(f"{name}: {value}" for name, value in (reservation.used or {}).items())
        return (
            ConditionStatus.TRUE,
            Reason.QUOTA_RESERVED,
            f"{{{reserved}}} reserved in the namespace's ResourceQuota; members use {{{used}}}",
        )
    if released is not None:
        return (
            ConditionStatus.FALSE,
            Reason.QUOTA_RELEASED,
            f"reservation released: {released}; members that still run count as ordinary usage",
        )
    return None


@dataclass(frozen=True)
class QuotaView:
    """What a group's status should show of its reservation: `status.reservation` and the
    QuotaReserved condition as (status, reason, message), or None to leave the condition alone.

    The quota controller computes it; the status reconciler, the one writer of PodGroup status,
    folds it into the status it writes (`apply_quota_view`).
    """

    reservation: Reservation | None
    condition: tuple[ConditionStatus, Reason, str] | None


def quota_view(ledger: Ledger, key: GroupKey, released: str | None) -> QuotaView:
    return QuotaView(
        reservation=reservation_status(ledger, key),
        condition=reservation_condition(ledger, key, released),
    )


def apply_quota_view(
    status: PodGroupStatus, view: QuotaView | None, now: datetime, *, id_seed: str
) -> PodGroupStatus:
    """`status` with the reservation and QuotaReserved condition of `view` (terminal groups
    too: the release of a finished group's reservation is shown on it)."""
    if view is None:
        return status
    conditions = status.conditions
    if view.condition is not None:
        conditions = set_condition(
            conditions, ConditionType.QUOTA_RESERVED, *view.condition, now, id_seed=id_seed
        )
    return status.model_copy(update={"reservation": view.reservation, "conditions": conditions})
