"""The CRDs installed for other schedulers' PodGroup kinds: checked in as generated, and
compatible with their owners' in the names and fields the operator reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from podgroup_operator import constants as c
from podgroup_operator.api.dialect_crds import DIALECT_CRDS, file_name, render

CRDS = Path(__file__).resolve().parents[3] / "crds" / "dialects"


@pytest.mark.parametrize("dialect", list(DIALECT_CRDS))
def test_the_checked_in_dialect_crds_are_the_generated_ones(dialect: c.Dialect) -> None:
    path = CRDS / file_name(dialect)
    assert path.read_text() == render(dialect), (
        f"{path} is stale; run `python -m podgroup_operator.api.dialect_crds crds/dialects`"
    )


def test_each_dialect_crd_is_marked_as_ours_and_named_as_its_owner_s() -> None:
    groups = {}
    for render_crd in DIALECT_CRDS.values():
        crd = render_crd()
        assert crd["metadata"]["labels"][c.DIALECT_CRD_LABEL] == "true"
        assert crd["spec"]["names"]["kind"] == "PodGroup"
        groups[crd["spec"]["group"]] = [v["name"] for v in crd["spec"]["versions"]]
    assert groups == {
        c.VOLCANO_GROUP: ["v1beta1"],
        c.KOORD_PODGROUP_GROUP: ["v1alpha1"],
    }


def test_volcano_s_crd_has_no_status_subresource_as_volcano_s_own() -> None:
    (version,) = DIALECT_CRDS[c.Dialect.VOLCANO]()["spec"]["versions"]
    assert "subresources" not in version
    (version,) = DIALECT_CRDS[c.Dialect.KOORDINATOR]()["spec"]["versions"]
    assert version["subresources"] == {"status": {}}
