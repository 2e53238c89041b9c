"""The dev cluster is a real control plane: it answers /readyz, its controllers act, and `down`
stops every process `up` started.

The rest of the suite trusts this cluster as a stand-in for a real one; these tests are what
earns that trust.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from podgroup_operator.adapters.kube import PODS, Kind, KubeClient, Request
from podgroup_operator.devcluster import cluster as devcluster
from tests.builders import replicaset
from tests.waiting import wait_for

REPLICASETS = Kind("apps", "v1", "replicasets")
CLI = Path(sys.executable).with_name("podgroup-operator")


async def test_cluster_is_ready(kube: KubeClient) -> None:
    status, body = await kube.transport.send(Request("GET", "/readyz"))
    assert status == 200, body
    assert body.get("message", "").strip() == "ok"


async def test_replicaset_controller_creates_pods(kube: KubeClient, namespace: str) -> None:
    """The kube-controller-manager runs: a ReplicaSet gets its three pods."""
    app = f"rs-{uuid.uuid4().hex[:6]}"
    template = {"spec": {"containers": [{"name": "main", "image": "registry.local/sim:1"}]}}
    await kube.create(REPLICASETS, replicaset(app, 3, template), namespace)

    async def pods() -> list[str]:
        items = (await kube.list(PODS, namespace, label_selector=f"app={app}"))["items"]
        return [p["metadata"]["name"] for p in items] if len(items) == 3 else []

    names = await wait_for(pods, 30, "3 pods of the ReplicaSet")
    assert all(name.startswith(f"{app}-") for name in names)


def _processes_mentioning(text: str) -> list[int]:
    """PIDs whose command line mentions `text` (catches children `down` might not know of)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie does not), read from /proc, not from the code under
    test."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _assert_all_gone(state: devcluster.ClusterState, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        running = {name: pid for name, pid in state.pids.items() if alive(pid)}
        strays = _processes_mentioning(state.state_dir)
        if not running and not strays:
            break
        assert time.monotonic() < deadline, f"still running after down: {running} {strays}"
        time.sleep(0.1)
    assert not Path(state.etcd_data).exists(), "etcd data left behind"
    assert devcluster.load_state(Path(state.state_dir)) is None


async def test_dev_cluster_cli_up_down_leaves_no_process(tmp_path: Path) -> None:
    """A second cluster via the command line, beside the session's: `down` stops all of it."""
    state_dir = tmp_path / "second-cluster"

    def cli(action: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(CLI), "dev-cluster", action, "--state-dir", str(state_dir)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    started = await asyncio.to_thread(cli, "up")
    try:
        assert started.returncode == 0, started.stderr
        assert f"export KUBECONFIG={state_dir / 'kubeconfig'}" in started.stdout
        state = devcluster.load_state(state_dir)
        assert state is not None
        assert set(state.pids) == {"etcd", "kube-apiserver", "kube-controller-manager"}
        assert all(alive(pid) for pid in state.pids.values())
        async with KubeClient.from_kubeconfig(str(state.kubeconfig)) as second:
            status, _ = await second.transport.send(Request("GET", "/readyz"))
            assert status == 200
    finally:
        stopped = await asyncio.to_thread(cli, "down")
    assert stopped.returncode == 0, stopped.stderr
    assert "kube-apiserver" in stopped.stdout and "etcd" in stopped.stdout
    await asyncio.to_thread(_assert_all_gone, state)


async def test_dev_cluster_library_up_down_leaves_no_process(tmp_path: Path) -> None:
    state_dir = tmp_path / "third-cluster"
    state = await asyncio.to_thread(devcluster.up, state_dir)
    try:
        assert all(alive(pid) for pid in state.pids.values())
        assert devcluster.status(state_dir)["running"] is True
    finally:
        stopped = await asyncio.to_thread(devcluster.down, state_dir)
    assert len(stopped) == 3
    await asyncio.to_thread(_assert_all_gone, state)
    assert devcluster.status(state_dir)["running"] is False
