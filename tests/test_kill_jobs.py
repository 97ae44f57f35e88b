"""SIGKILL at a random moment after a long job started writing: afterwards nothing half-written reads as complete,
the killed work is listed as interrupted, and the rerun finishes without duplicates."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT


def _kill_when(proc: subprocess.Popen, started, *, budget: float = 240.0, seed: int = 0) -> None:
    """SIGKILL ``proc`` a seeded 0-0.1 s after ``started()`` first holds (the job has begun writing).

    Short beside the work left after each trigger (the corpus index here: 1.7 s after its first table; rewiring:
    398 steps; the layer sweep: the rest of its encodings), so a machine several times faster still kills
    mid-job."""
    deadline = time.monotonic() + budget
    while not started():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the job never started writing"
        time.sleep(0.02)
    time.sleep(random.Random(seed).uniform(0, 0.1))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)


def test_corpus_index_killed_mid_build(tmp_path):
    corpus = tmp_path / "notes.txt"
    lines = [f"aspirin lowers fever in patient {i} and metformin treats diabetes" for i in range(60_000)]
    corpus.write_text("\n".join(lines) + "\n")
    facts = tmp_path / "facts.csv"
    facts.write_text("subject,relation,object\naspirin,may_treat,fever\nmetformin,may_treat,diabetes\n")
    argv = [sys.executable, "-m", "probekit", "corpus", "index", "--corpus", str(corpus), "--dataset", "triples",
            "--data-dir", str(facts), "--quiet", "--format", "json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    from probekit.corpus.index import list_indexes, root_dir

    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _kill_when(proc, lambda: any(p.name.startswith(".tmp-") and (p / "entities.parquet").exists()
                                 for p in root_dir().glob(".tmp-*")))
    assert proc.returncode == -signal.SIGKILL
    listed = list_indexes()
    assert listed and all(r["status"] == "incomplete (interrupted build)" for r in listed), listed
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["documents"] == len(lines) and stats["mentions"] == 4 * len(lines)  # each once, no duplicates
    assert [r["status"] for r in list_indexes()] == ["ok"]  # the killed build's folder was swept
    assert not list(root_dir().glob(".tmp-*"))


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "probekit", *args]


def _popen(argv: list[str], **extra_env: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **extra_env}
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(argv: list[str]) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.heavy
def test_rewire_killed_mid_training_resumes_from_its_checkpoint(tiny_encoder_dir, tmp_path):
    """A killed rewiring run is listed interrupted at once (its process is gone), every checkpoint it left reads
    complete (a half-written one stays in a hidden folder that no listing shows), and the same command again takes
    that run over from its newest checkpoint, saying so: one run, each step logged once, and (CPU training is
    deterministic under the seed) the loss curve and the final weights equal an uninterrupted run's."""
    from safetensors.torch import load_file

    from probekit import rewire

    words = ["aspirin", "fever", "metformin", "diabetes", "lowers", "treats", "patient", "insulin", "pain", "dose"]
    rng = random.Random(0)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(4, 12)))
                                for _ in range(64)) + "\n")
    argv = _cli("rewire", "--model", str(tiny_encoder_dir), "--corpus", str(corpus), "--steps", "40",
                "--checkpoint-every", "3", "--batch-size", "4", "--device", "cpu", "--format", "json", "--quiet")
    whole = tmp_path / "uninterrupted-cache"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROBEKIT_CACHE_DIR": str(whole)}
    ref = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert ref.returncode == 0, ref.stderr
    ref_info = json.loads(ref.stdout)
    ref_log = [json.loads(line) for line in (whole / "rewired" / ref_info["run_id"] / "log.jsonl").open()]

    proc = _popen(argv)
    # killed once a trainer state is saved (step 3), 0-0.1 s on: mid-step, mid-checkpoint, or just after one
    _kill_when(proc, lambda: any(rewire.runs_dir().glob("*/trainer.pt")), seed=1)
    assert proc.returncode == -signal.SIGKILL
    [killed] = [p.name for p in rewire.runs_dir().iterdir()]
    info = rewire.run_info(killed)
    assert info["status"] == "interrupted" and info["damaged"] == []
    steps = [c["step"] for c in info["checkpoints"]]
    assert steps and steps == list(range(3, 3 * len(steps) + 1, 3))  # only whole checkpoints, in order
    assert steps[-1] < 40, "the run finished before the kill: give it more steps"
    assert rewire.list_runs().set_index("run_id").status[killed] == "interrupted"
    killed_log = rewire.load_log(killed)
    assert killed_log.step.is_unique and list(killed_log.step) == list(range(1, len(killed_log) + 1))
    state = __import__("torch").load(rewire.runs_dir() / killed / "trainer.pt", weights_only=False)

    done = subprocess.run(argv, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert any(line.startswith(f"resuming interrupted run {killed} from step {state['step']} of 40 (started ")
               for line in done.stderr.splitlines()), done.stderr
    again = json.loads(done.stdout)
    assert again["status"] == "done" and again["run_id"] == killed  # taken over, not a second run
    assert [p.name for p in rewire.runs_dir().iterdir()] == [killed]
    assert not (rewire.runs_dir() / killed / "trainer.pt").exists()  # a finished run drops its optimizer state
    assert [c["step"] for c in again["checkpoints"]] == [c["step"] for c in ref_info["checkpoints"]]
    log = [json.loads(line) for line in (rewire.runs_dir() / killed / "log.jsonl").open()]
    assert [(r["step"], r["loss"]) for r in log] == [(r["step"], r["loss"]) for r in ref_log]
    ours, theirs = (load_file(next(Path(c["path"]).glob("*.safetensors")))
                    for c in (again["checkpoints"][-1], ref_info["checkpoints"][-1]))
    assert ours.keys() == theirs.keys() and all(ours[k].equal(theirs[k]) for k in ours)  # bit for bit


def _kill_holding_store(proc: subprocess.Popen, sql: str, *, budget: float = 240.0) -> None:
    """SIGKILL ``proc`` once ``sql`` counts a stored row, checking after each of the job's turns with the store file.

    The store's rule: a process holds ``<database>.lock`` (an exclusive ``flock``, its pid written inside) from
    before it connects until its connection is closed, and with ``PROBEKIT_DB_IDLE_CLOSE_S=0`` the job gives the
    file up after each write. So the check alternates with the job: it waits on the lock (blocking: the kernel
    hands it over the moment the job lets go, while the job goes on computing), reads, kills when ``sql`` holds,
    else lets go and waits until the lock file names the job (its next turn has begun). The job stores one
    write between two checks, and the kill lands right after the write that makes ``sql`` true, however fast the
    machine runs it (polling with a pause let a fast machine store every relation between two checks)."""
    import duckdb
    fcntl = pytest.importorskip("fcntl")
    from probekit import config
    from probekit.store.filelock import lock_path

    db = str(config.db_path())
    lock = lock_path(db)
    Path(lock).parent.mkdir(parents=True, exist_ok=True)
    table = re.search(r"FROM (\w+)", sql)[1]
    deadline = time.monotonic() + budget
    while True:
        assert proc.poll() is None, f"the job ended before storing anything: {proc.stderr and proc.stderr.read()}"
        assert time.monotonic() < deadline, "the job never stored a row"
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # the job writes nothing while this is held
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            if os.path.exists(db):
                con = duckdb.connect(db, read_only=True)
                try:
                    tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
                    hit = table in tables and con.execute(sql).fetchone()[0]
                finally:
                    con.close()
                if hit:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait(timeout=60)
                    return
        finally:
            os.close(fd)  # releases the flock
        # the job's turn: it writes its pid into the lock file once it holds the lock
        while Path(lock).read_text() != str(proc.pid):
            assert proc.poll() is None, f"the job ended: {proc.stderr and proc.stderr.read()}"
            assert time.monotonic() < deadline, "the job never took the store"
            time.sleep(0.002)


def _cell_results(db) -> dict:
    """Each grid cell's stored results, as a comparable text, read from the store at ``db``."""
    from probekit import store

    s = store.get_store(db)
    rows = s.fetch("SELECT e.cell_key, r.query_id, r.gold_ranks, r.top_ids FROM grid_events e "
                   "JOIN run_results r USING (run_id) WHERE e.status = 'done' ORDER BY 1, 2")
    s.close()
    out: dict = {}
    for key, *row in rows:
        out.setdefault(key, []).append(tuple(row))
    return out


@pytest.mark.heavy
def test_grid_run_killed_between_cells(tiny_encoder_dir, tmp_path):
    """Cells stored before the kill stay stored (each a finished run with all its results); the cell being saved
    when the process died is a run listed interrupted, never done; the rerun runs only the missing cells, and
    every cell's results equal those of an uninterrupted grid."""
    from probekit import config
    from probekit.bench import runs

    facts = tmp_path / "facts.csv"
    facts.write_text("subject,relation,object\nmetformin,may_treat,type 2 diabetes\naspirin,may_treat,pain\n"
                     "aspirin,may_treat,fever\nwarfarin,may_prevent,stroke\nstatin,may_prevent,heart attack\n")
    spec = tmp_path / "grid.json"
    spec.write_text(json.dumps({"name": "kill", "models": [str(tiny_encoder_dir)], "datasets": ["demo"],
                                "probes": [{"name": "retrieval", "options": {"pooling": ["cls", "mean"],
                                                                             "similarity": ["cosine", "dot", "l2"]}}],
                                "layers": [1, 2], "k": 5}))
    argv = _cli("grid", "run", str(spec), "--quiet", "--format", "json")
    whole = tmp_path / "uninterrupted.duckdb"
    # its own cache: the killed grid must not find every cell's vectors encoded already
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROBEKIT_DB": str(whole),
           "PROBEKIT_CACHE_DIR": str(tmp_path / "uninterrupted-cache")}
    assert subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600).returncode == 0
    expected = _cell_results(whole)
    assert len(expected) == 12

    gives_up_file = {**os.environ, "PYTHONPATH": str(ROOT), "PROBEKIT_DB_IDLE_CLOSE_S": "0"}
    proc = subprocess.Popen(argv, cwd=ROOT, env=gives_up_file, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    _kill_holding_store(proc, "SELECT count(*) FROM grid_events WHERE status = 'done'")
    assert proc.returncode == -signal.SIGKILL
    db = config.db_path()
    stored = _cell_results(db)
    assert 0 < len(stored) < 12
    assert all(stored[key] == expected[key] for key in stored)  # every stored cell is whole
    listed = runs.list_runs()
    assert set(listed.status) <= {"done", "interrupted"}, listed.status
    # every stored cell is a done run; at most one more run is done: the cell whose run was stored whole just
    # before the kill, before the grid recorded it (the rerun finds that run stored and reuses it)
    assert len(stored) <= (listed.status == "done").sum() <= len(stored) + 1

    done = json.loads(_finish(argv))
    assert done["skipped"] == len(stored) and done["ran"] + done["skipped"] == 12
    assert _cell_results(db) == expected
    listed = runs.list_runs()
    finished = listed[listed.status == "done"]
    assert len(finished) == 12 and finished.run_id.is_unique
    assert set(listed.status) <= {"done", "interrupted"}


def _sweep_json(out: str) -> dict:
    data = json.loads(out)
    varying = {"run_id", "seconds", "timings", "created_at", "meta", "settings"}
    return {k: v for k, v in data.items() if k not in varying}


@pytest.mark.heavy
def test_layers_sweep_killed_mid_encoding(tiny_encoder_dir, tmp_path):
    """A sweep is stored in one transaction at its end: killed while encoding it leaves no layer run at all (none
    half-stored), only whole embedding files in the cache (each written by rename), and the rerun, picking up the
    cached vectors, stores one run equal to an uninterrupted sweep's."""
    import numpy as np

    from probekit import cache, store
    from probekit.bench import layers

    rng = random.Random(0)
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vi", "so", "pe", "da"]
    rows = ["subject,relation,object"]
    for r in range(16):
        for _ in range(25):
            subject, obj = ("".join(rng.choice(syllables) for _ in range(4)) for _ in range(2))
            rows.append(f"{subject},rel_{r},{obj}")
    facts = tmp_path / "facts.csv"
    facts.write_text("\n".join(rows) + "\n")
    argv = _cli("layers", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir", str(facts),
                "--quiet", "--format", "json", "--save")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROBEKIT_DB": str(tmp_path / "whole.duckdb"),
           "PROBEKIT_CACHE_DIR": str(tmp_path / "whole-cache")}
    whole = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stderr

    proc = _popen(argv)
    _kill_when(proc, lambda: any(cache.folder().rglob("*.npy")), seed=1)
    assert proc.returncode == -signal.SIGKILL, "the sweep finished before the kill: give it more queries"
    assert "layer_runs" not in store.get_store().tables() or layers.list_layer_runs().empty
    store.close_all()
    for path in cache.folder().rglob("*.npy"):  # a half-written file would not load (it has a hidden temp name)
        np.load(path, allow_pickle=False)

    again = _finish(argv)
    assert _sweep_json(again) == _sweep_json(whole.stdout)
    listed = layers.list_layer_runs()
    assert len(listed) == 1 and listed.run_id[0] == json.loads(again)["run_id"]


@pytest.mark.heavy
def test_diskne_run_killed_between_fine_tuned_cells(tiny_encoder_dir):
    """Cells are stored one by one: killed after some, the run is listed interrupted (its process is gone), the
    rerun with the same settings takes that run over and fine-tunes only the missing cells, each (disease, seed)
    stored once."""
    from probekit.diskne import runs as dk

    built = json.loads(_finish(_cli("diskne", "build", "--format", "json")))
    argv = _cli("diskne", "run", "--set", built["path"], "--model", str(tiny_encoder_dir), "--category",
                "symptoms_diseases", "--seeds", "0", "1", "--epochs", "1", "--max-train", "16", "--device", "cpu",
                "--quiet", "--format", "json")
    proc = _popen(argv, PROBEKIT_DB_IDLE_CLOSE_S="0")  # gives the file up after each write: the check gets a turn
    # killed while this process holds the store: it cannot store another cell between the check and the kill (with
    # a random delay instead, a fast machine stored every cell first)
    _kill_holding_store(proc, "SELECT count(*) FROM diskne_cells")
    assert proc.returncode == -signal.SIGKILL
    [killed] = dk.list_runs().to_dict(orient="records")
    assert killed["status"] == "interrupted", killed
    from probekit import store

    s = store.get_store()
    kept = s.fetch("SELECT count(*), count(DISTINCT (target, seed)) FROM diskne_cells")[0]
    n_cells = s.fetch("SELECT n_cells FROM diskne_runs")[0][0]
    s.release_file()
    assert 0 < kept[0] == kept[1] < n_cells

    shown = json.loads(_finish(argv))
    [run] = shown["runs"]
    assert run["run_id"] == killed["run_id"] and run["status"] == "done"
    s = store.get_store()
    assert s.fetch("SELECT count(*), count(DISTINCT (target, seed)) FROM diskne_cells")[0] == (n_cells, n_cells)
    assert s.fetch("SELECT count(*) FROM diskne_runs") == [(1,)]


def _syllable_facts(path, *, relations: int, per_relation: int):
    """Made-up (subject, relation, object) rows: names the tokenizer splits into pieces, none repeated."""
    rng = random.Random(0)
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vi", "so", "pe", "da"]
    rows = ["subject,relation,object"]
    for r in range(relations):
        for _ in range(per_relation):
            subject, obj = ("".join(rng.choice(syllables) for _ in range(4)) for _ in range(2))
            rows.append(f"{subject},rel_{r:02d},{obj}")
    path.write_text("\n".join(rows) + "\n")
    return path


def _bench_rows(db) -> dict:
    """Each stored relation's results (query id, gold ranks, top ids, top scores), read from the store at ``db``."""
    from probekit import store

    s = store.get_store(db)
    rows = s.fetch("SELECT relation, query_id, gold_ranks, top_ids, top_scores FROM run_results ORDER BY 1, 2")
    s.close()
    out: dict = {}
    for rel, qid, ranks, ids, scores in rows:
        out.setdefault(rel, []).append((qid, json.loads(ranks), json.loads(ids), json.loads(scores)))
    return out


@pytest.mark.heavy
def test_bench_killed_after_several_relations_resumes_the_same_run(tiny_encoder_dir, tmp_path):
    """`bench --save` stores each relation as it finishes: killed after three, the rerun says which run it takes over
    and how much of it is stored, computes only the rest into that same run (one run, each query once), and the
    results equal an uninterrupted run's."""
    from probekit import config
    from probekit.bench import results
    from probekit.index_rank import TIE_TOLERANCE

    facts = _syllable_facts(tmp_path / "facts.csv", relations=12, per_relation=20)
    argv = _cli("bench", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir", str(facts),
                "--save", "--quiet", "--format", "json")
    whole = tmp_path / "uninterrupted.duckdb"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROBEKIT_DB": str(whole),
           "PROBEKIT_CACHE_DIR": str(tmp_path / "uninterrupted-cache")}
    ref = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert ref.returncode == 0, ref.stderr
    expected = _bench_rows(whole)
    assert len(expected) == 12

    proc = _popen(argv, PROBEKIT_DB_IDLE_CLOSE_S="0")  # gives the file up after each write: the check gets a turn
    _kill_holding_store(proc, "SELECT count(DISTINCT relation) >= 3 FROM run_results")
    assert proc.returncode == -signal.SIGKILL
    stored = _bench_rows(config.db_path())
    assert len(stored) == 3  # each relation is its own write, and the kill came right after the third
    [(killed, created)] = results.store().fetch("SELECT run_id, created_at FROM runs")
    results.store().release_file()

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert (f"resuming interrupted run {killed}: {len(stored)} of 12 relations stored "
            f"(started {created:%Y-%m-%d %H:%M} UTC)") in done.stderr.splitlines()
    assert json.loads(done.stdout)["run_id"] == killed
    s = results.store()
    assert s.fetch("SELECT run_id, status FROM runs") == [(killed, "done")]  # resumed, not a second run
    n_queries = sum(len(rows) for rows in expected.values())
    assert s.fetch("SELECT count(*), count(DISTINCT query_id) FROM run_results") == [(n_queries, n_queries)]
    s.release_file()
    got = _bench_rows(config.db_path())
    assert {rel: len(rows) for rel, rows in got.items()} == {rel: len(rows) for rel, rows in expected.items()}
    for rel, rows in expected.items():
        for (qid, ranks, ids, scores), (qid2, ranks2, ids2, scores2) in zip(rows, got[rel]):
            assert (qid2, ranks2, ids2) == (qid, ranks, ids), rel
            # the ranking's tie rule: scores closer than TIE_TOLERANCE of their scale (cosine: 1) are equal
            assert all(abs(a - b) <= TIE_TOLERANCE * max(1.0, abs(a)) for a, b in zip(scores, scores2)), rel


def _vector_files(cache_dir) -> dict:
    """Every vocabulary vector shard under ``cache_dir``, by its path below the vectors folder: its bytes."""
    return {str(p.relative_to(cache_dir)): p.read_bytes() for p in sorted(cache_dir.glob("vocab/*/vectors/*/*.npy"))}


@pytest.mark.heavy
def test_vocab_build_killed_after_two_shards_resumes_them(tiny_encoder_dir, tmp_path):
    """`vocab build` publishes each shard (vectors, then a receipt) as it is encoded: killed after two or more, the
    rerun says how many it found done, encodes the rest, and every shard is bit-identical to an uninterrupted
    build's (same process setup, same batches)."""
    from probekit import config

    rng = random.Random(0)
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vi", "so", "pe", "da"]
    names = tmp_path / "names.txt"
    names.write_text("\n".join(" ".join("".join(rng.choice(syllables) for _ in range(3)) for _ in range(3))
                               for _ in range(3000)) + "\n")
    argv = _cli("vocab", "build", "made-up", "--source", "names", "--file", str(names), "--model",
                str(tiny_encoder_dir), "--device", "cpu", "--shard-size", "50", "--batch-size", "25", "--quiet",
                "--format", "json")
    whole = tmp_path / "uninterrupted-cache"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROBEKIT_CACHE_DIR": str(whole),
           "PROBEKIT_VOCAB_DIR": str(tmp_path / "uninterrupted-vocab")}
    ref = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert ref.returncode == 0, ref.stderr
    expected = _vector_files(whole)
    assert len(expected) == 60

    cache = config.cache_dir()
    receipts = lambda: list(cache.glob("vocab/*/vectors/*/shard-*.done.json"))  # noqa: E731
    proc = _popen(argv)
    _kill_when(proc, lambda: len(receipts()) >= 2, seed=2)
    assert proc.returncode == -signal.SIGKILL
    kept = len(receipts())  # a receipt is written after its shard is in place: each one names a whole shard
    assert 2 <= kept < 60, "the build finished before the kill: give it more shards"

    done = subprocess.run(argv, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"resuming: {kept} of 60 shards done" in done.stderr.splitlines()
    assert json.loads(done.stdout)["shards"] == 60
    assert _vector_files(cache) == expected  # bit-identical, none missing, none extra
