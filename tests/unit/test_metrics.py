"""The scrape-time gauges count what the runtime reports, one sample per label value."""

from typing import Any

import pytest

from podgroup_operator.adapters import heap
from podgroup_operator.metrics import (
    NO_PHASE,
    UNRECOGNIZED_PHASE,
    CollectorPausesCollector,
    RuntimeCollector,
)


class View:
    def metric_snapshot(self) -> dict[str, Any]:
        return {
            "phases": ["Running", "Pending", "Running"],
            "waiting_reasons": ["NotEnoughResources"],
            "quota": {},
            "informers": {},
            "leader": 1.0,
            "binds_allowed": 40.0,
        }


def test_phases_and_waiting_reasons_are_tallied() -> None:
    gauges = {g.name: g for g in RuntimeCollector(View).collect()}
    phases = {s.labels["phase"]: s.value for s in gauges["podgroup_podgroups"].samples}
    assert phases == {"Pending": 1, "Running": 2}
    waiting = {s.labels["reason"]: s.value for s in gauges["podgroup_waiting_gangs"].samples}
    assert waiting == {"NotEnoughResources": 1}


def test_phases_the_operator_does_not_write_share_one_label() -> None:
    """A label takes what a status holds: a phase of 100 KB, or a new one per group, would be
    a series each (metrics.UNRECOGNIZED_PHASE)."""

    class Foreign(View):
        def metric_snapshot(self) -> dict[str, Any]:
            phases = ["Running", None, "", "Scheduling", "x" * 100_000, "Bogus"]
            return super().metric_snapshot() | {"phases": phases}

    gauges = {g.name: g for g in RuntimeCollector(Foreign).collect()}
    phases = {s.labels["phase"]: s.value for s in gauges["podgroup_podgroups"].samples}
    assert phases == {"Running": 1, NO_PHASE: 2, UNRECOGNIZED_PHASE: 3}


def test_the_binds_allowed_in_flight_are_a_gauge() -> None:
    gauges = {g.name: g for g in RuntimeCollector(View).collect()}
    (sample,) = gauges["podgroup_binds_allowed_in_flight"].samples
    assert sample.value == 40.0


def test_each_informers_lists_failures_and_stalls_are_counters() -> None:
    class Informing(View):
        def metric_snapshot(self) -> dict[str, Any]:
            informer = {"synced": True, "last_event": 0.0, "objects": 7}
            return super().metric_snapshot() | {
                "informers": {"pods": informer | {"lists": 2, "failures": 3, "stalls": 1}}
            }

    families = {f.name: f for f in RuntimeCollector(Informing).collect()}
    for name, value in (
        ("podgroup_informer_lists", 2),
        ("podgroup_informer_failures", 3),
        ("podgroup_informer_watch_stalls", 1),
    ):
        assert families[name].type == "counter"
        (sample,) = [s for s in families[name].samples if s.name == f"{name}_total"]
        assert sample.labels == {"kind": "pods"} and sample.value == value


def test_the_collectors_pauses_are_a_histogram_per_generation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = heap.Pauses()
    record.count = [3, 1, 0]
    record.total = [0.03, 1.5, 0.0]
    record.buckets = [
        [3] * len(heap.PAUSE_BUCKETS),
        [0 if bound < 2.5 else 1 for bound in heap.PAUSE_BUCKETS],
        [0] * len(heap.PAUSE_BUCKETS),
    ]
    monkeypatch.setattr(heap, "pauses", record)
    (family,) = CollectorPausesCollector().collect()
    values = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples}
    young = (("generation", "0"),)
    assert values["podgroup_gc_pause_seconds_count", young] == 3
    assert values["podgroup_gc_pause_seconds_sum", (("generation", "1"),)] == 1.5
    bucket = "podgroup_gc_pause_seconds_bucket"
    assert values[bucket, (("generation", "1"), ("le", "1.0"))] == 0
    assert values[bucket, (("generation", "1"), ("le", "2.5"))] == 1
    assert values[bucket, (("generation", "1"), ("le", "+Inf"))] == 1
