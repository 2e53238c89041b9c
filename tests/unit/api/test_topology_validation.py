"""Topologies and topology constraints: every problem reported at once, each with its field
path and the fix; a constraint checked against the Topology it names."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from podgroup_operator import constants as c
from podgroup_operator.api.models import (
    PodGroupStatus,
    Topology,
    TopologyConstraint,
    TopologySpec,
    level_problems,
)
from podgroup_operator.api.names import is_label_key, label_key_problem
from podgroup_operator.api.validation import (
    constraint_findings,
    podgroup_findings,
    spec_errors,
    topology_errors,
    topology_update_errors,
)

ZONE, BLOCK, RACK = "example.com/zone", "example.com/block", "example.com/rack"
LEVELS = {"fabric": (ZONE, BLOCK, RACK, c.LABEL_HOSTNAME)}


def topology(*labels: Any, name: str = "fabric") -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.TOPOLOGY_KIND,
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": label} for label in labels]},
    }


@pytest.mark.parametrize(
    "key",
    [
        "rack",
        "example.com/rack",
        "topology.kubernetes.io/zone",
        "nvidia.com/gpu.clique",
        "cloud.google.com/gce-topology-block",
        "a",
        "A_b.c-D",
        "x" * 63,
        f"{'a' * 253}/{'b' * 63}",
    ],
)
def test_label_keys_kubernetes_accepts(key: str) -> None:
    assert is_label_key(key), label_key_problem(key)


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("", "is empty"),
        ("/rack", "has an empty prefix"),
        ("a/b/c", "more than one '/'"),
        ("Example.com/rack", "no DNS subdomain"),
        ("example.com/", "has the name part ''"),
        ("-rack", "is no label name"),
        ("rack!", "is no label name"),
        ("x" * 64, "a name part of 64 characters: at most 63"),
        (f"{'a' * 254}/b", "no DNS subdomain"),
        ("a" * 400, "is 400 characters long: at most 317"),
    ],
)
def test_label_keys_kubernetes_refuses(key: str, problem: str) -> None:
    found = label_key_problem(key)
    assert found is not None and problem in found, found


VALID_TOPOLOGIES = [
    topology(RACK),
    topology(ZONE, BLOCK, RACK, c.LABEL_HOSTNAME),
    topology(c.LABEL_HOSTNAME),
    topology(*(f"example.com/l{i}" for i in range(16))),
]


@pytest.mark.parametrize("body", VALID_TOPOLOGIES, ids=range(len(VALID_TOPOLOGIES)))
def test_valid_topologies_have_no_errors(body: dict[str, Any]) -> None:
    assert topology_errors(body) == []
    parsed = Topology.model_validate(body)
    assert parsed.spec.node_labels == tuple(level["nodeLabel"] for level in body["spec"]["levels"])


BAD_TOPOLOGIES: list[tuple[str, dict[str, Any], str, str]] = [
    ("no spec", {"metadata": {"name": "t"}}, "spec", "is required; a Topology needs spec.levels"),
    ("spec a list", {"spec": [RACK]}, "spec", "must be an object with levels"),
    ("no levels", {"spec": {}}, "spec.levels", "is required"),
    ("empty levels", topology(), "spec.levels", "has 0 entries: at least 1 needed"),
    (
        "17 levels",
        topology(*(f"example.com/l{i}" for i in range(17))),
        "spec.levels",
        "has 17 entries: at most 16 allowed (no fabric has more tiers",
    ),
    ("levels not a list", {"spec": {"levels": RACK}}, "spec.levels", "must be a list"),
    ("level not an object", {"spec": {"levels": [RACK]}}, "spec.levels[0]", "must be an object"),
    (
        "level without nodeLabel",
        {"spec": {"levels": [{}]}},
        "spec.levels[0].nodeLabel",
        "is required",
    ),
    (
        "level typo",
        {"spec": {"levels": [{"nodeLabel": RACK, "label": RACK}]}},
        "spec.levels[0].label",
        "unknown field; remove it",
    ),
    (
        "nodeLabel not a key",
        topology(ZONE, "rack!"),
        "spec.levels[1].nodeLabel",
        "'rack!' is no label name: use letters, digits",
    ),
    ("nodeLabel a number", topology(3), "spec.levels[0].nodeLabel", "must be a string"),
    (
        "a level twice",
        topology(ZONE, RACK, ZONE),
        "spec.levels[2].nodeLabel",
        f"'{ZONE}' repeats levels[0]; each level is a different node label: remove one",
    ),
    (
        "hostname before the last level",
        topology(ZONE, c.LABEL_HOSTNAME, RACK),
        "spec.levels[1].nodeLabel",
        "kubernetes.io/hostname may only be the last level (each node is its own domain, finer "
        "than any other): move it to the end or remove it",
    ),
    (
        "a name no PodGroup can name",
        topology(RACK, name="My_Fabric"),
        "metadata.name",
        "use at most 253 lowercase letters",
    ),
]


@pytest.mark.parametrize(
    ("case", "body", "path", "fragment"), BAD_TOPOLOGIES, ids=[b[0] for b in BAD_TOPOLOGIES]
)
def test_bad_topologies_name_the_field_and_the_fix(
    case: str, body: dict[str, Any], path: str, fragment: str
) -> None:
    errors = topology_errors(body)
    assert any(e.startswith(f"{path}: ") and fragment in e for e in errors), errors


def test_every_topology_problem_at_once() -> None:
    errors = topology_errors(topology(c.LABEL_HOSTNAME, "bad key", RACK, RACK, name="Bad"))
    assert [e.split(": ")[0] for e in errors] == [
        "metadata.name",
        "spec.levels[1].nodeLabel",
        "spec.levels[0].nodeLabel",
        "spec.levels[3].nodeLabel",
    ]


def test_the_model_refuses_what_the_webhook_refuses() -> None:
    for _, body, path, _ in BAD_TOPOLOGIES:
        if path.startswith("spec") and isinstance(body.get("spec"), dict):
            with pytest.raises(ValidationError):
                TopologySpec.model_validate(body["spec"])
    assert level_problems([ZONE, RACK, c.LABEL_HOSTNAME]) == []


def test_a_topology_update_leaving_the_spec_as_stored_passes() -> None:
    stored = topology(c.LABEL_HOSTNAME, RACK)
    labelled = {**stored, "metadata": {"name": "fabric", "labels": {"a": "b"}}}
    assert topology_update_errors(stored, labelled) == []
    assert topology_update_errors(None, stored) == topology_errors(stored) != []
    assert topology_update_errors(topology(RACK), stored) == topology_errors(stored)


def test_a_stored_topology_with_an_unreadable_status_reads_as_empty() -> None:
    parsed = Topology.model_validate({**topology(RACK), "status": {"levels": "x"}})
    assert parsed.status.levels == [] and parsed.metadata.name == "fabric"


# --- PodGroup spec.topologyConstraint ------------------------------------------------------------

VALID_CONSTRAINTS: list[dict[str, Any]] = [
    {"requiredTopologyLevel": RACK},
    {"preferredTopologyLevel": RACK},
    {"requiredTopologyLevel": "nvidia.com/gpu.clique"},
    {"requiredTopologyLevel": BLOCK, "preferredTopologyLevel": RACK},
    {"topology": "fabric", "requiredTopologyLevel": BLOCK, "preferredTopologyLevel": RACK},
    {"topology": "fabric", "requiredTopologyLevel": RACK, "preferredTopologyLevel": RACK},
    {"topology": "fabric", "preferredTopologyLevel": c.LABEL_HOSTNAME},
    # Without a topology, no order is known: any two keys.
    {"requiredTopologyLevel": RACK, "preferredTopologyLevel": ZONE},
]


@pytest.mark.parametrize("constraint", VALID_CONSTRAINTS, ids=[str(c) for c in VALID_CONSTRAINTS])
def test_valid_constraints_are_admitted_without_warnings(constraint: dict[str, Any]) -> None:
    spec = {"minMember": 2, "topologyConstraint": constraint}
    assert spec_errors(spec) == []
    assert constraint_findings(spec, LEVELS.get) == ([], [])
    TopologyConstraint.model_validate(constraint)


BAD_CONSTRAINTS: list[tuple[str, Any, str, str]] = [
    (
        "no level",
        {"topology": "fabric"},
        "spec.topologyConstraint",
        "names no level: give requiredTopologyLevel (every member in one domain of that node "
        "label), preferredTopologyLevel (one domain when one fits), or both",
    ),
    ("empty", {}, "spec.topologyConstraint", "names no level"),
    ("a string", RACK, "spec.topologyConstraint", "must be an object"),
    (
        "required not a key",
        {"requiredTopologyLevel": "rack rack"},
        "spec.topologyConstraint.requiredTopologyLevel",
        "'rack rack' is no label name",
    ),
    (
        "preferred with two slashes",
        {"preferredTopologyLevel": "a/b/c"},
        "spec.topologyConstraint.preferredTopologyLevel",
        "has more than one '/'; a node label key is an optional DNS subdomain prefix",
    ),
    (
        "a level too long",
        {"requiredTopologyLevel": "r" * 100_000},
        "spec.topologyConstraint.requiredTopologyLevel",
        "is 100000 characters long: at most 317",
    ),
    (
        "topology no name",
        {"topology": "My Fabric", "requiredTopologyLevel": RACK},
        "spec.topologyConstraint.topology",
        "'My Fabric' is no Topology name",
    ),
    (
        "typo",
        {"requiredTopologyLevels": RACK},
        "spec.topologyConstraint.requiredTopologyLevels",
        "unknown field; remove it (known fields: preferredTopologyLevel, requiredTopologyLevel, "
        "topology)",
    ),
]


@pytest.mark.parametrize(
    ("case", "constraint", "path", "fragment"),
    BAD_CONSTRAINTS,
    ids=[b[0] for b in BAD_CONSTRAINTS],
)
def test_bad_constraints_name_the_field_and_the_fix(
    case: str, constraint: Any, path: str, fragment: str
) -> None:
    errors = spec_errors({"minMember": 1, "topologyConstraint": constraint})
    assert any(e.startswith(f"{path}: ") and fragment in e for e in errors), errors
    assert all(len(e) < 1_000 for e in errors)


AGAINST_THE_TOPOLOGY: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "required not a level",
        {"topology": "fabric", "requiredTopologyLevel": "example.com/row"},
        "spec.topologyConstraint.requiredTopologyLevel",
        f"'example.com/row' is not a level of Topology 'fabric' (levels, coarse to fine: {ZONE}, "
        f"{BLOCK}, {RACK}, kubernetes.io/hostname); use one of them, or leave out topology",
    ),
    (
        "preferred not a level",
        {"topology": "fabric", "preferredTopologyLevel": "example.com/row"},
        "spec.topologyConstraint.preferredTopologyLevel",
        "is not a level of Topology 'fabric'",
    ),
    (
        "preferred coarser than required",
        {"topology": "fabric", "requiredTopologyLevel": RACK, "preferredTopologyLevel": ZONE},
        "spec.topologyConstraint.preferredTopologyLevel",
        f"'{ZONE}' is coarser than requiredTopologyLevel '{RACK}' in Topology 'fabric'; prefer "
        f"the required level or a finer one ({RACK}, kubernetes.io/hostname), or require a "
        "coarser one",
    ),
]


@pytest.mark.parametrize(
    ("case", "constraint", "path", "fragment"),
    AGAINST_THE_TOPOLOGY,
    ids=[b[0] for b in AGAINST_THE_TOPOLOGY],
)
def test_levels_must_be_the_topologys_and_preferred_no_coarser(
    case: str, constraint: dict[str, Any], path: str, fragment: str
) -> None:
    spec = {"minMember": 1, "topologyConstraint": constraint}
    assert spec_errors(spec) == []  # the schema's rules hold; the Topology's do not
    errors, warnings = constraint_findings(spec, LEVELS.get)
    assert warnings == []
    assert any(e.startswith(f"{path}: ") and fragment in e for e in errors), errors


def test_a_missing_topology_is_a_warning_naming_it_not_an_error() -> None:
    constraint = {"topology": "later", "requiredTopologyLevel": RACK}
    spec = {"minMember": 1, "topologyConstraint": constraint}
    errors, warnings = constraint_findings(spec, LEVELS.get)
    assert errors == []
    assert warnings == [
        "spec.topologyConstraint.topology: Topology 'later' does not exist; the gang waits until "
        "it does: create it, or correct the name (kubectl get topologies lists them)"
    ]


def test_podgroup_findings_report_everything_at_once_and_ratchet_updates() -> None:
    bad = {
        "metadata": {"name": "g"},
        "spec": {
            "minMember": 0,
            "topologyConstraint": {
                "topology": "fabric",
                "requiredTopologyLevel": RACK,
                "preferredTopologyLevel": BLOCK,
            },
        },
    }
    errors, warnings = podgroup_findings(None, bad, LEVELS.get)
    assert [e.split(": ")[0] for e in errors] == [
        "spec.minMember",
        "spec.topologyConstraint.preferredTopologyLevel",
    ]
    assert warnings == []
    relabelled = {**bad, "metadata": {"name": "g", "labels": {"a": "b"}}}
    assert podgroup_findings(bad, relabelled, LEVELS.get) == ([], [])
    constraint = {"topology": "x", "preferredTopologyLevel": RACK}
    missing = {"spec": {"minMember": 1, "topologyConstraint": constraint}}
    assert podgroup_findings(None, missing, LEVELS.get)[1] != []
    assert podgroup_findings(missing, missing, LEVELS.get) == ([], [])


def test_placement_in_status_reads_and_writes_camel_case() -> None:
    status = PodGroupStatus.model_validate({"placement": {"level": RACK, "domain": "z0-r1"}})
    assert status.placement is not None and status.placement.domain == "z0-r1"
    assert status.to_api()["placement"] == {"level": RACK, "domain": "z0-r1"}
