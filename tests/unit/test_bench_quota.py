"""`bench core --scenario quota` (bench/quota.py), scaled down: the quota accounting holds at
every instant, every workload is admitted, and the figures are Kueue's recorder's. Nothing
here is timed (the clock is the simulated one alone: `charge_cpu=False`)."""

from __future__ import annotations

import io
import json

import pytest

from podgroup_operator.bench.core import main
from podgroup_operator.bench.quota import (
    CLASSES,
    NOMINAL_CPU,
    equivalence,
    print_summary,
    quota_jobs,
    quota_nodes,
    quota_tree,
    run_quota,
    usage_figures,
)
from podgroup_operator.bench.replay import Job, ReplayResult, replay
from podgroup_operator.constants import Reason
from podgroup_operator.scheduling.snapshot import Snapshot

SMALL = {"small": 12, "medium": 5, "large": 3}
"""20 workloads per queue."""


def test_the_full_shape_is_kueues_baseline() -> None:
    jobs = quota_jobs(5, 6)
    assert len(jobs) == 15_000
    assert len(quota_nodes(5, 6)) == 60
    tree = quota_tree(5, 6)
    assert len(tree.roots) == 5
    assert all(len(tree.nodes[root].children) == 6 for root in tree.roots)
    child = tree.nodes[tree.nodes[tree.roots[0]].children[0]]
    assert (child.min, child.spec.max) == ({"cpu": 20_000}, {"cpu": 120_000})
    assert tree.nodes[tree.roots[0]].spec.max == {"cpu": 120_000}
    large = [job for job in jobs if job.name.endswith(".large-49")]
    assert len(large) == 30
    assert (large[0].size, large[0].requests, large[0].created) == (4, {"cpu": "5"}, 60.0)
    assert sum(wc.count for wc in CLASSES) * 30 == 15_000


def test_no_quota_exceeds_its_max_and_use_is_the_sum_of_the_held_pods_at_every_cycle() -> None:
    tree = quota_tree(1, 2)
    nodes, jobs = quota_nodes(1, 2), quota_jobs(1, 2, SMALL)
    by_uid = {pod["metadata"]["uid"]: job for job in jobs for pod in job.pods()}
    peak: dict[tuple[str, str], int] = {}
    seen = 0

    def check(snapshot: Snapshot, at: float) -> None:
        nonlocal seen
        seen += 1
        usage = snapshot.quotas.usage
        assert usage is not None
        held: dict[str, int] = {}
        for uid, job in by_uid.items():
            if snapshot.pod_request(uid) is not None:
                held[job.namespace] = held.get(job.namespace, 0) + int(job.requests["cpu"]) * 1000
        for key, node in tree.nodes.items():
            used = usage.of_quota(key).get("cpu", 0)
            limit = node.max_of("cpu")
            assert limit is not None and used <= limit, (at, key, used)
            peak[key] = max(peak.get(key, 0), used)
            expected = sum(held.values()) if node.children else held.get(key[0], 0)
            assert used == expected, (at, key)

    result = replay(nodes, jobs, quotas=tree, equivalence=equivalence, observe=check)
    assert seen == result.cycles > 0
    assert result.unplaced == [] and len(result.starts) == len(jobs) == 40
    assert result.refusals.get(str(Reason.WAITING_FOR_QUOTA), 0) > 0
    cohort = tree.roots[0]
    assert peak[cohort] == 2 * NOMINAL_CPU * 1000
    assert max(peak[q] for q in tree.nodes[cohort].children) > NOMINAL_CPU * 1000  # borrowed


def test_skipping_equivalent_jobs_changes_no_decision() -> None:
    tree = quota_tree(1, 2)
    nodes, jobs = quota_nodes(1, 2), quota_jobs(1, 2, SMALL)
    every = replay(nodes, jobs, quotas=tree)
    skipping = replay(nodes, jobs, quotas=tree, equivalence=equivalence)
    assert skipping.skipped > 0 and skipping.decisions < every.decisions
    assert skipping.starts == every.starts


def test_usage_is_kueues_integral_over_each_queues_monitored_time() -> None:
    jobs = [
        Job("a.large-0", 4, {"cpu": "5"}, 1.0, created=1.0, namespace="a"),
        Job("a.small-0", 1, {"cpu": "1"}, 2.0, created=0.5, namespace="a"),
        Job("b.medium-0", 1, {"cpu": "5"}, 1.0, created=0.5, namespace="b"),
    ]
    result = ReplayResult(
        starts={"a.large-0": 1.0, "a.small-0": 2.0, "b.medium-0": 1.0},
        ends={"a.large-0": 2.0, "a.small-0": 4.0, "b.medium-0": 2.0},
    )
    # a: 20 cpu x 1 s + 1 cpu x 2 s = 22 over 4 s of a 20-cpu nominal: 27.5 %;
    # b: 5 over 2 s: 12.5 %; the class: 27 over 2 queues x 20 cpu x 4 s: 16.9 %.
    assert usage_figures(jobs, result) == {
        "cq_class_usage_pct": 16.9,
        "cq_usage_pct_min": 12.5,
        "cq_usage_pct_mean": 20.0,
    }


def test_the_scenario_reports_every_figure_beside_kueues() -> None:
    out = run_quota(1, 2, SMALL, charge_cpu=False)
    assert out["workloads"] == 40
    for label in ("quotas", "no_quotas"):
        figures = out[label]
        assert figures["admitted"] == 40 and figures["unplaced"] == 0
        assert set(figures["mean_time_to_admission_s"]) == {"large", "medium", "small"}
        assert figures["cq_usage_pct_min"] > 0
        assert figures["makespan_s"] >= 3 * 1.2 + 1.0  # the last large gang's creation and run
        assert figures["decisions"] > 0 and figures["decision_cpu_s"] >= 0
    assert out["decision_mean_ratio"] is not None and out["placing_mean_ratio"] is not None
    stream = io.StringIO()
    print_summary(out, stream)
    text = stream.getvalue()
    assert "time to admission large" in text and "215.5" in text
    json.dumps(out)


def test_the_cli_knows_the_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--scenario", "no-such"])
    assert "quota" in capsys.readouterr().err
