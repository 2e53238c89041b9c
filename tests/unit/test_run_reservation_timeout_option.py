"""`run --reservation-timeout`: parsed, bounded, and carried to the gang scheduler."""

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
    parsed = build_parser().parse_args(["run"])
    assert parsed.reservation_timeout == tuning.RESERVATION_TIMEOUT_SECONDS
    assert OperatorSettings().reservation_timeout_seconds == tuning.RESERVATION_TIMEOUT_SECONDS
    assert (
        build_parser().parse_args(["run", "--reservation-timeout", "90"]).reservation_timeout == 90
    )


@pytest.mark.parametrize(
    "value", ["0", "-3", str(tuning.MAX_RESERVATION_TIMEOUT_SECONDS + 1), "a while"]
)
def test_a_timeout_out_of_range_is_refused_naming_the_flag_and_the_range(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["run", "--reservation-timeout", value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--reservation-timeout" in err
    assert f"{value!r} is not a reservation timeout" in err
    assert f"a number of seconds from 1 to {tuning.MAX_RESERVATION_TIMEOUT_SECONDS}" in err


def test_the_scheduler_releases_after_the_seconds_the_settings_say() -> None:
    kube = KubeClient(FakeApiServer())
    settings = OperatorSettings(
        leader_election=False,
        metrics_address="",
        write_process=False,
        reservation_timeout_seconds=42,
    )
    leading = Leading(build_runtime(settings, kube))
    assert leading.scheduler.reservations.timeout == dt.timedelta(seconds=42)
