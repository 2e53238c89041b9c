"""The PodGroups and Topologies shown in README.md and docs/ pass our own validation (a doc
example must work)."""

from __future__ import annotations

import re
from typing import Any

import yaml

from podgroup_operator import constants as c
from podgroup_operator.api.validation import podgroup_errors, topology_errors
from tests.conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def shown(kind: str) -> list[tuple[str, dict[str, Any]]]:
    """(page, body) of every whole object of this kind of ours in a ```yaml block of the docs
    (another scheduler's PodGroup, shown in a migration guide, is theirs to validate)."""
    found = []
    for page in DOCS:
        for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), flags=re.DOTALL):
            body = yaml.safe_load(block)
            ours = str(body.get("apiVersion", c.API_VERSION)) if isinstance(body, dict) else ""
            if isinstance(body, dict) and body.get("kind") == kind and ours == c.API_VERSION:
                found.append((str(page.relative_to(REPO)), body))
    return found


def test_the_readme_shows_a_podgroup() -> None:
    assert any(page == "README.md" for page, _ in shown("PodGroup")), "README shows no PodGroup"


def test_every_podgroup_shown_is_valid() -> None:
    for page, body in shown("PodGroup"):
        assert podgroup_errors(body) == [], page


def test_every_topology_shown_is_valid() -> None:
    topologies = shown("Topology")
    assert any(page == "docs/concepts/topology.md" for page, _ in topologies), (
        "docs/concepts/topology.md shows no Topology"
    )
    for page, body in topologies:
        assert topology_errors(body) == [], page
