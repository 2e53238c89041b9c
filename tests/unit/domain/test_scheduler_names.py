"""`run --scheduler-name`: which pods the routing webhook hands to which of our names, and how
the command line takes the names."""

from __future__ import annotations

from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.cli import build_parser
from podgroup_operator.domain.membership import routed_scheduler
from tests.builders import pod

KUBEFLOW = "scheduler-plugins-scheduler"


def _pod(scheduler: str | None, **kwargs: Any) -> dict[str, Any]:
    body = pod("p", group="train", **kwargs)
    body["spec"].pop("schedulerName", None)
    if scheduler is not None:
        body["spec"]["schedulerName"] = scheduler
    return body


@pytest.mark.parametrize(
    ("scheduler", "names", "routed"),
    [
        (None, [c.SCHEDULER_NAME], c.SCHEDULER_NAME),
        ("", [c.SCHEDULER_NAME], c.SCHEDULER_NAME),
        (c.DEFAULT_SCHEDULER_NAME, [c.SCHEDULER_NAME], c.SCHEDULER_NAME),
        (c.DEFAULT_SCHEDULER_NAME, [KUBEFLOW, c.SCHEDULER_NAME], KUBEFLOW),
        (KUBEFLOW, [c.SCHEDULER_NAME, KUBEFLOW], None),
        ("volcano", [c.SCHEDULER_NAME], None),
    ],
    ids=[
        "unset goes to the default name",
        "empty goes to the default name",
        "default-scheduler goes to our name",
        "the first name is the one given",
        "already one of ours: left alone",
        "another scheduler named on purpose: left alone",
    ],
)
def test_routing(scheduler: str | None, names: list[str], routed: str | None) -> None:
    assert routed_scheduler(_pod(scheduler), names) == routed


def test_a_pod_that_is_no_member_is_never_routed() -> None:
    loner = pod("p")
    loner["spec"].pop("schedulerName", None)
    assert routed_scheduler(loner, [c.SCHEDULER_NAME]) is None


def test_run_defaults_to_podgroup_scheduler_and_repeats() -> None:
    parser = build_parser()
    assert parser.parse_args(["run"]).scheduler_name is None  # main.run: [podgroup-scheduler]
    args = parser.parse_args(["run", "--scheduler-name", KUBEFLOW, "--scheduler-name", "volcano"])
    assert args.scheduler_name == [KUBEFLOW, "volcano"]


def test_an_invalid_scheduler_name_is_refused_naming_the_flag_and_the_fix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["run", "--scheduler-name", "Volcano_Scheduler"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--scheduler-name" in err
    assert "'Volcano_Scheduler' is not a valid spec.schedulerName" in err
    assert "lowercase" in err
