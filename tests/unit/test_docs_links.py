"""Every relative link in README.md and docs/ leads to a file of the repository, and every
`#anchor` into a page to one of its headings (as GitHub derives them)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^[ \t]*```.*?^[ \t]*```", re.DOTALL | re.MULTILINE)
CODE = re.compile(r"(`+)[^`]*?\1")
"""Inline code: a pattern such as `[-a-z0-9]*(...)` is no link."""


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to -."""
    text = FENCE.sub("", page.read_text())
    found = set()
    for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def links() -> list[tuple[Path, str]]:
    found = []
    for page in PAGES:
        text = CODE.sub("", FENCE.sub("", page.read_text()))
        for target in LINK.findall(text):
            if not re.match(r"[a-z]+:", target):
                found.append((page, target))
    return found


def test_the_docs_link_to_each_other() -> None:
    assert len(links()) > 50


def test_every_relative_link_resolves() -> None:
    broken = []
    for page, target in links():
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        where = f"{page.relative_to(REPO)}: {target}"
        if not resolved.exists():
            broken.append(f"{where} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{where} (no such heading)")
    assert not broken, broken
