"""docs/reference/metrics.md: every series of the operator's registry (`metrics.REGISTRY`).

The counters and histograms are the module's `Counter`/`Histogram` objects; the gauges and
counters computed at scrape time come from its collectors, asked once with an empty runtime (a
family is listed whether or not it has samples)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from podgroup_operator import metrics
from podgroup_operator.reference.markdown import code, table

_SUFFIXES = {"counter": "_total"}
"""What the exposition appends to a family's name for its samples, by type (histograms' buckets,
sum and count are named in the table's type column)."""


@dataclass(frozen=True)
class Series:
    name: str
    type: str
    labels: tuple[str, ...]
    help: str

    @property
    def exposed(self) -> str:
        """The name a scrape shows (a counter's ends in `_total`)."""
        return self.name + _SUFFIXES.get(self.type, "")


class _Empty:
    """A runtime with nothing in it: the collectors yield every family, without samples."""

    def metric_snapshot(self) -> dict[str, Any]:
        return {
            "phases": [],
            "waiting_reasons": [],
            "quota": {},
            "informers": {},
            "leader": 0.0,
            "binds_allowed": 0.0,
        }


def _labels(metric: object) -> tuple[str, ...]:
    # prometheus-client keeps a metric's label names only on this attribute (no public reader).
    return tuple(getattr(metric, "_labelnames", ()))


def series() -> list[Series]:
    """Every series the operator exposes, sorted by name."""
    found: list[Series] = []
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            (described,) = value.describe()
            found.append(
                Series(described.name, described.type, _labels(value), described.documentation)
            )
    collectors: tuple[Collector, ...] = (
        metrics.RuntimeCollector(_Empty),
        metrics.CollectorPausesCollector(),
    )
    for collector in collectors:
        for family in collector.collect():
            found.append(Series(family.name, family.type, _labels(family), family.documentation))
    return sorted(found, key=lambda s: s.name)


def render() -> str:
    """The whole page."""
    rows = [
        (
            code(s.exposed),
            s.type + (" (`_bucket`, `_sum`, `_count`)" if s.type == "histogram" else ""),
            ", ".join(code(label) for label in s.labels),
            s.help,
        )
        for s in series()
    ]
    intro = (
        "# Metrics\n\n"
        "Every series on the operator's `/metrics` (served at `run --metrics-address`), "
        "generated from its registry (`operator/podgroup_operator/metrics.py`). "
        "Gauges of the cluster's state (PodGroups, quota, informers, leadership) are computed at "
        "scrape time.\n\n"
        "Example queries, the Grafana dashboard and the alerts (`deploy/components/monitoring`, "
        "the chart's `monitoring` values) are in [../guides/monitoring.md]"
        "(../guides/monitoring.md).\n"
    )
    return "\n".join([intro, table(("Name", "Type", "Labels", "Help"), rows)])
