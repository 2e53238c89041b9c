"""Every reason the gang scheduler refuses a gang with is one the status knows as the
scheduler's (`domain.scheduling_status.SCHEDULER_REASONS`), found in the source: a reason
left out reads as the lifecycle's, and no later verdict reaches the PodGroup's condition."""

from __future__ import annotations

import ast
from pathlib import Path

from podgroup_operator import constants as c
from podgroup_operator.domain.scheduling_status import SCHEDULER_REASONS

PACKAGE = Path(c.__file__).parent
LIFECYCLE_REFUSAL = c.Reason.NOT_ENOUGH_TASKS
"""The one lifecycle reason the scheduler also refuses with (too few members to decide)."""


def _reason(node: ast.AST) -> c.Reason | None:
    """`Reason.X` or `c.Reason.X` as the Reason it names, else None."""
    if not isinstance(node, ast.Attribute):
        return None
    owner = node.value
    named = (isinstance(owner, ast.Name) and owner.id == "Reason") or (
        isinstance(owner, ast.Attribute) and owner.attr == "Reason"
    )
    return c.Reason[node.attr] if named else None


def _tree(path: Path) -> ast.AST:
    return ast.parse(path.read_text(), str(path))


def core_reasons() -> set[c.Reason]:
    """Every reason the pure scheduling core names: its refusals' reasons."""
    found: set[c.Reason] = set()
    for path in (PACKAGE / "scheduling").rglob("*.py"):
        found |= {r for node in ast.walk(_tree(path)) if (r := _reason(node)) is not None}
    return found


def controller_reasons() -> set[c.Reason]:
    """The reasons the scheduler controller refuses with itself: `_refused(key, Reason.X, ..)`
    and `Verdict(..., reason=Reason.X)`."""
    found: set[c.Reason] = set()
    for node in ast.walk(_tree(PACKAGE / "controllers" / "scheduler.py")):
        if not isinstance(node, ast.Call):
            continue
        called = node.func
        name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
        if name == "_refused" and len(node.args) > 1:
            found |= {r for r in [_reason(node.args[1])] if r is not None}
        if name == "Verdict":
            found |= {r for k in node.keywords if k.arg == "reason" and (r := _reason(k.value))}
    return found


def test_the_scan_finds_the_reasons_of_both_parts() -> None:
    assert {c.Reason.NOT_ENOUGH_RESOURCES, c.Reason.WAITING_FOR_QUOTA} <= core_reasons()
    assert {c.Reason.SCHEDULING_GATED, c.Reason.VOLUME_BINDING_FAILED} <= controller_reasons()


def test_every_reason_the_scheduler_refuses_with_is_known_as_the_schedulers() -> None:
    refused_with = core_reasons() | controller_reasons()
    assert refused_with - {LIFECYCLE_REFUSAL} <= SCHEDULER_REASONS, sorted(
        refused_with - {LIFECYCLE_REFUSAL} - SCHEDULER_REASONS
    )
