"""`run --log-format json --log-level`: what a log collector reads from a real operator.

A second operator joins the session's on the dev cluster without webhooks: it campaigns for the
session operator's Lease and stands by, so it never schedules, yet it starts its informers,
becomes ready and logs its start-up, which is what these tests read.
"""

from __future__ import annotations

import json
from pathlib import Path

from podgroup_operator.devcluster.process import OperatorProcess


def _run_until_ready(kubeconfig: Path, log: Path, *args: str) -> list[str]:
    process = OperatorProcess(kubeconfig, log, ["--webhooks", "off", *args])
    process.start()
    try:
        process.wait_ready()
    finally:
        process.stop()
    return [line for line in log.read_text().splitlines() if line.strip()]


def test_json_logs_are_one_object_per_line(
    kubeconfig: Path, operator: OperatorProcess, tmp_path: Path
) -> None:
    lines = _run_until_ready(kubeconfig, tmp_path / "op.log", "--log-format", "json")
    records = [json.loads(line) for line in lines]  # every line, or this raises naming it
    assert all({"time", "level", "logger", "message"} <= record.keys() for record in records)
    assert any(
        record["level"] == "INFO" and record["message"].startswith("admission webhooks off")
        for record in records
    ), lines


def test_log_level_warning_drops_info(
    kubeconfig: Path, operator: OperatorProcess, tmp_path: Path
) -> None:
    lines = _run_until_ready(
        kubeconfig, tmp_path / "op.log", "--log-format", "json", "--log-level", "warning"
    )
    levels = {json.loads(line)["level"] for line in lines}
    assert levels <= {"WARNING", "ERROR", "CRITICAL"}, lines
