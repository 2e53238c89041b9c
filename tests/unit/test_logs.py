"""Every log line is bounded, whatever a message or a traceback embeds."""

from __future__ import annotations

import io
import logging

import pytest

from podgroup_operator import logs
from podgroup_operator.api.limits import summarize


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


def test_configure_installs_one_bounded_handler_on_the_root_logger() -> None:
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    try:
        logs.configure(logging.INFO, limit=100)
        (handler,) = root.handlers
        assert isinstance(handler.formatter, logs.BoundedFormatter)
        assert handler.formatter.limit == 100
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved:
            root.addHandler(handler)
        root.setLevel(level)


@pytest.mark.parametrize(
    ("count", "expected"),
    [(0, ""), (2, "g0, g1"), (5, "g0, g1, g2, g3, g4"), (7, "g0, g1, g2, g3, g4 and 2 more")],
)
def test_summarize_names_five_and_counts_the_rest(count: int, expected: str) -> None:
    assert summarize(f"g{i}" for i in range(count)) == expected
