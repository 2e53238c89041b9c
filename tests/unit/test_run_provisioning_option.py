"""`run --provisioning-class` and `sim-nodes --provisioner`: parsed, checked, and carried."""

from __future__ import annotations

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import KubeClient
from podgroup_operator.cli import build_parser
from podgroup_operator.controllers.runtime import Leading, build_runtime
from podgroup_operator.devcluster.provisioner import nodes_needed
from podgroup_operator.devcluster.simnodes import NodePool, pools_from_args, provision_template
from podgroup_operator.settings import OperatorSettings
from tests.fakes import FakeApiServer

CLASS = c.ProvisioningClass.BEST_EFFORT_ATOMIC.value


def test_off_by_default_a_class_parses_and_none_is_off() -> None:
    assert build_parser().parse_args(["run"]).provisioning_class is None
    assert (
        build_parser().parse_args(["run", "--provisioning-class", CLASS]).provisioning_class
        == CLASS
    )
    assert (
        build_parser().parse_args(["run", "--provisioning-class", "none"]).provisioning_class
        is None
    )


@pytest.mark.parametrize("value", ["", "two words", "x" * 254])
def test_a_bad_class_is_refused_naming_the_flag_and_an_example(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["run", "--provisioning-class", value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--provisioning-class" in err and "is not a provisioning class" in err and CLASS in err


def test_the_scheduler_asks_with_the_class_the_settings_say() -> None:
    settings = OperatorSettings(
        leader_election=False, metrics_address="", write_process=False, provisioning_class=CLASS
    )
    leading = Leading(build_runtime(settings, KubeClient(FakeApiServer())))
    assert leading.scheduler.provisioning is leading.provisioning
    assert leading.provisioning.default_class == CLASS
    assert leading.provisioning.due == leading.scheduler.provisioned


def test_the_provisioner_template_is_the_main_pool_unless_given() -> None:
    parser = build_parser()
    plain = parser.parse_args(["sim-nodes", "--cpu", "4", "--label", "pool=a"])
    assert provision_template(plain, pools_from_args(plain)) is None
    on = parser.parse_args(["sim-nodes", "--cpu", "4", "--label", "pool=a", "--provisioner"])
    template = provision_template(on, pools_from_args(on))
    assert template is not None
    assert (template.cpu, dict(template.labels), template.name_prefix) == (
        "4",
        {"pool": "a"},
        "sim-node-scaled",
    )
    given = parser.parse_args(
        ["sim-nodes", "--provisioner", "--provision-template", "cpu=16,gpu=8,label=pool=gpu"]
    )
    template = provision_template(given, pools_from_args(given))
    assert template is not None and template.gpu == 8 and template.labels == {"pool": "gpu"}


def test_the_provisioner_counts_template_nodes_per_pod_set_or_says_why_it_cannot() -> None:
    template = NodePool(cpu="4", memory="16Gi", labels={"pool": "a"})
    two_cpu = {"cpu": 2000, "pods": 1000}
    assert nodes_needed(template, two_cpu, {"pool": "a"}, 6) == 3
    assert nodes_needed(template, two_cpu, {}, 5) == 3
    assert "lack the labels" in str(nodes_needed(template, two_cpu, {"pool": "b"}, 1))
    assert "does not fit on a template node" in str(nodes_needed(template, {"cpu": 8000}, {}, 1))
