"""The PodGroup and Topology shown in the README pass our own validation (a doc example must
work)."""

from __future__ import annotations

import re

import yaml

from podgroup_operator.api.validation import podgroup_errors, topology_errors
from tests.conftest import REPO


def test_the_readme_podgroup_is_valid() -> None:
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", readme, flags=re.DOTALL)
    podgroups = [b for b in map(yaml.safe_load, blocks) if b and b.get("kind") == "PodGroup"]
    assert podgroups, "README shows no PodGroup"
    for body in podgroups:
        assert podgroup_errors(body) == []


def test_the_readme_topology_is_valid() -> None:
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", readme, flags=re.DOTALL)
    topologies = [b for b in map(yaml.safe_load, blocks) if b and b.get("kind") == "Topology"]
    assert topologies, "README shows no Topology"
    for body in topologies:
        assert topology_errors(body) == []
