"""The checked-in docs/reference/ is what the code generates, and the generator leaves nothing out.

The first tests compare each page with `podgroup-operator docs reference`'s output, as
tests/unit/api/test_api_crd.py does for the CRDs. The others enumerate each source on their own
(the registry as a scrape sees it, the webhook table, every parser, the constants, the CRD
schema) and look for every item on its page, so a generator that dropped some would fail here.
"""

from __future__ import annotations

import argparse
import ast
import importlib
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator import kubectl_plugin, metrics
from podgroup_operator.api.crd import openapi_schema, topology_openapi_schema
from podgroup_operator.cli import DOCS_REFERENCE_DIR, build_parser
from podgroup_operator.cli import main as cli_main
from podgroup_operator.handlers.webhooks import WEBHOOKS
from podgroup_operator.reference import COMMAND, render_pages
from podgroup_operator.reference.events import Usage, enum_members, usages
from podgroup_operator.reference.events import _scan_module as scan_module
from podgroup_operator.reference.markdown import cell

REPO = Path(__file__).resolve().parents[2]
DIRECTORY = REPO / DOCS_REFERENCE_DIR
PAGES = render_pages(build_parser())


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_checked_in_page_is_the_generated_one(name: str) -> None:
    path = DIRECTORY / name
    assert path.exists(), f"{DOCS_REFERENCE_DIR}/{name} is missing; run `{COMMAND}`"
    assert path.read_text() == PAGES[name], (
        f"{DOCS_REFERENCE_DIR}/{name} is stale; run `{COMMAND}` at the repository's root"
    )


def test_every_checked_in_page_is_generated() -> None:
    """A page the generator no longer writes is not left behind."""
    assert sorted(p.name for p in DIRECTORY.iterdir()) == sorted(PAGES)


def test_the_command_writes_the_pages(tmp_path: Path) -> None:
    assert cli_main(["docs", "reference", "-o", str(tmp_path / "out")]) == 0
    written = {p.name: p.read_text() for p in (tmp_path / "out").iterdir()}
    assert written == PAGES


def test_every_page_is_listed_on_the_index() -> None:
    index = PAGES["README.md"]
    for name in PAGES:
        if name != "README.md":
            assert f"]({name})" in index


# --- nothing left out ----------------------------------------------------------------------------


class View:
    """A runtime with one of everything, so each scrape-time family has a sample."""

    def metric_snapshot(self) -> dict[str, Any]:
        informer = {"synced": True, "last_event": 1.0, "objects": 1, "lists": 1}
        return {
            "phases": ["Running"],
            "waiting_reasons": ["NotEnoughResources"],
            "quota": {("ns", "cpu"): (1.0, 0.5)},
            "informers": {"pods": informer | {"failures": 0, "stalls": 0}},
            "leader": 1.0,
            "binds_allowed": 32.0,
        }


def test_every_series_a_scrape_shows_is_on_the_metrics_page() -> None:
    metrics.observe(View())
    try:
        families = list(metrics.REGISTRY.collect())
    finally:
        metrics.observe(None)
    page = PAGES["metrics.md"]
    assert len(families) >= 25
    for family in families:
        exposed = f"{family.name}_total" if family.type == "counter" else family.name
        (row,) = [line for line in page.splitlines() if line.startswith(f"| `{exposed}` |")]
        assert f"| {family.type}" in row
        assert cell(family.documentation) in row
        labels = {name for s in family.samples for name in s.labels if name != "le"}
        for label in labels:
            assert f"`{label}`" in row, (exposed, label)


def test_every_webhook_is_on_the_webhooks_page() -> None:
    page = PAGES["webhooks.md"]
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert len(rows) == len(WEBHOOKS)
    for spec in WEBHOOKS:
        (row,) = [line for line in rows if line.startswith(f"| `{spec.handler_id}` |")]
        assert f"`/{spec.handler_id}`" in row
        assert f"| {spec.failure_policy.value} |" in row
        assert ", ".join(spec.operations) in row
        assert spec.checks and spec.checks in page
        assert spec.why and spec.why in page


def _sections(page: str) -> dict[str, str]:
    """Each `## heading` of a page, with the text under it."""
    return {part.split("\n", 1)[0]: part for part in page.split("\n## ")[1:]}


def _parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command and its parser, found by walking the parsers themselves."""
    pending = [("podgroup-operator", build_parser())]
    while pending:
        name, parser = pending.pop()
        yield name, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                pending.extend((f"{name} {sub}", p) for sub, p in action.choices.items())
            if name == "podgroup-operator bench" and action.dest == "kind":
                for kind in action.choices or ():
                    module = importlib.import_module(f"podgroup_operator.bench.{kind}")
                    pending.append((f"{name} {kind}", module.build_parser()))
    yield "kubectl podgroup", kubectl_plugin.build_parser()


def test_every_command_and_option_is_on_the_cli_page() -> None:
    sections = _sections(PAGES["cli.md"])
    found = list(_parsers())
    assert len(found) >= 14
    for name, parser in found:
        assert name in sections, f"no section for {name}"
        section = sections[name]
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert f"`{option}`" in section, (name, option)
            for choice in action.choices or ():
                assert str(choice) in section, (name, choice)
            if action.help:
                assert cell(action.help.split(" (default: %(default)s)")[0]) in section


def test_every_reason_and_event_type_is_on_the_events_page() -> None:
    page = PAGES["events.md"]
    for enum in (c.Reason, c.PodReason, c.EventType, c.ConditionType):
        for member in enum:
            assert f"| `{member.value}` |" in page, member


def test_every_reason_has_a_docstring() -> None:
    """The events page's meaning column is the docstring under each member."""
    for enum in ("Reason", "PodReason", "EventType", "ConditionType"):
        members = enum_members(enum)
        assert [m.value for m in members] == [m.value for m in getattr(c, enum)]
        assert [m.name for m in members if not m.doc] == [], enum


def test_a_reason_is_emitted_as_an_event_exactly_when_its_docstring_says_so() -> None:
    """The source scan and the docstrings agree: "Warning Event" in the docstring, a Warning
    Event in the code, and a reason no code posts says nothing of an Event."""
    found = usages()
    for enum in ("Reason", "PodReason"):
        for member in enum_members(enum):
            usage = found.get((enum, member.name), Usage())
            assert bool(usage.event_types) == ("Event" in member.doc), (member.value, usage)
            for kind in (c.EventType.WARNING, c.EventType.NORMAL):
                if f"{kind.value} Event" in member.doc:
                    assert kind.value in usage.event_types, (member.value, usage)


def test_the_scan_finds_events_named_directly_and_passed_through_a_parameter() -> None:
    source = """
def post(kube):
    kube.narrate(body, c.EventType.WARNING, c.Reason.GANG_FAILED, "m")

class Loop:
    async def _event(self, body, reason, message):
        await self.kube.narrate(body, event_type=c.EventType.NORMAL, reason=reason)

    async def run(self):
        await self._event(body, c.Reason.PREEMPTED, "why")
        await self._event(body, reason=Reason.PREEMPTING, message="why")

def condition():
    return Reason.NOT_ENOUGH_TASKS
"""
    found: dict[tuple[str, str], Usage] = defaultdict(Usage)
    scan_module("x.py", ast.parse(source), found)
    assert found["Reason", "GANG_FAILED"].event_types == {"Warning"}
    assert found["Reason", "PREEMPTED"].event_types == {"Normal"}
    assert found["Reason", "PREEMPTING"].event_types == {"Normal"}
    assert found["Reason", "NOT_ENOUGH_TASKS"].event_types == set()
    assert found["Reason", "NOT_ENOUGH_TASKS"].referenced_in == {"x.py"}
    assert found["Reason", "PREEMPTED"].emitted_in == {"x.py"}


def _properties(schema: dict[str, Any], path: str) -> Iterator[str]:
    """The path of every property under `schema` (api/crd.py's structural schema)."""
    for name, sub in (schema.get("properties") or {}).items():
        yield f"{path}.{name}"
        yield from _properties(sub, f"{path}.{name}")
    items = schema.get("items")
    if isinstance(items, dict):
        yield from _properties(items, f"{path}[]")


@pytest.mark.parametrize("schema", [openapi_schema(), topology_openapi_schema()])
def test_every_field_of_the_crds_is_on_the_crd_page(schema: dict[str, Any]) -> None:
    page = PAGES["crd.md"]
    paths = [
        path
        for part in ("spec", "status")
        for path in _properties(schema["properties"][part], part)
    ]
    assert len(paths) >= 5
    for path in paths:
        assert f"| `{path}` |" in page, path
