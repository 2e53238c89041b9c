"""Every log line is bounded, whatever a message or a traceback embeds."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from podgroup_operator import __version__, logs
from podgroup_operator.api.limits import summarize
from podgroup_operator.cli import main as cli_main


def test_short_text_is_kept_whole() -> None:
    assert logs.truncate("gang default/a waits", 2000) == "gang default/a waits"


def test_long_text_keeps_head_and_tail_and_says_how_much_was_cut() -> None:
    text = "H" * 3000 + "T" * 3000
    cut = logs.truncate(text, 2000)
    assert cut.startswith("H" * 1000) and cut.endswith("T" * 1000)
    assert "[... 4000 characters cut ...]" in cut
    assert len(cut) < 2100


def test_the_formatter_bounds_message_and_traceback_and_keeps_the_exception_line() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.BoundedFormatter(limit=500))
    logger = logging.getLogger("test_logs.bounded")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        try:
            raise OverflowError("date value out of range " + "x" * 5000)
        except OverflowError:
            logger.exception("cycle failed for %s", ", ".join(f"ns/g{i}" for i in range(1000)))
    finally:
        logger.removeHandler(handler)
    line = stream.getvalue()
    assert len(line) < 600
    assert "cycle failed for ns/g0, ns/g1" in line
    assert "characters cut" in line
    assert line.rstrip().endswith("x" * 50)  # the tail of the exception line survives


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    """The root logger, with the handlers and level it had put back after the test."""
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    try:
        yield root
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved:
            root.addHandler(handler)
        root.setLevel(level)


def test_configure_installs_one_bounded_handler_on_the_root_logger(
    root_logger: logging.Logger,
) -> None:
    logs.configure(logging.INFO, limit=100)
    (handler,) = root_logger.handlers
    assert isinstance(handler.formatter, logs.BoundedFormatter)
    assert handler.formatter.limit == 100


@pytest.mark.parametrize(
    ("count", "expected"),
    [(0, ""), (2, "g0, g1"), (5, "g0, g1, g2, g3, g4"), (7, "g0, g1, g2, g3, g4 and 2 more")],
)
def test_summarize_names_five_and_counts_the_rest(count: int, expected: str) -> None:
    assert summarize(f"g{i}" for i in range(count)) == expected


def test_the_json_formatter_writes_one_valid_object_per_record_even_when_cut() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter(limit=300))
    logger = logging.getLogger("test_logs.json")
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.info('gang %s "waits"', "ns/a")
        try:
            raise OverflowError("x" * 5000)
        except OverflowError:
            logger.exception("cycle failed for %s", "y" * 5000)
    finally:
        logger.removeHandler(handler)
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == 'gang ns/a "waits"'
    assert (first["level"], first["logger"]) == ("INFO", "test_logs.json")
    assert "exception" not in first
    assert second["level"] == "ERROR"
    assert (
        second["message"].startswith("cycle failed for yyy")
        and "characters cut" in second["message"]
    )
    assert second["exception"].endswith("x" * 50) and len(second["exception"]) < 400


def test_configure_json_installs_the_json_formatter(root_logger: logging.Logger) -> None:
    logs.configure(logging.WARNING, log_format=logs.LogFormat.JSON)
    (handler,) = root_logger.handlers
    assert isinstance(handler.formatter, logs.JsonFormatter)
    assert root_logger.level == logging.WARNING


@pytest.mark.parametrize("log_format", list(logs.LogFormat))
def test_current_format_reports_what_configure_set(
    log_format: logs.LogFormat, root_logger: logging.Logger
) -> None:
    """What the writer process is told to log in, so its lines match the operator's."""
    logs.configure(logging.INFO, log_format=log_format)
    assert logs.current_format() is log_format


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli_main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"podgroup-operator {__version__}"


def test_run_refuses_an_unknown_log_level_naming_the_choices(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        cli_main(["run", "--log-level", "loud"])
    assert done.value.code == 2
    assert "--log-level: invalid choice: 'loud'" in capsys.readouterr().err


def test_a_failure_is_described_on_one_line_and_cut_with_a_count_of_the_rest() -> None:
    assert logs.describe(ValueError("bad\n  input\n")) == "ValueError: bad input"
    long = logs.describe(RuntimeError("x" * 500), limit=20)
    assert long == "RuntimeError: xxxxxx... (494 more chars)"
