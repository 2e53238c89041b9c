"""`run --bind-concurrency` and `--write-process`: parsed, bounded, and carried to the runtime."""

from __future__ import annotations

import pytest

from podgroup_operator.adapters.kube import KubeClient
from podgroup_operator.adapters.writer import WriterTransport, writer_connections
from podgroup_operator.cli import build_parser
from podgroup_operator.controllers.runtime import LEASE_CONNECTIONS, Leading, build_runtime
from podgroup_operator.settings import OperatorSettings
from podgroup_operator.tuning import (
    BIND_CONCURRENCY,
    BIND_CONCURRENCY_CEILING,
    MAX_BIND_CONCURRENCY,
)
from tests.fakes import FakeApiServer


def test_defaults_are_paced_binds_and_the_writer_process() -> None:
    args = build_parser().parse_args(["run"])
    assert (args.bind_concurrency, args.write_process) == (None, True)
    assert (OperatorSettings().bind_concurrency, OperatorSettings().write_process) == (None, True)
    assert build_parser().parse_args(["run", "--no-write-process"]).write_process is False
    assert build_parser().parse_args(["run", "--bind-concurrency", "auto"]).bind_concurrency is None


def test_both_options_parse() -> None:
    args = build_parser().parse_args(["run", "--write-process", "--bind-concurrency", "512"])
    assert (args.bind_concurrency, args.write_process) == (512, True)


async def test_paced_binds_start_at_the_floor_and_a_number_fixes_them() -> None:
    kube = KubeClient(FakeApiServer())
    settings = OperatorSettings(leader_election=False, metrics_address="", write_process=False)
    paced = Leading(build_runtime(settings, kube))
    assert paced.scheduler.binder.pacer is not None
    assert paced.scheduler.binder.allowed == BIND_CONCURRENCY
    assert (paced.scheduler.binder.pacer.floor, paced.scheduler.binder.pacer.ceiling) == (
        BIND_CONCURRENCY,
        BIND_CONCURRENCY_CEILING,
    )
    settings.bind_concurrency = 48
    fixed = Leading(build_runtime(settings, kube))
    assert fixed.scheduler.binder.pacer is None
    assert fixed.scheduler.binder.allowed == 48


@pytest.mark.parametrize("value", ["0", "-3", str(MAX_BIND_CONCURRENCY + 1), "many", "1.5"])
def test_a_bind_concurrency_out_of_range_is_refused_naming_the_flag_and_the_range(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["run", "--bind-concurrency", value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--bind-concurrency" in err
    assert f"{value!r} is not a bind concurrency" in err
    assert f"use auto (the default) or a whole number from 1 to {MAX_BIND_CONCURRENCY}" in err


async def test_the_writer_process_serves_the_schedulers_writes_only() -> None:
    """With --write-process the scheduler writes through the child's client; the status
    reconciler (whose PATCHes waited behind the binds there), the informers, the quota service
    and the elector keep the main one."""
    kube = KubeClient(FakeApiServer())
    settings = OperatorSettings(
        leader_election=False, metrics_address="", write_process=True, bind_concurrency=100
    )
    runtime = build_runtime(settings, kube)
    try:
        assert runtime.kube is kube and isinstance(runtime.writer.transport, WriterTransport)
        command = runtime.writer.transport.command
        assert command[command.index("--connections") + 1] == str(writer_connections(100))
        leading = Leading(runtime)
        assert leading.scheduler.binder.kube is runtime.writer
        assert leading.status.kube is kube
        assert leading.status.workers == 50  # half the binds in flight
        assert leading.scheduler.binder.allowed == 100
        assert runtime.informers.pods.kube is kube and runtime.quota.kube is kube
        assert runtime.writer.transport.pid is None  # started by the first write, not before
    finally:
        await runtime.writer.close()


def test_without_the_writer_process_everything_uses_one_client() -> None:
    kube = KubeClient(FakeApiServer())
    settings = OperatorSettings(leader_election=False, metrics_address="", write_process=False)
    runtime = build_runtime(settings, kube)
    assert runtime.writer is kube


async def test_the_writer_process_has_connections_for_the_most_binds_the_pacer_allows() -> None:
    kube = KubeClient(FakeApiServer())
    runtime = build_runtime(OperatorSettings(leader_election=False, metrics_address=""), kube)
    try:
        assert isinstance(runtime.writer.transport, WriterTransport)
        command = runtime.writer.transport.command
        assert command[command.index("--connections") + 1] == str(
            writer_connections(BIND_CONCURRENCY_CEILING)
        )
    finally:
        await runtime.writer.close()


def test_status_workers_keep_up_with_the_binds_in_flight() -> None:
    assert OperatorSettings().status_worker_count == BIND_CONCURRENCY_CEILING // 2  # paced
    assert OperatorSettings(bind_concurrency=32).status_worker_count == 16
    assert OperatorSettings(bind_concurrency=128).status_worker_count == 64
    assert OperatorSettings(bind_concurrency=128, status_workers=80).status_worker_count == 80
    assert OperatorSettings(bind_concurrency=1).status_worker_count == 16


@pytest.mark.parametrize("elect", [True, False])
def test_the_lease_has_a_client_of_its_own_when_the_runtime_makes_its_clients(
    elect: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kube-scheduler's way: a renewal never queues behind the leader's own writes."""
    made: list[tuple[KubeClient, int | None]] = []

    def from_kubeconfig(limit: int | None = None) -> KubeClient:
        made.append((KubeClient(FakeApiServer()), limit))
        return made[-1][0]

    monkeypatch.setattr(KubeClient, "from_kubeconfig", staticmethod(from_kubeconfig))
    runtime = build_runtime(OperatorSettings(metrics_address="", leader_election=elect))
    assert runtime.kube is made[0][0]
    if elect:
        assert [limit for _, limit in made] == [None, LEASE_CONNECTIONS]
        assert runtime.lease_kube is made[1][0] is not runtime.kube
        assert runtime.elector is not None and runtime.elector.kube is runtime.lease_kube
    else:
        assert len(made) == 1 and runtime.lease_kube is runtime.kube
