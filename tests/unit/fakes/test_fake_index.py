"""The stand-in for `kopf.Index` reads the way Kopf's index does."""

from __future__ import annotations

from typing import Any

from tests.builders import pod
from tests.fakes import FakeIndex

KEY = ("default", "gang")


def test_a_missing_key_gives_the_default_and_is_not_contained() -> None:
    index: FakeIndex[tuple[str, str], dict[str, Any]] = FakeIndex()
    assert index.get(KEY) is None
    assert list(index.get(KEY, [])) == []
    assert KEY not in index and len(index) == 0


def test_values_of_one_key_are_listed_once_per_object() -> None:
    a, b = pod("a"), pod("b")
    index = FakeIndex({KEY: [a, b]})
    newer_a = {**a, "status": {"phase": "Running"}}
    index.put(KEY, newer_a)
    assert list(index[KEY]) == [newer_a, b]
    assert dict(index) == {KEY: (newer_a, b)}


def test_removing_the_last_value_removes_the_key() -> None:
    a = pod("a")
    index = FakeIndex({KEY: [a]})
    index.remove(KEY, a)
    assert KEY not in index
    index.remove(KEY, a)  # removing what is gone is harmless, as for Kopf's indexers


def test_objects_without_uid_are_told_apart_by_name() -> None:
    index: FakeIndex[str, dict[str, Any]] = FakeIndex()
    index.put("k", {"metadata": {"name": "a", "namespace": "ns"}})
    index.put("k", {"metadata": {"name": "b", "namespace": "ns"}})
    index.put("k", {"metadata": {"name": "a", "namespace": "ns"}, "v": 2})
    assert [v["metadata"]["name"] for v in index["k"]] == ["a", "b"]
    assert index["k"][0]["v"] == 2
