"""Quantities parse exactly, round up to milli-units like the apiserver, and print for people."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from podgroup_operator.api.limits import MAX_MILLI
from podgroup_operator.api.quantity import (
    NON_NEGATIVE_QUANTITY_PATTERN,
    QUANTITY_PATTERN,
    QuantityError,
    format_milli,
    parse_quantity,
    to_milli,
)


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("2", Decimal(2)),
        ("500m", Decimal("0.5")),
        ("1.5", Decimal("1.5")),
        (".5", Decimal("0.5")),
        ("+1", Decimal(1)),
        ("-1", Decimal(-1)),
        ("1k", Decimal(1000)),
        ("1M", Decimal(10**6)),
        ("1G", Decimal(10**9)),
        ("1T", Decimal(10**12)),
        ("1P", Decimal(10**15)),
        ("1E", Decimal(10**18)),  # exa, not an exponent
        ("1Ki", Decimal(1024)),
        ("1.5Gi", Decimal(3 * 2**29)),
        ("1Ti", Decimal(2**40)),
        ("1Ei", Decimal(2**60)),
        ("1n", Decimal("1e-9")),
        ("1u", Decimal("1e-6")),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("1e-3", Decimal("0.001")),
        ("2.5e+2", Decimal(250)),
        (3, Decimal(3)),
        (1.5, Decimal("1.5")),
    ],
)
def test_parse_is_exact(text: str | int | float, amount: Decimal) -> None:
    assert parse_quantity(text) == amount


@pytest.mark.parametrize(
    "value",
    ["", "abc", "K", "1K", "1ki", "1e", "1.5.5", "1 Gi", "--1", "Gi", "1Gi2", "0x10"],
)
def test_malformed_strings_are_refused_with_examples_of_valid_ones(value: str) -> None:
    with pytest.raises(QuantityError) as caught:
        parse_quantity(value)
    assert repr(value) in str(caught.value)
    assert "'500m'" in str(caught.value)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (True, "is not a quantity"),
        (None, "is not a quantity"),
        ([], "is not a quantity"),
        (float("inf"), "not a finite quantity"),
        (float("nan"), "not a finite quantity"),
    ],
)
def test_other_types_are_refused(value: object, fragment: str) -> None:
    with pytest.raises(QuantityError, match=fragment):
        parse_quantity(value)  # type: ignore[arg-type]


def test_quantity_error_is_a_value_error() -> None:
    assert issubclass(QuantityError, ValueError)


@pytest.mark.parametrize(
    ("value", "milli"),
    [
        ("1", 1000),
        ("250m", 250),
        ("0.1", 100),
        ("1n", 1),  # rounded up, as MilliValue does: a request is never under-counted
        ("1u", 1),
        ("1001u", 2),
        ("1.0001m", 2),
        ("1Ki", 1024000),
        ("1e3", 1000000),
        ("-1.5m", -1),  # ceil toward +infinity, like ScaledValue
        (0, 0),
        (2, 2000),
        (Decimal("0.0005"), 1),
    ],
)
def test_to_milli_rounds_up(value: str | int | Decimal, milli: int) -> None:
    assert to_milli(value) == milli


@pytest.mark.parametrize(
    ("milli", "resource", "text"),
    [
        (1500, "cpu", "1500m"),
        (2000, "cpu", "2"),
        (0, "", "0"),
        (1, "memory", "1m"),
        (1024 * 1000, "memory", "1Ki"),
        (2**30 * 1000, "memory", "1Gi"),
        (3 * 2**40 * 1000, "ephemeral-storage", "3Ti"),
        (2**30 * 1000, "requests.memory", "1Gi"),
        (2**21 * 1000, "hugepages-2Mi", "2Mi"),
        ((2**20 + 1) * 1000, "memory", str(2**20 + 1)),
        (1000 * 1000, "memory", "1000"),
        (2**30 * 1000, "cpu", str(2**30)),  # cores stay decimal
    ],
)
def test_format_milli(milli: int, resource: str, text: str) -> None:
    assert format_milli(milli, resource) == text


@pytest.mark.parametrize("milli", [1, 999, 1000, 1500, 2**30 * 1000, 3 * 2**20 * 1000 + 1000])
@pytest.mark.parametrize("resource", ["cpu", "memory"])
def test_formatted_amounts_parse_back(milli: int, resource: str) -> None:
    assert to_milli(format_milli(milli, resource)) == milli


@pytest.mark.parametrize(
    "value", ["1", "+1", "500m", "1.5Gi", ".5", "1e3", "-1", "-500m", "1K", "abc", "1e", "1ki"]
)
def test_the_patterns_agree_with_the_parser(value: str) -> None:
    try:
        amount: Decimal | None = parse_quantity(value)
    except QuantityError:
        amount = None
    assert (re.match(QUANTITY_PATTERN, value) is not None) == (amount is not None)
    non_negative = amount is not None and amount >= 0
    assert (re.match(NON_NEGATIVE_QUANTITY_PATTERN, value) is not None) == non_negative


@pytest.mark.parametrize("value", ["1e30", 10**40, "1e99999999999", "9999999999999999Ei"])
def test_absurd_quantities_saturate_at_int64_milli_units(value: str | int) -> None:
    """As the apiserver's MilliValue does: a pod stored with such a request fits nowhere
    instead of breaking the scheduler's arithmetic."""
    assert to_milli(value) == MAX_MILLI == 2**63 - 1


def test_an_exponent_that_overflows_decimal_arithmetic_is_a_quantity_error() -> None:
    with pytest.raises(QuantityError, match="too large; resource amounts must be at most"):
        parse_quantity("1e99999999999")
