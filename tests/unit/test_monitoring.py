"""The dashboard, the alerts and the docs' example queries name only series the operator exposes.

deploy/components/monitoring holds the Grafana dashboard and the PrometheusRule; the Helm chart
renders the same objects from copies in its files/ (kept equal here; the rendered objects are
compared with kustomize's in tests/integration/test_helm_chart.py). Every PromQL expression in
them, and every ```promql block of docs/guides/monitoring.md, must name series of the operator's
registry (`metrics.py`, as docs/reference/metrics.md lists them) with the suffix a scrape shows:
`_total` on counters, `_bucket`, `_sum` or `_count` on histograms, and filter or group by labels
those series carry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from podgroup_operator.reference.metrics import series

REPO = Path(__file__).resolve().parents[2]
COMPONENT = REPO / "deploy" / "components" / "monitoring"
CHART_FILES = REPO / "deploy" / "helm" / "podgroup-operator" / "files"
DASHBOARD = "podgroup-operator.json"
RULES = "prometheusrule.yaml"
GUIDE = REPO / "docs" / "guides" / "monitoring.md"

SERIES_NAME = re.compile(r"\bpodgroup_[a-z0-9_]+\b")
MATCHERS = re.compile(r"\b(podgroup_[a-z0-9_]+)\s*\{([^}]*)\}")
MATCHER_LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
TARGET_LABELS = frozenset({"instance", "job"})
"""What Prometheus adds to every scraped series."""


def exposed() -> dict[str, frozenset[str]]:
    """Every name a scrape of the operator shows, with the labels its samples carry."""
    names: dict[str, frozenset[str]] = {}
    for each in series():
        labels = frozenset(each.labels) | TARGET_LABELS
        if each.type == "counter":
            names[each.name + "_total"] = labels
        elif each.type == "histogram":
            names[each.name + "_bucket"] = labels | {"le"}
            names[each.name + "_sum"] = labels
            names[each.name + "_count"] = labels
        else:
            names[each.name] = labels
    return names


def problems(expr: str, known: dict[str, frozenset[str]]) -> list[str]:
    """What in one PromQL expression names no series, or a label its series lack."""
    found = []
    named = SERIES_NAME.findall(expr)
    if not named:
        found.append("names no podgroup_ series")
    for name in named:
        if name not in known:
            found.append(
                f"{name} is not exposed (a counter ends in _total, a histogram's series in "
                "_bucket/_sum/_count)"
            )
    for name, matchers in MATCHERS.findall(expr):
        for label in MATCHER_LABEL.findall(matchers):
            if name in known and label not in known[name]:
                found.append(f"{name} has no label {label}")
    carried = frozenset().union(*(known.get(n, frozenset()) for n in named))
    for group in GROUPING.findall(expr):
        for label in (part.strip() for part in group.split(",") if part.strip()):
            if label not in carried:
                found.append(f"groups by {label}, which none of {sorted(set(named))} carries")
    return found


def dashboard_queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    def walk(panels: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
        for panel in panels:
            for target in panel.get("targets") or []:
                yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
            yield from walk(panel.get("panels") or [])

    yield from walk(dashboard["panels"])


def alert_rules() -> list[dict[str, Any]]:
    rule = yaml.safe_load((COMPONENT / RULES).read_text())
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def every_query() -> list[tuple[str, str]]:
    dashboard = json.loads((COMPONENT / DASHBOARD).read_text())
    queries = [(f"dashboard {where}", expr) for where, expr in dashboard_queries(dashboard)]
    queries += [(f"alert {r['alert']}", r["expr"]) for r in alert_rules()]
    blocks = re.findall(r"^```promql\n(.*?)^```", GUIDE.read_text(), re.MULTILINE | re.DOTALL)
    for number, block in enumerate(blocks, 1):
        queries += [(f"{GUIDE.name} block {number}", block.strip())]
    return queries


def test_every_query_names_only_series_the_operator_exposes() -> None:
    known = exposed()
    queries = every_query()
    assert len(queries) > 30
    wrong = [f"{where}: {p}" for where, expr in queries for p in problems(expr, known)]
    assert not wrong, "\n".join(wrong)


def test_the_check_catches_a_missing_suffix_a_wrong_name_and_a_wrong_label() -> None:
    known = exposed()
    assert problems("sum(rate(podgroup_binds_total[5m]))", known) == []
    assert problems("rate(podgroup_binds[5m])", known) == [
        "podgroup_binds is not exposed (a counter ends in _total, a histogram's series in "
        "_bucket/_sum/_count)"
    ]
    assert problems("podgroup_webhook_duration_seconds > 1", known)
    assert problems('podgroup_binds_total{phase="x"}', known) == [
        "podgroup_binds_total has no label phase"
    ]
    assert problems("sum by (reason) (podgroup_leader)", known) == [
        "groups by reason, which none of ['podgroup_leader'] carries"
    ]
    assert problems("up", known) == ["names no podgroup_ series"]


def test_the_dashboard_uses_every_series_family() -> None:
    """A series added to metrics.py gets a panel (or is left out here on purpose)."""
    dashboard = json.loads((COMPONENT / DASHBOARD).read_text())
    used = " ".join(expr for _, expr in dashboard_queries(dashboard))
    missing = [s.name for s in series() if s.name not in used]
    assert missing == []


def test_the_alerts_the_issue_asks_for_are_there() -> None:
    names = {r["alert"] for r in alert_rules()}
    assert {
        "PodGroupOperatorNoLeader",
        "PodGroupGangsWaiting",
        "PodGroupRestartsLooping",
        "PodGroupWebhookErrors",
    } <= names
    for rule in alert_rules():
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]
        assert rule["alert"] in GUIDE.read_text(), (
            f"{rule['alert']} is not explained in {GUIDE.name}"
        )


@pytest.mark.parametrize("name", [DASHBOARD, RULES])
def test_the_charts_copies_are_the_components_files(name: str) -> None:
    assert (CHART_FILES / name).read_bytes() == (COMPONENT / name).read_bytes(), (
        f"cp deploy/components/monitoring/{name} deploy/helm/podgroup-operator/files/"
    )
