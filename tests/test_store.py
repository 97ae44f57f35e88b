"""The store under contention and the one exporter under abuse."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from probekit.errors import ProbekitError
from probekit.store import db, export
from probekit.store.db import Store, StoreBusyError

ROOT = Path(__file__).resolve().parent.parent

WRITER = textwrap.dedent("""
    import sys, time
    from probekit.store.db import Store
    path, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = Store(path, idle_close=0.05, lock_wait=60)
    for i in range(n):
        with store.transaction() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS t (who VARCHAR, i INTEGER)")
            cur.execute("INSERT INTO t VALUES (?, ?)", [who, i])
        time.sleep(0.01)
    print("done", who, flush=True)
""")


def _writer(path: Path, who: str, n: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), who, str(n)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def test_two_processes_write_one_file_in_turn(tmp_path):
    """The app and a CLI call share one database: each opens the file only while it reads or writes, so
    two writing processes both finish and every row of both is stored once."""
    path = tmp_path / "shared.duckdb"
    procs = [_writer(path, "app", 40), _writer(path, "cli", 40)]
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        assert out.startswith("done")
    con = duckdb.connect(str(path))
    rows = con.execute("SELECT who, count(*), count(DISTINCT i) FROM t GROUP BY who ORDER BY who").fetchall()
    con.close()
    assert rows == [("app", 40, 40), ("cli", 40, 40)]


def test_idle_store_releases_the_file(tmp_path):
    """After its last reader or writer, the store closes the file, so another process can open it."""
    store = Store(tmp_path / "a.duckdb", idle_close=0.05)
    store.fetch("SELECT 1")
    deadline = time.monotonic() + 5
    while store.is_open and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not store.is_open
    assert store.fetch("SELECT 42") == [(42,)]  # reopens on demand
    store.close()


def test_a_held_file_gives_one_clear_message(tmp_path):
    """A process that keeps the file open (another app server) makes the store wait, then say so."""
    path = tmp_path / "held.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import duckdb, sys, time
        con = duckdb.connect({str(path)!r})
        print("holding", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().startswith("holding")
        t0 = time.monotonic()
        with pytest.raises(StoreBusyError, match="holds it") as info:
            Store(path, lock_wait=0.5)
        assert time.monotonic() - t0 < 10
        assert "PROBEKIT_DB" in str(info.value) and "\n" not in str(info.value)
    finally:
        holder.kill()
        holder.wait(10)


def test_a_store_holds_the_lock_file_from_connect_until_closed(tmp_path):
    """The rule (probekit.store.filelock): every store holds an exclusive flock on ``<database>.lock`` from before it
    connects until after its connection is closed. Another process's store waits for it and names its holder;
    two stores of one process share the hold (as DuckDB shares the database there), and the last close ends it."""
    from probekit.store import filelock

    if filelock.fcntl is None:
        pytest.skip("no fcntl here: only DuckDB's lock applies")
    path = tmp_path / "locked.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from probekit.store.db import Store
        s = Store({str(path)!r}, idle_close=3600)
        cur = s.cursor()
        print("holding", flush=True)
        sys.stdin.readline()
        cur.close()
        s.close()
        print("closed", flush=True)
        time.sleep(60)
    """)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().startswith("holding")
        with pytest.raises(StoreBusyError, match=f"holds it \\(process {holder.pid}\\)"):
            Store(path, lock_wait=0.3)
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline().startswith("closed")
        first, second = Store(path, idle_close=3600), Store(path, idle_close=3600)  # the holder still runs
        assert first.fetch("SELECT 1") == second.fetch("SELECT 1") == [(1,)]
        first.close()
        assert second.is_open and second.fetch("SELECT 2") == [(2,)]
        second.close()
        assert filelock.lock_path(str(path)) not in filelock.HELD
    finally:
        holder.kill()
        holder.wait(10)


def test_store_keeps_the_file_while_a_cursor_is_open(tmp_path, monkeypatch):
    """The idle closer scheduled by the last release leaves the file open when it fires while a cursor is open
    (and closes it when it fires with none). Its timer is fired by hand, at the moments the test chooses."""
    due = []

    class HandTimer:
        def __init__(self, interval, function, args=()):
            self.daemon = False
            due.append(lambda: function(*args))

        def start(self):
            pass

    monkeypatch.setattr(db.threading, "Timer", HandTimer)
    monkeypatch.setenv("PROBEKIT_DB_MAX_HOLD_S", "3600")  # no early give-up however slow the machine: the timer path
    store = Store(tmp_path / "b.duckdb", idle_close=0.01)  # its schema transaction schedules one closer
    assert len(due) == 1
    cur = store.cursor()
    due.pop()()
    assert store.is_open
    cur.close()
    cur.close()  # twice is harmless
    assert len(due) == 1
    due.pop()()
    assert not store.is_open
    store.close()
    assert store.max_hold == 3600  # read when used, not at import


def test_a_new_database_file_appears_complete(tmp_path):
    """DuckDB creates a new file, then writes its header: a second process opening the path in between found "not a
    valid DuckDB database file" (two writers started at once on a new file: one failed in 2 of 82 runs). The
    store makes the file under a name of its own and links it into place complete; when another process linked
    first, that file is kept as it is, and nothing else is left in the folder."""
    path = tmp_path / "new.duckdb"
    db._create(str(path))
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE mine AS SELECT 42 AS x")
    con.close()
    db._create(str(path))  # as the process that lost the race
    con = duckdb.connect(str(path))
    assert con.execute("SELECT x FROM mine").fetchall() == [(42,)]
    con.close()
    assert [p.name for p in tmp_path.iterdir()] == ["new.duckdb"]


def test_exit_closes_every_store_also_one_made_directly(tmp_path):
    """At exit every store is closed, also one made with ``Store(path)`` rather than ``get_store``: its idle timer
    (a daemon thread) closing the DuckDB connection while the interpreter finalises aborts the process (exit 134)."""
    store = Store(tmp_path / "c.duckdb", idle_close=3600)
    assert store.is_open and store.path not in db._STORES
    db._close_every_store()
    assert not store.is_open


# ---------------------------------------------------------------- the exporter
FRAME = pd.DataFrame({"query_id": ["a", "b"], "hits": [1, 0]})


def test_export_refuses_device_nodes_fifos_and_folders(tmp_path):
    """Renaming over PATH would replace a device or FIFO by a regular file: refused with one clear line,
    and nothing is left behind."""
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    for target in (Path("/dev/null"), fifo, tmp_path):
        with pytest.raises(ProbekitError, match="not a regular file|is a folder"):
            export.write_table(FRAME, target, fmt="csv")
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe.csv"]


def test_export_through_a_symlink_replaces_its_target(tmp_path):
    real = tmp_path / "real.csv"
    real.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    export.write_table(FRAME, link)
    assert link.is_symlink() and real.read_text().startswith("query_id,hits")


def test_export_keeps_umask_and_mode(tmp_path):
    old = os.umask(0o027)
    try:
        new = export.write_table(FRAME, tmp_path / "new.parquet")
    finally:
        os.umask(old)
    assert stat.S_IMODE(new.stat().st_mode) == 0o640
    kept = tmp_path / "kept.csv"
    kept.write_text("x\n")
    kept.chmod(0o604)
    export.write_table(FRAME, kept)
    assert stat.S_IMODE(kept.stat().st_mode) == 0o604
    assert pd.read_parquet(new).equals(FRAME)


def test_failed_export_leaves_no_temp_file_and_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "out.csv"
    target.write_text("previous\n")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)  # the writer (probekit.atomic) calls os.replace
    with pytest.raises(OSError, match="disk full"):
        export.write_table(FRAME, target)
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]
    assert target.read_text() == "previous\n"


def test_export_format_errors_name_the_choices(tmp_path):
    with pytest.raises(ProbekitError, match="unknown export format 'xlsx'.*available: csv, parquet, jsonl"):
        export.write_table(FRAME, tmp_path / "a.xlsx")
    assert export.write_table(FRAME, tmp_path / "a.jsonl").read_text().splitlines()[0] == \
        '{"query_id":"a","hits":1}'
