"""`bench scale`'s figures from what its watches saw: the summary is pure, so its arithmetic
is checked here without a cluster (tests/integration/test_bench_scale.py runs the command)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from pathlib import Path

import pytest

from podgroup_operator.adapters.kube import PODGROUPS, PODS, KubeClient
from podgroup_operator.bench import scale
from podgroup_operator.bench.scale import Observed, _summary, main, spread
from tests.fakes import FakeApiServer


def observed() -> Observed:
    """Two gangs of two; g0 turns Running 0.1 s after its last member, g1 0.5 s after."""
    seen = Observed()
    seen.pod_group = {"g0-0": "g0", "g0-1": "g0", "g1-0": "g1", "g1-1": "g1"}
    seen.bound = {"g0-0": 1.0, "g0-1": 1.5, "g1-0": 2.0, "g1-1": 3.0}
    seen.pod_running = {"g0-0": 2.0, "g0-1": 2.4, "g1-0": 4.0, "g1-1": 3.5}
    seen.group_running = {"g0": 2.5, "g1": 4.5}
    return seen


def test_convergence_runs_from_each_groups_last_member_running() -> None:
    result = _summary(observed(), pods=4, groups=2)
    # nearest rank (bench/stats.py): of two samples, p50 is the first and p99 the second
    assert result["convergence_ms"] == {"p50": 100, "p99": 500, "max": 500}
    assert result["all_running_s"] == 4.0


def test_the_slowest_groups_come_with_their_members_and_status_writes_in_time() -> None:
    """g1 (0.5 s) before g0 (0.1 s): g1's Pending was written before its members ran, its
    Running after; each group's writes are counted once."""
    seen = observed()
    scale._group_event(seen, {"metadata": {"name": "g1"}, "status": None})
    seen.start = time.monotonic() - 3.25  # the watch's clock: 3.25 s after the start
    scale._group_event(seen, {"metadata": {"name": "g1"}, "status": {"phase": "Pending"}})
    scale._group_event(seen, {"metadata": {"name": "g1"}, "status": {"phase": "Pending"}})
    seen.status_writes["g1"].append((4.5, "Running"))
    seen.status_writes["g0"] = [(2.5, "Running")]
    result = _summary(seen, pods=4, groups=2)
    [(at, phase), running] = result["slowest_groups"][0]["status_writes"]
    assert 3.25 <= at < 3.25 + 30 and (phase, running) == ("Pending", [4.5, "Running"])
    assert result["slowest_groups"] == [
        {
            "group": "g1",
            "convergence_ms": 500,
            "last_bound_s": 3.0,
            "last_running_s": 4.0,
            "status_writes": [[round(at, 2), "Pending"], [4.5, "Running"]],
        },
        {
            "group": "g0",
            "convergence_ms": 100,
            "last_bound_s": 1.5,
            "last_running_s": 2.4,
            "status_writes": [[2.5, "Running"]],
        },
    ]
    assert result["status_patches_per_group"] == {
        "mean": 1.5,
        "max": 2,
        "groups_by_count": {"1": 1, "2": 1},
    }


def test_the_most_written_groups_say_what_each_write_changed() -> None:
    """g1 is written three times: its counts, then a condition and its phase; g0 once. A
    repeat of the same status is no write."""
    seen = observed()
    scheduled = {"type": "Scheduled", "status": "True", "reason": "GangScheduled"}
    for status in (
        None,
        {"phase": "Pending", "scheduled": 1},
        {"phase": "Pending", "scheduled": 2},
        {"phase": "Pending", "scheduled": 2},
        {"phase": "Running", "scheduled": 2, "conditions": [scheduled]},
    ):
        scale._group_event(seen, {"metadata": {"name": "g1"}, "status": status})
    scale._group_event(seen, {"metadata": {"name": "g0"}, "status": {"phase": "Running"}})
    result = _summary(seen, pods=4, groups=2)
    first, second = result["most_written_groups"]
    assert first["group"] == "g1" and second["group"] == "g0"
    assert [(phase, changed) for _, phase, changed in first["status_writes"]] == [
        ("Pending", ["phase", "scheduled"]),
        ("Pending", ["scheduled"]),
        ("Running", ["phase", "conditions.Scheduled"]),
    ]
    assert [changed for _, _, changed in second["status_writes"]] == [["phase"]]
    assert result["status_patches_per_group"] == {
        "mean": 2,
        "max": 3,
        "groups_by_count": {"1": 1, "3": 1},
    }


def test_binds_are_counted_between_the_first_and_the_last() -> None:
    result = _summary(observed(), pods=4, groups=2)
    assert (result["first_bind_s"], result["last_bind_s"], result["pods_per_s"]) == (1.0, 3.0, 2.0)
    assert (result["bound"], result["groups_running"]) == (4, 2)


def test_a_group_seen_running_without_members_running_has_no_convergence() -> None:
    """A group whose members' Running the watch never saw (the side timed out) is left out,
    not counted from zero."""
    seen = observed()
    seen.pod_running = {"g0-0": 2.0, "g0-1": 2.4}
    result = _summary(seen, pods=4, groups=2)
    assert result["convergence_ms"] == {"p50": 100, "p99": 100, "max": 100}
    assert "all_running_s" not in result


def test_the_spread_of_repeated_runs_is_min_median_max_of_each_figure() -> None:
    """A figure missing from a run (its side timed out, or no `--versus`) is left out of that
    figure's spread, not counted as zero."""
    runs = [
        {
            "operator": {"pods_per_s": 300.0, "convergence_ms": {"p50": 150}},
            "pods_per_s_ratio": 0.7,
        },
        {
            "operator": {"pods_per_s": 360.0, "convergence_ms": {"p50": 120}},
            "pods_per_s_ratio": 1.06,
        },
        {"operator": {"pods_per_s": 330.0}, "pods_per_s_ratio": 0.8},
    ]
    result = spread(runs)
    assert result["operator.pods_per_s"] == {"min": 300.0, "median": 330.0, "max": 360.0, "runs": 3}
    assert result["pods_per_s_ratio"] == {"min": 0.7, "median": 0.8, "max": 1.06, "runs": 3}
    assert result["operator.convergence_ms.p50"] == {
        "min": 120,
        "median": 135,
        "max": 150,
        "runs": 2,
    }
    assert "kube-scheduler.pods_per_s" not in result


def test_repeat_takes_a_whole_number_of_runs_of_one_or_more(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for bad in ("0", "-1", "two"):
        with pytest.raises(SystemExit) as exit_:
            main(["--repeat", bad])
        assert exit_.value.code == 2
        assert f"{bad!r} is not a number of runs" in capsys.readouterr().err


def test_a_failed_run_keeps_the_runs_before_it_and_fails_the_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The third of three runs cannot start its cluster: the two done are printed with their
    spread and the error, and the command exits 1."""
    done = iter([{"operator": {"pods_per_s": 300.0}}, {"operator": {"pods_per_s": 340.0}}])

    def one_run(plan: object, *, versus: bool) -> dict[str, object]:
        try:
            return next(done)
        except StopIteration:
            raise RuntimeError("etcd did not start") from None

    monkeypatch.setattr(scale, "_report", one_run)
    monkeypatch.setattr(scale.heap, "configure", lambda: None)
    assert main(["--repeat", "3"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert [run["operator"]["pods_per_s"] for run in printed["runs"]] == [300.0, 340.0]
    assert printed["spread"]["operator.pods_per_s"]["runs"] == 2
    assert printed["error"] == "run 3 of 3: RuntimeError('etcd did not start')"


def test_a_side_that_timed_out_says_which_pods_and_groups_it_waited_for() -> None:
    """g1-1 never bound, g1-0 bound but never Running, g1 never Running: each named, with the
    phase and condition reasons g1's status last showed."""
    seen = observed()
    del seen.bound["g1-1"]
    del seen.pod_running["g1-1"], seen.pod_running["g1-0"]
    del seen.group_running["g1"]
    seen.last_status["g1"] = {
        "phase": "Scheduling",
        "conditions": [{"type": "Scheduled", "status": "False", "reason": "Unschedulable"}],
    }
    plan = scale.Plan(
        mode="backlog", nodes=1, gangs=2, size=2, cpu="1", node_cpu="1", rate=1.0, timeout=1.0
    )
    stuck = scale._stuck(seen, plan, scale.c.OPERATOR_NAME)
    assert stuck == {
        "unbound": {"count": 1, "first": ["g1-1"]},
        "bound_not_running": {"count": 1, "first": ["g1-0"]},
        "groups_not_running": {
            "count": 1,
            "first": {
                "g1": {"phase": "Scheduling", "conditions": {"Scheduled": "False Unschedulable"}}
            },
        },
    }
    # kube-scheduler's side has no group status to wait for.
    assert "groups_not_running" not in scale._stuck(seen, plan, scale.KUBE_SCHEDULER)


async def test_the_wait_for_the_benchs_watches_ends_naming_the_kind_that_never_listed() -> None:
    """A list the API server keeps refusing ends the side with the informer's name and its
    failed tries, instead of a wait with no end (the informer itself retries for ever)."""
    api = FakeApiServer()
    api.inject_error("GET", "/podgroups", 403, "Forbidden", times=1_000)
    kube = KubeClient(api)
    pods = scale._observe(kube, PODS, scale._slim_pod, lambda pod: None)
    groups = scale._observe(kube, PODGROUPS, scale._slim_group, lambda group: None)
    tasks = [asyncio.create_task(informer.run()) for informer in (pods, groups)]
    try:
        with pytest.raises(TimeoutError, match=r"within 1s for bench-podgroups \([1-9]\d* failed"):
            await scale._wait_synced([pods, groups], timeout=1.0)
        assert pods.synced.is_set()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_the_wait_for_the_benchs_watches_returns_once_every_kind_has_listed() -> None:
    kube = KubeClient(FakeApiServer())
    informers = [
        scale._observe(kube, PODS, scale._slim_pod, lambda pod: None),
        scale._observe(kube, PODGROUPS, scale._slim_group, lambda group: None),
    ]
    tasks = [asyncio.create_task(informer.run()) for informer in informers]
    try:
        await scale._wait_synced(informers, timeout=10.0)
        assert all(informer.synced.is_set() for informer in informers)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


METRICS = """\
# TYPE podgroup_event_loop_lag_seconds histogram
podgroup_event_loop_lag_seconds_bucket{le="0.1"} 90.0
podgroup_event_loop_lag_seconds_bucket{le="0.25"} 96.0
podgroup_event_loop_lag_seconds_bucket{le="0.5"} 98.0
podgroup_event_loop_lag_seconds_bucket{le="1.0"} 99.0
podgroup_event_loop_lag_seconds_bucket{le="5.0"} 100.0
podgroup_event_loop_lag_seconds_bucket{le="+Inf"} 100.0
podgroup_event_loop_lag_seconds_count 100.0
podgroup_event_loop_lag_seconds_sum 7.5
# TYPE podgroup_gc_pause_seconds histogram
podgroup_gc_pause_seconds_bucket{generation="0",le="0.25"} 50.0
podgroup_gc_pause_seconds_bucket{generation="0",le="1.0"} 50.0
podgroup_gc_pause_seconds_bucket{generation="0",le="5.0"} 50.0
podgroup_gc_pause_seconds_bucket{generation="0",le="+Inf"} 50.0
podgroup_gc_pause_seconds_count{generation="0"} 50.0
podgroup_gc_pause_seconds_sum{generation="0"} 0.5
podgroup_gc_pause_seconds_bucket{generation="2",le="0.25"} 1.0
podgroup_gc_pause_seconds_bucket{generation="2",le="1.0"} 2.0
podgroup_gc_pause_seconds_bucket{generation="2",le="5.0"} 3.0
podgroup_gc_pause_seconds_bucket{generation="2",le="+Inf"} 3.0
podgroup_gc_pause_seconds_count{generation="2"} 3.0
podgroup_gc_pause_seconds_sum{generation="2"} 2.756
# TYPE podgroup_status_writes counter
podgroup_status_writes_total 1040.0
# TYPE podgroup_informer_lists counter
podgroup_informer_lists_total{kind="pods"} 2.0
podgroup_informer_lists_total{kind="nodes"} 1.0
podgroup_informer_lists_total{kind="podgroups"} 1.0
# TYPE podgroup_informer_failures counter
podgroup_informer_failures_total{kind="pods"} 0.0
podgroup_informer_failures_total{kind="nodes"} 0.0
podgroup_informer_failures_total{kind="podgroups"} 3.0
# TYPE podgroup_informer_watch_stalls counter
podgroup_informer_watch_stalls_total{kind="pods"} 1.0
podgroup_informer_watch_stalls_total{kind="nodes"} 0.0
podgroup_informer_watch_stalls_total{kind="podgroups"} 0.0
# TYPE podgroup_scheduling_attempt_duration_seconds histogram
podgroup_scheduling_attempt_duration_seconds_bucket{le="1.0",result="placed"} 998.0
podgroup_scheduling_attempt_duration_seconds_bucket{le="+Inf",result="placed"} 1000.0
podgroup_scheduling_attempt_duration_seconds_count{result="placed"} 1000.0
podgroup_scheduling_attempt_duration_seconds_sum{result="placed"} 4.5
podgroup_scheduling_attempt_duration_seconds_bucket{le="1.0",result="refused"} 0.0
podgroup_scheduling_attempt_duration_seconds_bucket{le="+Inf",result="refused"} 0.0
podgroup_scheduling_attempt_duration_seconds_count{result="refused"} 0.0
podgroup_scheduling_attempt_duration_seconds_sum{result="refused"} 0.0
"""


def test_the_operators_metrics_say_when_its_loop_was_held_and_what_its_informers_did() -> None:
    """Lags and collections counted over each threshold (collections summed over generations);
    only kinds with more than one list, a failure or a stall are named; decisions with none of
    a result are left out."""
    assert scale._operator_figures(METRICS) == {
        "loop_lag_samples": 100,
        "loop_lag_over_s": {"0.25": 4, "1": 1, "5": 0},
        "status_writes": 1040,
        "gc_pauses": {"collections": 53, "seconds": 3.26, "over_s": {"0.25": 2, "1": 1, "5": 0}},
        "informer_trouble": {
            "pods": {"lists": 2, "failures": 0, "stalls": 1},
            "podgroups": {"lists": 1, "failures": 3, "stalls": 0},
        },
        "decisions": {"placed": {"count": 1000, "mean_ms": 4.5, "over_1_s": 2}},
    }


def test_the_operators_held_loop_lines_are_placed_in_seconds_from_the_start(
    tmp_path: Path,
) -> None:
    log = tmp_path / "op.log"
    held = "the event loop was held 0.60 s (lease renewal, watches, webhooks waited): x"
    log.write_text(
        "2026-11-27 19:00:00,000 INFO podgroup_operator.controllers.runtime: leading\n"
        f"2026-11-27 19:00:05,250 WARNING podgroup_operator.controllers.runtime: {held}\n"
        "a line without a time: the event loop was held 9 s\n"
    )
    start = dt.datetime(2026, 11, 27, 19, 0, 1).timestamp()
    assert scale._loop_held(log, start) == [{"at_s": 4.25, "said": held}]
    assert scale._loop_held(tmp_path / "missing.log", start) == []
