"""Lists in the hand-written docs that repeat what the code has, kept in step with it.

The generated reference (docs/reference/) cannot drift; these pages can, when a value, a column,
a phase or a condition is added to the code and the sentence that lists them is not touched:

* install.md's list of the chart's values against deploy/helm/podgroup-operator/values.yaml;
* why-pending.md's `kubectl get podgroups -o wide` columns against the CRD's printer columns;
* phases-and-conditions.md's phases, condition types and waiting reasons against the enums.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from podgroup_operator import constants as c
from tests.conftest import REPO

DOCS = REPO / "docs"
VALUES = REPO / "deploy" / "helm" / "podgroup-operator" / "values.yaml"
KEY = re.compile(r"^[a-z][A-Za-z]*(\.[a-z][A-Za-z]*)*$")
NOT_VALUES = {"gangGroup"}
"""Backticked names in the values list that are not values (a PodGroup field it explains)."""


def section(text: str, heading: str) -> str:
    """The text under `heading` up to the next heading of any level."""
    start = text.index(heading + "\n") + len(heading) + 1
    following = re.search(r"^#+ ", text[start:], re.MULTILINE)
    return text[start : start + following.start()] if following else text[start:]


def ticked(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def leaf_paths(values: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of values.yaml's leaves; an empty map (free-form: labels) is a leaf."""
    found = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            found += leaf_paths(value, path + ".")
        else:
            found.append(path)
    return found


def values_list() -> str:
    """install.md's list of the chart's values: from "Its values" to the first blank line after
    the bullets."""
    helm = section((DOCS / "guides" / "install.md").read_text(), "## With Helm")
    start = helm.index("Its values")
    bullets = re.search(r"\n- .*?(?=\n\n)", helm[start:], re.DOTALL)
    assert bullets, "install.md's values list lost its bullets"
    return bullets.group(0)


def test_the_install_page_lists_every_chart_value() -> None:
    named = {token for token in ticked(values_list()) if KEY.match(token)}
    values = yaml.safe_load(VALUES.read_text())
    missing = []
    for path in leaf_paths(values):
        parts = path.split(".")
        if not any(".".join(parts[:n]) in named for n in range(1, len(parts) + 1)):
            missing.append(path)
    assert not missing, f"chart values install.md's list does not name: {missing}"


def test_the_install_page_names_no_value_the_chart_lacks() -> None:
    values = yaml.safe_load(VALUES.read_text())
    paths = set()
    for leaf in leaf_paths(values):
        parts = leaf.split(".")
        paths |= {".".join(parts[:n]) for n in range(1, len(parts) + 1)}
    relative = {path.rsplit(".", 1)[-1] for path in paths if "." in path}
    unknown = [
        token
        for token in ticked(values_list())
        if KEY.match(token) and token not in paths | relative | NOT_VALUES
    ]
    assert not unknown, f"install.md names chart values values.yaml lacks: {unknown}"


def printer_columns() -> list[dict[str, Any]]:
    crd = yaml.safe_load((REPO / "crds" / f"{c.PLURAL}.{c.GROUP}.yaml").read_text())
    (version,) = crd["spec"]["versions"]
    columns: list[dict[str, Any]] = version["additionalPrinterColumns"]
    return columns


def test_why_pending_names_every_wide_column() -> None:
    text = (DOCS / "guides" / "why-pending.md").read_text()
    start = text.index("`kubectl get podgroups -o wide` shows")
    paragraph = text[start : text.index("\n\n", start)]
    named = {token for token in ticked(paragraph) if re.fullmatch(r"[A-Z][A-Za-z]+", token)}
    wide = {column["name"] for column in printer_columns() if column.get("priority", 0) > 0}
    assert named == wide


def test_the_phases_table_is_the_phase_enum() -> None:
    text = (DOCS / "concepts" / "phases-and-conditions.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \|", section(text, "## Phases"), re.MULTILINE)
    assert rows == [phase.value for phase in c.Phase]


def test_every_condition_type_is_on_the_phases_page() -> None:
    text = (DOCS / "concepts" / "phases-and-conditions.md").read_text()
    missing = [kind.value for kind in c.ConditionType if f"`{kind.value}`" not in text]
    assert not missing, f"condition types phases-and-conditions.md does not name: {missing}"


def test_every_waiting_reason_on_the_phases_page_exists() -> None:
    text = (DOCS / "concepts" / "phases-and-conditions.md").read_text()
    table = section(text, "## Why a gang waits: the `Unschedulable` condition")
    cells = re.findall(r"^\| ([^|]+) \|", table, re.MULTILINE)
    reasons = [name for cell in cells for name in ticked(cell)]
    assert len(reasons) >= 10
    known = {reason.value for reason in c.Reason}
    assert [r for r in reasons if r not in known] == []
