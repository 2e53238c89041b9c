"""Markdown tables for the reference pages: one row per line, cells escaped, nothing wrapped."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def cell(text: str) -> str:
    """`text` as one table cell: whitespace runs (newlines too) made one space, `|` escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def code(text: str) -> str:
    """`text` as inline code (empty stays empty); a backtick inside gets a longer fence."""
    if not text:
        return ""
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}" if fence == "`" else f"{fence} {text} {fence}"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table; every cell goes through `cell`."""
    lines = [
        "| " + " | ".join(cell(h) for h in headers) + " |",
        "| " + " | ".join("---" for _ in headers) + " |",
    ]
    lines.extend("| " + " | ".join(cell(value) for value in row) + " |" for row in rows)
    return "\n".join(lines) + "\n"


def first_paragraph(text: str | None) -> str:
    """The first paragraph of a docstring or description, on one line."""
    if not text:
        return ""
    return " ".join(text.strip().split("\n\n")[0].split())
