"""docs/reference/cli.md: `podgroup-operator`, each of its subcommands and `kubectl podgroup`,
from their argparse parsers.

The synopsis is written here rather than by argparse's formatter, whose wrapping follows the
terminal's width and whose layout differs between Python versions."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from podgroup_operator import kubectl_plugin
from podgroup_operator.bench import core, e2e, scale, webhook
from podgroup_operator.reference.markdown import code, first_paragraph, table

BENCH_PARSERS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "core": core.build_parser,
    "e2e": e2e.build_parser,
    "scale": scale.build_parser,
    "webhook": webhook.build_parser,
}
"""The parser of each `bench KIND`: `bench` hands the rest of its arguments to the kind's own."""

_DEFAULT_SUFFIX = re.compile(r"\s*\(default: %\(default\)s\)$")
"""What BooleanOptionalAction appends to a help on some Python versions (the table has a
Default column instead)."""


@dataclass(frozen=True)
class Option:
    """One row of a command's table: an option or a positional argument."""

    names: tuple[str, ...]
    value: str
    default: str
    help: str


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    synopsis: str
    options: tuple[Option, ...]
    epilog: str


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    # argparse has no public reader of a parser's arguments.
    return list(parser._actions)


_TYPES: dict[object, str] = {int: "integer", float: "number"}


def _value(action: argparse.Action) -> str:
    """What the option takes: its choices, else its metavar (positionals: their choices only)."""
    if action.nargs == 0:
        return ""
    if action.choices is not None:
        value = " | ".join(code(str(choice)) for choice in action.choices)
    elif not action.option_strings:
        value = ""
    else:
        value = code(str(action.metavar or action.dest.upper()))
    if action.type in _TYPES:
        value += f" ({_TYPES[action.type]})"
    if isinstance(action, argparse._AppendAction):
        value += " (repeatable)"
    elif action.nargs in ("*", "+"):
        value += " (several)"
    return value.strip()


def _default(action: argparse.Action) -> str:
    default = action.default
    if default in (None, argparse.SUPPRESS, [], "") or (default is False and action.nargs == 0):
        return ""
    if isinstance(action, argparse.BooleanOptionalAction):
        return "on" if default else "off"
    return code(str(default))


def _help(action: argparse.Action, prog: str) -> str:
    text = _DEFAULT_SUFFIX.sub("", action.help or "")
    if "%" in text:
        params: dict[str, Any] = {**vars(action), "prog": prog}
        text = text % params
    return text


def _usage_word(action: argparse.Action) -> str:
    if isinstance(action, argparse._SubParsersAction):
        word = "COMMAND"
    elif action.choices is not None:
        word = "{" + ",".join(str(choice) for choice in action.choices) + "}"
    else:
        word = str(action.metavar or action.dest)
    if action.nargs == "*":
        return f"[{word} ...]"
    if action.nargs == "?":
        return f"[{word}]"
    return word


def _command(name: str, parser: argparse.ArgumentParser, summary: str) -> Iterator[Command]:
    """The command `name` and, after it, each of its subcommands (depth first)."""
    options: list[Option] = []
    positionals: list[str] = []
    subcommands: list[tuple[str, argparse.ArgumentParser, str]] = []
    for action in _actions(parser):
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            subcommands.extend(
                (sub, subparser, helps.get(sub, "")) for sub, subparser in action.choices.items()
            )
            positionals.append(_usage_word(action))
            continue
        if not action.option_strings:
            positionals.append(_usage_word(action))
        names = tuple(action.option_strings) or (str(action.metavar or action.dest),)
        options.append(Option(names, _value(action), _default(action), _help(action, name)))
    has_options = any(o.names[0].startswith("-") for o in options)
    synopsis = " ".join([name, *(["[OPTIONS]"] if has_options else []), *positionals])
    yield Command(
        name=name,
        summary=summary or first_paragraph(parser.description),
        synopsis=synopsis,
        options=tuple(options),
        epilog=parser.epilog or "",
    )
    for sub, subparser, help_text in subcommands:
        if sub == "bench":
            yield from _benches(f"{name} {sub}", subparser, help_text)
        else:
            yield from _command(f"{name} {sub}", subparser, help_text)


def _benches(name: str, parser: argparse.ArgumentParser, summary: str) -> Iterator[Command]:
    """`bench` and each `bench KIND`, whose options its own module parses."""
    yield from _command(name, parser, summary)
    (kind,) = [a for a in _actions(parser) if a.dest == "kind"]
    if sorted(kind.choices or ()) != sorted(BENCH_PARSERS):
        raise LookupError(
            f"bench kinds {sorted(kind.choices or ())} differ from the parsers the reference "
            f"knows ({sorted(BENCH_PARSERS)}): add the new kind to BENCH_PARSERS"
        )
    for each in sorted(BENCH_PARSERS):
        bench_parser = BENCH_PARSERS[each]()
        yield from _command(
            f"{name} {each}", bench_parser, first_paragraph(bench_parser.description)
        )


def commands(cli_parser: argparse.ArgumentParser) -> list[Command]:
    """`podgroup-operator` (its parser is `cli_parser`), each subcommand, then `kubectl
    podgroup`."""
    plugin = kubectl_plugin.build_parser()
    return [
        *_command(cli_parser.prog, cli_parser, first_paragraph(cli_parser.description)),
        *_command(plugin.prog, plugin, first_paragraph(plugin.description)),
    ]


def _anchor(name: str) -> str:
    return name.replace(" ", "-")


def render(cli_parser: argparse.ArgumentParser) -> str:
    """The whole page."""
    found = commands(cli_parser)
    out = [
        "# Command line\n",
        "`podgroup-operator` (the operator, its manifests and the developer tools) and "
        "`kubectl podgroup` (a kubectl plugin), generated from their argparse parsers "
        "(`operator/podgroup_operator/cli.py`, `kubectl_plugin.py` and each benchmark's "
        "module). `-h`/`--help` prints the same on every command.\n",
        table(
            ("Command", "What it does"),
            [(f"[`{c.name}`](#{_anchor(c.name)})", c.summary) for c in found],
        ),
    ]
    for command in found:
        out.append(f"## {command.name}\n")
        if command.summary:
            out.append(command.summary + "\n")
        out.append(f"```\n{command.synopsis}\n```\n")
        if command.options:
            rows = [
                (", ".join(code(n) for n in o.names), o.value, o.default, o.help)
                for o in command.options
            ]
            out.append(table(("Option", "Value", "Default", "Description"), rows))
        if command.epilog:
            out.append(f"```\n{command.epilog.strip()}\n```\n")
    return "\n".join(out)
