"""CRDs for other schedulers' kinds that the operator serves, installed only where none exists.

`run --dialect-crds install` installs each of these when its name is not taken
(controllers/dialects.py `install_dialect_crds`): Volcano's and Koordinator's PodGroup, and
Koordinator's ElasticQuota. A cluster without Volcano still accepts the Volcano PodGroups that
Volcano-speaking job controllers (the MPI operator, Spark, Trainer) create, and Koordinator's
quota manifests apply unchanged without Koordinator. Each PodGroup CRD is compatible with the
owner's in group, version, kind, plural and the fields read here; the rest of an object is kept
as written (`x-kubernetes-preserve-unknown-fields`), and the status is part of the object where
the owner's CRD has no status subresource (Volcano's). The ElasticQuota CRD is our own schema
(api/crd.py) served in Koordinator's group. The native `scheduling.k8s.io` kind has none (see
`DIALECT_CRDS`). Each carries `DIALECT_CRD_LABEL`, the mark that lets the operator replace it
(an upgrade) and never a CRD without it. The files under `crds/dialects/` are this module's
output (`python -m podgroup_operator.api.dialect_crds crds/dialects`); a test keeps them equal.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from podgroup_operator import constants as c
from podgroup_operator.api.crd import elastic_quota_crd

_PRESERVE = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_RESOURCES = {
    "type": "object",
    "additionalProperties": {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    },
}
_PROTECTED_SUFFIX = ".k8s.io"
"""A group of this suffix is protected: its CRD needs `c.ANNOTATION_API_APPROVED`."""


def _schema(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": spec,
            },
            "status": _PRESERVE,
        },
    }


def _version(
    name: str,
    spec: dict[str, Any],
    *,
    storage: bool,
    status: bool,
    columns: list[tuple[str, str, str]],
) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": name,
        "served": True,
        "storage": storage,
        "schema": {"openAPIV3Schema": _schema(spec)},
        "additionalPrinterColumns": [
            {"name": title, "type": kind, "jsonPath": path} for title, kind, path in columns
        ],
    }
    if status:
        version["subresources"] = {"status": {}}
    return version


def _mark(crd: dict[str, Any]) -> dict[str, Any]:
    """`crd` with our marks: `DIALECT_CRD_LABEL` (the only one the install reads to call a CRD
    ours), `app.kubernetes.io/managed-by` (for people and tools), and, in a protected `*.k8s.io`
    group, the approval annotation without which the API server refuses the CRD."""
    metadata = crd["metadata"]
    metadata["labels"] = {c.DIALECT_CRD_LABEL: "true", c.LABEL_MANAGED_BY: c.OPERATOR_NAME}
    if crd["spec"]["group"].endswith(_PROTECTED_SUFFIX):
        metadata["annotations"] = {c.ANNOTATION_API_APPROVED: c.KOORD_API_APPROVAL}
    return crd


def _crd(group: str, versions: list[dict[str, Any]], short: list[str]) -> dict[str, Any]:
    names: dict[str, Any] = {
        "kind": c.KIND,
        "listKind": f"{c.KIND}List",
        "plural": c.PLURAL,
        "singular": c.SINGULAR,
    }
    if short:
        names["shortNames"] = short
    return _mark(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{c.PLURAL}.{group}"},
            "spec": {"group": group, "names": names, "scope": "Namespaced", "versions": versions},
        }
    )


_INT = {"type": "integer", "format": "int32"}
_PHASE_COLUMNS = [
    ("Status", "string", ".status.phase"),
    ("MinMember", "integer", ".spec.minMember"),
    ("Running", "integer", ".status.running"),
    ("Age", "date", ".metadata.creationTimestamp"),
]


def volcano_crd() -> dict[str, Any]:
    """`podgroups.scheduling.volcano.sh`, v1beta1, no status subresource (as Volcano's)."""
    spec = {
        "minMember": _INT,
        "minTaskMember": {"type": "object", "additionalProperties": _INT},
        "queue": {"type": "string"},
        "priorityClassName": {"type": "string"},
        "minResources": _RESOURCES,
        "networkTopology": _PRESERVE,
        "subGroupPolicy": {"type": "array", "items": _PRESERVE},
    }
    columns = [*_PHASE_COLUMNS, ("Queue", "string", ".spec.queue")]
    version = _version(c.VOLCANO_VERSION, spec, storage=True, status=False, columns=columns)
    return _crd(c.VOLCANO_GROUP, [version], ["podgroup-v1beta1"])


def koordinator_crd() -> dict[str, Any]:
    """`podgroups.scheduling.sigs.k8s.io`, v1alpha1 with a status subresource (as
    scheduler-plugins' original, which Koordinator installs)."""
    spec = {"minMember": _INT, "minResources": _RESOURCES, "scheduleTimeoutSeconds": _INT}
    version = _version(
        c.KOORD_PODGROUP_VERSION, spec, storage=True, status=True, columns=_PHASE_COLUMNS
    )
    return _crd(c.KOORD_PODGROUP_GROUP, [version], [])


def koordinator_elastic_quota_crd() -> dict[str, Any]:
    """`elasticquotas.scheduling.sigs.k8s.io`: our ElasticQuota (api/crd.py) served in
    Koordinator's group, so Koordinator's quota manifests apply without Koordinator. No short
    names: `kubectl get eq` keeps meaning our group's, never an ambiguous pick."""
    crd = elastic_quota_crd(c.KOORD_QUOTA_GROUP)
    del crd["spec"]["names"]["shortNames"]
    return _mark(crd)


DIALECT_CRDS: dict[str, Callable[[], dict[str, Any]]] = {
    f"{c.PLURAL}.{c.VOLCANO_GROUP}": volcano_crd,
    f"{c.PLURAL}.{c.KOORD_PODGROUP_GROUP}": koordinator_crd,
    c.KOORD_ELASTIC_QUOTA_CRD_NAME: koordinator_elastic_quota_crd,
}
"""Every CRD `--dialect-crds install` installs, by name; `crds/dialects/<name>.yaml` holds each.

None for the native `scheduling.k8s.io` PodGroup: the API server serves that group itself
(PriorityClass), and a CRD in it is Established but never served (404: seen on v1.20). The
native kind is read where the API server serves it."""


def render(name: str) -> str:
    """The CRD `name` (a key of `DIALECT_CRDS`) as the YAML checked in under crds/dialects/."""
    header = (
        "# Generated by `python -m podgroup_operator.api.dialect_crds crds/dialects` from\n"
        "# operator/podgroup_operator/api/dialect_crds.py. Installed by `run --dialect-crds "
        "install`\n# only where no CRD of this name exists: never over the owner's.\n"
    )
    return header + yaml.safe_dump(DIALECT_CRDS[name](), sort_keys=False, width=100)


def file_name(name: str) -> str:
    """The file under crds/dialects/ that holds the CRD `name`."""
    return f"{name}.yaml"


if __name__ == "__main__":
    directory = Path(sys.argv[1] if len(sys.argv) > 1 else "crds/dialects")
    directory.mkdir(parents=True, exist_ok=True)
    for each in DIALECT_CRDS:
        (directory / file_name(each)).write_text(render(each))
