"""The store's keys, their migration, deleting with children, stale runs and partial runs.

Databases "from before" are built here with the old DDL written out, so the migration is tested on what
the field has, not on whatever the current schema list starts with.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import timedelta

import duckdb
import pytest

from probekit import store as store_pkg
from probekit.bench import results, runs
from probekit.errors import ProbekitError
from probekit.store import owner, schema
from probekit.store.db import Store

OLD_RUNS = """
    CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY, created_at TIMESTAMP NOT NULL, finished_at TIMESTAMP,
        status VARCHAR NOT NULL, settings_key VARCHAR NOT NULL, label VARCHAR,
        model VARCHAR NOT NULL, model_source VARCHAR, model_revision VARCHAR,
        dataset VARCHAR NOT NULL, dataset_version VARCHAR, dataset_set VARCHAR, dataset_spec VARCHAR,
        probe VARCHAR NOT NULL, options VARCHAR, vocab VARCHAR, k INTEGER, device VARCHAR,
        probekit_version VARCHAR, n_queries INTEGER, n_relations INTEGER, seconds DOUBLE, timings VARCHAR,
        message VARCHAR
    );
    CREATE TABLE run_results (
        run_id VARCHAR NOT NULL, query_id VARCHAR NOT NULL, relation VARCHAR NOT NULL, subject VARCHAR,
        template VARCHAR, query VARCHAR, golds VARCHAR, gold_ranks VARCHAR, best_gold_rank INTEGER,
        top_ids VARCHAR, top_names VARCHAR, top_scores VARCHAR, gold_length DOUBLE, hard BOOLEAN,
        n_candidates INTEGER
    );
    CREATE INDEX run_results_run ON run_results (run_id);
    CREATE INDEX runs_settings ON runs (settings_key)
"""


def _old_runs_db(path) -> None:
    """A database as probekit left it before keys: schema version 1, a duplicate result, an orphan result,
    and a run left 'running' by a killed process (no owner column then)."""
    con = duckdb.connect(str(path))
    for stmt in OLD_RUNS.split(";"):
        con.execute(stmt)
    con.execute("CREATE TABLE schema_version (component VARCHAR PRIMARY KEY, version INTEGER NOT NULL, "
                "applied_at TIMESTAMP DEFAULT current_timestamp)")
    con.execute("INSERT INTO schema_version (component, version) VALUES ('runs', 1)")
    for run_id, status in (("run-a", "done"), ("run-killed", "running")):
        con.execute("INSERT INTO runs (run_id, created_at, status, settings_key, model, dataset, probe, n_queries) "
                    "VALUES (?, now()::TIMESTAMP, ?, 'key-' || ?, 'm', 'd', 'retrieval', 2)", [run_id, status, run_id])
    rows = [("run-a", "q1", "r", 1), ("run-a", "q1", "r", 7), ("run-a", "q2", "r", 3), ("run-gone", "q1", "r", 2),
            ("run-killed", "q1", "r", 4)]
    for run_id, qid, rel, rank in rows:
        con.execute("INSERT INTO run_results (run_id, query_id, relation, golds, gold_ranks, best_gold_rank, "
                    "top_ids, top_names, top_scores) VALUES (?, ?, ?, '[]', '[]', ?, '[]', '[]', '[]')",
                    [run_id, qid, rel, rank])
    con.close()


def test_migration_adds_keys_to_an_old_database(tmp_path):
    path = tmp_path / "old.duckdb"
    _old_runs_db(path)
    store = Store(path, idle_close=0)
    store.ensure_schema("runs")
    assert store.schema_version("runs") == len(schema.MIGRATIONS["runs"]) >= 2
    kept = store.fetch("SELECT run_id, query_id, best_gold_rank FROM run_results ORDER BY run_id, query_id")
    # each (run, query) once, the first stored row wins; the orphan of a deleted run is gone
    assert kept == [("run-a", "q1", 1), ("run-a", "q2", 3), ("run-killed", "q1", 4)]
    with pytest.raises(duckdb.ConstraintException, match="Duplicate key"):
        with store.transaction() as cur:
            cur.execute("INSERT INTO run_results (run_id, query_id, relation) VALUES ('run-a', 'q2', 'r')")
    with pytest.raises(duckdb.ConstraintException, match="foreign key"):
        with store.transaction() as cur:
            cur.execute("INSERT INTO run_results (run_id, query_id, relation) VALUES ('run-nope', 'q9', 'r')")
    with pytest.raises(duckdb.ConstraintException, match="foreign key"):
        with store.transaction() as cur:  # a run cannot go while its results are there
            cur.execute("DELETE FROM runs WHERE run_id = 'run-a'")
    cols = {c for (c,) in store.fetch("SELECT column_name FROM duckdb_columns() WHERE table_name = 'runs'")}
    assert {"owner_host", "owner_pid", "owner_start", "heartbeat_at"} <= cols
    assert store.fetch("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '%pre_keys%'") == [(0,)]
    store.close()
    # the migrated file reopens with its keys (they are in the file, not only in this connection)
    again = Store(path, idle_close=0)
    again.ensure_schema("runs")
    with pytest.raises(duckdb.ConstraintException):
        with again.transaction() as cur:
            cur.execute("INSERT INTO run_results (run_id, query_id, relation) VALUES ('run-a', 'q1', 'r')")
    again.close()


def test_a_failed_migration_leaves_the_old_database_as_it_was(tmp_path):
    """The rebuild runs in one transaction: when it fails half-way, nothing of it stays."""
    path = tmp_path / "old.duckdb"
    _old_runs_db(path)
    store = Store(path, idle_close=0)
    broken = [*schema.MIGRATIONS["runs"][:1], schema.MIGRATIONS["runs"][1] + ";\nSELECT no_such_column FROM runs"]
    with pytest.raises(duckdb.Error):
        store.ensure_schema("runs", broken)
    assert store.schema_version("runs") == 1
    assert store.fetch("SELECT count(*) FROM run_results") == [(5,)]
    assert store.fetch("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '%pre_keys%'") == [(0,)]
    store.close()


CHILD_ROWS = {
    # component: (child table, parent table, the old schema versions, a child row's columns and values)
    "layers": ("layer_results", "layer_runs", 1,
               "run_id, layer, relation, subset, n, hits_1, hits_5, hits_10", "?, 3, 'r', 'full', 5, 1, 2, 3"),
    "context": ("context_steps", "context_runs", 2, "run_id, mode, query_id, relation, target, permutation, step, "
                "context", "?, 'target', 'q', 'r', 't', 0, 1, 0"),
    "diskne": ("diskne_cells", "diskne_runs", 1,
               "run_id, target, seed, category, f1", "?, 'D1', 0, 'symptoms', 0.5"),
}
PARENT_ROWS = {
    "layer_runs": "INSERT INTO layer_runs (run_id, created_at, settings_key, model, dataset) "
                  "VALUES (?, now()::TIMESTAMP, 'k', 'm', 'd')",
    "context_runs": "INSERT INTO context_runs (run_id, created_at, model, probe) "
                    "VALUES (?, now()::TIMESTAMP, 'm', 'p')",
    "diskne_runs": "INSERT INTO diskne_runs (run_id, created_at, status, settings_key, label, model) "
                   "VALUES (?, now()::TIMESTAMP, 'done', 'k', 'l', 'm')",
}


@pytest.mark.parametrize("component", sorted(CHILD_ROWS))
def test_every_per_run_table_is_deduplicated_and_keyed(tmp_path, component):
    child, parent, old_version, cols, values = CHILD_ROWS[component]
    store = Store(tmp_path / f"{component}.duckdb", idle_close=0)
    store.ensure_schema(component, schema.MIGRATIONS[component][:old_version])
    with store.transaction() as cur:
        cur.execute(PARENT_ROWS[parent], ["r1"])
        for run_id in ("r1", "r1", "gone"):  # a duplicate, and an orphan
            cur.execute(f"INSERT INTO {child} ({cols}) VALUES ({values})", [run_id])
    store.ensure_schema(component)
    assert store.fetch(f"SELECT run_id, count(*) FROM {child} GROUP BY run_id") == [("r1", 1)]
    with pytest.raises(duckdb.ConstraintException, match="Duplicate key"):
        with store.transaction() as cur:
            cur.execute(f"INSERT INTO {child} ({cols}) VALUES ({values})", ["r1"])
    with pytest.raises(duckdb.ConstraintException, match="foreign key"):
        with store.transaction() as cur:
            cur.execute(f"INSERT INTO {child} ({cols}) VALUES ({values})", ["gone"])
    assert store.delete_with_children(parent, "r1") == 1
    assert store.fetch(f"SELECT count(*) FROM {child}") == [(0,)]
    assert store.fetch(f"SELECT count(*) FROM {parent}") == [(0,)]
    store.close()


def test_delete_with_children_refuses_unknown_tables(tmp_path):
    store = Store(tmp_path / "x.duckdb", idle_close=0)
    with pytest.raises(ProbekitError, match="unknown table"):
        store.delete_with_children("runs; DROP TABLE runs", "x")
    with pytest.raises(ProbekitError, match="unknown table"):
        store.delete_with_children("runs", "x", children=["schema_version"])
    store.close()


# ---------------------------------------------------------------- through the runs API
def _run(tiny_encoder, tiny_dataset):
    return runs.run_benchmark(tiny_encoder, tiny_dataset, k=5)


def test_deleting_a_run_deletes_its_results_and_perplexities(tiny_encoder, tiny_dataset):
    run = _run(tiny_encoder, tiny_dataset)
    s = store_pkg.component_store("templates")
    with s.transaction() as cur:
        cur.execute("INSERT INTO prompt_perplexity (run_id, query_id, scorer, method, fill, text, n_tokens, nll, "
                    "created_at) VALUES (?, 'q', 'sc', 'pseudo', 'gold', 't', 3, 1.0, now()::TIMESTAMP)", [run.run_id])
    runs.delete_run(run.run_id)
    for table in ("runs", "run_results", "prompt_perplexity"):
        assert s.fetch(f"SELECT count(*) FROM {table} WHERE run_id = ?", [run.run_id]) == [(0,)], table


def test_a_run_stores_each_query_once(tiny_encoder, tiny_dataset):
    """Storing a relation twice (two processes resuming one run) is refused by the key, not silently doubled."""
    run = _run(tiny_encoder, tiny_dataset)
    with pytest.raises(duckdb.ConstraintException):
        results.insert_results(run.run_id, run.frame.iloc[:2])
    assert len(runs.load_run(run.run_id).frame) == len(tiny_dataset)


def test_repeated_query_ids_are_refused_before_the_work(tiny_encoder, tiny_dataset):
    from dataclasses import replace

    from probekit.datasets import Dataset

    q = tiny_dataset.queries
    twice = Dataset(name="twice", queries=[*q, replace(q[0], golds=("x",))], templates=tiny_dataset.templates)
    with pytest.raises(ProbekitError, match=r"query id .* appears twice"):
        runs.run_benchmark(tiny_encoder, twice, k=5)
    assert results.store().fetch("SELECT count(*) FROM runs") == [(0,)]


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _as_killed(run_id: str, *, pid: int, beat_age_s: float = 0.0, host: str | None = None) -> None:
    """Make a stored run look like one whose process was killed mid-run (last relation never stored)."""
    s = results.store()
    last = s.fetch("SELECT max(relation) FROM run_results WHERE run_id = ?", [run_id])[0][0]
    s.fetch("DELETE FROM run_results WHERE run_id = ? AND relation = ?", [run_id, last])
    with s.transaction() as cur:
        cur.execute("UPDATE runs SET status = 'running', finished_at = NULL, owner_pid = ?, "
                    "owner_host = coalesce(?, owner_host), owner_start = NULL, heartbeat_at = ? WHERE run_id = ?",
                    [pid, host, results.now() - timedelta(seconds=beat_age_s), run_id])


def test_a_killed_run_is_listed_interrupted_and_resumed(tiny_encoder, tiny_dataset, capsys):
    from probekit import cli

    run = _run(tiny_encoder, tiny_dataset)
    _as_killed(run.run_id, pid=_dead_pid())
    listed = runs.list_runs()
    assert listed.set_index("run_id").status[run.run_id] == "interrupted"
    meta = runs.get_run(run.run_id)
    assert "process" in meta["message"] and "gone" in meta["message"]
    assert cli.main(["runs", "list"]) == 0
    out, err = capsys.readouterr()
    assert "interrupted" in out and "bench --save" in err
    stages = []
    again = runs.run_benchmark(tiny_encoder, tiny_dataset, k=5, progress=lambda d, t, s: stages.append(s))
    assert again.run_id == run.run_id and again.meta["status"] == "done"
    assert any(s.startswith(f"resuming interrupted run {run.run_id}") for s in stages)
    assert again.meta["owner_pid"] == os.getpid()
    assert len(again.frame) == len(tiny_dataset) == len(set(again.frame.query_id))


def test_a_silent_run_on_another_host_is_interrupted_after_the_stale_limit(tiny_encoder, tiny_dataset, monkeypatch):
    run = _run(tiny_encoder, tiny_dataset)
    _as_killed(run.run_id, pid=1, host="elsewhere", beat_age_s=120)
    assert runs.list_runs().set_index("run_id").status[run.run_id] == "running"  # 2 min < 6 h
    monkeypatch.setenv("PROBEKIT_STALE_RUN_S", "60")
    assert runs.list_runs().set_index("run_id").status[run.run_id] == "interrupted"
    assert "no heartbeat" in runs.get_run(run.run_id)["message"]
    monkeypatch.setenv("PROBEKIT_STALE_RUN_S", "soon")
    with pytest.raises(ProbekitError, match="PROBEKIT_STALE_RUN_S must be a number"):
        runs.list_runs()


def test_a_run_live_in_another_process_is_neither_taken_over_nor_deleted(tiny_encoder, tiny_dataset):
    run = _run(tiny_encoder, tiny_dataset)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _as_killed(run.run_id, pid=live.pid)
        assert runs.list_runs().set_index("run_id").status[run.run_id] == "running"
        with pytest.raises(ProbekitError, match=f"running in process {live.pid}"):
            runs.delete_run(run.run_id)
        other = runs.run_benchmark(tiny_encoder, tiny_dataset, k=5)
        assert other.run_id != run.run_id  # a new run, not a second writer on the live one
    finally:
        live.kill()
        live.wait()
    # once that process is gone, the run is interrupted and can be deleted
    assert runs.list_runs().set_index("run_id").status[run.run_id] == "interrupted"
    runs.delete_run(run.run_id)


def test_pid_reuse_does_not_keep_a_run_alive(tiny_encoder, tiny_dataset):
    """The owner is recorded with its process's start time: another process under the same pid is not it."""
    run = _run(tiny_encoder, tiny_dataset)
    _as_killed(run.run_id, pid=os.getpid())
    with results.store().transaction() as cur:
        cur.execute("UPDATE runs SET owner_start = 'an-earlier-process' WHERE run_id = ?", [run.run_id])
    if owner.process_start(os.getpid()) is None:
        pytest.skip("no /proc here: process start times are unknown")
    assert runs.list_runs().set_index("run_id").status[run.run_id] == "interrupted"


# ---------------------------------------------------------------- annotation sessions from partial runs
def test_annotations_refuse_an_unfinished_run_unless_allowed(tiny_encoder, tiny_dataset, capsys):
    from probekit import annotations as ann
    from probekit import cli

    run = _run(tiny_encoder, tiny_dataset)
    _as_killed(run.run_id, pid=_dead_pid())
    n_stored = len(runs.load_run(run.run_id).frame)
    with pytest.raises(ProbekitError, match=rf"run {run.run_id} is interrupted, not finished \({n_stored}/8"):
        ann.from_run(run.run_id, name="partial", n_queries=4, k=5)
    code = cli.main(["annotations", "create", "--run", run.run_id, "--name", "partial", "--n", "4", "--k", "5"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--allow-partial" in err[0] and "interrupted" in err[0]
    assert cli.main(["annotations", "create", "--run", run.run_id, "--name", "partial", "--n", "4", "--k", "5",
                     "--allow-partial"]) == 0
    assert "created session" in capsys.readouterr().out
    with results.store().transaction() as cur:
        cur.execute("UPDATE runs SET status = 'cancelled' WHERE run_id = ?", [run.run_id])
    with pytest.raises(ProbekitError, match="is cancelled, not finished"):
        ann.from_run(run.run_id, name="partial", n_queries=4, k=5)
    runs.run_benchmark(tiny_encoder, tiny_dataset, k=5)  # resumed to the end: now accepted
    sid = ann.from_run(run.run_id, name="whole", n_queries=4, k=5)
    assert ann.get_session(sid)["source_run"] == run.run_id


def test_benchmark_page_lists_a_killed_run_as_interrupted(tiny_encoder, tiny_encoder_dir, tiny_dataset):
    from apptest_utils import errors, open_app

    run = _run(tiny_encoder, tiny_dataset)
    _as_killed(run.run_id, pid=_dead_pid())
    at = open_app("benchmark", model=str(tiny_encoder_dir))
    assert errors(at) == []
    listing = next(d.value for d in at.dataframe if "status" in d.value.columns)
    assert listing.set_index("run_id").status[run.run_id] == "interrupted"


def test_a_killed_diskne_run_is_interrupted_and_only_an_unfinished_one_is_taken_over():
    """A killed run must not stay `running` forever in the listings (stale runs are marked `interrupted` on
    start and offered for resume), for DisKnE's fine-tuning runs too: a run whose process is gone is listed
    interrupted and the next start with its settings takes it over; a run live in another process is never
    taken over."""
    from probekit.diskne import runs as dk

    s = dk._store()
    rows = [("dk-dead", "k1", _dead_pid()), ("dk-live", "k2", os.getppid())]  # the parent process is alive
    with s.transaction() as cur:
        for run_id, key, pid in rows:
            cur.execute("INSERT INTO diskne_runs (run_id, created_at, status, settings_key, label, model, owner_host, "
                        "owner_pid, heartbeat_at) VALUES (?, ?, 'running', ?, 'l', 'm', ?, ?, ?)",
                        [run_id, owner.now(), key, socket.gethostname(), pid, owner.now()])
    status = dk.list_runs().set_index("run_id").status
    assert status["dk-dead"] == "interrupted" and status["dk-live"] == "running"
    assert dk._resumable("k2") is None  # alive elsewhere: left to its process
    assert dk._resumable("k1") == "dk-dead"
    taken = s.fetch("SELECT status, owner_pid FROM diskne_runs WHERE run_id = 'dk-dead'")[0]
    assert taken == ("running", os.getpid())
    assert dk._resumable("k1") is None  # now ours and running: a second start does not take it again
