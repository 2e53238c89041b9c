"""`bench scale` works end to end on tiny numbers (its figures are for people, never asserted)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from podgroup_operator.devcluster import cluster as devcluster

COMMAND = [str(Path(sys.executable).with_name("podgroup-operator")), "bench", "scale"]


TINY = ["--nodes", "3", "--gangs", "3", "--gang-size", "2", "--node-cpu", "4", "--timeout", "60"]
"""Six pods on three sim nodes; a side that has not drained in 60 s (it takes a few seconds)
ends, says what it was waiting for and exits 1, well before pytest's own timeout would kill the
command and its output with it."""


def run_bench(*args: str, timeout: float, expect: int = 0) -> subprocess.CompletedProcess[str]:
    """`bench scale` with `args`; exit `expect` expected, else its stderr (what was stuck) is shown.

    A command still running at `timeout` gets SIGTERM, so that it stops the clusters it started
    (a SIGKILL, which `subprocess.run` sends, would leave them running), and its output so far
    is shown. Output goes to files, not pipes: waiting for a pipe's end would also wait for any
    process the command left behind holding it."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen([*COMMAND, *args], stdout=out, stderr=err)
        ran_past = False
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            ran_past = True
            ask_for_stacks(process)
            process.terminate()
            try:
                process.wait(timeout=45)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if ran_past:
        raise AssertionError(f"bench scale ran past {timeout:.0f}s:\n{stderr[-8000:]}")
    assert process.returncode == expect, stderr[-6000:]
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


STACKS_SECONDS = 3.0
"""How long a bench is given to print its stacks after SIGUSR1."""


def ask_for_stacks(process: subprocess.Popen[bytes]) -> None:
    """Make a bench that does not end print its stacks on its stderr (SIGUSR1, see
    `cli._dump_stacks`), and give it the time to."""
    process.send_signal(signal.SIGUSR1)
    time.sleep(STACKS_SECONDS)


def stacks_of(process: subprocess.Popen[bytes], stderr: Path) -> str:
    """The stacks of a bench that does not end, as the tail of the file its stderr goes to."""
    ask_for_stacks(process)
    return stderr.read_text(errors="replace")[-8000:]


def tiny_backlog(*args: str) -> dict[str, Any]:
    """The operator's side of a 3 x 2 backlog on 3 sim nodes; all bound and Running."""
    result = run_bench(*TINY, *args, timeout=240)
    ours: dict[str, Any] = json.loads(result.stdout)["operator"]
    assert (ours["pods"], ours["bound"], ours["groups_running"]) == (6, 6, 3)
    return ours


def test_a_tiny_backlog_is_bound_and_reported() -> None:
    ours = tiny_backlog()
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
        "scheduler-writer",  # the writer process is on by default
    }
    assert cpu["kube-apiserver"] > 0 and cpu["scheduler"] > 0 and cpu["scheduler-writer"] > 0
    assert ours["writer_peak_rss_mb"] > 0
    # The API server's own count of what the side cost it: one bind per pod, a status per group.
    requests = ours["apiserver_requests"]
    assert requests["POST pods/binding"]["count"] == 6
    assert requests["PATCH podgroups/status"]["count"] >= 3
    assert all(figures["count"] > 0 and figures["mean_ms"] >= 0 for figures in requests.values())
    # Events by reason: at least the groups' phase changes, each count a positive number.
    assert ours["events"].get("PhaseChanged", 0) >= 1
    assert all(isinstance(n, int) and n > 0 for n in ours["events"].values())
    # The operator's own metrics, read before it stopped: its decisions and status writes.
    operator = ours["operator_metrics"]
    assert operator["decisions"]["placed"]["count"] >= 3
    assert 3 <= operator["status_writes"] <= requests["PATCH podgroups/status"]["count"]
    assert operator["loop_lag_samples"] > 0 and set(operator["loop_lag_over_s"]) == {
        "0.25",
        "1",
        "5",
    }
    assert operator["informer_trouble"] == {}
    assert operator["gc_pauses"]["collections"] >= 1  # at least the one after the first lists
    # Its log's held-loop lines (parsing: tests/unit/test_bench_summary.py); a tiny run may
    # have none, but the key is there for every operator side.
    assert isinstance(ours["loop_held"], list)


def test_operator_args_reach_run_and_turn_the_writer_process_off() -> None:
    ours = tiny_backlog("--operator-args=--no-write-process --bind-concurrency 4")
    assert "scheduler-writer" not in ours["cpu_seconds"]
    assert "writer_peak_rss_mb" not in ours


def test_repeat_prints_every_run_and_the_spread_of_its_figures() -> None:
    # Two runs of at most 60 s each, with their clusters' starts and stops, and a SIGTERM's
    # grace: under pytest's 300 s.
    result = run_bench(*TINY, "--repeat", "2", timeout=230)
    printed = json.loads(result.stdout)
    runs = [run["operator"] for run in printed["runs"]]
    assert [(ours["bound"], ours["groups_running"]) for ours in runs] == [(6, 3), (6, 3)]
    rates = printed["spread"]["operator.pods_per_s"]
    assert rates["runs"] == 2
    assert rates["min"] == min(ours["pods_per_s"] for ours in runs)
    assert rates["max"] == max(ours["pods_per_s"] for ours in runs)


FAILOVER_BACKLOG = ["--nodes", "3", "--gangs", "200", "--gang-size", "5", "--node-cpu", "4"]
"""1,000 pods of 10m on three nodes of 4 cpu: enough that half are bound well before the end."""


def test_failover_kills_the_leader_halfway_and_the_standby_drains_the_rest() -> None:
    """The leader is killed with -9 once half the pods are bound; the standby takes the Lease
    and binds the rest, within every node's cpu."""
    backlog = FAILOVER_BACKLOG
    result = run_bench(*backlog, "--timeout", "120", "--failover", timeout=280)
    ours = json.loads(result.stdout)["operator"]
    assert (ours["bound"], ours["groups_running"], ours["timed_out"]) == (1000, 200, False)
    failover = ours["failover"]
    assert failover["signal"] == "kill" and failover["signalled"] in ("scheduler", "standby")
    assert 500 <= failover["bound_at_signal"] < 1000, failover
    assert 0 < failover["led_after_s"] <= failover["first_bind_after_signal_s"], failover
    assert (failover["over_capacity_count"], failover["failed_pods"]) == (0, 0), failover
    assert {"scheduler", "standby"} <= set(ours["cpu_seconds"])


def test_failover_term_hands_the_lease_over_and_the_standby_drains_the_rest() -> None:
    """SIGTERM instead of -9: the leader releases the Lease, and the other takes it at once."""
    backlog = FAILOVER_BACKLOG
    result = run_bench(*backlog, "--timeout", "120", "--failover", "term", timeout=280)
    ours = json.loads(result.stdout)["operator"]
    assert (ours["bound"], ours["groups_running"], ours["timed_out"]) == (1000, 200, False)
    failover = ours["failover"]
    assert failover["signal"] == "term" and 500 <= failover["bound_at_signal"] < 1000, failover
    assert (failover["over_capacity_count"], failover["failed_pods"]) == (0, 0), failover
    # Without the hand-over the other would wait for the Lease to run out (15 s).
    assert failover["led_after_s"] < 10, failover


def test_failover_with_versus_is_refused() -> None:
    result = run_bench(*TINY, "--failover", "--versus", "kube-scheduler", timeout=60, expect=2)
    assert "--failover is the operator's alone" in result.stderr


def test_a_side_that_cannot_drain_exits_1_naming_what_it_waited_for() -> None:
    """Two pods of 3 cpu on one 4-cpu node: the gang never fits, the side ends at --timeout."""
    never_fits = ["--nodes", "1", "--gangs", "1", "--gang-size", "2", "--node-cpu", "4"]
    result = run_bench(*never_fits, "--pod-cpu", "3", "--timeout", "20", timeout=240, expect=1)
    ours = json.loads(result.stdout)["operator"]
    assert ours["timed_out"]
    stuck = ours["stuck"]
    assert stuck["unbound"] == {"count": 2, "first": ["g0-0", "g0-1"]}
    assert stuck["groups_not_running"]["count"] == 1
    # The operator said why, and the status the watch last saw carries it.
    conditions = stuck["groups_not_running"]["first"]["g0"]["conditions"]
    assert conditions.get("Unschedulable", "").startswith("True"), conditions
    assert "--- last " in result.stderr and "lines of operator.log ---" in result.stderr


def test_a_scheduler_that_exits_ends_its_side_at_once_with_its_exit_code() -> None:
    """`run` refuses an unknown option (exit 2): the side stops there, not at its timeout."""
    result = run_bench(*TINY, "--operator-args=--no-such-option", timeout=240, expect=1)
    ours = json.loads(result.stdout)["operator"]
    assert (ours["scheduler_exit_code"], ours["timed_out"], ours["bound"]) == (2, False, 0)
    assert ours["stuck"]["unbound"]["count"] == 6
    assert "--no-such-option" in result.stderr  # the operator's own words, from its log


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


def _processes_naming(text: str) -> dict[int, str]:
    """Live processes whose command line or environment contains `text` (pid -> command)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if text.encode() in cmdline + environ:
            found[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
    return found


@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_sigterm_stops_the_run_and_everything_it_started(tmp_path: Path, sigint: str) -> None:
    """`kill` (or `timeout`, or a CI job's cancel) must not leave a dev cluster behind.

    Also when the bench starts with SIGINT ignored, as a shell without job control starts the
    commands it runs in the background (`bench scale ... &` in a script): SIGTERM must still
    stop it (it once ran on, its clusters with it).

    The gangs ask for more cpu than any node has, so the run waits for its timeout and is still
    running when it is told to stop. Every process it started carries its temporary directory
    (in TMPDIR) in its command line or environment: none may be left once it has exited.
    """
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    stderr = tmp_path / "stderr.txt"
    with stderr.open("wb") as sink:
        # An ignored signal stays ignored across exec: the shell's `trap '' INT` is inherited.
        shell = ["/bin/sh", "-c", "trap '' INT; exec \"$@\"", "sh"]
        ignoring = shell if sigint == "ignored" else []
        never_fits = ["--pod-cpu", "100", "--timeout", "600"]
        bench = subprocess.Popen(
            [*ignoring, *COMMAND, *TINY, *never_fits],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    state: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + 180
        logs: list[Path] = []
        while time.monotonic() < deadline and bench.poll() is None:
            logs = list(tmp_path.glob("podgroup-bench-scale-*/operator/operator.log"))
            if logs and logs[0].stat().st_size > 0:
                break
            time.sleep(0.5)
        assert logs, "the operator side never started"
        state = json.loads((logs[0].parent / "cluster.json").read_text())
        started = _processes_naming(str(tmp_path))
        commands = " ".join(started.values())
        for name in ("etcd", "kube-apiserver", "kube-controller-manager", "sim-nodes", " run "):
            assert name in commands, started
        assert Path(state["etcd_data"]).exists()

        # What a test that gives up on a bench gets first: every thread's and task's stack.
        stacks = stacks_of(bench, stderr)
        assert "Current thread" in stacks, stacks
        assert "in _run_side" in stacks and "scale.py:" in stacks, stacks
        assert bench.poll() is None  # it goes on

        bench.send_signal(signal.SIGTERM)
        try:
            bench.wait(timeout=120)
        except subprocess.TimeoutExpired:
            stacks = stacks_of(bench, stderr)
            raise AssertionError(f"bench scale still ran 120 s after SIGTERM:\n{stacks}") from None
    finally:
        # Whatever happened above, nothing of this run is left to the tests after it.
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        left = _processes_naming(str(tmp_path))
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        etcd_data_left = bool(state) and Path(state["etcd_data"]).exists()
        if state:
            shutil.rmtree(state["etcd_data"], ignore_errors=True)
    assert bench.returncode != 0, stderr.read_text()[-2000:]
    assert left == {}
    assert not etcd_data_left
    assert list(tmp_path.glob("podgroup-bench-scale-*")) == []
