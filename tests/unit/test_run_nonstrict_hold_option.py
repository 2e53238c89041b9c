"""`run --nonstrict-hold-seconds`: parsed, bounded, and carried to the gang scheduler."""

from __future__ import annotations

import datetime as dt

import pytest

from podgroup_operator import tuning
from podgroup_operator.adapters.kube import KubeClient
from podgroup_operator.cli import build_parser
from podgroup_operator.controllers.runtime import Leading, build_runtime
from podgroup_operator.settings import OperatorSettings
from tests.fakes import FakeApiServer


def test_the_default_is_the_constant_and_a_number_of_seconds_parses() -> None:
    assert (
        build_parser().parse_args(["run"]).nonstrict_hold_seconds == tuning.NONSTRICT_HOLD_SECONDS
    )
    assert OperatorSettings().nonstrict_hold_seconds == tuning.NONSTRICT_HOLD_SECONDS
    args = build_parser().parse_args(["run", "--nonstrict-hold-seconds", "4.5"])
    assert args.nonstrict_hold_seconds == 4.5


@pytest.mark.parametrize(
    "value", ["0", "-3", "0.5", str(tuning.MAX_NONSTRICT_HOLD_SECONDS + 1), "soon"]
)
def test_a_hold_out_of_range_is_refused_naming_the_flag_and_the_range(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["run", "--nonstrict-hold-seconds", value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--nonstrict-hold-seconds" in err
    assert f"{value!r} is not a NonStrict hold" in err
    assert f"a number of seconds from 1 to {tuning.MAX_NONSTRICT_HOLD_SECONDS}" in err


def test_the_scheduler_holds_for_the_seconds_the_settings_say() -> None:
    kube = KubeClient(FakeApiServer())
    settings = OperatorSettings(
        leader_election=False, metrics_address="", write_process=False, nonstrict_hold_seconds=7
    )
    leading = Leading(build_runtime(settings, kube))
    assert leading.scheduler.holds.cap == dt.timedelta(seconds=7)
