"""Credentials that expire: an exec plugin (as EKS and GKE kubeconfigs use) is run again on 401.

The kubeconfig's user is an exec plugin that prints whatever token a file holds and counts its
runs. The client is made while the file holds a token the apiserver does not know (an expired
one, as far as the apiserver is concerned); the file then gets the admin's token, as the cloud
would issue a fresh one. The next request meets 401, re-runs the plugin and succeeds, without
the caller noticing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from podgroup_operator.adapters.kube import NAMESPACES, KubeClient
from tests.conftest import ClusterUnderTest

PLUGIN = """\
import json, pathlib, sys
here = pathlib.Path(sys.argv[1])
with (here / "runs").open("a") as runs:
    runs.write("run\\n")
print(json.dumps({
    "apiVersion": "client.authentication.k8s.io/v1beta1",
    "kind": "ExecCredential",
    "status": {"token": (here / "token").read_text().strip()},
}))
"""


def _exec_kubeconfig(admin_kubeconfig: Path, workdir: Path) -> Path:
    config = yaml.safe_load(admin_kubeconfig.read_text())
    (workdir / "plugin.py").write_text(PLUGIN)
    for user in config["users"]:
        user["user"] = {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": sys.executable,
                "args": [str(workdir / "plugin.py"), str(workdir)],
            }
        }
    path = workdir / "kubeconfig"
    path.write_text(json.dumps(config))
    return path


async def test_an_exec_plugin_is_run_again_when_its_token_is_refused(
    cluster: ClusterUnderTest, tmp_path: Path
) -> None:
    if cluster.state is None:
        pytest.fail("needs the dev cluster's static tokens (PODGROUP_TEST_KUBECONFIG set)")
    kubeconfig = _exec_kubeconfig(cluster.kubeconfig, tmp_path)
    (tmp_path / "token").write_text("expired-token")
    async with KubeClient.from_kubeconfig(str(kubeconfig)) as kube:
        assert (tmp_path / "runs").read_text().count("run") == 1
        (tmp_path / "token").write_text(cluster.state.tokens["admin"])
        namespaces = await kube.list(NAMESPACES)
        assert any(n["metadata"]["name"] == "kube-system" for n in namespaces["items"])
        assert (tmp_path / "runs").read_text().count("run") == 2
        # The new token is kept: no further run while it works.
        await kube.list(NAMESPACES)
        assert (tmp_path / "runs").read_text().count("run") == 2
