"""Validate a PodGroup body and report every problem at once, each with its field path.

The CRD schema refuses most bad input already (bounds included, see api/limits.py); what it
cannot express (totalResources below minResources, resource names, quantities too large in their
string form, unknown fields on a cluster whose CRD still keeps them) lands here, in the
validating webhook. Lightweight gangs' labels are checked with the same function
(domain/lightweight.py), so both speak with the same messages. Kueue's `field.ErrorList` is the
model: collect, then raise once at the edge, so a user fixes everything in one round trip.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from podgroup_operator.api.models import PodGroupSpec, PodGroupStatus
from podgroup_operator.api.quantity import coverage_errors

_ONE_YEAR = "one year; use a shorter duration"
LIMIT_REASONS: dict[str, str] = {
    "scheduleTimeoutSeconds": _ONE_YEAR,
    "backoffSeconds": _ONE_YEAR,
    "maxBackoffSeconds": _ONE_YEAR,
    "minMember": "no cluster holds more pods at once; use the gang's real size",
    "maxRestarts": "a gang that broke this often is crash-looping; allow fewer restarts",
    "gangGroup": "they are all placed in one decision; merge them into fewer, larger PodGroups",
}
"""Why each bounded field has its limit and what to do instead, keyed by API field name."""


def _path(loc: tuple[int | str, ...], root: str) -> str:
    path = root
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.startswith("function-") or part in ("str", "int", "float", "bool"):
            continue  # union branch labels of pydantic, not fields
        else:
            path += f".{part}"
    return path


def _known_fields(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The API names allowed next to an unknown field, to suggest the likely intended one."""
    current: Any = model
    for part in loc[:-1]:
        field = next(
            (f for name, f in current.model_fields.items() if part in (name, f.alias)), None
        )
        annotation = getattr(field, "annotation", None)
        candidates = [a for a in getattr(annotation, "__args__", (annotation,)) if a is not None]
        current = next(
            (a for a in candidates if isinstance(a, type) and issubclass(a, BaseModel)), None
        )
        if current is None:
            return []
    return sorted(f.alias or name for name, f in current.model_fields.items())


def _message(error: Any, model: type[BaseModel]) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        known = _known_fields(model, error["loc"])
        return "unknown field; remove it" + (
            f" (known fields: {', '.join(known)})" if known else ""
        )
    if kind in ("greater_than_equal",):
        return f"must be >= {ctx.get('ge')}"
    if kind in ("greater_than",):
        return f"must be > {ctx.get('gt')}"
    if kind in ("less_than_equal", "too_long", "string_too_long"):
        return _too_large(error, kind, ctx)
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be an integer, not {error.get('input')!r}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be an object (a mapping), not {error.get('input')!r}"
    if kind == "list_type":
        return f"must be a list, not {error.get('input')!r}"
    if kind in ("string_type",):
        return f"must be a string, not {error.get('input')!r}"
    if kind == "enum":
        return f"must be one of {ctx.get('expected')}, not {error.get('input')!r}"
    if kind == "string_pattern_mismatch":
        return f"{error.get('input')!r} does not match {ctx.get('pattern')}"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    return str(error["msg"][0].lower() + error["msg"][1:])


def _too_large(error: Any, kind: str, ctx: dict[str, Any]) -> str:
    """The limit, and why it exists: `1000000000000 is too large: at most 31536000 (...)`."""
    field = next((p for p in reversed(error["loc"]) if isinstance(p, str)), "")
    reason = LIMIT_REASONS.get(field)
    value = error.get("input")
    if kind == "less_than_equal":
        head = f"{value!r} is too large: must be at most {ctx.get('le')}"
    elif kind == "too_long":
        head = f"has {ctx.get('actual_length')} entries: at most {ctx.get('max_length')} allowed"
    else:
        head = f"is {len(str(value))} characters long: at most {ctx.get('max_length')} allowed"
    return f"{head} ({reason})" if reason else head


_API_FIELDS = {f.alias or name for name, f in PodGroupSpec.model_fields.items()}


def spec_errors(spec: Any) -> list[str]:
    """Every problem of a PodGroup spec as `spec.field.path: what is wrong and how to fix it`."""
    if not isinstance(spec, dict):
        return [f"spec: must be an object with at least minMember, not {spec!r}"]
    try:
        PodGroupSpec.model_validate(spec)
    except ValidationError as exc:
        errors = []
        for error in exc.errors(include_url=False):
            loc = tuple(error["loc"])
            if not loc and error["type"] == "value_error":
                continue  # the cross-field rule: reported below, even when other fields fail
            message = _message(error, PodGroupSpec)
            field, sep, rest = message.partition(": ")
            if not loc and sep and field in _API_FIELDS:
                # A cross-field rule names its own field first ("totalResources: ...").
                loc, message = (field,), rest
            errors.append(f"{_path(loc, 'spec')}: {message}")
        errors.extend(coverage_errors(spec.get("totalResources"), spec.get("minResources")))
        # pydantic may report one field through several union branches; keep each once.
        return _bounded(list(dict.fromkeys(errors)))
    return []


MAX_ERRORS = 20
"""Errors listed in one answer; a 1,000-entry list of bad names must not make a 1 MB message."""


def _bounded(errors: list[str]) -> list[str]:
    if len(errors) <= MAX_ERRORS:
        return errors
    return [*errors[:MAX_ERRORS], f"... and {len(errors) - MAX_ERRORS} more errors"]


SHOWN_INPUT = 80
"""Characters of a refused value repeated in a message about stored status (a phase can be a
100 KB string: the message must still say which field and what to do)."""


def status_errors(errors: list[dict[str, Any]]) -> list[str]:
    """The errors of `models.salvage_status` as `status.field.path: what was wrong`."""
    lines = []
    for error in errors:
        shown = error.get("input")
        if isinstance(shown, str) and len(shown) > SHOWN_INPUT:
            shown = f"{shown[:SHOWN_INPUT]}... ({len(shown)} chars)"
        elif isinstance(shown, dict | list):
            shown = f"a {type(shown).__name__} of {len(shown)}"
        message = _message({**error, "input": shown}, PodGroupStatus)
        lines.append(f"{_path(tuple(error['loc']), 'status')}: {message}")
    return _bounded(list(dict.fromkeys(lines)))


def update_errors(old: dict[str, Any] | None, body: dict[str, Any]) -> list[str]:
    """Every problem of a PodGroup created (`old` None) or updated: an update that leaves the
    spec as stored has none, whatever the spec holds.

    Why: a PodGroup stored before these rules (or while the webhook was off) kept its spec, and
    every update of it was refused, a label, an owner reference or a controller removing its
    finalizer as much as a change of the spec, so such an object could not even be deleted
    cleanly. Kubernetes ratchets CRD validation the same way (from 1.28). A change to the spec
    is checked whole, so the answer names what else must be fixed with it.
    """
    if old is not None and old.get("spec") == body.get("spec"):
        return []
    return podgroup_errors(body)


def podgroup_errors(body: dict[str, Any]) -> list[str]:
    """Every problem of a whole PodGroup object."""
    if "spec" not in body:
        return ["spec: is required; a PodGroup needs at least spec.minMember"]
    return spec_errors(body["spec"])


def stored_podgroup_errors(body: Mapping[str, Any], exc: ValidationError) -> list[str]:
    """Why a stored PodGroup did not parse (`exc`): every problem of `podgroup_errors`, or the
    model's own words should those rules find none, so that the status reconciler and the
    scheduler never say nothing, and say the same."""
    return podgroup_errors(dict(body)) or [str(exc)]
