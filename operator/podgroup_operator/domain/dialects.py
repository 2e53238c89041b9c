"""Other schedulers' PodGroups read as ours: the translation both ways, pure.

A Volcano (`scheduling.volcano.sh/v1beta1`), Koordinator (`scheduling.sigs.k8s.io/v1alpha1`)
or native (`scheduling.k8s.io/v1beta1`, `v1alpha2`) PodGroup is mirrored into a
`scheduling.x-k8s.io` PodGroup of the same name (`mirror_body`), labelled with its dialect
(`LABEL_MIRROR_OF`) and owned by the source, so the scheduler, the status reconciler, the
webhooks and `kubectl get podgroups` treat it as any other; its status is written back into the
source in the source's own shape (`volcano_status`, `koordinator_status`, `native_status`),
because the job controllers that made the source (Volcano's, the MPI operator, Spark, Trainer,
JobSet) read it there. One object per gang keeps one place that decides; the source stays the
one the user edits (the mirror's spec is rewritten from it on every change).

Each `translate_*` returns the spec, the `Note`s on fields mapped loosely or not at all (each
a sentence that names the field and what happens instead), and the errors, each
`field: what is wrong; the fix`. A source with errors gets no mirror, and its pods wait.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.api.elastic_quota import pod_quota_ref
from podgroup_operator.api.names import is_dns_label, is_label_value
from podgroup_operator.api.validation import spec_errors
from podgroup_operator.domain.lightweight import parse_duration_seconds, parse_gang_groups

JSON = dict[str, Any]
Levels = Callable[[str], tuple[str, ...] | None]
"""The node label keys of a Topology by name, coarse to fine; None when there is none."""
QuotaOf = Callable[[str, str], str | None]
"""(namespace, bare name) -> the ElasticQuota that name resolves to from that namespace, as
`namespace/name`; None when there is none (or several)."""

ANNOTATION_TOPOLOGY = f"{c.GROUP}/topology"
"""On a Volcano PodGroup: the Topology whose levels its network tiers map to (tier 1 is the
finest level); without it, the cluster's only Topology, if there is exactly one."""
DEFAULT_VOLCANO_QUEUE = "default"
KOORD_MATCH_ONCE_SATISFIED = "once-satisfied"
_SHOWN = 60


@dataclass(frozen=True)
class Note:
    """A field read loosely or not at all: said once in a Normal Event on the source."""

    field: str
    message: str
    reason: str = c.DialectReason.NOT_MAPPED

    @property
    def text(self) -> str:
        return f"{self.field}: {self.message}"


@dataclass(frozen=True)
class Translation:
    """What a source PodGroup says in our terms."""

    spec: JSON
    notes: tuple[Note, ...] = ()
    errors: tuple[str, ...] = ()
    quota: str | None = None
    """The quota the mirror's label names (`LABEL_ELASTIC_QUOTA`), its members' unless they
    name one: the source's own quota label, else a Volcano queue's ElasticQuota."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "...'"


def _count(value: Any, field: str, errors: list[str], *, fix: str) -> int | None:
    """A whole number of at least 1 from a source field, else an error naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        errors.append(f"{field}: must be a whole number of at least 1, not {_shown(value)}; {fix}")
        return None
    return value


def queue_mapping(
    queue: str | None, namespace: str, quotas: QuotaOf | None
) -> tuple[str | None, Note | None]:
    """What a Volcano `spec.queue` becomes here: the ElasticQuota of that name (resolved as a
    bare `spec.parent` is: in the PodGroup's namespace first, else the one quota of that name
    in the cluster), carried to the mirror as its quota label, and a Note saying which. The
    `default` queue, or none, is no quota: the gang is charged as if it named none. Returns
    (the label's value or None, the Note or None)."""
    if not queue or queue == DEFAULT_VOLCANO_QUEUE:
        return None, None
    found = quotas(namespace, queue) if quotas is not None and is_label_value(queue) else None
    if found is None:
        return None, Note(
            "spec.queue",
            f"queue {_shown(queue)} is not charged: no ElasticQuota named so exists in "
            f"namespace {namespace} (nor one alone of that name in the cluster); the gang is "
            "charged as if it named no queue (to its namespace's one ElasticQuota, if any). "
            f"Create an ElasticQuota ({c.API_VERSION}) named {_shown(queue)} to charge it",
            c.DialectReason.QUEUE_IGNORED,
        )
    return queue, Note(
        "spec.queue",
        f"queue {_shown(queue)} is charged to ElasticQuota {found}: its {c.API_VERSION} "
        f"PodGroup is labelled {c.LABEL_ELASTIC_QUOTA}={queue}, and its members that name no "
        "quota themselves are admitted against it",
        c.DialectReason.QUEUE_MAPPED,
    )


def _network_topology(
    raw: Any, field: str, topology: str | None, levels: tuple[str, ...] | None
) -> tuple[JSON | None, list[Note], list[str]]:
    """A Volcano `networkTopology` as our topologyConstraint, where its tiers map to the levels
    of one Topology: tier 1 is the finest level, tier N the N-th from the finest. `hard` with
    `highestTierAllowed: N` requires that tier's domain and prefers tier 1; `soft` prefers tier
    1 only."""
    if raw is None:
        return None, [], []
    if not isinstance(raw, Mapping):
        return None, [], [f"{field}: must be an object with mode and highestTierAllowed"]
    mode = raw.get("mode") or "hard"
    if mode not in ("hard", "soft"):
        return None, [], [f"{field}.mode: must be hard or soft, not {_shown(mode)}"]
    if levels is None:
        why = (
            f"Topology {topology!r} does not exist"
            if topology
            else f"name the Topology its tiers map to with the annotation {ANNOTATION_TOPOLOGY}"
            " (the cluster has not exactly one)"
        )
        return None, [Note(field, f"not mapped: {why}; the gang is placed without it")], []
    finest = levels[-1]
    constraint: JSON = {"topology": topology, "preferredTopologyLevel": finest}
    if mode == "soft":
        return constraint, [], []
    tier_name = raw.get("highestTierName")
    tier = raw.get("highestTierAllowed")
    if tier_name:
        if tier_name not in levels:
            note = Note(
                f"{field}.highestTierName",
                f"{_shown(tier_name)} is no level of Topology {topology!r} ({', '.join(levels)});"
                " only its preferred (finest) level is kept",
            )
            return constraint, [note], []
        return {**constraint, "requiredTopologyLevel": tier_name}, [], []
    if tier is None:
        return constraint, [], []
    if isinstance(tier, bool) or not isinstance(tier, int) or tier < 1:
        return None, [], [f"{field}.highestTierAllowed: must be a whole number of at least 1"]
    if tier > len(levels):
        # Crossing every tier of the Topology is no constraint at all.
        return constraint, [], []
    return {**constraint, "requiredTopologyLevel": levels[-tier]}, [], []


def _topology_of(
    source: JSON, topologies: Mapping[str, tuple[str, ...]]
) -> tuple[str | None, tuple[str, ...] | None]:
    annotations = (source.get("metadata") or {}).get("annotations") or {}
    named = annotations.get(ANNOTATION_TOPOLOGY)
    if named:
        return named, topologies.get(named)
    if len(topologies) == 1:
        ((name, levels),) = topologies.items()
        return name, levels
    return None, None


def translate_volcano(
    source: JSON, topologies: Mapping[str, tuple[str, ...]], quotas: QuotaOf | None = None
) -> Translation:
    """A Volcano PodGroup in our terms: minMember, minResources, minTaskMember and
    subGroupPolicy (sub-groups), networkTopology (a topologyConstraint where its tiers map),
    queue (the ElasticQuota of its name, `queue_mapping`, with a Note); priorityClassName is
    said in a Note."""
    raw = source.get("spec") or {}
    errors: list[str] = []
    notes: list[Note] = []
    spec: JSON = {}
    if not isinstance(raw, Mapping):
        return Translation({}, (), ("spec: must be an object with at least minMember",))
    minimum = raw.get("minMember")
    if minimum in (None, 0):
        spec["minMember"] = 1
        notes.append(Note("spec.minMember", "absent or 0: read as 1, every member on its own"))
    else:
        spec["minMember"] = _count(
            minimum, "spec.minMember", errors, fix="set it to the members that must run together"
        )
    if raw.get("minResources") is not None:
        spec["minResources"] = raw["minResources"]
    namespace = str((source.get("metadata") or {}).get("namespace") or "")
    quota, queue_note = queue_mapping(raw.get("queue"), namespace, quotas)
    if queue_note is not None:
        notes.append(queue_note)
    if raw.get("priorityClassName"):
        notes.append(
            Note(
                "spec.priorityClassName",
                f"{_shown(raw['priorityClassName'])} is not copied: each member's own "
                "priorityClassName orders and preempts here (Volcano's job controller sets it "
                "on the pods too)",
            )
        )
    topology, levels = _topology_of(source, topologies)
    constraint, more_notes, more_errors = _network_topology(
        raw.get("networkTopology"), "spec.networkTopology", topology, levels
    )
    notes += more_notes
    errors += more_errors
    if constraint is not None:
        spec["topologyConstraint"] = {k: v for k, v in constraint.items() if v is not None}
    tasks, policies = raw.get("minTaskMember"), raw.get("subGroupPolicy")
    if tasks and policies:
        errors.append(
            "spec.minTaskMember: set minTaskMember or subGroupPolicy, not both (Volcano advises "
            "against it too); keep subGroupPolicy"
        )
    elif tasks:
        spec["subGroups"] = _task_sub_groups(tasks, errors)
    elif policies:
        _policy_sub_groups(policies, spec, notes, errors, topology, levels)
    spec = {k: v for k, v in spec.items() if v is not None}
    if not errors:
        errors += [_from_ours(e) for e in spec_errors(spec)]
    return Translation(spec, tuple(notes), tuple(errors), quota)


def _task_sub_groups(tasks: Any, errors: list[str]) -> list[JSON] | None:
    """`minTaskMember` {task: n}: one leaf sub-group per task, joined by the pod label
    volcano.sh/task-spec (or scheduling.x-k8s.io/sub-group) naming the task."""
    if not isinstance(tasks, Mapping):
        errors.append("spec.minTaskMember: must map task names to whole numbers")
        return None
    subs = []
    for task, count in tasks.items():
        field = f"spec.minTaskMember[{task}]"
        if not isinstance(task, str) or not is_dns_label(task):
            errors.append(
                f"{field}: {_shown(task)} is not a DNS label (lowercase letters, digits, '-', at "
                "most 63); name the task so, as a sub-group is named after it"
            )
            continue
        if count == 0:
            continue
        number = _count(count, field, errors, fix="or 0 for a task with no minimum")
        if number is not None:
            subs.append({"name": task, "minMember": number})
    return subs or None


def _policy_sub_groups(
    policies: Any,
    spec: JSON,
    notes: list[Note],
    errors: list[str],
    topology: str | None,
    levels: tuple[str, ...] | None,
) -> None:
    """`subGroupPolicy`: each policy a template sub-group over its matchLabelKeys of
    subGroupSize members, in one domain of its networkTopology."""
    if not isinstance(policies, list):
        errors.append("spec.subGroupPolicy: must be a list of policies")
        return
    subs = []
    for i, policy in enumerate(policies):
        field = f"spec.subGroupPolicy[{i}]"
        if not isinstance(policy, Mapping):
            errors.append(f"{field}: must be an object with name, subGroupSize, matchLabelKeys")
            continue
        name = policy.get("name")
        if not isinstance(name, str) or not is_dns_label(name):
            errors.append(f"{field}.name: {_shown(name)} must be a DNS label")
            continue
        keys = policy.get("matchLabelKeys")
        if not keys:
            errors.append(
                f"{field}.matchLabelKeys: required here: the pods with equal values of these "
                "label keys form one sub-group (a labelSelector alone is not read)"
            )
            continue
        if policy.get("labelSelector"):
            notes.append(
                Note(
                    f"{field}.labelSelector",
                    "not read: every member carrying the matchLabelKeys joins a sub-group",
                )
            )
        size = _count(
            policy.get("subGroupSize"),
            f"{field}.subGroupSize",
            errors,
            fix="set it to the members of each sub-group",
        )
        sub: JSON = {"name": name, "minMember": size, "matchLabelKeys": list(keys)}
        constraint, more_notes, more_errors = _network_topology(
            policy.get("networkTopology"), f"{field}.networkTopology", topology, levels
        )
        notes += more_notes
        errors += more_errors
        if constraint is not None:
            sub["topologyConstraint"] = {k: v for k, v in constraint.items() if v is not None}
        subs.append(sub)
        least = policy.get("minSubGroups")
        if least:
            if len(policies) == 1:
                spec["minSubGroup"] = least
            else:
                notes.append(
                    Note(
                        f"{field}.minSubGroups",
                        "not mapped with several policies: every sub-group must reach its size",
                    )
                )
    if subs:
        spec["subGroups"] = subs


def _from_ours(error: str) -> str:
    """One of our validation errors said about the source: the field names mostly agree."""
    return f"{error} (as read here from the source PodGroup)"


def translate_koordinator(source: JSON) -> Translation:
    """A `scheduling.sigs.k8s.io` PodGroup with Koordinator's annotations in our terms:
    minMember, minResources, scheduleTimeoutSeconds (the annotation waiting-time wins), mode,
    groups (gangGroup); total-number and match-policy are said in Notes."""
    raw = source.get("spec") or {}
    meta = source.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    namespace = meta.get("namespace") or ""
    errors: list[str] = []
    notes: list[Note] = []
    spec: JSON = {}
    if not isinstance(raw, Mapping):
        return Translation({}, (), ("spec: must be an object with at least minMember",))
    spec["minMember"] = _count(
        raw.get("minMember"),
        "spec.minMember",
        errors,
        fix="set it to the members that must run together",
    )
    for key in ("minResources", "scheduleTimeoutSeconds"):
        if raw.get(key) is not None:
            spec[key] = raw[key]
    waiting = annotations.get(c.ANNOTATION_KOORD_WAITING_TIME)
    if waiting:
        seconds = parse_duration_seconds(waiting)
        if seconds is None:
            errors.append(
                f"annotation {c.ANNOTATION_KOORD_WAITING_TIME}: {_shown(waiting)} is not a "
                "duration; use one like '30s', '5m' or '1h30m'"
            )
        else:
            spec["scheduleTimeoutSeconds"] = seconds
    mode = annotations.get(c.ANNOTATION_KOORD_MODE)
    if mode:
        if mode not in tuple(c.GangMode):
            errors.append(
                f"annotation {c.ANNOTATION_KOORD_MODE}: {_shown(mode)} is not a mode; use "
                f"{c.GangMode.STRICT} or {c.GangMode.NON_STRICT}"
            )
        else:
            spec["mode"] = mode
    raw_groups = annotations.get(c.ANNOTATION_KOORD_GROUPS)
    if raw_groups:
        groups = parse_gang_groups(raw_groups, namespace)
        if groups is None:
            errors.append(
                f"annotation {c.ANNOTATION_KOORD_GROUPS}: must be a JSON list of "
                f"'namespace/name' or 'name' strings, like [\"team/a\", \"b\"], not "
                f"{_shown(raw_groups)}"
            )
        else:
            spec["gangGroup"] = groups
    if annotations.get(c.ANNOTATION_KOORD_TOTAL_NUMBER):
        notes.append(
            Note(
                f"annotation {c.ANNOTATION_KOORD_TOTAL_NUMBER}",
                "not needed: the members are counted from the pods that name the group",
            )
        )
    policy = annotations.get(c.ANNOTATION_KOORD_MATCH_POLICY)
    if policy and policy != KOORD_MATCH_ONCE_SATISFIED:
        notes.append(
            Note(
                f"annotation {c.ANNOTATION_KOORD_MATCH_POLICY}",
                f"{_shown(policy)} is read as {KOORD_MATCH_ONCE_SATISFIED}: once minMember "
                "members were bound together, the rest are placed as they come",
            )
        )
    spec = {k: v for k, v in spec.items() if v is not None}
    if not errors:
        errors += [_from_ours(e) for e in spec_errors(spec)]
    return Translation(spec, tuple(notes), tuple(errors))


def translate_native(source: JSON) -> Translation:
    """A native `scheduling.k8s.io` PodGroup (v1beta1 or v1alpha2) in our terms:
    `spec.schedulingPolicy.gang.minCount` is minMember; `basic` (no gang) is minMember 1."""
    raw = source.get("spec") or {}
    policy = raw.get("schedulingPolicy") if isinstance(raw, Mapping) else None
    if not isinstance(policy, Mapping) or not (
        isinstance(policy.get("gang"), Mapping) or "basic" in policy
    ):
        return Translation(
            {},
            (),
            (
                "spec.schedulingPolicy: set gang: {minCount: N} for a gang, or basic: {} for "
                "pods scheduled one by one",
            ),
        )
    if not isinstance(policy.get("gang"), Mapping):
        return Translation({"minMember": 1})
    errors: list[str] = []
    count = _count(
        policy["gang"].get("minCount"),
        "spec.schedulingPolicy.gang.minCount",
        errors,
        fix="set it to the pods that must be scheduled together",
    )
    spec = {"minMember": count} if count is not None else {}
    if not errors:
        errors += [_from_ours(e) for e in spec_errors(spec)]
    return Translation(spec, (), tuple(errors))


def translate(
    dialect: c.Dialect,
    source: JSON,
    topologies: Mapping[str, tuple[str, ...]],
    quotas: QuotaOf | None = None,
) -> Translation:
    """The source PodGroup of `dialect` in our terms. A quota label on the source (ours or
    Koordinator's) is carried to the mirror, and wins over a Volcano queue: it is the more
    explicit statement."""
    if dialect is c.Dialect.VOLCANO:
        found = translate_volcano(source, topologies, quotas)
    elif dialect is c.Dialect.KOORDINATOR:
        found = translate_koordinator(source)
    else:
        found = translate_native(source)
    ref = pod_quota_ref((source.get("metadata") or {}).get("labels"))
    if ref is not None and ref.namespace is None and is_label_value(ref.name):
        notes = tuple(n for n in found.notes if n.field != "spec.queue")
        return Translation(found.spec, notes, found.errors, ref.name)
    return found


def mirror_labels(dialect: c.Dialect, quota: str | None, current: JSON | None = None) -> JSON:
    """The labels of the mirror: `current` (the mirror's now, None for a new one) with the
    dialect's label and the quota label set to `quota` (removed when None)."""
    labels = {k: v for k, v in (current or {}).items() if k not in (c.LABEL_ELASTIC_QUOTA,)}
    labels[c.LABEL_MIRROR_OF] = dialect.value
    if quota is not None:
        labels[c.LABEL_ELASTIC_QUOTA] = quota
    return labels


def mirror_body(dialect: c.Dialect, source: JSON, spec: JSON, quota: str | None = None) -> JSON:
    """Our PodGroup made from `source`: same name and namespace, labelled with the dialect
    (and the quota it names, `Translation.quota`), owned by the source (deleting it deletes
    the mirror)."""
    meta = source["metadata"]
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": mirror_labels(dialect, quota),
            "ownerReferences": [
                {
                    "apiVersion": source.get("apiVersion"),
                    "kind": source.get("kind"),
                    "name": meta["name"],
                    "uid": meta.get("uid"),
                    "controller": True,
                }
            ],
        },
        "spec": spec,
    }


def mirror_of(group: JSON) -> c.Dialect | None:
    """The dialect our PodGroup was mirrored from, or None for one a user (or a lightweight
    gang) made."""
    labels = (group.get("metadata") or {}).get("labels") or {}
    try:
        return c.Dialect(str(labels.get(c.LABEL_MIRROR_OF)))
    except ValueError:
        return None


def owned_by(group: JSON, source: JSON) -> bool:
    """True when our PodGroup `group` is the mirror of this very `source` (by uid)."""
    uid = (source.get("metadata") or {}).get("uid")
    refs = (group.get("metadata") or {}).get("ownerReferences") or ()
    return any(ref.get("uid") == uid for ref in refs)


def _conditions(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(x.get("type")): x for x in status.get("conditions") or () if isinstance(x, Mapping)}


def _true(status: Mapping[str, Any], kind: str) -> bool:
    cond = _conditions(status).get(kind)
    return cond is not None and cond.get("status") == c.ConditionStatus.TRUE


def _held_back(status: Mapping[str, Any]) -> bool:
    """Refused for a cause its controller cannot cure by making pods (room, a spec, a gate)."""
    cond = _conditions(status).get(c.ConditionType.UNSCHEDULABLE)
    return (
        cond is not None
        and cond.get("status") == c.ConditionStatus.TRUE
        and cond.get("reason") != c.Reason.NOT_ENOUGH_TASKS
    )


def volcano_status(ours: Mapping[str, Any]) -> JSON:
    """Our status in Volcano's shape: phase (Pending, Inqueue, Running, Unknown, Completed),
    running, succeeded, failed, and the Unschedulable and Scheduled conditions.

    Inqueue is any Pending gang not held back for room, a spec or a gate: Volcano's job
    controller creates the pods only once its PodGroup is Inqueue, so a gang still missing
    members must say Inqueue, or it would wait for pods that are never made."""
    phase = ours.get("phase")
    if phase == c.Phase.RUNNING:
        volcano = c.VolcanoPhase.RUNNING
    elif phase == c.Phase.UNKNOWN:
        volcano = c.VolcanoPhase.UNKNOWN
    elif phase in (c.Phase.FINISHED, c.Phase.FAILED):
        volcano = c.VolcanoPhase.COMPLETED
    elif _held_back(ours):
        volcano = c.VolcanoPhase.PENDING
    else:
        volcano = c.VolcanoPhase.INQUEUE
    kept = (c.ConditionType.UNSCHEDULABLE, c.ConditionType.SCHEDULED)
    return {
        "phase": volcano.value,
        "running": int(ours.get("running") or 0),
        "succeeded": int(ours.get("succeeded") or 0),
        "failed": int(ours.get("failed") or 0),
        "conditions": [
            {k: v for k, v in x.items() if k != "observedGeneration"}
            for x in ours.get("conditions") or ()
            if isinstance(x, Mapping) and x.get("type") in kept
        ],
    }


def koordinator_status(ours: Mapping[str, Any]) -> JSON:
    """Our status in scheduler-plugins v1alpha1's shape, which Koordinator writes: phase
    (Scheduled once minMember are bound, before they run), scheduled, running, succeeded,
    failed, occupiedBy, scheduleStartTime."""
    phase = ours.get("phase") or c.Phase.PENDING
    if phase == c.Phase.PENDING and _true(ours, c.ConditionType.SCHEDULED):
        koord = c.KoordPhase.SCHEDULED.value
    else:
        koord = str(phase)
    status: JSON = {"phase": koord}
    for key in ("scheduled", "running", "succeeded", "failed"):
        status[key] = int(ours.get(key) or 0)
    for key in ("occupiedBy", "scheduleStartTime"):
        if ours.get(key):
            status[key] = ours[key]
    return status


def native_status(dialect: c.Dialect, ours: Mapping[str, Any], current: Mapping[str, Any]) -> JSON:
    """The native condition: `PodGroupInitiallyScheduled` (v1beta1), True once minCount members
    were bound together and latched there; `PodGroupScheduled` (v1alpha2), True while they
    are. The other conditions in `current` (other writers') are kept."""
    kind = (
        c.NativeCondition.INITIALLY_SCHEDULED
        if dialect is c.Dialect.NATIVE_V1BETA1
        else c.NativeCondition.SCHEDULED
    )
    others = [x for x in current.get("conditions") or () if x.get("type") != kind]
    previous = _conditions(current).get(kind)
    scheduled = _true(ours, c.ConditionType.SCHEDULED) or ours.get("phase") in (
        c.Phase.RUNNING,
        c.Phase.FINISHED,
    )
    latched = kind is c.NativeCondition.INITIALLY_SCHEDULED and (
        previous is not None and previous.get("status") == c.ConditionStatus.TRUE
    )
    if scheduled or latched:
        status, reason, message = (
            c.ConditionStatus.TRUE,
            c.DialectReason.SCHEDULED,
            "minCount members were bound together",
        )
    else:
        refusal = _conditions(ours).get(c.ConditionType.UNSCHEDULABLE) or {}
        status, reason = c.ConditionStatus.FALSE, c.DialectReason.UNSCHEDULABLE
        message = str(refusal.get("message") or "waiting for minCount members to fit together")
    if previous is not None and previous.get("status") == status:
        since = previous.get("lastTransitionTime")
    else:
        since = None
    condition: JSON = {
        "type": kind.value,
        "status": status.value,
        "reason": reason.value,
        "message": message[: c.EVENT_MESSAGE_LIMIT],
    }
    if since:
        condition["lastTransitionTime"] = since
    return {"conditions": [*others, condition]}


def status_for(dialect: c.Dialect, ours: Mapping[str, Any], current: Mapping[str, Any]) -> JSON:
    """The source's status written from ours (`current`: the source's status now)."""
    if dialect is c.Dialect.VOLCANO:
        return volcano_status(ours)
    if dialect is c.Dialect.KOORDINATOR:
        return koordinator_status(ours)
    return native_status(dialect, ours, current)


def differs(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """True when writing `wanted` would change the source's status (keys it has are compared;
    a condition's lastTransitionTime, set by the writer, is left out of the comparison)."""

    def plain(value: Any) -> Any:
        if isinstance(value, list):
            return [plain(v) for v in value]
        if isinstance(value, Mapping):
            return {k: plain(v) for k, v in value.items() if k != "lastTransitionTime"}
        return value

    return any(plain(current.get(k)) != plain(v) for k, v in wanted.items())
