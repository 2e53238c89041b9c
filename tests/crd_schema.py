"""A CRD's structural schema applied as the apiserver applies it to every write: prune, then check.

Why: the in-memory API server stored any PodGroup, so a unit test could pass on an object the
real apiserver refuses (a bound the CRD sets, a status field it does not declare and silently
drops). `FakeApiServer` runs every create, update and patch of a kind with a schema through
`CrdSchema`, the status subresource too: v1.20 checks the whole object at a status write, so a
spec stored before the CRD was tightened makes every status write of it fail (422).

The checking is jsonschema's; this module only turns the OpenAPI v3 dialect of CRDs into JSON
Schema (`x-kubernetes-int-or-string`, `x-kubernetes-preserve-unknown-fields`, the `date-time`
format) and the answers into the apiserver's field paths and wording.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator, FormatChecker

JSON = dict[str, Any]

CRD_DIR = Path(__file__).resolve().parents[1] / "crds"

_ROOT_FIELDS = ("apiVersion", "kind", "metadata")
"""Fields of every object that the apiserver checks and keeps whatever the schema says."""

_formats = FormatChecker(formats=())


@_formats.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    """RFC 3339, as the apiserver's strfmt reads it (a string of another shape is refused)."""
    if isinstance(value, str):
        dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return True


class CrdSchema:
    """One version's `openAPIV3Schema`: `prune` drops what it does not declare, `errors` says
    what breaks it, as `(field path, message)` pairs."""

    def __init__(self, openapi: JSON) -> None:
        self.openapi = openapi
        self._validator = Draft202012Validator(_json_schema(openapi), format_checker=_formats)

    def prune(self, obj: JSON) -> JSON:
        """A copy of `obj` without the fields the schema does not declare (structural pruning)."""
        kept = {k: copy.deepcopy(v) for k, v in obj.items() if k in _ROOT_FIELDS}
        rest = {k: v for k, v in obj.items() if k not in _ROOT_FIELDS}
        return {**_pruned(rest, self.openapi), **kept}

    def errors(self, obj: JSON) -> list[tuple[str, str]]:
        """Every violation as (field path, `Invalid value: <value>: <why>`), in a stable order.

        The path names a list item by its list (`spec.gangGroup`), as v1.20's apiserver does.
        """
        found = []
        for error in self._validator.iter_errors(obj):
            path = ".".join(str(part) for part in error.absolute_path if not isinstance(part, int))
            value = json.dumps(error.instance) if not isinstance(error.instance, dict) else "{...}"
            found.append((path or "<root>", f"Invalid value: {value}: {error.message}"))
        return sorted(found)


def crd_schemas(*crds: Mapping[str, Any]) -> dict[str, CrdSchema]:
    """The storage version's schema of each CRD, by plural (what `FakeApiServer` takes)."""
    schemas = {}
    for crd in crds:
        version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
        schemas[crd["spec"]["names"]["plural"]] = CrdSchema(version["schema"]["openAPIV3Schema"])
    return schemas


def project_crds() -> list[JSON]:
    """The CRDs in crds/, as `make test` installs them on the dev cluster."""
    return [
        crd
        for path in sorted(CRD_DIR.glob("*.yaml"))
        for crd in yaml.safe_load_all(path.read_text())
        if crd and crd.get("kind") == "CustomResourceDefinition"
    ]


def _json_schema(openapi: Any) -> Any:
    """OpenAPI v3 as CRDs write it, in JSON Schema: int-or-string becomes a type pair (its
    `anyOf` already says so, but only together with this marker may a value be either), the
    `x-kubernetes-*` markers and descriptions go (they check nothing)."""
    if isinstance(openapi, list):
        return [_json_schema(item) for item in openapi]
    if not isinstance(openapi, dict):
        return openapi
    schema = {
        key: _json_schema(value)
        for key, value in openapi.items()
        if not key.startswith("x-kubernetes-") and key != "description"
    }
    if openapi.get("x-kubernetes-int-or-string"):
        schema.pop("anyOf", None)
        schema["type"] = ["integer", "string"]
    return schema


def _pruned(value: Any, schema: Mapping[str, Any]) -> Any:
    if isinstance(value, dict) and schema.get("type", "object") == "object":
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        keep_unknown = schema.get("x-kubernetes-preserve-unknown-fields") or extra is True
        result = {}
        for key, item in value.items():
            if properties and key in properties:
                result[key] = _pruned(item, properties[key])
            elif isinstance(extra, dict):
                result[key] = _pruned(item, extra)
            elif keep_unknown:
                result[key] = copy.deepcopy(item)
        return result
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_pruned(item, schema["items"]) for item in value]
    return copy.deepcopy(value)
