"""The store across processes: the app and `bench --save` writing one file at the same
time, and what a SIGKILL leaves (what the CLI reported as saved is in the file after reopening)."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import duckdb
import pytest

from tests.conftest import TINY_TRIPLES

ROOT = Path(__file__).resolve().parent.parent

APP = textwrap.dedent("""
    # What the app does while an expert rates: short-lived store use from the Benchmark and Annotate pages.
    import sys, time, pathlib
    from probekit import annotations as ann
    from probekit.bench import runs
    from probekit.store import component_store
    from probekit.types import Query, Ranking
    stop = pathlib.Path(sys.argv[1])
    qs = [Query(id=f"q{i}", subject=f"s{i}", relation="r", template="[X] r [Y] .", golds=("g",)) for i in range(3)]
    rk = [Ranking(query=q, ids=(0, 1, 2), names=("a", "b", "c"), scores=(3.0, 2.0, 1.0), gold_ranks=(None,),
                  n_candidates=3) for q in qs]
    sid = ann.from_rankings(rk, name="while the CLI runs", k=3)
    who = ann.join(sid, "expert")
    items = [i for (i,) in component_store("annotations").fetch(
        "SELECT item_id FROM annotation_items WHERE session_id = ? ORDER BY item_id", [sid])]
    print("ready", sid, flush=True)
    n = 0
    while not stop.exists() or n < 5:
        runs.list_runs()
        event = ann.rate(sid, items[n % len(items)], who, 1 + n % 5)
        n += 1
        print("rated", event, flush=True)
        time.sleep(0.02)
    print("done", n, flush=True)
""")

SLOW_RANK = textwrap.dedent("""
    # `python -m probekit` whose probe takes 0.6 s a relation, so the run spans the app's ratings whatever the load
    import sys, time
    from probekit.cli import main
    from probekit.probes import get_probe
    cls = type(get_probe("retrieval"))
    original = cls.rank
    def rank(self, *a, **kw):
        time.sleep(0.6)
        return original(self, *a, **kw)
    cls.rank = rank
    sys.exit(main(sys.argv[1:]))
""")

BLOCK_SECOND_RELATION = textwrap.dedent("""
    # `python -m probekit` whose probe hangs on the second relation, as if still computing when killed.
    import sys, time
    from probekit.cli import main
    from probekit.probes import get_probe
    cls = type(get_probe("retrieval"))
    original, calls = cls.rank, []
    def rank(self, *a, **kw):
        calls.append(1)
        if len(calls) == 2:
            print("blocked", file=sys.stderr, flush=True)
            time.sleep(600)
        return original(self, *a, **kw)
    cls.rank = rank
    sys.exit(main(sys.argv[1:]))
""")


def _env(tmp_path: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PROBEKIT_DB": str(tmp_path / "shared.duckdb"),
            "PROBEKIT_DB_IDLE_CLOSE_S": "0.05", "PROBEKIT_DB_LOCK_WAIT_S": "60"}


def _lines(stream) -> queue.Queue:
    q: queue.Queue = queue.Queue()

    def pump():
        for line in stream:
            q.put(line)
        q.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return q


def _wait_for(q: queue.Queue, pattern: str, timeout: float = 240) -> re.Match:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        try:
            line = q.get(timeout=1)
        except queue.Empty:
            continue
        if line is None:
            break
        seen.append(line)
        m = re.search(pattern, line)
        if m:
            return m
    raise AssertionError(f"no line matching {pattern!r}; got:\n{''.join(seen[-20:])}")


def _bench_args(model_dir: Path, facts: Path) -> list[str]:
    return ["bench", "--model", str(model_dir), "--dataset", "triples", "--data-dir", str(facts), "--save", "--k", "5"]


@pytest.mark.heavy
def test_app_and_cli_write_one_database_at_the_same_time(tmp_path, tiny_encoder_dir):
    """An expert rating in the app while `bench --save` runs in a terminal: both succeed, nothing is lost
    (every rating the app was told is committed is in the file; the CLI's run is complete)."""
    facts = tmp_path / "facts.csv"
    facts.write_text(TINY_TRIPLES)
    stop = tmp_path / "stop"
    env = _env(tmp_path)
    app = subprocess.Popen([sys.executable, "-c", APP, str(stop)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=env, cwd=ROOT)
    try:
        out = _lines(app.stdout)
        sid = _wait_for(out, r"^ready (\S+)").group(1)
        cli = subprocess.run([sys.executable, "-c", SLOW_RANK, *_bench_args(tiny_encoder_dir, facts), "--format",
                              "json", "--quiet"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        stop.touch()
        assert app.wait(timeout=120) == 0, app.stderr.read()
    finally:
        app.kill()
        app.wait()
    assert cli.returncode == 0, cli.stderr
    run_id = json.loads(cli.stdout)["run_id"]
    acknowledged = []
    while (line := out.get(timeout=10)) is not None:
        if line.startswith("rated "):
            acknowledged.append(int(line.split()[1]))
    con = duckdb.connect(env["PROBEKIT_DB"], read_only=True)
    try:
        events = {e for (e,) in con.execute("SELECT event_id FROM annotation_events WHERE session_id = ?",
                                            [sid]).fetchall()}
        status, started, finished = con.execute("SELECT status, created_at, finished_at FROM runs WHERE run_id = ?",
                                                [run_id]).fetchone()
        n_results = con.execute("SELECT count(DISTINCT query_id), count(*) FROM run_results WHERE run_id = ?",
                                [run_id]).fetchone()
        during = con.execute("SELECT count(*) FROM annotation_events WHERE session_id = ? AND created_at "
                             "BETWEEN ? AND ?", [sid, started, finished]).fetchone()[0]
    finally:
        con.close()
    assert acknowledged and set(acknowledged) == events
    assert status == "done" and n_results == (8, 8)
    assert during >= 1, "the app wrote nothing while the CLI's run was being computed: the test proved nothing"


def test_sigkill_after_a_reported_save_keeps_it_and_resumes(tmp_path, tiny_encoder_dir, capsys, monkeypatch):
    """Committed, not just acknowledged: kill -9 the CLI right after it reports a relation stored; that
    relation is in the file when reopened, the run is listed interrupted, and the next `bench --save` takes
    it over and finishes it (each query once)."""
    from probekit import cli, store
    from probekit.bench import runs

    facts = tmp_path / "facts.csv"
    facts.write_text(TINY_TRIPLES)
    env = _env(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", BLOCK_SECOND_RELATION, *_bench_args(tiny_encoder_dir, facts)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        err = _lines(proc.stderr)
        relation = _wait_for(err, r"relation 1/2 (\S+) · done").group(1)
        proc.send_signal(signal.SIGKILL)  # at once: no time to write anything after the report
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    con = duckdb.connect(env["PROBEKIT_DB"])
    try:
        run_id, status, owner = con.execute("SELECT run_id, status, owner_pid FROM runs").fetchone()
        stored = con.execute("SELECT relation, count(*) FROM run_results GROUP BY relation").fetchall()
    finally:
        con.close()
    assert status == "running" and owner == proc.pid
    assert stored == [(relation, 4)]  # the relation reported as done, all 4 of its queries

    monkeypatch.setenv("PROBEKIT_DB", env["PROBEKIT_DB"])
    store.close_all()
    assert runs.list_runs().set_index("run_id").status[run_id] == "interrupted"
    assert cli.main([*_bench_args(tiny_encoder_dir, facts), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["run_id"] == run_id
    assert f"resuming interrupted run {run_id}: 1 of 2 relations stored (started " in err
    whole = runs.load_run(run_id)
    assert whole.meta["status"] == "done" and len(whole.frame) == 8 == whole.frame.query_id.nunique()
