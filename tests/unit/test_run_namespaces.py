"""`run -n NS` and `--leader-elect-namespace NS`: only names a namespace can have.

A namespace that no API path can hold (`a/b`, `..`) would otherwise reach every informer's list
and fail there for ever, a warning at a time; refused here, it is one line naming the flag.
"""

from __future__ import annotations

import pytest

from podgroup_operator.cli import build_parser


def test_namespaces_parse_and_repeat() -> None:
    args = build_parser().parse_args(["run", "-n", "team-a", "--namespace", "b2"])
    assert args.namespace == ["team-a", "b2"]
    args = build_parser().parse_args(["run", "--leader-elect-namespace", "podgroup-operator"])
    assert args.leader_elect_namespace == "podgroup-operator"


@pytest.mark.parametrize("flag", ["-n", "--leader-elect-namespace"])
@pytest.mark.parametrize("value", ["a/b", "..", "Team-A", "a-", "a" * 64])
def test_a_value_no_namespace_can_have_is_refused_naming_the_flag_and_the_fix(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["run", flag, value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert flag in err
    assert f"{value!r} is not a namespace name" in err
    assert "lowercase letters, digits and '-'" in err
