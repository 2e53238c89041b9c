"""Generate the PodGroup CustomResourceDefinition from the pydantic models.

The models are the source of truth; this turns their JSON Schema into a *structural* OpenAPI v3
schema as the apiserver demands: `$ref`s inlined, `anyOf: [X, null]` reduced to X, titles and
defaults dropped (the apiserver would persist defaults; the models apply them on read), and
quantities as `x-kubernetes-int-or-string`. A test fails when `crds/` differs from this output.

No object of the schema keeps unknown fields (`x-kubernetes-preserve-unknown-fields`), except
the pod bodies in `status.restartPods`. Keeping them would let our webhook name a typo like
`minMembers`, but the apiserver then publishes that object without its properties in OpenAPI v2
(kubectl cannot validate unknown fields otherwise), so `kubectl explain podgroup.spec.minMember`
prints nothing, and kubectl's own validation cannot name the typo either. Without it, a typo is
caught by kubectl's validation (client-side on 1.20-1.24, `fieldValidation=Strict` on 1.25+)
and pruned, not stored, for other clients; README "Admission webhooks" says so.
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
            continue  # structural schemas close objects by listing properties; unknowns prune
        if key == "properties":
            out[key] = {name: _structural(sub, defs) for name, sub in value.items()}
        elif key == "const":
            out["enum"] = [value]
        else:
            out[key] = _structural(value, defs)
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    return out


def openapi_schema() -> dict[str, Any]:
    """The structural schema of a whole PodGroup object."""
    spec = PodGroupSpec.model_json_schema(by_alias=True, mode="validation")
    status = PodGroupStatus.model_json_schema(by_alias=True, mode="validation")
    spec_schema = _structural(spec, spec.get("$defs", {}))
    status_schema = _structural(status, status.get("$defs", {}))
    return {
        "type": "object",
        "description": "A gang of pods scheduled, reserved and restarted as a whole "
        "(podgroup-operator; a superset of scheduler-plugins' PodGroup).",
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
        ("Terminating", "integer", ".status.terminating", 1),
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
