"""docs/reference/events.md: the reasons of the Events and conditions the operator writes.

The vocabulary is `constants.Reason`, `constants.PodReason` and `constants.EventType`, each
member with the docstring under it in constants.py (read from the source: Python keeps no
docstring of an enum member). Where each reason is emitted as an Event is found in the package's
source: a call that names an `EventType` member and a reason member is an Event of that type
and reason; a call that names an `EventType` and passes on a parameter of its function as the
reason takes the reasons the function's callers in the same module pass for it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from podgroup_operator import constants
from podgroup_operator.reference.markdown import code, table

PACKAGE = Path(constants.__file__).parent
REASON_ENUMS = ("Reason", "PodReason")
"""The enums whose members are reasons of Events (and of conditions)."""


@dataclass(frozen=True)
class Member:
    name: str
    value: str
    doc: str


@cache
def enum_members(class_name: str) -> tuple[Member, ...]:
    """The members of the enum `class_name` of constants.py, in source order, with the
    docstring under each ("" when it has none)."""
    tree = ast.parse((PACKAGE / "constants.py").read_text())
    (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    members: list[Member] = []
    body = node.body
    for index, statement in enumerate(body):
        if not (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and isinstance(statement.value, ast.Constant)
        ):
            continue
        following = body[index + 1] if index + 1 < len(body) else None
        doc = ""
        if (
            isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            doc = following.value.value
        members.append(Member(statement.targets[0].id, str(statement.value.value), doc))
    return tuple(members)


def _enum_reference(node: ast.AST, enums: tuple[str, ...]) -> tuple[str, str] | None:
    """(enum, member) when `node` is `Enum.MEMBER` or `module.Enum.MEMBER`."""
    if not isinstance(node, ast.Attribute):
        return None
    owner = node.value
    name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
    return (name, node.attr) if name in enums else None


def _references(node: ast.AST, enums: tuple[str, ...]) -> set[tuple[str, str]]:
    return {ref for sub in ast.walk(node) if (ref := _enum_reference(sub, enums)) is not None}


def _arguments(call: ast.Call) -> list[ast.expr]:
    return [*call.args, *(keyword.value for keyword in call.keywords)]


def _callee(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


@dataclass
class Usage:
    """What the source does with one reason."""

    event_types: set[str] = field(default_factory=set)
    emitted_in: set[str] = field(default_factory=set)
    referenced_in: set[str] = field(default_factory=set)


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    names = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def _passed(call: ast.Call, index: int | None, name: str) -> ast.expr | None:
    """The argument `call` passes for the parameter `name` (positional `index`)."""
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    if index is not None and index < len(call.args):
        return call.args[index]
    return None


def _scan_module(module: str, tree: ast.Module, usages: dict[tuple[str, str], Usage]) -> None:
    for reference in _references(tree, REASON_ENUMS):
        usages[reference].referenced_in.add(module)
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    for function in _functions(tree):
        parameters = _parameters(function)
        for call in (n for n in ast.walk(function) if isinstance(n, ast.Call)):
            types = {
                member for arg in _arguments(call) for _, member in _references(arg, ("EventType",))
            }
            if not types:
                continue
            reasons = {ref for arg in _arguments(call) for ref in _references(arg, REASON_ENUMS)}
            for arg in _arguments(call):
                if isinstance(arg, ast.Name) and arg.id in parameters:
                    index = parameters.index(arg.id)
                    for caller in (c for c in calls if _callee(c) == function.name):
                        passed = _passed(caller, index, arg.id)
                        if passed is not None:
                            reasons |= _references(passed, REASON_ENUMS)
            for reason in reasons:
                usages[reason].event_types.update(
                    getattr(constants.EventType, t).value for t in types
                )
                usages[reason].emitted_in.add(module)


@cache
def usages() -> dict[tuple[str, str], Usage]:
    """(enum, member) -> how the package's modules (but constants.py and this package) use it.
    Read once per process: the source does not change under it."""
    found: dict[tuple[str, str], Usage] = defaultdict(Usage)
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module == "constants.py" or module.startswith("reference/"):
            continue
        text = path.read_text()
        if any(f"{enum}." in text for enum in REASON_ENUMS):  # parse only what can name one
            _scan_module(module, ast.parse(text), found)
    return dict(found)


def _modules(names: set[str]) -> str:
    return ", ".join(code(name) for name in sorted(names))


def _reason_table(enum: str, found: dict[tuple[str, str], Usage]) -> str:
    rows = []
    for member in enum_members(enum):
        usage = found.get((enum, member.name), Usage())
        rows.append(
            (
                code(member.value),
                ", ".join(sorted(usage.event_types)),
                _modules(usage.emitted_in),
                _modules(usage.referenced_in - usage.emitted_in),
                member.doc,
            )
        )
    headers = ("Reason", "Event type", "Event emitted in", "Also used in", "Meaning")
    return table(headers, rows)


def _vocabulary_table(enum: str) -> str:
    return table(("Value", "Meaning"), [(code(m.value), m.doc) for m in enum_members(enum)])


def render() -> str:
    """The whole page."""
    found = usages()
    return "\n".join(
        [
            "# Events and reasons\n",
            "The reasons the operator writes on Kubernetes Events and on conditions, generated "
            "from `operator/podgroup_operator/constants.py` (the meaning is each member's "
            "docstring) and from the operator's source (where each is used). A reason with an "
            "Event type is posted as an Event (`kubectl describe` and `kubectl podgroup "
            "describe` show them); the others are reasons of conditions only. Modules are "
            "relative to `operator/podgroup_operator/`.\n",
            "## Event types\n",
            _vocabulary_table("EventType"),
            "## Reasons on PodGroups and their pods\n",
            _reason_table("Reason", found),
            "## Reasons on pods, in kube-scheduler's words\n",
            "The `PodScheduled` condition and the scheduling Events on member pods use exactly "
            "kube-scheduler's reasons, which cluster-autoscaler and dashboards match.\n",
            _reason_table("PodReason", found),
            "## Condition types of a PodGroup\n",
            _vocabulary_table("ConditionType"),
        ]
    )
