"""`bench scale` works end to end on tiny numbers (its figures are for people, never asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from podgroup_operator.devcluster import cluster as devcluster

COMMAND = [str(Path(sys.executable).with_name("podgroup-operator")), "bench", "scale"]


def test_a_tiny_backlog_is_bound_and_reported() -> None:
    result = subprocess.run(
        [*COMMAND, "--nodes", "3", "--gangs", "3", "--gang-size", "2", "--node-cpu", "4"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    ours = report["operator"]
    assert (ours["pods"], ours["bound"], ours["groups_running"]) == (6, 6, 3)
    assert not ours["timed_out"] and ours["create_errors"] == 0
    for key in ("first_bind_s", "last_bind_s", "pods_per_s", "all_running_s", "peak_rss_mb"):
        assert isinstance(ours[key], int | float), key
    assert set(ours["convergence_ms"]) == {"p50", "p99", "max"}
    assert ours["status_patches_per_group"]["max"] >= 1
    cpu = ours["cpu_seconds"]
    assert set(cpu) == {
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "sim-nodes",
        "scheduler",
    }
    assert cpu["kube-apiserver"] > 0 and cpu["scheduler"] > 0
    # Events by reason: at least the groups' phase changes, each count a positive number.
    assert ours["events"].get("PhaseChanged", 0) >= 1
    assert all(isinstance(n, int) and n > 0 for n in ours["events"].values())


def test_versus_without_a_built_kube_scheduler_says_so_and_exits_2(tmp_path: Path) -> None:
    """An empty cache: the check happens before any cluster is started."""
    env = {**os.environ, "PODGROUP_OPERATOR_CACHE": str(tmp_path)}
    result = subprocess.run(
        [*COMMAND, "--versus", "kube-scheduler"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "kube-scheduler is not built: run `podgroup-operator dev-cluster build "
        "--with-scheduler` first"
    ]
    assert not (tmp_path / f"kubernetes-{devcluster.KUBERNETES_VERSION}").exists()
