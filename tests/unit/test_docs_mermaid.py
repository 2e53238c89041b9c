"""Every Mermaid diagram in the Markdown parses with Mermaid's own parser, so GitHub draws it.

The parser is the pinned `mermaid` npm package (tests/mermaid/package.json), installed once by
tests/mermaid/install.sh into the cache beside the control plane; node runs it
(tests/mermaid/check.mjs). Without node or npm the test fails, naming them: a docs check that
skips would let a broken picture through.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from podgroup_operator.constants import Phase

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tests" / "mermaid"
BLOCK = re.compile(r"^```mermaid\n(.*?)^```", re.MULTILINE | re.DOTALL)
EXPECTED_PICTURES = {
    "docs/concepts/phases-and-conditions.md": "stateDiagram",
    "docs/architecture.md": "flowchart-v2",
    "docs/concepts/topology.md": "flowchart-v2",
    "docs/concepts/sub-groups.md": "flowchart-v2",
}


def mermaid_blocks(root: Path = REPO) -> list[dict[str, str]]:
    """Each ```mermaid block of the repository's Markdown, with `file:line` of its fence."""
    blocks = []
    for path in sorted(root.rglob("*.md")):
        relative = path.relative_to(root)
        if relative.parts[0].startswith(".") or "node_modules" in relative.parts:
            continue
        text = path.read_text()
        for found in BLOCK.finditer(text):
            line = text.count("\n", 0, found.start()) + 1
            blocks.append({"where": f"{relative}:{line}", "text": found.group(1)})
    return blocks


def parse(blocks: list[dict[str, str]]) -> list[dict[str, str | None]]:
    for tool in ("node", "npm"):
        assert shutil.which(tool), (
            f"{tool} not found: install Node.js 20 or later to check the docs"
        )
    installed = subprocess.run(
        ["bash", str(TOOLS / "install.sh")],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    ran = subprocess.run(
        ["node", str(TOOLS / "check.mjs"), installed.stdout.strip()],
        check=False,
        input=json.dumps(blocks),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    results: list[dict[str, str | None]] = json.loads(ran.stdout)
    return results


@pytest.mark.timeout(300)
def test_every_mermaid_diagram_parses() -> None:
    blocks = mermaid_blocks()
    results = parse(blocks)
    assert [r["where"] for r in results] == [b["where"] for b in blocks]
    broken = [f"{r['where']}: {r['error']}" for r in results if r["error"] is not None]
    assert not broken, "\n".join(broken)
    types = {str(r["where"]).rsplit(":", 1)[0]: r["type"] for r in results}
    for doc, kind in EXPECTED_PICTURES.items():
        assert types.get(doc) == kind, f"{doc} should draw a {kind} diagram"


@pytest.mark.timeout(300)
def test_a_broken_diagram_is_reported_with_its_place() -> None:
    results = parse(
        [
            {"where": "good.md:1", "text": "flowchart LR\n  a --> b\n"},
            {"where": "bad.md:3", "text": "stateDiagram-v2\n  A -->\n"},
        ]
    )
    assert results[0] == {"where": "good.md:1", "type": "flowchart-v2", "error": None}
    assert results[1]["where"] == "bad.md:3"
    assert results[1]["type"] is None
    assert "Parse error" in str(results[1]["error"])


def test_the_phase_diagram_draws_every_phase_and_only_phases() -> None:
    doc = REPO / "docs" / "concepts" / "phases-and-conditions.md"
    (diagram,) = [
        b["text"] for b in mermaid_blocks() if b["where"].startswith(str(doc.relative_to(REPO)))
    ]
    edges = re.findall(r"^\s*(\S+)\s+-->\s+(\S+?):?(?:\s|$)", diagram, re.MULTILINE)
    states = {state for edge in edges for state in edge} - {"[*]"}
    assert states == {phase.value for phase in Phase}
    assert ("Finished", "[*]") in edges and ("Failed", "[*]") in edges
    assert not [edge for edge in edges if edge[0] in ("Finished", "Failed") and edge[1] != "[*]"]
