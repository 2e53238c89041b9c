"""The collector stays off the informers' loads, and what they loaded is frozen afterwards."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from podgroup_operator.adapters import heap
from podgroup_operator.adapters.informers import Informer
from podgroup_operator.adapters.kube import PODS, KubeClient
from podgroup_operator.adapters.slim import slim_pod
from tests.builders import pod
from tests.fakes import FakeApiServer


@pytest.fixture(autouse=True)
def collector() -> Iterator[None]:
    """Each test starts with the collector on and nothing frozen, and leaves it so."""
    gc.unfreeze()
    gc.enable()
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.enable()
    gc.set_threshold(*threshold)


def test_nested_pauses_resume_the_collector_only_when_the_last_ends() -> None:
    with heap.paused():
        assert not gc.isenabled()
        with heap.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # another list is still loading
        loaded = [{"n": i} for i in range(100)]
    assert gc.isenabled()
    assert gc.get_freeze_count() > len(loaded)


def test_a_pause_that_raises_still_resumes_the_collector() -> None:
    with pytest.raises(RuntimeError), heap.paused():
        raise RuntimeError("the list failed")
    assert gc.isenabled()


def test_a_process_that_turned_the_collector_off_keeps_it_off_and_nothing_is_frozen() -> None:
    gc.disable()
    with heap.paused():
        pass
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_frozen_object_is_still_freed_when_nothing_refers_to_it() -> None:
    """Freezing hides objects from the cycle collector, not from reference counting: a store
    entry replaced by a newer version goes at once."""
    freed: list[str] = []

    class Entry(dict[str, Any]):
        def __del__(self) -> None:
            freed.append("entry")

    with heap.paused():
        store = {"default/p": Entry(name="p")}
    assert gc.get_freeze_count() > 0
    store["default/p"] = Entry(name="p, newer")
    assert freed == ["entry"]


def test_configure_raises_the_young_threshold_and_freezes_what_start_up_loaded() -> None:
    heap.configure()
    assert gc.get_threshold()[0] == heap.YOUNG_THRESHOLD
    assert gc.get_freeze_count() > 0


async def test_an_informer_lists_with_the_collector_paused_and_is_synced_after_the_freeze() -> None:
    api = FakeApiServer()
    api.seed(*(pod(f"p{i}", group="g") for i in range(5)))
    kube = KubeClient(api)
    during: list[bool] = []
    list_page = kube.list_page

    async def recording(*args: Any, **kwargs: Any) -> Any:
        during.append(gc.isenabled())
        return await list_page(*args, **kwargs)

    kube.list_page = recording  # type: ignore[method-assign]
    informer = Informer(kube, PODS, slim_pod, page_size=2)
    handled: list[bool] = []
    informer.add_handler(lambda kind, obj, old: handled.append(gc.isenabled()))
    await informer._list()
    assert during == [False, False, False]
    assert handled == [False] * 5  # the fan-out of the first list is part of the load
    assert gc.isenabled() and informer.synced.is_set()
    assert gc.get_freeze_count() > 0
