"""The CRDs installed for other schedulers' kinds (`run --dialect-crds install`): checked in as
generated, one directory, one mark, one approval, and compatible with their owners' in the names
and fields the operator reads."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from podgroup_operator import constants as c
from podgroup_operator.api.crd import elastic_quota_crd_manifest
from podgroup_operator.api.dialect_crds import DIALECT_CRDS, file_name, render

REPO = Path(__file__).resolve().parents[3]
CRDS = REPO / "crds" / "dialects"


@pytest.mark.parametrize("name", list(DIALECT_CRDS))
def test_the_checked_in_dialect_crds_are_the_generated_ones(name: str) -> None:
    path = CRDS / file_name(name)
    assert path.read_text() == render(name), (
        f"{path} is stale; run `python -m podgroup_operator.api.dialect_crds crds/dialects`"
    )
    assert yaml.safe_load(render(name)) == DIALECT_CRDS[name]()


def test_crds_dialects_holds_exactly_the_generated_crds() -> None:
    """No file of an earlier mechanism, nor one the generator no longer makes, lingers."""
    assert sorted(p.name for p in CRDS.iterdir()) == sorted(map(file_name, DIALECT_CRDS))
    assert not (REPO / "crds" / "optional").exists()


def test_each_dialect_crd_is_marked_as_ours_and_named_as_its_owner_s() -> None:
    kinds = {}
    for name, render_crd in DIALECT_CRDS.items():
        crd = render_crd()
        assert crd["metadata"]["name"] == name
        assert crd["metadata"]["labels"][c.DIALECT_CRD_LABEL] == "true"
        spec = crd["spec"]
        assert name == f"{spec['names']['plural']}.{spec['group']}"
        kinds[name] = (spec["names"]["kind"], [v["name"] for v in spec["versions"]])
    assert kinds == {
        "podgroups.scheduling.volcano.sh": ("PodGroup", ["v1beta1"]),
        "podgroups.scheduling.sigs.k8s.io": ("PodGroup", ["v1alpha1"]),
        "elasticquotas.scheduling.sigs.k8s.io": ("ElasticQuota", ["v1alpha1"]),
    }


def test_the_protected_group_s_crds_carry_one_approval_koordinator_s_own_carry() -> None:
    """`scheduling.sigs.k8s.io` is protected (`*.k8s.io`): the API server refuses its CRDs
    without the annotation. Koordinator's own PodGroup and ElasticQuota CRDs carry
    scheduler-plugins' PR 52; so do ours. Volcano's group is not protected: none."""
    approvals = {
        name: crd().get("metadata", {}).get("annotations") for name, crd in DIALECT_CRDS.items()
    }
    approved = {c.ANNOTATION_API_APPROVED: c.KOORD_API_APPROVAL}
    assert approvals == {
        "podgroups.scheduling.volcano.sh": None,
        "podgroups.scheduling.sigs.k8s.io": approved,
        "elasticquotas.scheduling.sigs.k8s.io": approved,
    }
    assert c.KOORD_API_APPROVAL == "https://github.com/kubernetes-sigs/scheduler-plugins/pull/52"


def test_volcano_s_crd_has_no_status_subresource_as_volcano_s_own() -> None:
    (version,) = DIALECT_CRDS["podgroups.scheduling.volcano.sh"]()["spec"]["versions"]
    assert "subresources" not in version
    (version,) = DIALECT_CRDS["podgroups.scheduling.sigs.k8s.io"]()["spec"]["versions"]
    assert version["subresources"] == {"status": {}}


def test_the_koordinator_group_quota_crd_is_ours_in_its_group_without_short_names() -> None:
    """The same schema, columns and status as our ElasticQuota: a quota means one thing in
    either group; `kubectl get eq` keeps meaning ours."""
    koordinator = DIALECT_CRDS[c.KOORD_ELASTIC_QUOTA_CRD_NAME]()
    ours = elastic_quota_crd_manifest()
    names = {**koordinator["spec"]["names"], "shortNames": list(c.ELASTIC_QUOTA_SHORT_NAMES)}
    assert {**koordinator["spec"], "group": c.GROUP, "names": names} == ours["spec"]
