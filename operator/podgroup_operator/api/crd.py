"""Generate the PodGroup CustomResourceDefinition from the pydantic models.

The models are the source of truth; this turns their JSON Schema into a *structural* OpenAPI v3
schema as the apiserver demands: `$ref`s inlined, `anyOf: [X, null]` reduced to X, titles and
defaults dropped (the apiserver would persist defaults; the models apply them on read), and
quantities as `x-kubernetes-int-or-string`. A test fails when `crds/` differs from this output.
"""

from __future__ import annotations

from typing import Any

import yaml

from podgroup_operator import constants as c
from podgroup_operator.api.models import PodGroupSpec, PodGroupStatus

_DROP = {"title", "default", "$defs"}


def _structural(schema: Any, defs: dict[str, Any]) -> Any:
    if isinstance(schema, list):
        return [_structural(item, defs) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        target = defs[schema["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return _structural(merged, defs)
    if "anyOf" in schema and not schema.get("x-kubernetes-int-or-string"):
        options = [o for o in schema["anyOf"] if o.get("type") != "null"]
        rest = {k: v for k, v in schema.items() if k != "anyOf"}
        if len(options) == 1:
            return _structural({**options[0], **rest}, defs)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROP:
            continue
        if key == "additionalProperties" and value is False:
            continue  # closed objects are checked by the webhook; the schema must not prune
        if key == "properties":
            out[key] = {name: _structural(sub, defs) for name, sub in value.items()}
        elif key == "const":
            out["enum"] = [value]
        else:
            out[key] = _structural(value, defs)
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    return out


def _keep_unknown_fields(schema: dict[str, Any]) -> dict[str, Any]:
    """Keep unknown fields of every object in the spec, so the webhook can name and refuse them.

    Without this the apiserver silently prunes a typo like `minMembers` before any webhook sees
    it, and the user never learns why their setting has no effect.
    """
    if "properties" in schema:
        schema["x-kubernetes-preserve-unknown-fields"] = True
        for sub in schema["properties"].values():
            _keep_unknown_fields(sub)
    if isinstance(schema.get("items"), dict):
        _keep_unknown_fields(schema["items"])
    return schema


def openapi_schema() -> dict[str, Any]:
    """The structural schema of a whole PodGroup object."""
    spec = PodGroupSpec.model_json_schema(by_alias=True, mode="validation")
    status = PodGroupStatus.model_json_schema(by_alias=True, mode="validation")
    spec_schema = _keep_unknown_fields(_structural(spec, spec.get("$defs", {})))
    status_schema = _structural(status, status.get("$defs", {}))
    status_schema["x-kubernetes-preserve-unknown-fields"] = True
    return {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec_schema,
            "status": status_schema,
        },
    }


def crd_manifest() -> dict[str, Any]:
    columns = [
        ("Phase", "string", ".status.phase", 0),
        ("MinMember", "integer", ".spec.minMember", 0),
        ("Running", "integer", ".status.running", 0),
        ("Succeeded", "integer", ".status.succeeded", 0),
        ("Failed", "integer", ".status.failed", 0),
        ("Age", "date", ".metadata.creationTimestamp", 0),
        ("Scheduled", "integer", ".status.scheduled", 1),
        ("Restarts", "integer", ".status.restarts", 1),
        ("Reserved", "string", ".status.reservation.reserved", 1),
        ("Reason", "string", '.status.conditions[?(@.type=="Unschedulable")].reason', 1),
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": c.CRD_NAME},
        "spec": {
            "group": c.GROUP,
            "names": {
                "kind": c.KIND,
                "listKind": f"{c.KIND}List",
                "plural": c.PLURAL,
                "singular": c.SINGULAR,
                "shortNames": [c.SHORT_NAME],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": c.VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": openapi_schema()},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {
                            "name": name,
                            "type": kind,
                            "jsonPath": path,
                            **({"priority": p} if p else {}),
                        }
                        for name, kind, path, p in columns
                    ],
                }
            ],
        },
    }


def render_crd() -> str:
    header = (
        "# Generated by `podgroup-operator crd` from operator/podgroup_operator/api/models.py.\n"
    )
    return header + yaml.safe_dump(crd_manifest(), sort_keys=False, width=100)
