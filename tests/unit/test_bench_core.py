"""`bench core`'s pod-to-pod scenarios decide what their docstring says, small enough to run
here (the figures come from the command; nothing here is timed)."""

from __future__ import annotations

import pytest

from podgroup_operator.bench.core import CONSTRAINED, run_core, run_hostile


@pytest.mark.parametrize("scenario", CONSTRAINED)
def test_each_constrained_scenario_places_every_member(scenario: str) -> None:
    result = run_core(30, 4, 5, False, 1, None, scenario=scenario)
    assert result["scenario"] == scenario
    assert (result["decisions"], result["placed_pods"], result["refused"]) == (4, 20, 0)


def test_each_hostile_pod_is_refused_for_what_it_lists_or_placed_if_it_lists_a_score() -> None:
    result = run_hostile(20, 50, 1)
    outcomes = {kind: found["outcome"] for kind, found in result["pods"].items()}
    assert outcomes == {
        "host ports": "20 node(s) didn't have free ports for the requested pod ports "
        "(0.0.0.0:9100/TCP)",
        "inline EBS volumes": "20 node(s) exceed max volume count",
        "tolerations": "20 node(s) had untolerated taint {dedicated-0=x: NoSchedule}",
        "node affinity values": "20 node(s) didn't match Pod's node affinity",
        "node affinity terms": "20 node(s) didn't match Pod's node affinity",
        "container images": "placed on node-00000",
        "spread constraints": "20 node(s) didn't match pod topology spread constraints "
        "(missing required label) (x-0)",
    }
