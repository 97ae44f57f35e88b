"""A cursor of a :class:`~probekit.store.db.Store`'s shared connection: it gives its use back to the store on
``close()``, and every statement through it says a full disk as :class:`~probekit.errors.DiskFullError` (the
store decides, :meth:`Store._failed`, and closes a connection DuckDB has invalidated)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

import duckdb

from ..errors import DiskFullError

T = TypeVar("T")


class Owner(Protocol):
    """What a cursor needs of its store (:class:`probekit.store.db.Store`), which makes it: no import back."""

    def _failed(self, error: BaseException) -> DiskFullError | None: ...

    def _release(self) -> None: ...


class Cursor:
    """A cursor of the shared connection that gives its use back to the store on ``close()``."""

    def __init__(self, store: Owner, cur: duckdb.DuckDBPyConnection):
        self._store, self.raw, self._open = store, cur, True

    def __getattr__(self, name):
        return getattr(self.raw, name)

    def guarded(self, call: Callable[[], T]) -> T:
        """``call()``, with DuckDB's error for a full disk (or an invalidated connection) said as the store says it."""
        try:
            return call()
        except duckdb.Error as e:
            full = self._store._failed(e)
            if full is None:
                raise
            raise full from e

    def execute(self, *args, **kw):
        return self.guarded(lambda: self.raw.execute(*args, **kw))

    def executemany(self, *args, **kw):
        return self.guarded(lambda: self.raw.executemany(*args, **kw))

    def close(self) -> None:
        if self._open:
            self._open = False
            try:
                self.raw.close()
            finally:
                self._store._release()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
