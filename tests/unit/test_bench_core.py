"""`bench core`'s pod-to-pod scenarios decide what their docstring says, small enough to run
here (the figures come from the command; nothing here is timed)."""

from __future__ import annotations

import pytest

from podgroup_operator.bench.core import CONSTRAINED, run_core


@pytest.mark.parametrize("scenario", CONSTRAINED)
def test_each_constrained_scenario_places_every_member(scenario: str) -> None:
    result = run_core(30, 4, 5, False, 1, None, scenario=scenario)
    assert result["scenario"] == scenario
    assert (result["decisions"], result["placed_pods"], result["refused"]) == (4, 20, 0)
