"""The scrape-time gauges count what the runtime reports, one sample per label value."""

from typing import Any

from podgroup_operator.metrics import RuntimeCollector


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
