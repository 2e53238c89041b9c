"""`dev-cluster`'s state directory: --state-dir, else $PODGROUP_DEV_STATE, else the cache's."""

from __future__ import annotations

from pathlib import Path

import pytest

from podgroup_operator.cli import DEV_STATE_ENV, main
from podgroup_operator.devcluster import cluster


def _env_error(capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    """`dev-cluster env` where no cluster runs: it fails, naming the directory it looked in."""
    assert main(["dev-cluster", "env", *extra]) == 1
    return capsys.readouterr().err.strip()


def test_the_option_wins_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(DEV_STATE_ENV, str(tmp_path / "from-env"))
    error = _env_error(capsys, "--state-dir", str(tmp_path / "from-option"))
    assert error == f"no dev cluster in {tmp_path / 'from-option'}"


def test_the_environment_names_it_when_the_option_is_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(DEV_STATE_ENV, str(tmp_path / "from-env"))
    assert _env_error(capsys) == f"no dev cluster in {tmp_path / 'from-env'}"


def test_the_cache_directory_is_the_last_resort(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(DEV_STATE_ENV, raising=False)
    monkeypatch.setattr(cluster, "DEFAULT_STATE_DIR", tmp_path / "cache" / "dev-cluster")
    assert _env_error(capsys) == f"no dev cluster in {tmp_path / 'cache' / 'dev-cluster'}"
