"""`podgroup-operator run` as a child process, the way users run it.

Tests and `bench e2e` both need the real operator next to the real control plane: started with
a given kubeconfig, known to be healthy, stopped (or killed) on demand, its log at hand.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import LEASES, ApiError, KubeClient
from podgroup_operator.local import free_port


class OperatorProcess:
    """`podgroup-operator run` as a child process, the way users run it."""

    def __init__(
        self, kubeconfig: Path, log_path: Path, extra_args: list[str] | None = None
    ) -> None:
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.extra_args = extra_args or []
        self.process: subprocess.Popen[bytes] | None = None
        self.health_port = free_port()
        self.metrics_port = free_port()
        self.webhook_port = free_port()
        """Where a `--webhooks local` operator serves: fixed for the object's life, so the
        configurations `install_webhooks` writes stay right across restarts."""

    def start(self) -> None:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("podgroup-operator")),
                "run",
                "--liveness",
                f"http://127.0.0.1:{self.health_port}/healthz",
                "--metrics-address",
                f"127.0.0.1:{self.metrics_port}",
                "--webhook-port",
                str(self.webhook_port),
                *self.extra_args,
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    @property
    def webhook_url(self) -> str:
        return f"https://127.0.0.1:{self.webhook_port}"

    def _webhooks(self, *args: str) -> None:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        done = subprocess.run(
            [str(Path(sys.executable).with_name("podgroup-operator")), "webhooks", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"podgroup-operator webhooks {args[0]}: {done.stderr.strip()}")

    def install_webhooks(self, admin_kubeconfig: Path | None = None) -> None:
        """Point the cluster's webhook configurations at this process, as `make demo` does.

        The operator never writes them itself; `admin_kubeconfig` is for an operator whose own
        identity may not (the RBAC test's)."""
        from podgroup_operator.settings import OperatorSettings

        cert_dir = str(OperatorSettings().webhook_cert_dir)
        args = ["install", "--url", self.webhook_url, "--cert-dir", cert_dir]
        if admin_kubeconfig is not None:
            args += ["--kubeconfig", str(admin_kubeconfig)]
        self._webhooks(*args)

    def uninstall_webhooks(self) -> None:
        """Remove the webhook configurations (absent ones are fine)."""
        self._webhooks("uninstall")

    def ready_url(self) -> str:
        """The operator's /readyz: informers synced and the admission server accepting (Kopf's
        /healthz answers before its admission server listens)."""
        return f"http://127.0.0.1:{self.metrics_port}/readyz"

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until `ready_url()` answers 200; fail with the log's tail if the process died."""
        deadline = time.monotonic() + timeout
        url = self.ready_url()
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"operator exited with {self.process.returncode}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"operator not ready after {timeout}s:\n{self.log_tail()}")

    def stop(self, kill: bool = False) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def children(self) -> list[int]:
        """The operator's live child processes (its writer process, when it runs one)."""
        return [] if self.process is None else child_pids(self.process.pid)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def child_pids(pid: int) -> list[int]:
    """The live child processes of `pid` (/proc/PID/task/*/children)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found += [int(child) for child in (task / "children").read_text().split()]
    return found


async def lease_holder(kube: KubeClient, namespace: str | None = None) -> str:
    """The leader Lease's holder; "" while nobody has created it yet. `namespace` defaults to
    where a `run` started from this environment keeps it (settings.lease_namespace)."""
    from podgroup_operator.settings import OperatorSettings

    where = namespace or OperatorSettings().lease_namespace
    try:
        lease = await kube.get(LEASES, c.LEADER_LEASE_NAME, where)
    except ApiError as exc:
        if exc.not_found:
            return ""
        raise
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def pid_of_identity(identity: str) -> int | None:
    """The process id in a replica's identity outside a cluster, `<host>_<pid>_<tag>`
    (controllers/leader.py, `default_identity`); None for any other identity."""
    parts = identity.split("_")
    return int(parts[-2]) if len(parts) >= 3 and parts[-2].isdigit() else None


async def leading(kube: KubeClient, processes: Iterable[OperatorProcess]) -> OperatorProcess | None:
    """The one of `processes` holding the leader Lease now, or None."""
    pid = pid_of_identity(await lease_holder(kube))
    return next((p for p in processes if p.process and p.process.pid == pid), None)
