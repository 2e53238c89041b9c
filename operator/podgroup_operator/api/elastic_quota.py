"""The ElasticQuota API: scheduler-plugins' kind, our additions, and Koordinator's keys as aliases.

`ElasticQuotaSpec` is a compatible superset of scheduler-plugins' `scheduling.x-k8s.io/v1alpha1`
ElasticQuota (`spec.min`, `spec.max`; `status.used`): every addition is optional and defaulted so
that their object means here what it meant there (nothing guaranteed beyond `min`, weight 1, no
parent, reclaimable at once, priority order). Koordinator's labels and annotations
(`quota.scheduling.koordinator.sh/...`) are read as aliases of our fields, so one function,
`normalize`, turns an object of either dialect into the `QuotaSpec` the quota tree
(scheduling/elastic/) is built from. The choices are recorded in
docs/decisions/023-elastic-quota-model.md.

Amounts in a `QuotaSpec` are integer milli-units, as everywhere the scheduler does arithmetic; a
resource absent from `max` is unlimited, absent from `min` or `guarantee` is zero (the meaning
scheduler-plugins gives extended resources).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError
from pydantic.alias_generators import to_camel

from podgroup_operator.api.limits import MAX_SECONDS
from podgroup_operator.api.models import ResourceList
from podgroup_operator.api.names import is_dns_label, is_dns_subdomain
from podgroup_operator.api.quantity import QuantityError, format_milli, parse_quantity, to_milli
from podgroup_operator.constants import (
    ANNOTATION_KOORD_SHARED_WEIGHT,
    KOORD_FALSE,
    KOORD_INTERNAL_QUOTAS,
    KOORD_QUOTA_GROUP,
    KOORD_QUOTA_PREFIX,
    KOORD_ROOT_QUOTA,
    KOORD_TRUE,
    LABEL_ELASTIC_QUOTA,
    LABEL_KOORD_ALLOW_LENT,
    LABEL_KOORD_QUOTA_IS_PARENT,
    LABEL_KOORD_QUOTA_NAME,
    LABEL_KOORD_QUOTA_PARENT,
    QueueingStrategy,
)

MAX_WEIGHT = 1_000_000
"""Weights are relative among siblings; a ratio beyond a million to one is a typo."""

Milli = dict[str, int]
"""Resource name -> integer milli-units."""


class _QuotaModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", validate_default=False
    )

    def to_api(self) -> dict[str, Any]:
        """The JSON body the apiserver expects: camelCase keys, no unset optionals."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class ElasticQuotaSpec(_QuotaModel):
    """What a quota may use: `min` guaranteed (lent while idle), `max` never exceeded."""

    min: ResourceList | None = Field(
        default=None,
        description="Resources this quota is entitled to; idle, they are lent to others and "
        "reclaimed when needed. A resource not listed is 0.",
    )
    max: ResourceList | None = Field(
        default=None,
        description="Resources this quota never exceeds, borrowing included. A resource not "
        "listed is unlimited.",
    )
    guarantee: ResourceList | None = Field(
        default=None,
        description="The part of min that is never lent, even idle (at most min). Default: none.",
    )
    weight: StrictInt | None = Field(
        default=None,
        ge=1,
        le=MAX_WEIGHT,
        description="This quota's share of the surplus relative to its siblings (default 1).",
    )
    parent: str | None = Field(
        default=None,
        description="The parent quota: `name` in this namespace (or a name unique in the "
        "cluster), or `namespace/name`. Default: none (a root).",
    )
    min_run_seconds: StrictInt | None = Field(
        default=None,
        ge=0,
        le=MAX_SECONDS,
        description="Seconds a gang of this quota runs before another quota may reclaim it "
        "(default 0).",
    )
    queueing_strategy: QueueingStrategy | None = Field(
        default=None,
        description="Priority (default): priority, then creation; StrictFIFO: creation only.",
    )


class ElasticQuotaStatus(_QuotaModel):
    """What the quota uses now and why: `used` is scheduler-plugins' field; the rest explain."""

    used: ResourceList | None = Field(
        default=None, description="What the quota's bound pods request, its children's included."
    )
    borrowed: ResourceList | None = Field(
        default=None, description="Used beyond min: lent by other quotas."
    )
    lent: ResourceList | None = Field(
        default=None, description="This quota's idle min used by other quotas."
    )
    fair_share: ResourceList | None = Field(
        default=None,
        description="What a fair division gives the quota now: what its pods use and its gangs "
        "waiting ask, up to its min, plus its weighted part of what is left.",
    )
    gangs_waiting: StrictInt | None = Field(
        default=None, ge=0, description="Gangs charged to this quota that wait to be admitted."
    )
    min: ResourceList | None = Field(
        default=None,
        description="The min the scheduler reads, Koordinator's keys applied, per governed "
        "resource.",
    )
    max: ResourceList | None = Field(
        default=None,
        description="The max the scheduler reads; a governed resource absent is unlimited.",
    )
    guarantee: ResourceList | None = Field(
        default=None,
        description="The part of min never lent, as the scheduler reads it (allow-lent-resource "
        "false: all of min).",
    )


@dataclass(frozen=True)
class QuotaRef:
    """A quota named by another object: `namespace` None when it was a bare name."""

    namespace: str | None
    name: str

    def __str__(self) -> str:
        return self.name if self.namespace is None else f"{self.namespace}/{self.name}"


QuotaKey = tuple[str, str]
"""(namespace, name) of an ElasticQuota."""


@dataclass(frozen=True)
class QuotaSpec:
    """One ElasticQuota, normalized: whichever dialect it was written in, this is its meaning."""

    key: QuotaKey
    min: Milli = field(default_factory=dict)
    max: Milli = field(default_factory=dict)
    """Absent resource: unlimited."""
    guarantee: Milli = field(default_factory=dict)
    weight: int = 1
    shared_weight: Milli = field(default_factory=dict)
    """Koordinator's per-resource weights (milli), its max where a Koordinator object gives
    none; empty: `weight` for every resource."""
    parent: QuotaRef | None = None
    is_parent: bool | None = None
    """True: children only, no pods; False: no children; None: either (our dialect)."""
    min_run_seconds: int = 0
    queueing: QueueingStrategy = QueueingStrategy.PRIORITY

    @property
    def label(self) -> str:
        return f"{self.key[0]}/{self.key[1]}"


class ElasticQuotaError(ValueError):
    """Every problem of one ElasticQuota, each `path: what is wrong; the fix`."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


_FIELD_FIXES: dict[str, str] = {
    "weight": f"use an integer from 1 (the default) to {MAX_WEIGHT}; higher gets more surplus",
    "minRunSeconds": f"use seconds from 0 (reclaimable at once) to {MAX_SECONDS} (one year)",
    "gangsWaiting": "a count is never negative",
}
"""How to fix a bounded field, by its API name."""

_PYDANTIC_FIXES: dict[str, str] = {
    "extra_forbidden": "unknown field; remove it (known: min, max, guarantee, weight, parent, "
    "minRunSeconds, queueingStrategy)",
    "greater_than_equal": "is too small",
    "less_than_equal": "is too large",
}


def _pydantic_errors(exc: ValidationError, root: str) -> list[str]:
    out = []
    for error in exc.errors():
        path = root + "".join(
            f"[{p}]" if isinstance(p, int) else f".{p}"
            for p in error["loc"]
            if not (isinstance(p, str) and (p.startswith("function-") or p in ("str", "int")))
        )
        kind = error["type"]
        ctx = error.get("ctx") or {}
        fix = _FIELD_FIXES.get(str(error["loc"][0]) if error["loc"] else "", "")
        if kind == "greater_than_equal":
            text = f"must be >= {ctx.get('ge')}, not {error.get('input')!r}; {fix}"
        elif kind == "less_than_equal":
            text = f"must be at most {ctx.get('le')}, not {error.get('input')!r}; {fix}"
        elif kind == "value_error":
            text = str(ctx.get("error", error["msg"]))
        elif kind == "enum":
            text = f"must be one of {ctx.get('expected')}, not {error.get('input')!r}"
        else:
            text = _PYDANTIC_FIXES.get(kind, str(error["msg"]))
        out.append(f"{path}: {text}")
    return out


_REF = re.compile(r"^(?:([^/]+)/)?([^/]+)$")


def parse_ref(text: str) -> QuotaRef | None:
    """`name` or `namespace/name`; None when the text is neither."""
    match = _REF.match(text)
    if match is None:
        return None
    namespace, name = match.groups()
    if not is_dns_subdomain(name) or (namespace is not None and not is_dns_label(namespace)):
        return None
    return QuotaRef(namespace, name)


def _milli(resources: Mapping[str, Any] | None) -> Milli:
    return {name: to_milli(value) for name, value in (resources or {}).items()}


def _flag(
    labels: Mapping[str, str], key: str, errors: list[str], default: bool | None
) -> bool | None:
    value = labels.get(key)
    if value is None:
        return default
    if value not in (KOORD_TRUE, KOORD_FALSE):
        errors.append(f'metadata.labels["{key}"]: {value!r} is not a flag; use "true" or "false"')
        return default
    return value == KOORD_TRUE


def _shared_weight(annotations: Mapping[str, str], errors: list[str]) -> Milli:
    raw = annotations.get(ANNOTATION_KOORD_SHARED_WEIGHT)
    if raw is None:
        return {}
    where = f'metadata.annotations["{ANNOTATION_KOORD_SHARED_WEIGHT}"]'
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        errors.append(f'{where}: {raw!r} is not a JSON resource list; write e.g. {{"cpu": "4"}}')
        return {}
    weights: Milli = {}
    for name, value in parsed.items():
        try:
            amount = parse_quantity(value)
        except QuantityError as exc:
            errors.append(f"{where}.{name}: {exc}")
            continue
        if amount <= 0:
            errors.append(f"{where}.{name}: {value!r} must be > 0; give a positive weight")
            continue
        weights[name] = to_milli(amount)
    return weights


def _over(
    low: Milli, high: Milli, low_path: str, high_path: str, fix: str, *, absent_is_zero: bool
) -> list[str]:
    """Each resource whose `low` exceeds its `high` (absent in high: 0 or unlimited)."""
    out = []
    for name in sorted(low):
        if name not in high and not absent_is_zero:
            continue
        cap = high.get(name, 0)
        if low[name] > cap:
            out.append(
                f"{low_path}.{name}: {format_milli(low[name], name)} is above {high_path}.{name} "
                f"{format_milli(cap, name)}; {fix}"
            )
    return out


def elastic_quota_errors(obj: Mapping[str, Any]) -> list[str]:
    """Every problem of an ElasticQuota object, as `path: what is wrong; the fix`."""
    try:
        normalize(obj)
    except ElasticQuotaError as exc:
        return exc.errors
    return []


_LABELS_READ = (LABEL_KOORD_QUOTA_PARENT, LABEL_KOORD_QUOTA_IS_PARENT, LABEL_KOORD_ALLOW_LENT)
_ANNOTATIONS_READ = (ANNOTATION_KOORD_SHARED_WEIGHT,)


def _quota_keys(obj: Mapping[str, Any]) -> tuple[Any, list[str | None], list[str | None]]:
    """What `normalize` reads of an object: its spec and the Koordinator keys it aliases (not
    the others of that prefix, such as the runtime annotations Koordinator rewrites)."""
    meta = obj.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    return (
        obj.get("spec"),
        [labels.get(key) for key in _LABELS_READ],
        [annotations.get(key) for key in _ANNOTATIONS_READ],
    )


def koordinator_internal(obj: Mapping[str, Any]) -> bool:
    """One of the quotas Koordinator's scheduler keeps for itself (its root, system and default
    quotas, in its group): Koordinator's to write as it likes."""
    group = str(obj.get("apiVersion") or "").partition("/")[0]
    name = (obj.get("metadata") or {}).get("name")
    return group == KOORD_QUOTA_GROUP and name in KOORD_INTERNAL_QUOTAS


def elastic_quota_update_errors(
    old: Mapping[str, Any] | None, body: Mapping[str, Any]
) -> list[str]:
    """`elastic_quota_errors` of an ElasticQuota created (`old` None) or updated. None for an
    update that leaves what `normalize` reads as stored (the spec and the Koordinator keys it
    aliases), so an object stored before the webhook existed can still get a label, a finalizer
    or Koordinator's runtime annotations; none for Koordinator's own internal quotas
    (`koordinator_internal`), which a running Koordinator must always be able to write."""
    if koordinator_internal(body):
        return []
    if old is not None and _quota_keys(old) == _quota_keys(body):
        return []
    return elastic_quota_errors(body)


def normalize(obj: Mapping[str, Any]) -> QuotaSpec:
    """The meaning of an ElasticQuota written in our dialect, scheduler-plugins' or Koordinator's.

    Raises ElasticQuotaError with every problem at once. Koordinator's keys fill a field only
    where the spec leaves it unset; both set and disagreeing is an error, so a migration never
    silently picks one.
    """
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    name = str(meta.get("name") or "")
    labels: Mapping[str, str] = meta.get("labels") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    errors: list[str] = []
    if not namespace:
        errors.append("metadata.namespace: is required; ElasticQuota is namespaced")
    if not name:
        errors.append("metadata.name: is required; name the quota")
    spec = _spec(obj.get("spec") or {}, errors)
    low, high, kept = _milli(spec.min), _milli(spec.max), _milli(spec.guarantee)
    errors += _over(
        low, high, "spec.min", "spec.max", "lower min or raise max", absent_is_zero=False
    )
    errors += _over(
        kept,
        low,
        "spec.guarantee",
        "spec.min",
        "the guarantee is the part of min never lent: lower guarantee or raise min",
        absent_is_zero=True,
    )
    lends = _flag(labels, LABEL_KOORD_ALLOW_LENT, errors, True)
    if lends is False:
        if spec.guarantee is not None and kept != low:
            errors.append(
                f'spec.guarantee: differs from spec.min while metadata.labels["'
                f'{LABEL_KOORD_ALLOW_LENT}"] is "false" (nothing lent); drop one of the two'
            )
        kept = dict(low)
    is_parent = _flag(labels, LABEL_KOORD_QUOTA_IS_PARENT, errors, None)
    parent = _parent(spec.parent, labels.get(LABEL_KOORD_QUOTA_PARENT), (namespace, name), errors)
    shared = _shared_weight(annotations, errors)
    if shared and spec.weight is not None:
        errors.append(
            f'spec.weight: set together with metadata.annotations["'
            f'{ANNOTATION_KOORD_SHARED_WEIGHT}"]; keep one of the two'
        )
    if not shared and spec.weight is None and _koordinator(obj, labels, annotations):
        shared = {k: v for k, v in high.items() if v > 0}  # Koordinator's default: max
    if errors:
        raise ElasticQuotaError(errors)
    return QuotaSpec(
        key=(namespace, name),
        min=low,
        max=high,
        guarantee={k: v for k, v in kept.items() if v},
        weight=spec.weight or 1,
        shared_weight=shared,
        parent=parent,
        is_parent=is_parent,
        min_run_seconds=spec.min_run_seconds or 0,
        queueing=spec.queueing_strategy or QueueingStrategy.PRIORITY,
    )


def _koordinator(
    obj: Mapping[str, Any], labels: Mapping[str, str], annotations: Mapping[str, str]
) -> bool:
    """Written for Koordinator: served in its group, or carrying one of its quota keys."""
    group = str(obj.get("apiVersion") or "").partition("/")[0]
    prefix = f"{KOORD_QUOTA_PREFIX}/"
    return group == KOORD_QUOTA_GROUP or any(k.startswith(prefix) for k in (*labels, *annotations))


def _spec(raw: Any, errors: list[str]) -> ElasticQuotaSpec:
    """The spec's fields that parse, every other one reported, so that the rules between fields
    (min <= max, ...) still speak about the fields that are right."""
    if not isinstance(raw, dict):
        errors.append(f"spec: must be an object (min, max, ...), not {raw!r}")
        return ElasticQuotaSpec()
    try:
        return ElasticQuotaSpec.model_validate(raw)
    except ValidationError as exc:
        errors.extend(_pydantic_errors(exc, "spec"))
        bad = {error["loc"][0] for error in exc.errors() if error["loc"]}
    try:
        return ElasticQuotaSpec.model_validate({k: v for k, v in raw.items() if k not in bad})
    except ValidationError:
        return ElasticQuotaSpec()


def _parent(
    spec_parent: str | None, label_parent: str | None, key: QuotaKey, errors: list[str]
) -> QuotaRef | None:
    """The parent named by `spec.parent` or Koordinator's label (its root means none)."""
    ref = None
    if spec_parent is not None:
        ref = parse_ref(spec_parent)
        if ref is None:
            errors.append(
                f"spec.parent: {spec_parent!r} is not a quota name; write `name` (this "
                "namespace, or a name unique in the cluster) or `namespace/name`"
            )
    label_ref = None
    if label_parent and label_parent != KOORD_ROOT_QUOTA:
        label_ref = parse_ref(label_parent)
        if label_ref is None:
            errors.append(
                f'metadata.labels["{LABEL_KOORD_QUOTA_PARENT}"]: {label_parent!r} is not a '
                "quota name; write the parent ElasticQuota's name"
            )
    if ref is not None and label_ref is not None and label_ref.name != ref.name:
        errors.append(
            f'spec.parent: {spec_parent!r} disagrees with metadata.labels["'
            f'{LABEL_KOORD_QUOTA_PARENT}"] {label_parent!r}; keep one of the two'
        )
    chosen = ref or label_ref
    if chosen is not None and chosen.name == key[1] and chosen.namespace in (None, key[0]):
        errors.append("spec.parent: names this quota itself; name another quota or none")
    return chosen


def pod_quota_ref(labels: Mapping[str, str] | None) -> QuotaRef | None:
    """The quota a pod names: our label, else Koordinator's (a bare name); None: its namespace's.

    A label value cannot hold `/`, so a label names a quota by its bare name, resolved like a
    bare `spec.parent` (scheduling/elastic/tree.py `QuotaTree.resolve`)."""
    for key in (LABEL_ELASTIC_QUOTA, LABEL_KOORD_QUOTA_NAME):
        value = (labels or {}).get(key)
        if value:
            return parse_ref(value) or QuotaRef(None, value)
    return None


def member_quota_ref(
    labels: Mapping[str, str] | None, group_ref: QuotaRef | None
) -> QuotaRef | None:
    """The quota a gang member is charged to: the one its own label names, else the one its
    PodGroup's label names (`group_ref`, `pod_quota_ref` of the group's labels), else None (its
    namespace's). The member's label wins because it is the narrower statement, the one Kueue
    and Koordinator read on each pod; a group label fills in for members stamped without one.
    Admission, the snapshot's charge and reclaim all call this, so they agree."""
    ref = pod_quota_ref(labels)
    return group_ref if ref is None else ref
