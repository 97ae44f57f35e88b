"""DuckDB storage shared by every component: one connection per process, a cursor per caller.

DuckDB lets one process hold the write lock, so the app (or a CLI call) opens the file once through
:func:`get_store` and every session/thread works on its own ``cursor()``. Each component (runs,
annotations, …) has its migrations in :mod:`probekit.store.schema` and gets the store through
:func:`component_store`, which applies them; the ``schema_version`` table records how far each
component's schema has been migrated. Only parameterised SQL is used with user values.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import duckdb

from .. import config
from ..errors import ProbekitError
from .schema import MIGRATIONS

_STORES: dict[str, Store] = {}
_STORES_LOCK = threading.Lock()


class Store:
    def __init__(self, path: str | Path):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = duckdb.connect(self.path)
        except duckdb.IOException as e:
            raise ProbekitError(
                f"cannot open the database {self.path}: {str(e).splitlines()[0]}. Another probekit process "
                "(the app, or a CLI call) probably holds it; stop it or set PROBEKIT_DB to another file."
            ) from None
        self._lock = threading.RLock()
        self._migrated: set[str] = set()
        with self._lock:
            self._con.execute("CREATE TABLE IF NOT EXISTS schema_version ("
                              "component VARCHAR PRIMARY KEY, version INTEGER NOT NULL, "
                              "applied_at TIMESTAMP DEFAULT current_timestamp)")

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor of its own for a session or thread (DuckDB connections are not shared safely)."""
        return self._con.cursor()

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """One short transaction on a fresh cursor; rolled back on any error."""
        cur = self.cursor()
        try:
            cur.execute("BEGIN TRANSACTION")
            yield cur
            cur.execute("COMMIT")
        except BaseException:
            try:
                cur.execute("ROLLBACK")
            except duckdb.Error:
                pass
            raise
        finally:
            cur.close()

    def schema_version(self, component: str) -> int:
        cur = self.cursor()
        try:
            rows = cur.execute("SELECT version FROM schema_version WHERE component = ?", [component]).fetchall()
        finally:
            cur.close()
        return rows[0][0] if rows else 0

    def ensure_schema(self, component: str, migrations: Sequence[str] | None = None) -> None:
        """Apply the migrations of ``component`` not yet applied (each a block of SQL statements);
        by default the component's list in :data:`probekit.store.schema.MIGRATIONS`."""
        if component in self._migrated:
            return
        if migrations is None:
            if component not in MIGRATIONS:
                raise ProbekitError(f"unknown store component {component!r}; available: {', '.join(MIGRATIONS)}")
            migrations = MIGRATIONS[component]
        with self._lock:
            current = self.schema_version(component)
            for version, sql in enumerate(migrations, start=1):
                if version <= current:
                    continue
                with self.transaction() as cur:
                    for stmt in (s.strip() for s in sql.split(";")):
                        if stmt:
                            cur.execute(stmt)
                    cur.execute("INSERT OR REPLACE INTO schema_version (component, version) VALUES (?, ?)",
                                [component, version])
            self._migrated.add(component)

    def fetch(self, sql: str, params: Sequence | None = None) -> list[tuple]:
        cur = self.cursor()
        try:
            return cur.execute(sql, params or []).fetchall()
        finally:
            cur.close()

    def fetch_df(self, sql: str, params: Sequence | None = None):
        cur = self.cursor()
        try:
            return cur.execute(sql, params or []).df()
        finally:
            cur.close()

    def close(self) -> None:
        with _STORES_LOCK:
            _STORES.pop(self.path, None)
        self._con.close()


def get_store(path: str | Path | None = None) -> Store:
    """The process-wide store for ``path`` (default ``PROBEKIT_DB``)."""
    key = str(path or config.db_path())
    with _STORES_LOCK:
        if key not in _STORES:
            _STORES[key] = Store(key)
        return _STORES[key]


def component_store(component: str) -> Store:
    """The process-wide store with ``component``'s schema migrated (see :mod:`probekit.store.schema`)."""
    store = get_store()
    store.ensure_schema(component)
    return store


def close_all() -> None:
    for s in list(_STORES.values()):
        s.close()
