"""`bench scale` stops what it started however its side ends: the clean-up path of `_run_side`,
with the cluster, the sim nodes and the gangs' creation replaced (the real command's SIGTERM is
tests/integration/test_bench_scale.py's)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import KubeClient
from podgroup_operator.bench import scale
from tests.fakes import FakeApiServer


class FakeSimNodes:
    """What `_run_side` does with the sim nodes' process."""

    pid = 0

    def __init__(self) -> None:
        self.terminated = False

    def terminate(self) -> None:
        self.terminated = True

    def wait(self, timeout: float | None = None) -> int:
        return 0


class NeverSynced:
    """An observer whose watch runs until cancelled."""

    async def run(self) -> None:
        await asyncio.Event().wait()


async def test_a_side_stopped_while_it_creates_the_gangs_stops_the_sim_nodes_and_the_cluster(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """SIGTERM or Ctrl-C while the backlog is being created cancels the side before its
    failover exists. The `finally` once read that name unbound, raised, and skipped the rest:
    the sim nodes and the whole dev cluster (etcd's data in /dev/shm) were left running."""
    sim = FakeSimNodes()
    downs: list[Path] = []
    state = SimpleNamespace(kubeconfig=tmp_path / "kubeconfig", pids={})

    async def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    async def stopped(*args: Any, **kwargs: Any) -> int:
        raise asyncio.CancelledError  # as the signal's cancellation reaches the creation

    monkeypatch.setattr(scale.devcluster, "up", lambda state_dir: state)
    monkeypatch.setattr(scale.devcluster, "down", downs.append)
    monkeypatch.setattr(scale.subprocess, "Popen", lambda *args, **kwargs: sim)
    monkeypatch.setattr(
        scale.KubeClient, "from_kubeconfig", lambda *args, **kwargs: KubeClient(FakeApiServer())
    )
    monkeypatch.setattr(scale, "_prepare", nothing)
    monkeypatch.setattr(scale, "_observe", lambda *args, **kwargs: NeverSynced())
    monkeypatch.setattr(scale, "_wait_synced", nothing)
    monkeypatch.setattr(scale, "_create_gangs", stopped)
    plan = scale.Plan(
        mode="backlog", nodes=1, gangs=1, size=1, cpu="1", node_cpu="1", rate=1.0, timeout=1.0
    )
    with pytest.raises(asyncio.CancelledError):
        await scale._run_side(plan, tmp_path, c.OPERATOR_NAME)
    assert sim.terminated
    assert downs == [tmp_path]
