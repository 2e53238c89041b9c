"""Logging setup with a bounded line: no single object can flood the operator's log.

Messages are bounded at their source too (refusals summarise long lists), but any message, from our
code or a library's, may embed user input; so every formatted record, traceback included, is cut to
MAX_LINE characters here, keeping its head and its tail (where a traceback names the exception)
around a marker saying how much was cut (docs/decisions/013-bounded-log-lines.md).
"""

from __future__ import annotations

import json
import logging
from enum import StrEnum

MAX_LINE = 2_000
"""Characters of one formatted record (message and traceback) that reach the log."""

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def truncate(text: str, limit: int = MAX_LINE) -> str:
    """`text` at most `limit` characters (plus the marker): head and tail kept, middle cut."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    cut = len(text) - limit
    return f"{text[:head]} [... {cut} characters cut ...] {text[-tail:]}"


CAUSE_LIMIT = 400
"""Characters of an exception's text kept in reports, Events and log lines."""


def describe(exc: BaseException, limit: int = CAUSE_LIMIT) -> str:
    """`Type: message` on one line (the API server's texts end in newlines), cut to `limit`
    characters with a count of the rest: a bounded report of any failure."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more chars)"


class BoundedFormatter(logging.Formatter):
    """A Formatter whose output never exceeds `limit` characters (plus the cut marker)."""

    def __init__(self, fmt: str | None = LOG_FORMAT, limit: int = MAX_LINE) -> None:
        super().__init__(fmt)
        self.limit = limit

    def format(self, record: logging.LogRecord) -> str:
        return truncate(super().format(record), self.limit)


class LogFormat(StrEnum):
    TEXT = "text"
    """One human line per record (LOG_FORMAT)."""
    JSON = "json"
    """One JSON object per line, for log collectors that index fields."""


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message and, if any, exception.

    The message and the traceback are bounded like BoundedFormatter's, each on its own, so the
    line stays valid JSON (cutting the serialised text could cut a string in half).
    """

    def __init__(self, limit: int = MAX_LINE) -> None:
        super().__init__()
        self.limit = limit

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}",
            "level": record.levelname,
            "logger": record.name,
            "message": truncate(record.getMessage(), self.limit),
        }
        if record.exc_info:
            entry["exception"] = truncate(self.formatException(record.exc_info), self.limit)
        return json.dumps(entry, ensure_ascii=False)


LEVELS = ("debug", "info", "warning", "error")
"""What `run --log-level` accepts (logging's names, lower case)."""


def configure(
    level: int = logging.INFO, limit: int = MAX_LINE, log_format: LogFormat = LogFormat.TEXT
) -> None:
    """Root logging to stderr with bounded lines; replaces handlers set up before (basicConfig)."""
    handler = logging.StreamHandler()
    formatter: logging.Formatter = (
        JsonFormatter(limit)
        if log_format is LogFormat.JSON
        else BoundedFormatter(LOG_FORMAT, limit)
    )
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


def current_format() -> LogFormat:
    """The format `configure` set on the root logger (TEXT when it was never called): what a
    child process of the operator is told to log in, so its lines match the parent's."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler.formatter, JsonFormatter):
            return LogFormat.JSON
    return LogFormat.TEXT
