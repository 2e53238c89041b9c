"""`make help` lists every target: a target added without a `##` line would go unseen."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"


def phony_targets() -> set[str]:
    text = MAKEFILE.read_text()
    found = re.search(r"^\.PHONY:(.*)$", text, re.MULTILINE)
    assert found, "the Makefile declares its targets in one .PHONY line"
    return set(found.group(1).split())


def test_every_phony_target_has_a_help_line() -> None:
    shown = subprocess.run(
        ["make", "--no-print-directory", "-f", str(MAKEFILE), "help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    listed = {line.split()[1] for line in shown.splitlines() if line.startswith("  make ")}
    assert listed == phony_targets()
