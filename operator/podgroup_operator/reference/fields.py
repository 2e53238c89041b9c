"""docs/reference/crd.md: every field of PodGroup, Topology and ElasticQuota, from the models.

The rows come from each model's JSON Schema (`model_json_schema`, as api/crd.py renders the
CRDs from), walked depth-first in the models' field order: nested models (`policy`,
`topologyConstraint`, `reservation`, `placement`, ...) give rows of their own fields, list items
appear as `path[]` and map values as `path.<name>`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from podgroup_operator import constants as c
from podgroup_operator.api.crd import CRD_MANIFESTS
from podgroup_operator.api.elastic_quota import ElasticQuotaSpec, ElasticQuotaStatus
from podgroup_operator.api.models import (
    PodGroupSpec,
    PodGroupStatus,
    TopologySpec,
    TopologyStatus,
)
from podgroup_operator.reference.markdown import code, first_paragraph, table

Schema = dict[str, Any]


@dataclass(frozen=True)
class Field:
    """One row of a field table."""

    path: str
    type: str
    required: bool
    default: str
    bounds: str
    description: str
    pattern: str


def _resolve(schema: Schema, defs: Schema) -> Schema:
    """`schema` with its `$ref` inlined (the field's own keys win) and `anyOf: [X, null]`
    reduced to X, as the CRD's structural schema has them."""
    while True:
        if "$ref" in schema:
            target = defs[schema["$ref"].rsplit("/", 1)[-1]]
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
            continue
        options = schema.get("anyOf")
        if options and not schema.get("x-kubernetes-int-or-string"):
            kept = [o for o in options if o.get("type") != "null"]
            if len(kept) == 1 < len(options):
                rest = {k: v for k, v in schema.items() if k != "anyOf"}
                schema = {**kept[0], **rest}
                continue
        return schema


def _type(schema: Schema, defs: Schema) -> str:
    if schema.get("x-kubernetes-int-or-string"):
        return "quantity (integer or string)"
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return "object (any fields)"
    kind = schema.get("type")
    if kind == "array":
        return f"array of {_type(_resolve(schema.get('items') or {}, defs), defs)}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        values = _resolve(schema["additionalProperties"], defs)
        return f"map of string to {_type(values, defs)}"
    if kind == "string" and schema.get("format"):
        return f"string ({schema['format']})"
    return str(kind or "any")


def _range(low: Any, high: Any, unit: str = "") -> str:
    suffix = f" {unit}" if unit else ""
    if low is not None and high is not None:
        return f"{low} to {high}{suffix}"
    if low is not None:
        return f"at least {low}{suffix}"
    if high is not None:
        return f"at most {high}{suffix}"
    return ""


def _bounds(schema: Schema) -> str:
    parts = [
        _range(schema.get("minimum"), schema.get("maximum")),
        _range(schema.get("minLength"), schema.get("maxLength"), "characters"),
        _range(schema.get("minItems"), schema.get("maxItems"), "items"),
        _range(schema.get("minProperties"), schema.get("maxProperties"), "entries"),
    ]
    if "enum" in schema:
        parts.append("one of " + ", ".join(code(str(v)) for v in schema["enum"]))
    if schema.get("x-kubernetes-list-map-keys"):
        keys = ", ".join(code(k) for k in schema["x-kubernetes-list-map-keys"])
        parts.append(f"items unique by {keys}")
    alternatives = [o.get("required") for o in schema.get("anyOf") or []]
    if alternatives and all(alternatives):
        names = " or ".join(code(", ".join(fields)) for fields in alternatives if fields)
        parts.append(f"needs {names}")
    if schema.get("pattern"):
        parts.append("pattern (below)")
    return "; ".join(part for part in parts if part)


def _default(schema: Schema) -> str:
    if schema.get("default") is None:
        return ""
    return code(json.dumps(schema["default"]))


def _fields(
    schema: Schema, defs: Schema, prefix: str, required: bool = False, of: str = ""
) -> Iterator[Field]:
    """The row of `schema` at `prefix`, then its children's rows; `of` describes a row without
    a description of its own (an item of a list, a value of a map)."""
    schema = _resolve(schema, defs)
    yield Field(
        path=prefix,
        type=_type(schema, defs),
        required=required,
        default=_default(schema),
        bounds=_bounds(schema),
        description=schema.get("description") or of,
        pattern=schema.get("pattern", ""),
    )
    yield from _children(schema, defs, prefix)


def _children(schema: Schema, defs: Schema, prefix: str) -> Iterator[Field]:
    if schema.get("x-kubernetes-preserve-unknown-fields") or schema.get(
        "x-kubernetes-int-or-string"
    ):
        return
    needed = set(schema.get("required") or ())
    for name, sub in (schema.get("properties") or {}).items():
        yield from _fields(sub, defs, f"{prefix}.{name}", name in needed)
    items = schema.get("items")
    if isinstance(items, dict):
        resolved = _resolve(items, defs)
        if resolved.get("properties"):
            yield from _children(resolved, defs, f"{prefix}[]")
        elif _bounds(resolved):
            yield from _fields(resolved, defs, f"{prefix}[]", of=f"An item of {code(prefix)}.")
    values = schema.get("additionalProperties")
    if isinstance(values, dict):
        yield from _fields(values, defs, f"{prefix}.<name>", of=f"A value of {code(prefix)}.")


def model_fields(model: type[BaseModel], prefix: str) -> list[Field]:
    """Every field of `model` (and of the models it nests) under `prefix`, e.g. `spec`."""
    schema = model.model_json_schema(by_alias=True, mode="validation")
    defs = schema.get("$defs", {})
    return list(_children(_resolve(schema, defs), defs, prefix))


def _field_table(fields: list[Field]) -> str:
    rows = [
        (
            code(f.path),
            f.type,
            "yes" if f.required else "",
            f.default,
            f.bounds,
            f.description,
        )
        for f in fields
    ]
    return table(("Field", "Type", "Required", "Default", "Bounds", "Description"), rows)


def _pattern_table(fields: list[Field]) -> str:
    rows = [(code(f.path), code(f.pattern)) for f in fields if f.pattern]
    return table(("Field", "Pattern"), rows) if rows else ""


def _columns_table(plural: str) -> str:
    version = CRD_MANIFESTS[plural]()["spec"]["versions"][0]
    rows = [
        (
            column["name"],
            column["type"],
            code(column["jsonPath"]),
            "yes" if column.get("priority") else "",
        )
        for column in version["additionalPrinterColumns"]
    ]
    return table(("Column", "Type", "JSONPath", "Only with `-o wide`"), rows)


def _scope(plural: str) -> str:
    return str(CRD_MANIFESTS[plural]()["spec"]["scope"])


@dataclass(frozen=True)
class Kind:
    """One resource of the page."""

    name: str
    plural: str
    spec: type[BaseModel]
    status: type[BaseModel]


KINDS = (
    Kind(c.KIND, c.PLURAL, PodGroupSpec, PodGroupStatus),
    Kind(c.TOPOLOGY_KIND, c.TOPOLOGY_PLURAL, TopologySpec, TopologyStatus),
    Kind(c.ELASTIC_QUOTA_KIND, c.ELASTIC_QUOTA_PLURAL, ElasticQuotaSpec, ElasticQuotaStatus),
)


def render() -> str:
    """The whole page."""
    out = [
        "# Custom resources\n",
        "Every field of the operator's resources, generated from the pydantic models "
        "(`operator/podgroup_operator/api/models.py`), which the CRDs in `crds/` are generated "
        "from too. Bounds are enforced by the CRD schema (the API server refuses a value out "
        "of them even when the operator is down) and by the validating webhook, whose message "
        "names the field and the fix. A default is what the operator reads when the field is "
        "absent; the API server stores none. `path[]` is an item of a list, `path.<name>` a "
        "value of a map.\n",
    ]
    for kind in KINDS:
        out.append(f"## {kind.name}\n")
        out.append(
            table(
                ("API version", "Kind", "Plural", "Scope"),
                [(code(c.API_VERSION), code(kind.name), code(kind.plural), _scope(kind.plural))],
            )
        )
        out.append(first_paragraph(kind.spec.__doc__) + "\n")
        for part, model in (("spec", kind.spec), ("status", kind.status)):
            fields = model_fields(model, part)
            out.append(f"### {kind.name} {part}\n")
            out.append(_field_table(fields))
            patterns = _pattern_table(fields)
            if patterns:
                out.append(f"Patterns of {kind.name} {part} (regular expressions):\n")
                out.append(patterns)
        out.append(f"### {kind.name} columns of `kubectl get`\n")
        out.append(_columns_table(kind.plural))
    return "\n".join(out)
