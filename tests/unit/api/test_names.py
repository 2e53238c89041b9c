"""The two name shapes every layer checks (api/names.py), at their edges."""

from __future__ import annotations

import pytest

from podgroup_operator.api.names import is_dns_label, is_dns_subdomain


@pytest.mark.parametrize("value", ["a", "team-a", "0", "a" * 63])
def test_namespace_names(value: str) -> None:
    assert is_dns_label(value)


@pytest.mark.parametrize("value", ["", "a.b", "Team", "-a", "a-", "a" * 64, "a\n", "a/b"])
def test_not_namespace_names(value: str) -> None:
    assert not is_dns_label(value)


@pytest.mark.parametrize("value", ["train", "a.b-c.d", "x" * 253, "nvidia.com"])
def test_object_names(value: str) -> None:
    assert is_dns_subdomain(value)


@pytest.mark.parametrize(
    "value",
    # "train\n": a `$` at the end of a pattern accepts a trailing newline; fullmatch does not.
    ["", "Train", "a..b", ".a", "a.", "x" * 254, "train\n", "a_b", ".."],
)
def test_not_object_names(value: str) -> None:
    assert not is_dns_subdomain(value)
