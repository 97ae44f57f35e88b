"""The one in-process memo: least recently used entries leave first, bounded by a number of entries and/or bytes.

>>> m = Memo(max_entries=2)
>>> m.put("a", 1); m.put("b", 2); m.get("a"); m.put("c", 3)
1
>>> sorted(m.keys())
['a', 'c']
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Bound = int | Callable[[], int] | None
"""A number, or a function read at each insertion (a bound that follows a module setting), or None: no bound."""


def _read(bound: Bound) -> int | None:
    return bound() if callable(bound) else bound


class Memo(Generic[K, V]):
    """A thread-safe LRU memo.

    - ``max_entries``: at most this many entries; ``max_bytes``: the sizes (``sizeof(value)``) sum to at most
      this. After an insertion the least recently used entries (a hit counts as a use) leave until both hold,
      but the entry just put is never evicted by its own insertion, unless ``admit_oversize=False`` and it alone
      exceeds ``max_bytes``: then it is not stored at all.
    - ``on_evict(value)`` runs (outside the lock) for every value that leaves by eviction or :meth:`clear`.
    """

    def __init__(self, *, max_entries: Bound = None, max_bytes: Bound = None,
                 sizeof: Callable[[V], int] | None = None, admit_oversize: bool = True,
                 on_evict: Callable[[V], object] | None = None):
        if max_bytes is not None and sizeof is None:
            raise ValueError("a byte bound needs sizeof")
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._sizeof, self._admit_oversize, self._on_evict = sizeof, admit_oversize, on_evict
        self._data: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: K, default: V | None = None) -> V | None:
        """The value under ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return default
            self._data.move_to_end(key)
            return hit[0]

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` under ``key`` as the most recently used entry, then evict down to the bounds."""
        size = self._sizeof(value) if self._sizeof is not None else 0
        max_entries, max_bytes = _read(self.max_entries), _read(self.max_bytes)
        evicted: list[V] = []
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
                if old[0] is not value:
                    evicted.append(old[0])
            if self._admit_oversize or max_bytes is None or size <= max_bytes:
                self._data[key] = (value, size)
                self._bytes += size
            while len(self._data) > 1 and ((max_entries is not None and len(self._data) > max_entries)
                                           or (max_bytes is not None and self._bytes > max_bytes)):
                _, (gone, gone_size) = self._data.popitem(last=False)
                self._bytes -= gone_size
                evicted.append(gone)
        self._evicted(evicted)

    def pop(self, key: K) -> V | None:
        """Remove ``key``'s entry and return its value (None when absent); ``on_evict`` does not run."""
        with self._lock:
            hit = self._data.pop(key, None)
            if hit is None:
                return None
            self._bytes -= hit[1]
            return hit[0]

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            evicted = [v for v, _ in self._data.values()]
            self._data.clear()
            self._bytes = 0
        self._evicted(evicted)

    def _evicted(self, values: list[V]) -> None:
        if self._on_evict is not None:
            for v in values:
                self._on_evict(v)

    @property
    def bytes(self) -> int:
        """The summed sizes of the entries kept (0 without ``sizeof``)."""
        with self._lock:
            return self._bytes

    def keys(self) -> list[K]:
        """The keys, least recently used first."""
        with self._lock:
            return list(self._data)

    def values(self) -> list[V]:
        """The values, least recently used first."""
        with self._lock:
            return [v for v, _ in self._data.values()]

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)


__all__ = ["Memo"]
