"""`install_crd_if_absent`: created where none exists, never touching one that does."""

from __future__ import annotations

import logging

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import CRDS, KubeClient
from podgroup_operator.api.crd import koordinator_elastic_quota_crd_manifest
from podgroup_operator.controllers.crd_install import (
    install_crd_if_absent,
    install_koordinator_quota_crd,
)
from tests.fakes import FakeApiServer

NAME = c.KOORD_ELASTIC_QUOTA_CRD_NAME


async def test_the_koordinator_quota_crd_is_created_where_none_exists() -> None:
    api = FakeApiServer()
    assert await install_koordinator_quota_crd(KubeClient(api)) is True
    stored = api.get_object(CRDS, NAME)
    assert stored is not None
    assert stored["spec"] == koordinator_elastic_quota_crd_manifest()["spec"]
    assert stored["metadata"]["labels"] == {c.LABEL_MANAGED_BY: c.OPERATOR_NAME}


async def test_an_existing_crd_is_left_as_it_is() -> None:
    """Koordinator's own (no status subresource, its own schema) is never replaced."""
    api = FakeApiServer()
    theirs = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME, "labels": {"app": "koordinator"}},
        "spec": {"group": c.KOORD_QUOTA_GROUP, "versions": []},
    }
    api.seed(theirs)
    assert await install_koordinator_quota_crd(KubeClient(api)) is False
    assert api.get_object(CRDS, NAME)["metadata"]["labels"] == {"app": "koordinator"}
    assert [m for m, _ in api.requests] == ["GET"]


@pytest.mark.parametrize(("method", "code"), [("GET", 403), ("POST", 403), ("POST", 409)])
async def test_a_refusal_or_a_race_is_logged_and_the_operator_runs_on(
    method: str, code: int, caplog: pytest.LogCaptureFixture
) -> None:
    api = FakeApiServer()
    api.inject_error(method, lambda request: "customresourcedefinitions" in request.path, code)
    caplog.set_level(logging.INFO)
    assert (
        await install_crd_if_absent(KubeClient(api), koordinator_elastic_quota_crd_manifest())
        is False
    )
    assert NAME in caplog.text
    level = logging.INFO if code == 409 else logging.ERROR
    assert [r.levelno for r in caplog.records if NAME in r.getMessage()] == [level]


async def test_ours_from_an_earlier_release_is_brought_up_to_date() -> None:
    """Our label marks it ours: an outdated schema is replaced, other marks kept; an up to date
    one is not written."""
    api = FakeApiServer()
    older = koordinator_elastic_quota_crd_manifest()
    (version,) = older["spec"]["versions"]
    version["additionalPrinterColumns"] = version["additionalPrinterColumns"][:1]
    older["metadata"]["labels"]["extra"] = "kept"
    api.seed(older)
    kube = KubeClient(api)
    assert await install_koordinator_quota_crd(kube) is True
    stored = api.get_object(CRDS, NAME)
    assert stored is not None
    assert stored["spec"] == koordinator_elastic_quota_crd_manifest()["spec"]
    assert stored["metadata"]["labels"]["extra"] == "kept"
    writes = len([m for m, _ in api.requests if m != "GET"])
    assert await install_koordinator_quota_crd(kube) is False
    assert len([m for m, _ in api.requests if m != "GET"]) == writes
