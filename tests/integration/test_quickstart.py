"""The quick start (docs/guides/quickstart.md, deploy/quickstart.sh): the parts a dev cluster
without a kubelet can run.

* The overlay the script writes (`deploy/quickstart.sh overlay DIR`) renders the install of the
  chosen certificate overlay with only the operator's image changed, for both overlays; an image
  without a tag is refused, naming IMAGE and the fix.
* That overlay, with the components a 1.20 server needs given to the script (`COMPONENTS`, as the
  page tells users of older clusters), is accepted by the API server (`kubectl apply
  --dry-run=server -k`). A component that does not exist is refused, naming it.
* The chart, given `--set image.repository=... --set image.tag=...` as the page does, runs that
  image.
* The page's gang goes through the operator's admission webhooks (`kubectl apply
  --dry-run=server -f examples/quickstart-gang.yaml`, the script's `check`);
  tests/e2e/test_examples.py runs it to Running on sim nodes.

Building and loading the image, the rollout and `/readyz` of real pods, and pulling busybox need
a kubelet: the script runs them on the user's cluster.
"""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.deploy_helpers import (
    DEPLOY,
    components_for,
    find,
    kubectl,
    render,
)
from tests.integration.test_helm_chart import render_chart

SCRIPT = DEPLOY / "quickstart.sh"
GANG = REPO / "examples" / "quickstart-gang.yaml"
IMAGE = "registry.example.com:5000/team/podgroup-operator:v1.2.3"


def quickstart(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The script with `env` added to this process's environment."""
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def operator_container(documents: list[dict[str, Any]]) -> dict[str, Any]:
    (only,) = find(documents, "Deployment")["spec"]["template"]["spec"]["containers"]
    return only


def without_image(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    copied = copy.deepcopy(documents)
    operator_container(copied).pop("image")
    return copied


@pytest.mark.parametrize("certs", ["self-managed", "cert-manager"])
def test_the_overlay_changes_only_the_image(certs: str, tmp_path: Path) -> None:
    result = quickstart("overlay", str(tmp_path / "my-install"), IMAGE=IMAGE, CERTS=certs)
    assert result.returncode == 0, result.stderr
    written = yaml.safe_load((tmp_path / "my-install" / "kustomization.yaml").read_text())
    assert written["images"] == [
        {"name": "podgroup-operator", "newName": IMAGE.rsplit(":", 1)[0], "newTag": "v1.2.3"}
    ]
    ours = render(tmp_path / "my-install")
    theirs = render(DEPLOY / "overlays" / certs)
    assert operator_container(ours)["image"] == IMAGE
    assert operator_container(theirs)["image"] == "podgroup-operator:0.1.0"
    assert without_image(ours) == without_image(theirs)


def test_an_image_without_a_tag_is_refused_naming_the_fix(tmp_path: Path) -> None:
    result = quickstart("overlay", str(tmp_path), IMAGE="registry.example.com:5000/operator")
    assert result.returncode == 1
    assert "IMAGE=registry.example.com:5000/operator has no tag" in result.stderr
    assert "IMAGE=registry.example.com:5000/operator:dev" in result.stderr
    assert not (tmp_path / "kustomization.yaml").exists()


def test_an_unknown_setting_is_refused_naming_the_choices() -> None:
    result = quickstart("overlay", "unused", CERTS="letsencrypt")
    assert result.returncode == 1
    assert "CERTS=letsencrypt: use self-managed or cert-manager" in result.stderr


def test_an_unknown_component_is_refused_naming_it(tmp_path: Path) -> None:
    result = quickstart("overlay", str(tmp_path), COMPONENTS="flowcontrol-v1beta9")
    assert result.returncode == 1
    assert "no deploy/components/flowcontrol-v1beta9" in result.stderr


def test_the_chart_runs_the_image_the_page_sets() -> None:
    documents = render_chart({"image": {"repository": "podgroup-operator", "tag": "dev"}})
    assert operator_container(documents)["image"] == "podgroup-operator:dev"
    script = SCRIPT.read_text()
    assert '--set image.repository="$(image_name)" --set image.tag="$(image_tag)"' in script


# --- on the dev cluster --------------------------------------------------------------------------


async def test_the_api_server_accepts_the_overlay(
    kubeconfig: Path, operator_namespace: None, fresh_configurations: None, tmp_path: Path
) -> None:
    # The components this (1.20) server needs, as the page tells users of older clusters.
    components = " ".join(components_for(kubeconfig))
    assert components, "the dev cluster is older than 1.29"
    overlay = tmp_path / "my-install"
    result = quickstart("overlay", str(overlay), IMAGE=IMAGE, COMPONENTS=components)
    assert result.returncode == 0, result.stderr
    dry_run = kubectl("apply", "--dry-run=server", "-k", str(overlay), kubeconfig=kubeconfig)
    lines = dry_run.stdout.strip().splitlines()
    assert len(lines) == len(render(overlay))
    assert all("(server dry run)" in line for line in lines)
    assert "deployment.apps/podgroup-operator created (server dry run)" in lines or (
        "deployment.apps/podgroup-operator configured (server dry run)" in lines
    )


async def test_the_gang_passes_the_webhooks(
    kubeconfig: Path, operator: Any, namespace: str
) -> None:
    result = kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", str(GANG), kubeconfig=kubeconfig
    )
    assert result.stdout.strip().splitlines() == [
        "podgroup.scheduling.x-k8s.io/hello created (server dry run)",
        "job.batch/hello created (server dry run)",
    ]
    refused = kubectl(
        "apply",
        "--dry-run=server",
        "-n",
        namespace,
        "-f",
        "-",
        kubeconfig=kubeconfig,
        stdin=GANG.read_text().replace("minMember: 2", "minMember: 0"),
        check=False,
    )
    assert refused.returncode != 0, "the webhook (or schema) must refuse minMember 0"
    assert "minMember" in refused.stderr
