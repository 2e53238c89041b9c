"""Kubernetes resource quantities ("500m", "4Gi", "1e3"), parsed exactly.

The pure layers may not import the Kubernetes client, and the scheduler wants integers: every
quantity becomes an exact `Decimal` here and an integer count of milli-units where arithmetic
happens (kube-scheduler does the same with MilliValue), so sums never drift.
"""

import math
import re
from decimal import Decimal, InvalidOperation, Overflow
from typing import Any

from podgroup_operator.api.limits import MAX_MILLI, MAX_QUANTITY

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
"""The apiserver's own quantity grammar."""

NON_NEGATIVE_QUANTITY_PATTERN = QUANTITY_PATTERN.replace(r"^(\+|-)?", r"^\+?", 1)
"""The same grammar without a minus sign: resource amounts are never negative (CRD schema)."""

_RE = re.compile(QUANTITY_PATTERN)
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)")
_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity; the message says what a valid one looks like."""


class QuantityTooLargeError(QuantityError):
    """A quantity so large (`1e999999999`) that even exact decimal arithmetic overflows."""


TOO_LARGE_HINT = (
    f"resource amounts must be at most {MAX_QUANTITY} (Kubernetes computes them as 64-bit "
    "milli-units); use a realistic amount such as '64', '500m' or '256Gi'"
)
"""The fix named by every refusal of an oversized quantity."""


def parse_quantity(value: str | int | float) -> Decimal:
    """Parse a quantity into an exact Decimal; raise QuantityError with a fix-it message."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity; use a number or a string like '500m'")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a finite quantity")
        return Decimal(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity; use a string like '500m', '4Gi' or '2'")
    text = value.strip()
    if not _RE.match(text):
        raise QuantityError(
            f"{value!r} is not a Kubernetes quantity; use a number with an optional suffix, "
            "like '500m', '2', '4Gi' or '1e3'"
        )
    number = _NUMBER.match(text)
    assert number is not None  # the full pattern matched, so its numeric prefix does too
    mantissa, suffix = text[: number.end()], text[number.end() :]
    try:
        base = Decimal(mantissa)
        if suffix in _SUFFIX:  # before the exponent form: "1E" is exa, "1Ei" exbi
            return base * _SUFFIX[suffix]
        return base * (Decimal(10) ** Decimal(suffix[1:]))
    except Overflow:
        raise QuantityTooLargeError(f"{value!r} is too large; {TOO_LARGE_HINT}") from None
    except (InvalidOperation, KeyError) as exc:  # pragma: no cover - guarded by the pattern
        raise QuantityError(f"{value!r} is not a Kubernetes quantity") from exc


def to_milli(value: str | int | float | Decimal) -> int:
    """A quantity as whole milli-units, rounded up as the apiserver's MilliValue does.

    Saturates at +-MAX_MILLI like MilliValue does, so a pod or a PodGroup stored with an absurd
    amount (`1e30`) is simply too big to fit anywhere instead of breaking the arithmetic.
    """
    try:
        amount = value if isinstance(value, Decimal) else parse_quantity(value)
    except QuantityTooLargeError:
        return MAX_MILLI if not str(value).lstrip().startswith("-") else -MAX_MILLI
    if amount.is_nan():
        raise QuantityError(f"{value!r} is not a quantity")
    if amount.is_infinite() or abs(amount) > MAX_QUANTITY:
        return MAX_MILLI if amount > 0 else -MAX_MILLI
    return math.ceil(amount * 1000)


def format_milli(milli: int, resource: str = "") -> str:
    """Render milli-units for people: cores stay decimal, memory-like resources use binary units."""
    if milli % 1000:
        return f"{milli}m"
    whole = milli // 1000
    if resource in ("memory", "ephemeral-storage") or resource.startswith(
        ("requests.memory", "hugepages-")
    ):
        for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if whole >= factor and whole % factor == 0:
                return f"{whole // factor}{suffix}"
    return str(whole)


COVERAGE_ERRORS_JOIN = "; and "
"""How the model joins several coverage errors into the one message pydantic carries."""


def coverage_errors(total: Any, minimum: Any) -> list[str]:
    """The rule "totalResources covers minResources", with its one message per resource.

    A gang that may reserve less than it needs to start could never run: the webhook, the
    model and the quota ledger all ask this function. Values that do not parse are the fields'
    own errors and are skipped here, as is anything that is not a map."""
    if not isinstance(total, dict) or not isinstance(minimum, dict):
        return []
    errors = []
    for name, value in minimum.items():
        try:
            need = parse_quantity(value)
            have = parse_quantity(total.get(name, 0))
        except (QuantityError, TypeError):
            continue
        if have < need:
            errors.append(
                f"spec.totalResources.{name}: {total.get(name, 0)} is below "
                f"spec.minResources.{name} {value}; raise totalResources or lower minResources"
            )
    return errors
