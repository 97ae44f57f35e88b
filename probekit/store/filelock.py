"""The lock file every :class:`~probekit.store.db.Store` holds from before it connects until its connection is
closed: an exclusive ``flock`` on ``<database>.lock``, shared by the stores of one process (as DuckDB shares the
database there). Why: DuckDB's own file lock let a process open the file while the previous holder was still
closing it (see :mod:`probekit.store.db`).
"""

from __future__ import annotations

import os
import threading

try:
    import fcntl
except ImportError:  # Windows: DuckDB's own lock only
    fcntl = None  # type: ignore[assignment]

HELD: dict[str, list] = {}
"""Lock file path -> [open file descriptor, how many stores of this process hold it]."""
_HELD_LOCK = threading.Lock()


def lock_path(path: str) -> str:
    return os.path.realpath(path) + ".lock"


def take(path: str) -> str | None:
    """Take the exclusive lock on ``path``'s lock file, or share this process's hold of it: ``None`` when held,
    else who holds it (" (process N)", or "" when unknown). ``None`` also where locking is impossible (no
    ``fcntl``, an in-memory database, a folder one cannot write a lock file in): DuckDB's lock still applies."""
    if fcntl is None or path == ":memory:":
        return None
    lock = lock_path(path)
    with _HELD_LOCK:
        if lock in HELD:
            HELD[lock][1] += 1
            return None
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            finally:
                os.close(fd)
            return f" (process {pid})" if pid.isdigit() else ""
        try:  # who holds it, for a waiting process's message; only that: a full disk must not leak the lock
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        except OSError:
            pass
        HELD[lock] = [fd, 1]
        return None


def drop(path: str) -> None:
    """Give back one hold of ``path``'s lock file; the last hold of this process unlocks it."""
    if fcntl is None or path == ":memory:":
        return
    lock = lock_path(path)
    with _HELD_LOCK:
        held = HELD.get(lock)
        if held is None:
            return
        held[1] -= 1
        if held[1] == 0:
            del HELD[lock]
            os.close(held[0])  # closing the descriptor releases the flock
