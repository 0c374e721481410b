"""Per-process holders and caches: one shape for what several apps kept by hand.

* :class:`PerProcess` — one object per process and key (a Redis client per URL, a
  Django cache per configuration, an event-loop thread). A forked child (a Celery
  worker, Daphne's or gunicorn's workers) must not share its parent's sockets, so
  the object is made again when ``os.getpid()`` changes, when the key changes
  (tests that override ``REDIS_URL``) or when ``alive(obj)`` says it died (a
  thread). The fast path reads one attribute without the lock; the object is
  made once under the lock (double-checked), so concurrent first callers share it.
* :class:`TtlCache` — a thread-safe map whose entries expire after their own number
  of seconds on the monotonic clock (token lookups: a revocation reaches every
  process within the time to live). At ``max_entries`` it starts over instead of
  growing: a flood of distinct keys cannot take the memory.

Neither imports Django: both are plain Python, usable from any layer.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["PerProcess", "TtlCache"]

T = TypeVar("T")
V = TypeVar("V")


class PerProcess(Generic[T]):
    """``get(key)`` returns one ``make(key)`` per process and key.

    >>> made = []
    >>> holder = PerProcess(lambda key: made.append(key) or f"client:{key}")
    >>> holder.get("redis://a"), holder.get("redis://a"), made
    ('client:redis://a', 'client:redis://a', ['redis://a'])
    >>> holder.get("redis://b"), made
    ('client:redis://b', ['redis://a', 'redis://b'])
    """

    def __init__(self, make: Callable[[Any], T],
                 alive: Callable[[T], bool] | None = None) -> None:
        self._make = make
        self._alive = alive
        self._lock = threading.Lock()
        self._current: tuple[int, Hashable, T] | None = None

    def _fresh(self, current: tuple[int, Hashable, T] | None, key: Hashable) -> bool:
        return (current is not None and current[0] == os.getpid() and current[1] == key
                and (self._alive is None or self._alive(current[2])))

    def get(self, key: Hashable = None) -> T:
        current = self._current
        if not self._fresh(current, key):
            with self._lock:
                current = self._current
                if not self._fresh(current, key):
                    current = (os.getpid(), key, self._make(key))
                    self._current = current
        assert current is not None
        return current[2]

    def peek(self) -> T | None:
        """The object this process holds now (``None``: none yet, or the parent's)."""
        current = self._current
        return current[2] if current is not None and current[0] == os.getpid() else None

    def clear(self) -> None:
        """Forget the object (the next ``get`` makes a new one); it is not closed."""
        with self._lock:
            self._current = None


class TtlCache(Generic[V]):
    """A per-process map of values that expire ``ttl`` seconds after they are put.

    >>> now = [0.0]
    >>> cache = TtlCache(max_entries=2, clock=lambda: now[0])
    >>> cache.put("a", 1, ttl=5.0); cache.get("a")
    1
    >>> now[0] = 5.0; cache.get("a") is None   # expired at exactly its time to live
    True
    """

    def __init__(self, max_entries: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[Hashable, tuple[float, V]] = {}

    def get(self, key: Hashable) -> V | None:
        """The value, or ``None`` when there is none or it has expired."""
        entry = self._entries.get(key)
        if entry is None or entry[0] <= self._clock():
            return None
        return entry[1]

    def put(self, key: Hashable, value: V, ttl: float) -> None:
        """Keep ``value`` for ``ttl`` seconds (a full cache starts over first)."""
        until = self._clock() + ttl
        with self._lock:
            if key not in self._entries and len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[key] = (until, value)

    def pop(self, key: Hashable) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
