"""Generate the PodGroup, Topology and ElasticQuota CustomResourceDefinitions from the models.

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
and pruned, not stored, for other clients; docs/concepts/admission.md says so.
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel

from podgroup_operator import constants as c
from podgroup_operator.api.elastic_quota import ElasticQuotaSpec, ElasticQuotaStatus
from podgroup_operator.api.models import (
    PodGroupSpec,
    PodGroupStatus,
    TopologySpec,
    TopologyStatus,
)

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


def _object_schema(
    spec_model: type[BaseModel],
    status_model: type[BaseModel],
    description: str,
    *,
    spec_required: bool = True,
) -> dict[str, Any]:
    spec = spec_model.model_json_schema(by_alias=True, mode="validation")
    status = status_model.model_json_schema(by_alias=True, mode="validation")
    return {
        "type": "object",
        "description": description,
        **({"required": ["spec"]} if spec_required else {}),
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": _structural(spec, spec.get("$defs", {})),
            "status": _structural(status, status.get("$defs", {})),
        },
    }


def openapi_schema() -> dict[str, Any]:
    """The structural schema of a whole PodGroup object."""
    return _object_schema(
        PodGroupSpec,
        PodGroupStatus,
        "A gang of pods scheduled, reserved and restarted as a whole "
        "(podgroup-operator; a superset of scheduler-plugins' PodGroup).",
    )


def topology_openapi_schema() -> dict[str, Any]:
    """The structural schema of a whole Topology object."""
    return _object_schema(
        TopologySpec,
        TopologyStatus,
        "A fabric's levels as node label keys, coarse to fine (zone, block, rack, host), "
        "which a PodGroup's spec.topologyConstraint places its gang within (podgroup-operator).",
    )


def elastic_quota_openapi_schema() -> dict[str, Any]:
    """The structural schema of a whole ElasticQuota object. `spec` is optional, as in
    scheduler-plugins' CRD, so every object their CRD admitted is admitted here too."""
    return _object_schema(
        ElasticQuotaSpec,
        ElasticQuotaStatus,
        "What a team may use: min lent while idle and reclaimed when needed, max never "
        "exceeded, in a tree of quotas (podgroup-operator; a superset of scheduler-plugins' "
        "ElasticQuota).",
        spec_required=False,
    )


Column = tuple[str, str, str, int]
"""(name, type, jsonPath, priority) of a printer column; priority 1 shows only with -o wide."""


def _crd(
    *,
    name: str,
    names: dict[str, Any],
    scope: str,
    schema: dict[str, Any],
    columns: list[Column],
    group: str = c.GROUP,
) -> dict[str, Any]:
    """One CRD (of the project's group unless told): one served and stored version with a
    status subresource, `schema` as its structural schema, `columns` as its printer columns."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {
            "group": group,
            "names": names,
            "scope": scope,
            "versions": [
                {
                    "name": c.VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {
                            "name": title,
                            "type": kind,
                            "jsonPath": path,
                            **({"priority": p} if p else {}),
                        }
                        for title, kind, path, p in columns
                    ],
                }
            ],
        },
    }


def crd_manifest() -> dict[str, Any]:
    columns: list[Column] = [
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
        ("Domain", "string", ".status.placement.domain", 1),
        ("SubGroups", "string", ".status.subGroupsSatisfied", 1),
    ]
    return _crd(
        name=c.CRD_NAME,
        names={
            "kind": c.KIND,
            "listKind": f"{c.KIND}List",
            "plural": c.PLURAL,
            "singular": c.SINGULAR,
            "shortNames": [c.SHORT_NAME],
        },
        scope="Namespaced",
        schema=openapi_schema(),
        columns=columns,
    )


def topology_crd_manifest() -> dict[str, Any]:
    """The Topology CRD. Its columns show the coarsest and the finest level: the apiserver
    prints only the first value a printer column's jsonPath finds, so `.spec.levels[*]` would
    show the coarsest alone under a name promising all of them."""
    columns: list[Column] = [
        ("Coarsest", "string", ".spec.levels[0].nodeLabel", 0),
        ("Finest", "string", ".spec.levels[-1:].nodeLabel", 0),
        ("Age", "date", ".metadata.creationTimestamp", 0),
    ]
    return _crd(
        name=c.TOPOLOGY_CRD_NAME,
        names={
            "kind": c.TOPOLOGY_KIND,
            "listKind": f"{c.TOPOLOGY_KIND}List",
            "plural": c.TOPOLOGY_PLURAL,
            "singular": c.TOPOLOGY_SINGULAR,
        },
        scope="Cluster",
        schema=topology_openapi_schema(),
        columns=columns,
    )


ELASTIC_QUOTA_COLUMNS: list[Column] = [
    ("Min", "string", ".spec.min", 0),
    ("Max", "string", ".spec.max", 0),
    ("Used", "string", ".status.used", 0),
    ("Borrowed", "string", ".status.borrowed", 0),
    ("Waiting", "integer", ".status.gangsWaiting", 0),
    ("Age", "date", ".metadata.creationTimestamp", 0),
    ("Parent", "string", ".spec.parent", 1),
    ("Guarantee", "string", ".spec.guarantee", 1),
    ("Weight", "integer", ".spec.weight", 1),
    ("Lent", "string", ".status.lent", 1),
    ("FairShare", "string", ".status.fairShare", 1),
]
"""`kubectl get eq`: a resource list prints as its JSON, the way scheduler-plugins users read
min and max today; `-o wide` adds the tree and the fair-share numbers."""


def elastic_quota_crd(group: str) -> dict[str, Any]:
    """The ElasticQuota CRD served in `group`: ours (`c.GROUP`), or Koordinator's, which
    api/dialect_crds.py marks and installs only where none exists."""
    return _crd(
        name=f"{c.ELASTIC_QUOTA_PLURAL}.{group}",
        names={
            "kind": c.ELASTIC_QUOTA_KIND,
            "listKind": f"{c.ELASTIC_QUOTA_KIND}List",
            "plural": c.ELASTIC_QUOTA_PLURAL,
            "singular": c.ELASTIC_QUOTA_SINGULAR,
            "shortNames": list(c.ELASTIC_QUOTA_SHORT_NAMES),
        },
        scope="Namespaced",
        schema=elastic_quota_openapi_schema(),
        columns=ELASTIC_QUOTA_COLUMNS,
        group=group,
    )


def elastic_quota_crd_manifest() -> dict[str, Any]:
    """The ElasticQuota CRD of our group: the same name, group, version, kind and short names
    as scheduler-plugins', so applying it over theirs keeps every stored object."""
    return elastic_quota_crd(c.GROUP)


CRD_MANIFESTS = {
    c.PLURAL: crd_manifest,
    c.TOPOLOGY_PLURAL: topology_crd_manifest,
    c.ELASTIC_QUOTA_PLURAL: elastic_quota_crd_manifest,
}
"""Every CRD of the project's group by plural; `crds/<plural>.<group>.yaml` holds each rendered."""


def render_crd(kind: str = c.PLURAL) -> str:
    """The CRD named by `kind` (a plural of our group) as the YAML checked in under crds/."""
    manifest = CRD_MANIFESTS[kind]()
    header = (
        f"# Generated by `podgroup-operator crd --kind {kind}` from operator/podgroup_operator/api/"
    )
    source = "elastic_quota.py" if kind == c.ELASTIC_QUOTA_PLURAL else "models.py"
    return f"{header}{source}.\n" + yaml.safe_dump(manifest, sort_keys=False, width=100)
