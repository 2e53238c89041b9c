"""Which gangGroup entries count: the consent rule across namespaces (domain/gang_groups.py)."""

from __future__ import annotations

from typing import Any

import pytest

from podgroup_operator.domain.gang_groups import (
    NO_TRUST,
    GangGroupTrust,
    consents,
    unconsented_warnings,
)


@pytest.mark.parametrize(
    ("listed_list", "trust", "counts"),
    [
        (None, NO_TRUST, False),  # the named group does not exist (yet)
        ([], NO_TRUST, False),
        (["b/y"], NO_TRUST, False),
        (["b/y", "a/other"], NO_TRUST, False),
        (["b/y", "a/x"], NO_TRUST, True),
        (None, GangGroupTrust.of(["a,b"]), True),
        (None, GangGroupTrust.of(["a,c", "b,d"]), False),
    ],
)
def test_an_entry_of_another_namespace_counts_with_consent_or_trust(
    listed_list: list[str] | None, trust: GangGroupTrust, counts: bool
) -> None:
    assert consents(("a", "x"), ("b", "y"), listed_list, trust) is counts


def test_an_entry_of_the_same_namespace_always_counts() -> None:
    assert consents(("a", "x"), ("a", "y"), None)


def test_trust_sets_ignore_blanks_and_sets_of_one() -> None:
    trust = GangGroupTrust.of([" a , b ,", "c", "c,"])
    assert trust.sets == (frozenset({"a", "b"}),)
    assert trust.trusts("b", "a") and not trust.trusts("a", "c")


def _body(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": spec}


def test_admission_warns_of_each_entry_of_another_namespace_naming_its_field() -> None:
    body = _body("a", "x", minMember=1, gangGroup=["a/x", "b/y", "a/z", "c/w"])
    assert unconsented_warnings(None, body) == [
        "spec.gangGroup[1]: b/y is a PodGroup of another namespace; it counts only once its own "
        "gangGroup lists a/x, and until then this gang waits",
        "spec.gangGroup[3]: c/w is a PodGroup of another namespace; it counts only once its own "
        "gangGroup lists a/x, and until then this gang waits",
    ]
    assert unconsented_warnings(None, body, GangGroupTrust.of(["a,b,c"])) == []


def test_admission_does_not_warn_again_for_an_update_that_keeps_the_spec() -> None:
    body = _body("a", "x", minMember=1, gangGroup=["b/y"])
    assert unconsented_warnings(body, body) == []
    assert len(unconsented_warnings(_body("a", "x", minMember=1), body)) == 1


@pytest.mark.parametrize("entries", [None, "b/y", [3, "nope"]])
def test_admission_leaves_malformed_lists_to_validation(entries: Any) -> None:
    assert unconsented_warnings(None, _body("a", "x", gangGroup=entries)) == []
