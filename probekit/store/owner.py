"""Who computes a stored run: its owner process and heartbeat, so a killed run is seen as ``interrupted``.

Any table of runs with the columns ``run_id, status, created_at, message, owner_host, owner_pid, owner_start,
heartbeat_at`` (benchmark runs, DisKnE runs) uses these helpers. A ``running`` run whose owner is gone (same
host: no such process, or another process under its pid), that names no owner (an older probekit), or whose
heartbeat is older than ``PROBEKIT_STALE_RUN_S`` seconds (default 6 h; the only test for another host) is
marked ``interrupted`` by :func:`mark_stale`; :func:`claim` lets the next start take it over, and only one
process wins.
"""

from __future__ import annotations

import os
import socket
import time
from datetime import UTC, datetime
from pathlib import Path

from .. import config

UNFINISHED = ("cancelled", "failed", "interrupted")
"""Statuses a start with the same settings resumes (a ``running`` run belongs to a live process)."""
STALE_RUN_S = config.STALE_RUN_S
"""Default for ``PROBEKIT_STALE_RUN_S``: a running run silent this long is taken as interrupted."""
HEARTBEAT_S = 60.0
"""At most this often a running run renews its heartbeat."""
OWNER_COLUMNS = ("owner_host", "owner_pid", "owner_start", "heartbeat_at")


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def stale_after() -> float:
    """Seconds without a heartbeat after which a running run counts as interrupted (``PROBEKIT_STALE_RUN_S``,
    read by :func:`probekit.config.stale_run_s`)."""
    return config.stale_run_s()


def process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, from /proc), or None where that is unknown."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
        return stat[stat.rindex(")") + 2:].split()[19]
    except (OSError, ValueError, IndexError):
        return None


def owner() -> dict:
    """This process as a run's owner."""
    return {"owner_host": socket.gethostname(), "owner_pid": os.getpid(), "owner_start": process_start(os.getpid())}


def owner_alive(host, pid, start) -> bool | None:
    """Whether the process that owns a run still runs: None when it cannot be told (another host, no owner)."""
    if pid is None or host != socket.gethostname():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    now_start = process_start(int(pid))
    return not (start and now_start and now_start != start)  # the pid was reused by a newer process


def mark_stale(store, table: str) -> list[str]:
    """Mark ``interrupted`` every running run of ``table`` whose owner is gone or whose heartbeat is stale."""
    limit = stale_after()
    marked = []
    rows = store.fetch(f"SELECT run_id, owner_host, owner_pid, owner_start, coalesce(heartbeat_at, created_at) "
                       f"FROM {table} WHERE status = 'running'")
    for run_id, host, pid, start, beat in rows:
        age = (now() - beat).total_seconds() if beat is not None else float("inf")
        alive = owner_alive(host, pid, start)
        if pid is None:
            why = "no owner recorded (started by an older probekit)"
        elif alive is False:
            why = f"its process {pid} on {host} is gone"
        elif age > limit:
            why = f"no heartbeat for {age / 3600:.1f} h (PROBEKIT_STALE_RUN_S={limit:g})"
        else:
            continue
        with store.transaction() as cur:
            # only if nobody beat or took it over since it was read
            n = cur.execute(f"UPDATE {table} SET status = 'interrupted', message = ? WHERE run_id = ? AND status = "
                            f"'running' AND coalesce(heartbeat_at, created_at) IS NOT DISTINCT FROM ?",
                            [f"interrupted: {why}; the next start with the same settings resumes it", run_id, beat]
                            ).fetchone()[0]
        if n:
            marked.append(run_id)
    return marked


def claim(store, table: str, run_id: str) -> bool:
    """Take over an unfinished run (cancelled, failed, interrupted) for this process; False when another
    process took it first."""
    me = owner()
    with store.transaction() as cur:
        n = cur.execute(f"UPDATE {table} SET status = 'running', message = NULL, owner_host = ?, owner_pid = ?, "
                        f"owner_start = ?, heartbeat_at = ? WHERE run_id = ? AND status IN "
                        f"({', '.join('?' * len(UNFINISHED))})",
                        [me["owner_host"], me["owner_pid"], me["owner_start"], now(), run_id, *UNFINISHED]
                        ).fetchone()[0]
    return bool(n)


class Heartbeat:
    """Renews a running run's heartbeat, at most every ``every`` seconds (call it as often as you like)."""

    def __init__(self, store, table: str, run_id: str | None, every: float | None = None):
        self.store, self.table, self.run_id = store, table, run_id
        self.every, self.last = HEARTBEAT_S if every is None else every, time.monotonic()

    def __call__(self) -> None:
        if self.run_id is None or time.monotonic() - self.last < self.every:
            return
        self.last = time.monotonic()
        with self.store.transaction() as cur:
            cur.execute(f"UPDATE {self.table} SET heartbeat_at = ? WHERE run_id = ? AND status = 'running'",
                        [now(), self.run_id])
