"""The decision records (docs/decisions/) that code links to exist, and the index lists each."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DECISIONS = ROOT / "docs" / "decisions"
LINK = re.compile(r"docs/decisions/(\d{3}-[a-z0-9-]+\.md)")
SECTIONS = ("## Context", "## Decision", "## What was measured", "## Consequences")


def linked_records() -> dict[str, list[str]]:
    """Record file name -> the source files that link to it."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "operator").rglob("*.py")):
        for name in LINK.findall(path.read_text()):
            found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_record_the_code_links_to_exists() -> None:
    linked = linked_records()
    assert linked, "no source file links to a decision record"
    missing = {name: files for name, files in linked.items() if not (DECISIONS / name).is_file()}
    assert not missing, f"links to records that do not exist: {missing}"


def test_every_record_has_its_sections_a_date_and_a_line_in_the_index() -> None:
    index = (DECISIONS / "README.md").read_text()
    records = sorted(DECISIONS.glob("[0-9][0-9][0-9]-*.md"))
    assert records
    numbers = [record.name[:3] for record in records]
    assert len(set(numbers)) == len(numbers), f"two records share a number: {numbers}"
    for record in records:
        text = record.read_text()
        assert f"]({record.name})" in index, f"{record.name} is not in docs/decisions/README.md"
        for section in SECTIONS:
            assert section in text, f"{record.name} has no '{section}' section"
        assert re.search(r"\*\*Measured:\*\*.*20\d\d-\d\d-\d\d", text), (
            f"{record.name} does not say when its figures were measured"
        )
