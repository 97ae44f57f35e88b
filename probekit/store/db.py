"""DuckDB storage shared by every component, opened only while it is used.

DuckDB lets one *process* hold a database file at a time (another process cannot even open it
read-only meanwhile). So that the app and a CLI call (``bench --save`` in a terminal while the app is
open) can share one file, a :class:`Store` opens the file when a read or write starts and closes it
once nothing has used it for :attr:`Store.idle_close` seconds; every caller works on its own cursor of the shared
connection. A process that finds the file held waits (retrying); it gives up, with a message naming the
problem, only when one process has held the file for :attr:`Store.lock_wait` seconds without a break: while the holder
changes (five processes rating in turn) the store is busy, not stuck, and a write waits for its turn.

DuckDB's own file lock is not enough for a file that changes hands this often: a process opening the file while
the previous holder is still closing it (checkpointing its write-ahead log into the file, truncating, removing
the log) can read a half-written file ("Could not read enough bytes") or a state without the holder's last
commit, and then hand out the same sequence numbers again, so that a write acknowledged to one process is
overwritten by another's. Measured with DuckDB 2.0 alone, eight processes each opening, inserting one row and
closing, 150 times, under load: workers crashed reading a truncated file. So every :class:`Store` also holds an
exclusive ``flock`` on ``<database>.lock`` from before it connects until after the connection is closed (shared
by the stores of one process, as DuckDB shares its database there); with it, the same eight processes stored
1,200 of 1,200 rows, each under the process it was acknowledged to. Where ``fcntl`` is missing (Windows) only
DuckDB's lock applies.
So that a busy app (a page polling every half second) cannot
keep the file for ever, a store that has held it for :attr:`Store.max_hold` seconds closes it at the next moment
nobody uses it and waits :data:`YIELD_S` before opening it again: a waiting process (retrying every
:data:`RETRY_S` at most) gets its turn. Each component (runs, annotations, …) has its migrations in
:mod:`probekit.store.schema` and gets the store through :func:`component_store`, which applies them; the
``schema_version`` table records how far each component's schema has been migrated. Only
parameterised SQL is used with user values. The three durations are a store's own when given, else
``PROBEKIT_DB_IDLE_CLOSE_S``, ``PROBEKIT_DB_LOCK_WAIT_S`` and ``PROBEKIT_DB_MAX_HOLD_S``, read by
:mod:`probekit.config` each time they are used.

A full disk is one :class:`~probekit.errors.DiskFullError` naming the file and the space left, from every way in
(a transaction, a cursor's statement, a read, opening the file), never DuckDB's own error: DuckDB reports it as
a ``TransactionException`` when the commit's log cannot be written (the same class as a write conflict, which
callers retry: a full disk would be retried as "busy" for the whole lock wait) and as a ``FatalException`` when a
checkpoint fails, after which the connection refuses everything ("database has been invalidated"). Measured with
DuckDB 2.0 on a full tmpfs: a commit that fails leaves nothing of its transaction (the file reopened after the
space is freed holds exactly the earlier commits), and a checkpoint that fails keeps every commit in the log. So
the store closes an invalidated connection once nobody uses it, and the next use opens the file again: once
space is freed, the same write succeeds, and what was stored before is kept either way.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import duckdb

from .. import config
from ..errors import DiskFullError, ProbekitError, disk_full
from .cursor import Cursor
from .filelock import drop as _drop_file_lock
from .filelock import take as _take_file_lock
from .schema import CHILDREN, MIGRATIONS

YIELD_S = 0.15
"""After giving the file up for :attr:`Store.max_hold`, how long this process waits before reopening it."""
RETRY_S = 0.05
"""The longest pause between two attempts to open a file another process holds (less than :data:`YIELD_S`)."""

_STORES: dict[str, Store] = {}
_STORES_LOCK = threading.Lock()
_EVERY: weakref.WeakSet[Store] = weakref.WeakSet()
"""Every store of this process, also one made with ``Store(path)`` rather than :func:`get_store`: closed at exit."""


class StoreBusyError(ProbekitError):
    """Another process held the database file for longer than we were willing to wait."""


def _invalidated(error: BaseException) -> bool:
    """Whether DuckDB has given up on this connection (a failed checkpoint, e.g. on a full disk): it must be
    closed and the file opened again."""
    return isinstance(error, duckdb.FatalException) or "has been invalidated" in str(error)


def _holder(message: str) -> str:
    pid = re.search(r"PID (\d+)", message)
    return f" (process {pid.group(1)})" if pid else ""


def _create(path: str) -> None:
    """Create an empty database file at ``path`` in one step. DuckDB creates a new file, then locks it and writes
    its header, so a second process opening the path in between finds "not a valid DuckDB database file"; here
    the file is made under a name of its own and linked into place, complete. Whichever process links first
    wins, the other opens that file."""
    tmp = f"{path}.{os.getpid()}-{threading.get_ident()}.new"
    try:
        duckdb.connect(tmp).close()
        os.link(tmp, path)
    except (OSError, duckdb.Error):  # another process linked first (its file is as good), or no hard links here
        pass  # or no such folder: either way the open that follows creates the file or says why it cannot
    finally:
        for leftover in (tmp, tmp + ".wal"):
            if os.path.exists(leftover):
                os.remove(leftover)


class Store:
    def __init__(self, path: str | Path, *, idle_close: float | None = None, lock_wait: float | None = None,
                 max_hold: float | None = None):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._idle_close, self._lock_wait, self._max_hold = idle_close, lock_wait, max_hold
        _ = self.idle_close, self.lock_wait, self.max_hold  # a bad PROBEKIT_DB_* value fails here, naming it
        self._lock = threading.RLock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._users = 0
        self._generation = 0
        self._opened_at = 0.0
        self._reopen_after = 0.0
        self._migrated: set[str] = set()
        self._invalid = False  # the connection is not to be trusted: closed once unused, then the file reopened
        self._unused = threading.Condition(self._lock)  # notified when the last user gives the connection back
        self._mine = threading.local()  # cursors the current thread holds
        _EVERY.add(self)
        with self.transaction() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS schema_version ("
                        "component VARCHAR PRIMARY KEY, version INTEGER NOT NULL, "
                        "applied_at TIMESTAMP DEFAULT current_timestamp)")

    # ------------------------------------------------------------ opening and closing the file
    @property
    def idle_close(self) -> float:
        """Seconds without any reader or writer after which the file is closed, so another process can use it
        (this store's own, else :func:`probekit.config.db_idle_close_s`)."""
        return config.db_idle_close_s() if self._idle_close is None else self._idle_close

    @property
    def lock_wait(self) -> float:
        """Seconds to keep retrying while the same other process holds the file; the wait starts again when the
        holder changes (this store's own, else :func:`probekit.config.db_lock_wait_s`)."""
        return config.db_lock_wait_s() if self._lock_wait is None else self._lock_wait

    @property
    def max_hold(self) -> float:
        """Seconds of continuous holding after which the file is given up at the next idle moment (this store's
        own, else :func:`probekit.config.db_max_hold_s`)."""
        return config.db_max_hold_s() if self._max_hold is None else self._max_hold

    def _open(self) -> duckdb.DuckDBPyConnection:
        if self.path != ":memory:" and not os.path.exists(self.path):
            _create(self.path)
        deadline = time.monotonic() + self.lock_wait
        delay, holder = 0.02, ""
        while True:
            waiting_on = _take_file_lock(self.path)
            if waiting_on is None:
                try:
                    return duckdb.connect(self.path)
                except duckdb.IOException as e:  # held by a process that does not use the lock file
                    _drop_file_lock(self.path)
                    if (full := disk_full(e, path=self.path)) is not None:
                        raise full from None
                    first = str(e).splitlines()[0]
                    if "lock" not in first.lower():
                        raise StoreBusyError(f"cannot open the database {self.path}: {first}. "
                                             "Check the path and its permissions.") from None
                    waiting_on = _holder(first)
                except BaseException:
                    _drop_file_lock(self.path)
                    raise
            else:
                first = "Could not set lock on file: another process holds it"
            if waiting_on and waiting_on != holder:
                # another process has had its turn since: the store is busy, not stuck; wait on
                holder, deadline = waiting_on, time.monotonic() + self.lock_wait
            if time.monotonic() >= deadline:
                raise StoreBusyError(
                    f"cannot open the database {self.path}: {first}. Another probekit process (the app, or a CLI "
                    f"call) holds it{waiting_on}; wait for it to finish, stop it, or set PROBEKIT_DB to another "
                    "file.") from None
            time.sleep(delay)
            delay = min(delay * 2, RETRY_S)

    @property
    def is_open(self) -> bool:
        return self._con is not None

    def _failed(self, error: BaseException) -> DiskFullError | None:
        """Note what a DuckDB ``error`` of this store's file says; returns it as a :class:`DiskFullError` when the
        disk is full (else None: raise it as it is). After a full disk or an invalidated connection the connection
        is closed once unused and the file opened again: DuckDB 2.0 answers some queries wrongly on a connection
        whose commit failed for want of space (measured: after two failed commits of a row with key 3, ``SELECT *``
        shows the committed rows only but ``max(k)`` with a ``WHERE`` gives 3; on the reopened file both are right),
        and a key press whose number it finds that way would be taken as stored and skipped."""
        full = disk_full(error, path=self.path)
        if full is not None or _invalidated(error):
            with self._lock:
                self._invalid = True
                if self._users == 0:
                    self._generation += 1
                    self._close_connection()
        return full

    def _acquire(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            if self._invalid and not getattr(self._mine, "n", 0):
                # a connection to be replaced: wait until its other users are done with it, then reopen the file
                # (a thread that holds a cursor itself cannot wait for itself: it goes on with the old connection)
                self._unused.wait_for(lambda: self._users == 0 or not self._invalid, timeout=self.lock_wait)
            if self._invalid and self._users == 0:
                self._generation += 1
                self._close_connection()
            if self._con is None:
                pause = self._reopen_after - time.monotonic()
                if pause > 0:  # just gave the file up after a long hold: let a waiting process have it
                    time.sleep(pause)
                self._con = self._open()
                self._opened_at = time.monotonic()
            self._users += 1
            try:
                cur = self._con.cursor()
            except BaseException:
                self._users -= 1
                raise
            self._mine.n = getattr(self._mine, "n", 0) + 1
            return cur

    def _release(self) -> None:
        with self._lock:
            self._users -= 1
            self._mine.n = max(0, getattr(self._mine, "n", 0) - 1)
            if self._users == 0:
                self._unused.notify_all()
            if self._users > 0 or self._con is None:
                return
            self._generation += 1
            generation = self._generation
            idle_close = self.idle_close
            if idle_close <= 0 or self._invalid:
                self._close_connection()
                return
            if time.monotonic() - self._opened_at > self.max_hold:
                self._close_connection()
                self._reopen_after = time.monotonic() + YIELD_S
                return
        timer = threading.Timer(idle_close, self._close_if_idle, args=(generation,))
        timer.daemon = True
        timer.start()

    def _close_if_idle(self, generation: int) -> None:
        with self._lock:
            if self._users == 0 and generation == self._generation:
                self._close_connection()

    def _close_connection(self) -> None:
        self._invalid = False
        if self._con is not None:
            try:
                self._con.close()
            finally:
                self._con = None
                _drop_file_lock(self.path)  # only once DuckDB has finished with the file

    def release_file(self) -> None:
        """Close the file now if nobody is using it (another process may then open it)."""
        with self._lock:
            if self._users == 0:
                self._generation += 1
                self._close_connection()

    # ------------------------------------------------------------ using it
    def cursor(self) -> Cursor:
        """A cursor of its own for a session or thread; ``close()`` it (or use ``with``) when done:
        the file stays open while any cursor is."""
        return Cursor(self, self._acquire())

    @contextmanager
    def transaction(self) -> Iterator[Cursor]:
        """One short transaction on a fresh cursor; rolled back on any error."""
        cur = self.cursor()
        try:
            cur.execute("BEGIN TRANSACTION")
            yield cur
            cur.execute("COMMIT")  # a full disk: DiskFullError (the cursor's execute), nothing of it stored
        except BaseException:
            try:
                cur.raw.execute("ROLLBACK")
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
        full = migrations is None  # only the component's whole list marks it migrated for this process
        if full and component in self._migrated:
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
            if full:
                self._migrated.add(component)

    def tables(self) -> set[str]:
        return {t for (t,) in self.fetch("SELECT table_name FROM duckdb_tables()")}

    def delete_with_children(self, parent: str, run_id: str, *, children: Sequence[str] | None = None) -> int:
        """Delete the row ``run_id`` of ``parent`` and, first, its rows in every child table (by default
        :data:`probekit.store.schema.CHILDREN`; tables absent from this database are skipped); returns how
        many parent rows went (0 or 1).

        DuckDB checks a foreign key against committed data, so the children go in one transaction and the
        parent in the next: a process killed between the two leaves the run with no rows (still consistent;
        deleting it again finishes the job)."""
        children = CHILDREN.get(parent, ()) if children is None else children
        known = set(CHILDREN) | {c for cs in CHILDREN.values() for c in cs}
        for name in (parent, *children):
            if name not in known:  # identifiers come from code, but never format an unknown one into SQL
                raise ProbekitError(f"unknown table {name!r} for delete_with_children")
        present = self.tables()
        with self.transaction() as cur:
            for child in children:
                if child in present:
                    cur.execute(f"DELETE FROM {child} WHERE run_id = ?", [run_id])
        with self.transaction() as cur:
            return cur.execute(f"DELETE FROM {parent} WHERE run_id = ?", [run_id]).fetchone()[0]

    def fetch(self, sql: str, params: Sequence | None = None) -> list[tuple]:
        return self._read(sql, params, lambda result: result.fetchall())

    def fetch_df(self, sql: str, params: Sequence | None = None):
        return self._read(sql, params, lambda result: result.df())

    def _read(self, sql: str, params: Sequence | None, take):
        """``take`` of the statement's result on a cursor of its own; fetching can fail too (an invalidated
        connection), and says a full disk as the statement does."""
        cur = self.cursor()
        try:
            return cur.guarded(lambda: take(cur.raw.execute(sql, params or [])))
        finally:
            cur.close()

    def close(self) -> None:
        with _STORES_LOCK:
            _STORES.pop(self.path, None)
        with self._lock:
            self._generation += 1
            self._users = 0
            self._close_connection()


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


def _close_every_store() -> None:
    """Close every store before the interpreter stops: an idle timer (a daemon thread) that closed a DuckDB
    connection while the interpreter finalises aborts the process ("FATAL: exception not rethrown", exit 134)."""
    close_all()
    for s in list(_EVERY):
        s.close()


atexit.register(_close_every_store)  # close the file cleanly at exit (no idle timer left behind)
