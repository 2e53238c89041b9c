"""`podgroup-operator webhooks install|uninstall` on the dev cluster, run as users run it.

An operator run outside the cluster no longer writes webhook configurations itself: the dev
tooling (make demo, the tests) installs them pointing at its local URL, and removes them
afterwards so that nothing keeps calling a port nobody serves.
"""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
from pathlib import Path

from podgroup_operator.adapters.kube import (
    MUTATING_WEBHOOKS,
    VALIDATING_WEBHOOKS,
    ApiError,
    KubeClient,
)
from podgroup_operator.devcluster.process import OperatorProcess
from podgroup_operator.manifests import CONFIG_NAMES
from tests.deploy_helpers import webhook_configurations_restored

CLI = Path(sys.executable).with_name("podgroup-operator")
NAME = CONFIG_NAMES[0]


def run(*args: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), "webhooks", *args, "--kubeconfig", str(kubeconfig)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


async def test_install_points_both_configurations_at_the_url_and_uninstall_removes_them(
    kube: KubeClient, kubeconfig: Path, tmp_path: Path
) -> None:
    async with webhook_configurations_restored(kube):
        installed = run(
            "install",
            "--url",
            "https://127.0.0.1:18443",
            "--cert-dir",
            str(tmp_path / "certs"),
            kubeconfig=kubeconfig,
        )
        assert installed.returncode == 0, installed.stderr
        assert all(
            line.endswith(" created (-> https://127.0.0.1:18443)")
            or line.endswith(" configured (-> https://127.0.0.1:18443)")
            for line in installed.stdout.splitlines()
        ), installed.stdout
        assert [line.split()[0] for line in installed.stdout.splitlines()] == [
            f"validatingwebhookconfiguration/{NAME}",
            f"mutatingwebhookconfiguration/{NAME}",
        ]
        ca = base64.b64encode((tmp_path / "certs" / "ca.crt").read_bytes()).decode()
        for kind in (VALIDATING_WEBHOOKS, MUTATING_WEBHOOKS):
            body = await kube.get(kind, NAME)
            for hook in body["webhooks"]:
                assert hook["clientConfig"]["url"].startswith("https://127.0.0.1:18443/")
                assert hook["clientConfig"]["caBundle"] == ca

        removed = run("uninstall", kubeconfig=kubeconfig)
        assert removed.returncode == 0, removed.stderr
        assert removed.stdout.splitlines() == [
            f"validatingwebhookconfiguration/{NAME} deleted",
            f"mutatingwebhookconfiguration/{NAME} deleted",
        ]
        again = run("uninstall", kubeconfig=kubeconfig)
        assert again.returncode == 0, again.stderr
        assert again.stdout.splitlines() == [
            f"validatingwebhookconfiguration/{NAME} not found",
            f"mutatingwebhookconfiguration/{NAME} not found",
        ]


async def _resource_versions(kube: KubeClient) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for kind in (VALIDATING_WEBHOOKS, MUTATING_WEBHOOKS):
        try:
            found[kind.plural] = (await kube.get(kind, NAME))["metadata"]["resourceVersion"]
        except ApiError as exc:
            if not exc.not_found:
                raise
            found[kind.plural] = None
    return found


async def test_starting_and_stopping_an_operator_never_writes_configurations(
    kube: KubeClient, kubeconfig: Path, operator: OperatorProcess, tmp_path: Path
) -> None:
    """Absent ones are not created by a start; installed ones survive a graceful stop
    untouched (their resourceVersion unchanged), so a stop never switches admission off."""
    async with webhook_configurations_restored(kube):
        assert run("uninstall", kubeconfig=kubeconfig).returncode == 0
        replica = OperatorProcess(kubeconfig, tmp_path / "op.log", ["--webhooks", "local"])
        replica.start()
        try:
            await asyncio.to_thread(replica.wait_ready)  # webhook server up, informers synced
            assert await _resource_versions(kube) == {
                VALIDATING_WEBHOOKS.plural: None,
                MUTATING_WEBHOOKS.plural: None,
            }
            await asyncio.to_thread(replica.install_webhooks)
            installed = await _resource_versions(kube)
            assert None not in installed.values()
        finally:
            replica.stop()  # SIGTERM: Kopf's cleanup handlers run
        assert replica.process is not None and replica.process.returncode == 0, replica.log_tail()
        assert await _resource_versions(kube) == installed
