"""``twin.core.perprocess``: one object per process and key (made again in a forked
child, on a new key, when it died), and the time-to-live cache of the token lookups."""
from __future__ import annotations

import multiprocessing
import os
import threading
from typing import Any

import pytest

from twin.core.perprocess import PerProcess, TtlCache


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_object_per_key_made_again_when_the_key_changes() -> None:
    made: list[str] = []
    holder: PerProcess[object] = PerProcess(lambda key: made.append(key) or object())
    first = holder.get("redis://a/1")
    assert holder.get("redis://a/1") is first
    assert holder.peek() is first
    second = holder.get("redis://a/2")
    assert second is not first and made == ["redis://a/1", "redis://a/2"]
    holder.clear()
    assert holder.peek() is None
    assert holder.get("redis://a/2") is not second and len(made) == 3


def test_concurrent_first_callers_share_one_object() -> None:
    made: list[int] = []
    gate = threading.Barrier(8)
    holder: PerProcess[int] = PerProcess(lambda key: made.append(1) or len(made))
    seen: list[int] = []

    def call() -> None:
        gate.wait()
        seen.append(holder.get("k"))

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert made == [1] and seen == [1] * 8


def test_a_dead_object_is_replaced() -> None:
    holder: PerProcess[dict[str, bool]] = PerProcess(lambda key: {"alive": True},
                                                     alive=lambda obj: obj["alive"])
    first = holder.get()
    first["alive"] = False
    assert holder.get() is not first


def _child(holder: PerProcess[tuple[int, int]], parent_obj_id: int,
           out: Any) -> None:
    obj = holder.get("k")
    out.put((holder.peek() is obj, id(obj) != parent_obj_id, obj[0] == os.getpid()))


def test_a_forked_child_makes_its_own_object() -> None:
    """A child must not use its parent's sockets: the object it inherited is not
    handed out there (``peek`` is None), ``get`` makes one of the child's own."""
    holder: PerProcess[tuple[int, int]] = PerProcess(lambda key: (os.getpid(), 0))
    parent = holder.get("k")
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    proc = ctx.Process(target=_child, args=(holder, id(parent), out))
    proc.start()
    fresh, other, own_pid = out.get(timeout=30)
    proc.join(30)
    assert proc.exitcode == 0
    assert fresh and own_pid and other
    assert holder.get("k") is parent  # the parent keeps its own


def test_entries_expire_after_their_own_time_to_live() -> None:
    clock = Clock()
    cache: TtlCache[str] = TtlCache(clock=clock)
    cache.put("short", "a", ttl=1.0)
    cache.put("long", "b", ttl=5.0)
    clock.now += 0.999
    assert cache.get("short") == "a" and cache.get("long") == "b"
    clock.now += 0.001
    assert cache.get("short") is None and cache.get("long") == "b"
    clock.now += 4.0
    assert cache.get("long") is None
    assert cache.get("never") is None


def test_pop_and_clear_forget_entries() -> None:
    cache: TtlCache[int] = TtlCache(clock=Clock())
    cache.put("a", 1, ttl=10)
    cache.put("b", 2, ttl=10)
    cache.pop("a")
    cache.pop("missing")
    assert cache.get("a") is None and cache.get("b") == 2
    cache.clear()
    assert len(cache) == 0


def test_a_full_cache_starts_over_instead_of_growing() -> None:
    cache: TtlCache[int] = TtlCache(max_entries=3, clock=Clock())
    for i in range(3):
        cache.put(i, i, ttl=10)
    cache.put(1, 10, ttl=10)  # replacing a key does not count as growing
    assert len(cache) == 3 and cache.get(1) == 10
    cache.put("new", 4, ttl=10)
    assert len(cache) == 1 and cache.get("new") == 4 and cache.get(0) is None


def test_max_entries_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        TtlCache(max_entries=0)
