"""Pydantic models of the PodGroup: the single source of truth for the API.

The CRD in `crds/` is generated from these models (`podgroup-operator crd`), the validating
webhook parses bodies with them, and the domain computes statuses as instances of them. Field
names are the API's camelCase (aliases); Python code uses snake_case.

The spec is a compatible superset of scheduler-plugins' PodGroup (`minMember`, `minResources`,
`scheduleTimeoutSeconds`), so Kubeflow and other existing clients work unchanged.

The cluster-scoped Topology (a fabric's node label keys, coarse to fine) is modelled here too: its
CRD is generated the same way, and a PodGroup's `spec.topologyConstraint` names one.
"""

import base64
import binascii
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from podgroup_operator.api.limits import (
    MAX_GANG_GROUP,
    MAX_GANG_GROUP_ENTRY,
    MAX_LABEL_KEY_LENGTH,
    MAX_LABEL_NAME_LENGTH,
    MAX_MATCH_LABEL_KEYS,
    MAX_MIN_MEMBER,
    MAX_NAME_LENGTH,
    MAX_QUANTITY,
    MAX_QUANTITY_SCHEMA,
    MAX_RESOURCE_NAMES,
    MAX_RESTARTS,
    MAX_SECONDS,
    MAX_SUB_GROUP_DEPTH,
    MAX_SUB_GROUPS,
    MAX_TOPOLOGY_LEVELS,
    summarize,
)
from podgroup_operator.api.names import (
    DNS_LABEL,
    DNS_SUBDOMAIN,
    LABEL_KEY_HINT,
    LABEL_KEY_PATTERN,
    is_dns_subdomain,
    label_key_problem,
)
from podgroup_operator.api.quantity import (
    COVERAGE_ERRORS_JOIN,
    NON_NEGATIVE_QUANTITY_PATTERN,
    TOO_LARGE_HINT,
    QuantityError,
    parse_quantity,
)
from podgroup_operator.constants import (
    LABEL_HOSTNAME,
    ConditionStatus,
    ConditionType,
    GangMode,
    Phase,
    PolicyAction,
    RestartScope,
)

_RESOURCE_NAME = rf"({DNS_SUBDOMAIN}/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
"""A resource name: `cpu`, or an extended resource qualified by a domain (`nvidia.com/gpu`)."""


_QUANTITY_SCHEMA: dict[str, Any] = {
    # The structural form the apiserver accepts for int-or-string, validated as a non-negative
    # quantity by the schema itself, so even a cluster without our webhook refuses "-1" or "abc".
    "x-kubernetes-int-or-string": True,
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "minimum": 0,
    # Refuses the integer form of an absurd amount; the string form ("1e30") is refused by the
    # webhook (a pattern cannot compare magnitudes) and saturates in `to_milli` if stored anyway.
    "maximum": MAX_QUANTITY_SCHEMA,
    "pattern": NON_NEGATIVE_QUANTITY_PATTERN,
}


_FREE_OBJECT: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
"""A whole Kubernetes object kept as it is (a pod body to recreate)."""


def _check_quantity(value: Any) -> str | int:
    """Accept what the apiserver accepts for a quantity; refuse negatives and amounts beyond
    MAX_QUANTITY (they would overflow Kubernetes' int64 milli-units) with a fix-it message."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    try:
        amount = parse_quantity(value)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    if amount < 0:
        raise ValueError(f"{value!r} is negative; resource amounts must be >= 0")
    if amount > MAX_QUANTITY:
        raise ValueError(f"{value!r} is too large; {TOO_LARGE_HINT}")
    return value if isinstance(value, int) else str(value)


Quantity = Annotated[
    str | int,
    BeforeValidator(_check_quantity),
    WithJsonSchema(_QUANTITY_SCHEMA),
]
"""A non-negative Kubernetes quantity, as an int or a string like "500m" or "4Gi"."""


def _check_resource_names(value: dict[str, Any]) -> dict[str, Any]:
    if len(value) > MAX_RESOURCE_NAMES:
        raise ValueError(
            f"{len(value)} resource names; at most {MAX_RESOURCE_NAMES}: list only the resources "
            "the group needs"
        )
    bad = [name for name in value if not re.fullmatch(_RESOURCE_NAME, name)]
    if bad:
        raise ValueError(
            f"invalid resource name(s) {summarize(map(repr, bad))}; use names like 'cpu', "
            "'memory', 'pods' or a qualified extended resource like 'nvidia.com/gpu'"
        )
    return value


ResourceList = Annotated[
    dict[str, Quantity],
    AfterValidator(_check_resource_names),
    WithJsonSchema(
        {
            "type": "object",
            "maxProperties": MAX_RESOURCE_NAMES,
            "additionalProperties": _QUANTITY_SCHEMA,
        }
    ),
]
"""Resource name -> quantity, as in a container's `resources.requests`."""


def resource_amounts(resources: dict[str, str | int] | None) -> dict[str, Decimal]:
    """Exact amounts of a ResourceList that already passed validation."""
    return {name: parse_quantity(value) for name, value in (resources or {}).items()}


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_enum_values=False,
        validate_default=False,
    )

    def to_api(self) -> dict[str, Any]:
        """The JSON body the apiserver expects: camelCase keys, no unset optionals."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class RestartPolicy(_Model):
    """What the operator does when a gang breaks (`spec.policy`): a Running gang drops below
    minMember, or a member fails before the gang ever ran whole.

    Absent, the owning controller manages failures and the operator only reports phase Unknown.
    """

    action: PolicyAction = Field(
        default=PolicyAction.RESTART_GANG,
        description="RestartGang deletes and recreates every member; FailGang fails the group; "
        "None only reports.",
    )
    max_restarts: StrictInt = Field(
        default=3,
        ge=0,
        le=MAX_RESTARTS,
        description=f"Restarts allowed before the group becomes Failed (default 3, at most "
        f"{MAX_RESTARTS}).",
    )
    backoff_seconds: StrictInt = Field(
        default=10,
        ge=0,
        le=MAX_SECONDS,
        description="Seconds before the first restart (default 10); doubles for each restart. "
        f"At most {MAX_SECONDS} (one year).",
    )
    max_backoff_seconds: StrictInt = Field(
        default=300,
        ge=0,
        le=MAX_SECONDS,
        description="Cap in seconds of the exponential restart backoff (default 300). At most "
        f"{MAX_SECONDS} (one year).",
    )
    scope: RestartScope | None = Field(
        default=None,
        description="Group (default) restarts every member; SubGroup restarts a broken "
        "sub-group (below its minMember after a member failed or went) alone, charged like a "
        "restart (at once and uncharged after a preemption, which then takes whole sub-groups "
        "only), while the group's minMember and minSubGroup hold, and the whole group otherwise.",
    )


SHOWN_VALUE = 80
"""Characters of a refused name repeated in its message: a 100 KB key still gets a short one."""


def _shown(value: str) -> str:
    return repr(value) if len(value) <= SHOWN_VALUE else f"{value[:SHOWN_VALUE]!r}..."


def _check_label_key(value: str) -> str:
    problem = label_key_problem(value)
    if problem is not None:
        raise ValueError(f"{_shown(value)} {problem}; {LABEL_KEY_HINT}")
    return value


NodeLabelKey = Annotated[
    str,
    AfterValidator(_check_label_key),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_LABEL_KEY_LENGTH,
            "pattern": LABEL_KEY_PATTERN,
        }
    ),
]
"""A node label key, e.g. `example.com/rack` or `topology.kubernetes.io/zone`."""


def _check_topology_name(value: str) -> str:
    if not is_dns_subdomain(value):
        raise ValueError(
            f"{_shown(value)} is no Topology name: use the metadata.name of a Topology, at most "
            "253 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
        )
    return value


TopologyName = Annotated[
    str,
    AfterValidator(_check_topology_name),
    WithJsonSchema(
        {"type": "string", "maxLength": MAX_NAME_LENGTH, "pattern": f"^{DNS_SUBDOMAIN}$"}
    ),
]
"""The name of a cluster-scoped Topology."""


class TopologyConstraint(_Model):
    """Where a gang's members may be bound together, by node labels (`spec.topologyConstraint`).

    At least one level is given. With `topology`, each level is one of that Topology's levels
    and the preferred one is the required one or finer (checked by the validating webhook, which
    reads the Topology); a sub-group's constraint without it uses its ancestors' Topology
    (`topology_in_effect`); with none in effect, each level is any node label key.
    """

    model_config = ConfigDict(
        # The schema's own check that a level is given, for a cluster without our webhook.
        json_schema_extra={
            "anyOf": [
                {"required": ["requiredTopologyLevel"]},
                {"required": ["preferredTopologyLevel"]},
            ]
        }
    )

    topology: TopologyName | None = Field(
        default=None,
        description="Name of the cluster-scoped Topology whose levels the constraint uses; the "
        "preferred level may then fall back to each coarser level of it, never past the "
        "required one. Absent on a sub-group, its nearest ancestor's (the group's for the "
        "top); absent there too, the levels are any node label keys.",
    )
    required_topology_level: NodeLabelKey | None = Field(
        default=None,
        description="Node label key whose one value (domain) holds every member bound, e.g. "
        "example.com/rack; nodes without the label are not candidates.",
    )
    preferred_topology_level: NodeLabelKey | None = Field(
        default=None,
        description="Node label key of the domain tried first; with a Topology, the required "
        "level itself or a finer one. Absent a required level, a gang that fits in no one "
        "domain is placed cluster-wide.",
    )

    @model_validator(mode="after")
    def _a_level_is_given(self) -> "TopologyConstraint":
        """The rule across its levels (`validation.constraint_rule_errors`), imported here
        since validation.py reads these models."""
        from podgroup_operator.api.validation import constraint_rule_errors

        errors = constraint_rule_errors(self)
        if errors:
            raise ValueError("; ".join(errors))
        return self


SubGroupName = Annotated[
    str, Field(pattern=f"^{DNS_LABEL}$", min_length=1, max_length=MAX_LABEL_NAME_LENGTH)
]
"""A sub-group's name: a DNS label, so that it is also a valid pod label value."""


class SubGroup(_Model):
    """One part of a gang (`spec.subGroups[]`): a leaf holds the pods labelled
    `scheduling.x-k8s.io/sub-group: NAME`; a parent holds its children (`parent` naming it).

    A leaf with `matchLabelKeys` is a template: the group's pods that carry every key and no
    sub-group label form one sub-group per distinct tuple of values, named `NAME-VALUES`."""

    name: SubGroupName = Field(
        description="A DNS label, unique among the group's sub-groups; pods join a leaf with the "
        "label scheduling.x-k8s.io/sub-group: NAME."
    )
    parent: SubGroupName | None = Field(
        default=None,
        description="The sub-group this one is part of; absent, a direct part of the group. The "
        f"tree is at most {MAX_SUB_GROUP_DEPTH} deep.",
    )
    min_member: StrictInt | None = Field(
        default=None,
        ge=1,
        le=MAX_MIN_MEMBER,
        description="Members of this sub-group that must be bound at once; required of a leaf. "
        "On a parent, at least what its counted children's minimums sum to.",
    )
    min_sub_group: StrictInt | None = Field(
        default=None,
        ge=1,
        le=MAX_SUB_GROUPS,
        description="On a parent: how many of its direct children must reach their minimum "
        "(default: all).",
    )
    topology_constraint: TopologyConstraint | None = Field(
        default=None,
        description="The one domain this sub-group's members are bound in, inside its parent's "
        "domain: its levels equal to or finer than its parent's, in the same Topology (without "
        "topology, it uses its nearest ancestor's, the group's for the top).",
    )
    match_label_keys: (
        list[
            Annotated[str, AfterValidator(_check_label_key), Field(max_length=MAX_LABEL_KEY_LENGTH)]
        ]
        | None
    ) = Field(
        default=None,
        min_length=1,
        max_length=MAX_MATCH_LABEL_KEYS,
        description="Pod label keys: the group's pods with equal values for all of them (and no "
        "sub-group label) form one sub-group each, named NAME-VALUE1-VALUE2.",
    )


def ancestors(sub: SubGroup, by_name: Mapping[str, SubGroup]) -> Iterator[SubGroup]:
    """The sub-groups above `sub`, nearest first. A cycle or an unknown parent ends the walk:
    validation names those, and every reader of a stored tree must still stop."""
    seen = {sub.name}
    current = sub
    while current.parent is not None and current.parent not in seen:
        seen.add(current.parent)
        parent = by_name.get(current.parent)
        if parent is None:
            return
        yield parent
        current = parent


@dataclass(frozen=True)
class TopologyInEffect:
    """The Topology whose levels a sub-group's constraint is read in (`name`, None: any node
    label keys) and who names it (`source`: `its own`, `parent sub-group 'p'`, `the group`)."""

    name: str | None
    source: str = ""
    above: str | None = None
    """The Topology its ancestors use, which it would inherit naming none (None: none)."""

    @property
    def inherited(self) -> bool:
        return self.name is not None and self.source != OWN_TOPOLOGY


OWN_TOPOLOGY = "its own"
"""`TopologyInEffect.source` of a sub-group that names its Topology itself."""


def topology_in_effect(
    sub: SubGroup, by_name: Mapping[str, SubGroup], group: TopologyConstraint | None
) -> TopologyInEffect:
    """The Topology of `sub`'s constraint: the one it names, else its nearest ancestor's that
    names one, else the group's `spec.topologyConstraint.topology`, else none.

    A sub-group lies inside its parent's domain, so its levels are cut by the same Topology (as
    KAI-Scheduler's sub-groups inherit theirs); the scheduler resolves and the webhook checks
    a sub-group's levels in this one Topology
    (docs/decisions/020-sub-groups-inherit-their-topology.md). A cycle or an unknown parent
    ends the walk."""
    constraint = sub.topology_constraint
    if constraint is not None and constraint.topology is not None:
        above = topology_in_effect(
            sub.model_copy(update={"topology_constraint": None}), by_name, group
        )
        return TopologyInEffect(constraint.topology, OWN_TOPOLOGY, above.name)
    for parent in ancestors(sub, by_name):
        named = parent.topology_constraint and parent.topology_constraint.topology
        if named:
            return TopologyInEffect(named, f"parent sub-group {parent.name!r}", named)
    if group is not None and group.topology is not None:
        return TopologyInEffect(group.topology, "the group", group.topology)
    return TopologyInEffect(None)


def constraint_in_effect(
    sub: SubGroup, by_name: Mapping[str, SubGroup], group: TopologyConstraint | None
) -> TopologyConstraint | None:
    """`sub`'s topologyConstraint with the Topology it inherits (`topology_in_effect`) filled
    in, or None when it has none."""
    constraint = sub.topology_constraint
    if constraint is None or constraint.topology is not None:
        return constraint
    named = topology_in_effect(sub, by_name, group).name
    return constraint if named is None else constraint.model_copy(update={"topology": named})


class PodGroupSpec(_Model):
    """A gang: pods that must run together, at least minMember of them at the same time."""

    min_member: StrictInt = Field(
        ge=1,
        le=MAX_MIN_MEMBER,
        description="Members that must be running at the same time for the group to run. "
        f"Required; 1 to {MAX_MIN_MEMBER}.",
    )
    min_resources: ResourceList | None = Field(
        default=None,
        description="Resources the whole group needs at least (name -> quantity, e.g. cpu: 16); "
        "a group the cluster cannot hold is not attempted.",
    )
    schedule_timeout_seconds: StrictInt | None = Field(
        default=None,
        ge=1,
        le=MAX_SECONDS,
        description="Seconds to wait for a whole-gang placement before reporting "
        "ScheduleTimeout and backing off; a Strict gang then holding fewer than minMember "
        "members bound is restarted (or failed) by its policy, to free their nodes "
        f"(default 60; 1 to {MAX_SECONDS}, one year).",
    )
    total_resources: ResourceList | None = Field(
        default=None,
        description="Quota reserved for the whole group in a namespace that opted in to "
        "quota reservation.",
    )
    policy: RestartPolicy | None = Field(
        default=None,
        description="Whole-gang restart policy; absent, the owning controller handles failures.",
    )
    mode: GangMode | None = Field(
        default=None,
        description="Strict (default) releases a failed attempt at once; NonStrict keeps "
        "members placed across cycles.",
    )
    gang_group: (
        list[
            Annotated[
                str,
                Field(
                    pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$",
                    max_length=MAX_GANG_GROUP_ENTRY,
                ),
            ]
        ]
        | None
    ) = Field(
        default=None,
        max_length=MAX_GANG_GROUP,
        description="PodGroups (namespace/name) that must all fit before any of them binds; "
        f"at most {MAX_GANG_GROUP}.",
    )
    topology_constraint: TopologyConstraint | None = Field(
        default=None,
        description="Bind the members within one domain of a node label (a rack, a block, an "
        "NVLink domain): required, preferred, or both.",
    )
    sub_groups: list[SubGroup] | None = Field(
        default=None,
        max_length=MAX_SUB_GROUPS,
        # The schema refuses a repeated name itself, for a cluster without our webhook.
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
        description="The gang's parts, a tree at most 4 deep: each placed whole (its minMember) "
        f"in one domain of its own topology level, inside its parent's; at most {MAX_SUB_GROUPS}.",
    )
    min_sub_group: StrictInt | None = Field(
        default=None,
        ge=1,
        le=MAX_SUB_GROUPS,
        description="How many of the top-level sub-groups must reach their minimum (default: all).",
    )
    max_run_seconds: StrictInt | None = Field(
        default=None,
        ge=1,
        le=MAX_SECONDS,
        description="The most seconds the gang may run, counted from when it became Running: "
        "past it the gang is stopped whole (members deleted, phase Failed, reason "
        "RunTimeExceeded). A gang with a limit may backfill nodes reserved for an older gang "
        "when it ends before that gang's estimated start. Absent: read from the members' "
        "activeDeadlineSeconds or label kueue.x-k8s.io/max-exec-time-seconds, else none "
        f"(1 to {MAX_SECONDS}, one year).",
    )

    @model_validator(mode="after")
    def _fields_agree(self) -> "PodGroupSpec":
        """The rules across fields (`validation.spec_rule_errors`), raised as one error;
        imported here since validation.py reads these models."""
        from podgroup_operator.api.validation import spec_rule_errors

        errors = spec_rule_errors(self)
        if errors:
            raise ValueError(COVERAGE_ERRORS_JOIN.join(errors))
        return self


_SPEC_API_FIELDS = {f.alias or n for n, f in PodGroupSpec.model_fields.items()} | set(
    PodGroupSpec.model_fields
)


class Condition(_Model):
    """One observation about the group, in the standard Kubernetes condition shape."""

    model_config = ConfigDict(extra="ignore")

    type: str = Field(description="A ConditionType; other writers may add their own types.")
    status: ConditionStatus = Field(description="True, False or Unknown.")
    transition_id: str | None = Field(
        default=None,
        alias="transitionID",
        description="Changes on every transition of this condition.",
    )
    last_transition_time: datetime | None = Field(
        default=None, description="When the status last flipped."
    )
    reason: str | None = Field(default=None, description="Machine-readable cause (CamelCase).")
    message: str | None = Field(default=None, description="The cause in words, with the fix.")


class Reservation(_Model):
    """Quota held for the group against its namespace's ResourceQuota (`totalResources`)."""

    model_config = ConfigDict(extra="ignore")

    reserved: ResourceList | None = Field(default=None, description="Quota held for the group.")
    used: ResourceList | None = Field(default=None, description="Requests of live members.")


PACKED_PODS_MAX_BYTES = 64 * 2**20
"""The most JSON a packed list of pods may unpack to: a status is at most 1.5 MiB in etcd, and a
packed value that inflates past this is not one the operator wrote (a zlib bomb)."""


def pack_pods(bodies: list[dict[str, Any]]) -> str:
    """Pod bodies as base64 of zlib-compressed JSON: the bodies of a gang's members differ in
    little but their names, so they pack well (docs/decisions/014-restart-bodies-packed.md)."""
    text = orjson.dumps(bodies, option=orjson.OPT_SORT_KEYS)
    return base64.b64encode(zlib.compress(text, 9)).decode("ascii")


def unpack_pods(packed: str) -> list[dict[str, Any]]:
    """The bodies `pack_pods` packed; ValueError for anything else."""
    try:
        inflate = zlib.decompressobj()
        text = inflate.decompress(base64.b64decode(packed, validate=True), PACKED_PODS_MAX_BYTES)
    except (binascii.Error, zlib.error) as exc:
        raise ValueError(f"not base64 of zlib-compressed JSON: {exc}") from exc
    if inflate.unconsumed_tail:
        raise ValueError(f"unpacks to more than {PACKED_PODS_MAX_BYTES} bytes")
    bodies = orjson.loads(text)  # a ValueError past 1,024 levels of nesting, not a RecursionError
    if not isinstance(bodies, list) or not all(isinstance(body, dict) for body in bodies):
        raise ValueError("not a list of pod objects")
    return bodies


def _unpackable(packed: str | None) -> str | None:
    if packed is not None:
        unpack_pods(packed)
    return packed


class SubGroupPlacement(_Model):
    """Where one sub-group was bound (`status.placement.subGroups[]`)."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(description="The sub-group (a template's one, NAME-VALUES).")
    level: str = Field(description="The node label key of its domain's level.")
    domain: str = Field(description="The label value of the domain its members were bound in.")


class TopologyPlacement(_Model):
    """Where a gang with a topology constraint was bound (`status.placement`)."""

    model_config = ConfigDict(extra="ignore")

    level: str | None = Field(
        default=None,
        description="The node label key of the level actually used (absent: the group itself "
        "was placed without a domain).",
    )
    domain: str | None = Field(
        default=None,
        description="The label value of the domain the gang was bound in, e.g. z0-b3-r5.",
    )
    sub_groups: list[SubGroupPlacement] | None = Field(
        default=None,
        description="The domain of each sub-group placed under a topology constraint.",
    )


class SubGroupStatus(_Model):
    """One sub-group's members (`status.subGroups[]`)."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(description="The sub-group (a template's one, NAME-VALUES).")
    min_member: int = Field(
        default=0,
        description="What it needs: its minMember; for a parent without one, what its counted "
        "children need, each instance of a template a child of its own.",
    )
    running: int = Field(default=0, description="Its members running.")
    succeeded: int = Field(default=0, description="Its members that succeeded.")
    failed: int = Field(default=0, description="Its members that failed.")


class PodGroupStatus(_Model):
    """What the operator observed: phase, member counts, conditions and restart progress."""

    model_config = ConfigDict(extra="ignore")

    phase: Annotated[Phase | None, WithJsonSchema({"type": "string"})] = Field(
        default=None,
        description="Pending, Running, Unknown, Finished or Failed. Finished and Failed latch.",
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description=", ".join(ConditionType)
        + ": one condition of each type at most (docs/concepts/phases-and-conditions.md).",
    )
    scheduled: int = Field(default=0, description="Members bound to a node.")
    running: int = Field(default=0, description="Members running.")
    succeeded: int = Field(default=0, description="Members that succeeded.")
    failed: int = Field(default=0, description="Members that failed.")
    terminating: int = Field(
        default=0,
        description="Members being deleted (deletionTimestamp set) whose pods still exist. Those "
        "still running count in `running` until their pods are gone.",
    )
    occupied_by: str | None = Field(
        default=None,
        description="The owner (kind/name) of the members, as scheduler-plugins sets it.",
    )
    observed_generation: int | None = Field(
        default=None, description="The spec generation this status was computed from."
    )
    schedule_start_time: datetime | None = Field(
        default=None, description="When the group was first seen waiting for placement."
    )
    running_time: datetime | None = Field(
        default=None, description="When the group first became Running."
    )
    completion_time: datetime | None = Field(
        default=None, description="When the group reached Finished or Failed."
    )
    last_failure_time: datetime | None = Field(
        default=None, description="When a member last failed or was deleted while running."
    )
    restarts: int = Field(default=0, description="Whole-gang restarts performed.")
    last_restart_time: datetime | None = Field(
        default=None, description="When the last whole-gang restart began."
    )
    restarting_uids: list[str] = Field(
        default_factory=list,
        alias="restartingUIDs",
        description="UIDs of the members of the incarnation being restarted (empty when idle).",
    )
    restart_pods: list[Annotated[dict[str, Any], WithJsonSchema(_FREE_OBJECT)]] = Field(
        default_factory=list,
        description="Bare members the restart recreates once their names are free.",
    )
    restart_pods_packed: Annotated[str | None, AfterValidator(_unpackable)] = Field(
        default=None,
        description="The same, as base64 of zlib-compressed JSON, when there are too many to "
        "write plainly (hundreds of bare members).",
    )
    restart_pods_digest: str | None = Field(
        default=None,
        description="The operator's signature (HMAC-SHA256) of restartingUIDs and the recorded "
        "pods, bound to this PodGroup: a record without a matching one is refused.",
    )
    reservation: Reservation | None = Field(
        default=None, description="Quota reserved for the group and used by its live members."
    )
    placement: TopologyPlacement | None = Field(
        default=None,
        description="The level actually used and the label value of the domain the gang was "
        "bound in, once bound under a topology constraint.",
    )
    sub_groups: list[SubGroupStatus] | None = Field(
        default=None,
        description="Each sub-group's members: leaves' own, a parent's summed over its subtree.",
    )
    sub_groups_satisfied: str | None = Field(
        default=None,
        description="Sub-groups whose running members reach their minMember, of all (3/4).",
    )


def salvage_status(raw: Any) -> tuple[PodGroupStatus, list[dict[str, Any]]]:
    """A stored status as this operator reads it, and the pydantic errors of what it could not.

    Status is ours to write, but not only we write it: a cluster moving over from
    scheduler-plugins has groups in its phases (`PreScheduling`, `Scheduling`, `Scheduled`), and
    another controller, a person with a status patch or an older release may leave values this
    model refuses. Refusing the whole group would leave its gang unscheduled for ever, so each
    top-level field that does not validate is read as absent instead, and the errors say which, so
    the status reconciler rewrites those fields from the members and says so once (an Event).
    """
    try:
        return PodGroupStatus.model_validate(raw), []
    except ValidationError as exc:
        errors: list[dict[str, Any]] = [dict(error) for error in exc.errors(include_url=False)]
    if isinstance(raw, Mapping):
        unreadable = {error["loc"][0] for error in errors if error["loc"]}
        kept = {key: value for key, value in raw.items() if key not in unreadable}
        try:
            return PodGroupStatus.model_validate(kept), errors
        except ValidationError:
            pass  # an error without a field to drop: read nothing of it
    return PodGroupStatus(), errors


def unreadable_fields(errors: list[dict[str, Any]]) -> set[str]:
    """The status fields (API names) that `salvage_status` read as absent."""
    fields = {str(error["loc"][0]) for error in errors if error["loc"]}
    if any(not error["loc"] for error in errors):
        fields |= {f.alias or name for name, f in PodGroupStatus.model_fields.items()}
    return fields


class ObjectMeta(BaseModel):
    """The few metadata fields the operator reads; the rest passes through untouched."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, alias_generator=to_camel)

    name: str
    namespace: str = "default"
    uid: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[dict[str, Any]] = Field(default_factory=list)


class PodGroup(BaseModel):
    """A whole PodGroup object as read from the API."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    metadata: ObjectMeta
    spec: PodGroupSpec
    status: PodGroupStatus = Field(default_factory=PodGroupStatus)
    unreadable_status: list[dict[str, Any]] = Field(default_factory=list, exclude=True, repr=False)
    """The errors of the stored status fields read as absent (`salvage_status`); empty when
    the status was read whole. Never part of the API: set from `status` on every parse."""

    @model_validator(mode="before")
    @classmethod
    def _salvage_status(cls, data: Any) -> Any:
        """Read the status leniently (`salvage_status`): only the spec can make a PodGroup
        unreadable, and that is the user's to fix."""
        if not isinstance(data, Mapping):
            return data
        status = data.get("status")
        if isinstance(status, PodGroupStatus):
            return {**data, "unreadable_status": []}
        read, errors = salvage_status(status or {})
        return {**data, "status": read, "unreadable_status": errors}

    @field_validator("spec", mode="before")
    @classmethod
    def _ignore_unknown_spec_fields(cls, value: Any) -> Any:
        """Reading is lenient: an object stored with unknown spec fields still gets a status.

        The CRD schema closes every object, so the apiserver prunes unknown fields before they
        are stored; they can only come from an older CRD that kept them (and a time our webhook,
        which refuses them as PodGroupSpec forbids them, was off).
        """
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if k in _SPEC_API_FIELDS}
        return value

    @property
    def key(self) -> tuple[str, str]:
        return (self.metadata.namespace, self.metadata.name)


# --- Topology ------------------------------------------------------------------------------------


class LevelOrderError(ValueError):
    """A Topology's levels break an order rule (`level_problems`); the message names each."""


def level_problems(labels: Sequence[str]) -> list[tuple[int, str]]:
    """(index, what is wrong and the fix) for each level of a Topology, given as node label keys
    coarse to fine, that repeats an earlier one or puts kubernetes.io/hostname before the end."""
    problems: list[tuple[int, str]] = []
    first: dict[str, int] = {}
    for index, label in enumerate(labels):
        if label in first:
            problems.append(
                (
                    index,
                    f"{_shown(label)} repeats levels[{first[label]}]; each level is a "
                    "different node label: remove one",
                )
            )
        else:
            first[label] = index
        if label == LABEL_HOSTNAME and index != len(labels) - 1:
            problems.append(
                (
                    index,
                    f"{LABEL_HOSTNAME} may only be the last level (each node is its own "
                    "domain, finer than any other): move it to the end or remove it",
                )
            )
    return problems


class TopologyLevel(_Model):
    """One tier of the fabric: the node label whose values name its domains."""

    node_label: NodeLabelKey = Field(
        description="Node label key of this level, e.g. example.com/rack; each value of it is "
        "one domain (one rack). kubernetes.io/hostname only as the last level."
    )


class TopologySpec(_Model):
    """A fabric's levels, coarse to fine (zone, block, rack, host)."""

    levels: list[TopologyLevel] = Field(
        min_length=1,
        max_length=MAX_TOPOLOGY_LEVELS,
        description=f"1 to {MAX_TOPOLOGY_LEVELS} levels, coarsest first, each a different node "
        "label; kubernetes.io/hostname only as the last.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["nodeLabel"],
        },
    )

    @field_validator("levels")
    @classmethod
    def _levels_in_order(cls, levels: list[TopologyLevel]) -> list[TopologyLevel]:
        problems = level_problems([level.node_label for level in levels])
        if problems:
            raise LevelOrderError(
                "; ".join(f"levels[{index}].nodeLabel: {problem}" for index, problem in problems)
            )
        return levels

    @property
    def node_labels(self) -> tuple[str, ...]:
        return tuple(level.node_label for level in self.levels)


class TopologyLevelStatus(_Model):
    """What the nodes say of one level."""

    model_config = ConfigDict(extra="ignore")

    node_label: str = Field(description="The level's node label key.")
    domains: int = Field(
        default=0, description="Distinct values of the label among the nodes that carry it."
    )
    nodes_without_label: int = Field(
        default=0,
        description="Ready nodes that lack the label: no gang constrained to this level is "
        "placed on them.",
    )


class TopologyStatus(_Model):
    """The domains of each level, as the operator last counted them from the nodes."""

    model_config = ConfigDict(extra="ignore")

    levels: list[TopologyLevelStatus] = Field(
        default_factory=list, description="One entry per level of the spec, in its order."
    )
    observed_generation: int | None = Field(
        default=None, description="The spec generation this status was computed from."
    )


class ClusterObjectMeta(BaseModel):
    """The few metadata fields read of a cluster-scoped object."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, alias_generator=to_camel)

    name: str
    uid: str | None = None
    generation: int | None = None
    resource_version: str | None = None


class Topology(BaseModel):
    """A whole Topology object as read from the API; a status it cannot read is read as empty
    (the operator rewrites it)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    metadata: ClusterObjectMeta
    spec: TopologySpec
    status: TopologyStatus = Field(default_factory=TopologyStatus)

    @field_validator("status", mode="before")
    @classmethod
    def _lenient_status(cls, value: Any) -> Any:
        try:
            return TopologyStatus.model_validate(value or {})
        except ValidationError:
            return TopologyStatus()
