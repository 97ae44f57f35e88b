"""SIGKILL at a random moment after a long job started writing: afterwards nothing half-written reads as complete,
the killed work is listed as interrupted, and the rerun finishes without duplicates."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

from conftest import ROOT


def _kill_when(proc: subprocess.Popen, started, *, budget: float = 240.0, seed: int = 0) -> None:
    """SIGKILL ``proc`` a random 0-0.5 s after ``started()`` first holds (the job has begun writing)."""
    deadline = time.monotonic() + budget
    while not started():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the job never started writing"
        time.sleep(0.02)
    time.sleep(random.Random(seed).uniform(0, 0.5))
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
