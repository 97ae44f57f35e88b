"""A full disk, for real: every command that writes says so in one line (rc 2) and keeps what was stored before;
once space is freed the same command succeeds.

The disk is a small tmpfs mounted in a mount namespace of the test's own (``unshare --user --map-root-user
--mount``: no root needed where user namespaces are allowed; as root ``unshare --mount`` is enough), so nothing
on the machine sees it and it goes away with the process. The probekit database, data and cache folders are put
on it, a filler file takes every byte left, and the real CLI (:func:`probekit.cli.main`, what ``python -m
probekit`` runs) is called in that process: once with the disk full, once after the filler is deleted. The rule
checked: ``error: disk full: could not write PATH (N MB free); free space and rerun — what was stored before is
kept``, one line, rc 2 (it was ``unexpected TransactionException … (a bug in probekit)``, rc 1); the annotation
events stored before, and an earlier file at the export's path, are unchanged; the commands then succeed.

This file is also the program run inside the namespace (``python tests/test_disk_full.py cli DISK SPEC``).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MESSAGE = re.compile(r"^error: disk full: could not write (\S+) \((\d+\.\d) MB free\); free space and rerun — what "
                     r"was stored before is kept$")
DOCS = {"n1.txt": "Metformin is used for type 2 diabetes. Aspirin lowers fever.\n", "n2.txt": "Aspirin treats fever."}
FACTS = "subject,relation,object\nmetformin,may_treat,type 2 diabetes\naspirin,may_treat,fever\n"


@functools.cache
def namespace() -> tuple[list[str] | None, str]:
    """The command prefix that runs a process in a mount namespace of its own where it may mount a tmpfs, or None
    and why not. Tried for real: a user namespace (unprivileged, where the kernel allows it), else root's own."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None, "no unshare command (util-linux) to make a mount namespace for a small tmpfs"
    prefixes = [[unshare, "--user", "--map-root-user", "--mount"]]
    if os.geteuid() == 0:
        prefixes.append([unshare, "--mount"])
    with tempfile.TemporaryDirectory() as where:
        for prefix in prefixes:
            probe = subprocess.run([*prefix, "mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", where],
                                   capture_output=True, text=True, timeout=30)
            if probe.returncode == 0:
                return prefix, ""
    return None, ("cannot mount a tmpfs: not root, and user namespaces are not allowed here "
                  f"({probe.stderr.strip()[:200]})")


def on_small_disk(disk: Path, mb: int, argv: list[str], *, env: dict | None = None, **kw) -> subprocess.Popen:
    """Start ``argv`` in a mount namespace of its own with a ``mb`` MB tmpfs mounted at ``disk`` (skips the test
    where no namespace can be made). The process's pid is the namespace's: ``/proc/PID/root/<disk>`` is the tmpfs
    for another process (the test filling and freeing it)."""
    prefix, why = namespace()
    if prefix is None:
        pytest.skip(why)
    disk.mkdir(parents=True, exist_ok=True)
    script = 'mount -t tmpfs -o size="$1"m tmpfs "$2" && shift 2 && exec "$@"'
    return subprocess.Popen([*prefix, "sh", "-c", script, "sh", str(mb), str(disk), *argv],
                            env={**os.environ, **(env or {})}, **kw)


def fill(folder: str | os.PathLike) -> Path:
    """A filler file in ``folder`` taking every byte its file system has left (large writes, then smaller ones
    down to one byte); returns its path (delete it to free the space)."""
    path = Path(folder) / "filler"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1 << 20, 1 << 16, 4096, 512, 1):
            block = b"\0" * size
            while True:
                try:
                    os.write(fd, block)
                except OSError:
                    break
    finally:
        os.close(fd)
    return path


# ---------------------------------------------------------------- inside the namespace
def _cli(argv: list[str]) -> dict:
    from probekit import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return {"rc": code, "err": err.getvalue(), "out": out.getvalue()}


def _commands_on_full_disk(disk: str, s: dict) -> dict:
    """A tour stored and an earlier file at the export's path, then the commands once on the full disk and once
    after freeing it."""
    from probekit import store, tours

    before = _cli(["tour", "add", "talk", "/probe?query=x", "--title", "stored before"])
    export = Path(disk) / "talk.yaml"
    export.write_text("an earlier export\n")
    store.close_all()  # checkpointed, no write-ahead log left: the next database write needs new space
    commands = {  # each writes somewhere else: a file of the user's, the cache, the database
        "tour export": ["tour", "export", "talk", str(export)],
        "corpus index": ["corpus", "index", "--corpus", s["docs"], "--dataset", "triples", "--data-dir", s["facts"],
                         "--quiet"],
        "tour add": ["tour", "add", "talk", "/layers", "--title", "added"],
    }
    filler = fill(disk)
    full = {name: _cli(argv) for name, argv in commands.items()}
    export_then = export.read_text()
    filler.unlink()
    freed = {name: _cli(argv) for name, argv in commands.items()}
    return {"before": before, "full": full, "freed": freed, "export_then": export_then,
            "steps": [step.title for step in tours.get_tour("talk").steps]}


def _presses_on_full_disk(disk: str) -> dict:
    """An expert's desk (the Annotate page's :class:`Desk`, with an ``act`` that turns every error into a message,
    as a page may) taking presses while the disk is full, twice in a row on the same open database, then after
    freeing it."""
    import pandas as pd
    from test_annotations import rankings

    from pages._rating_keys import Desk
    from probekit import annotations as ann
    from probekit import store
    from probekit.errors import ProbekitError

    sid = ann.from_rankings(rankings(2, k=3), name="full disk", k=3)
    who = ann.join(sid, "Rae")
    desk = Desk()

    def act(key: str, ms: int | None) -> None:
        with desk.lock:
            try:
                desk.query[sid], desk.flash = ann.press(sid, who, key, query_index=desk.query.get(sid),
                                                        elapsed_ms=ms)
            except ProbekitError as e:
                desk.flash = str(e)

    desk.query[sid] = ann.next_query(sid, who)
    desk.act = act

    def window(keys: str) -> dict:
        return {"client": "w", "queue": [[1 + i, k, 100 + i] for i, k in enumerate(keys)]}

    acks = [desk.take(window("54"))]
    store.close_all()
    filler = fill(disk)
    acks += [desk.take(window("54u3")), desk.take(window("54u3"))]  # sent again at once: the same connection
    problem = desk.problem
    filler.unlink()
    acks.append(desk.take(window("54u3")))
    events = ann.events_frame(sid)
    presses = store.get_store().fetch("SELECT seq, key, event_id IS NOT NULL FROM annotation_presses "
                                      "WHERE session_id = ? ORDER BY seq", [sid])
    return {"acks": acks, "problem": problem, "problem_after": desk.problem,
            "events": [[k, None if pd.isna(v) else int(v)] for k, v in zip(events.kind, events.score)],
            "scores": [a["score"] for a in ann.query_view(sid, who, 0)["answers"]], "presses": presses}


def _on_full_disk(disk: str, spec: str) -> None:
    """Run inside the namespace: both scenarios on the tmpfs at ``disk``; prints a JSON report."""
    os.environ.update(PROBEKIT_DB=f"{disk}/probekit.duckdb", PROBEKIT_DATA_DIR=f"{disk}/data",
                      PROBEKIT_CACHE_DIR=f"{disk}/cache", PROBEKIT_VOCAB_DIR=f"{disk}/vocabularies")
    report = {"commands": _commands_on_full_disk(disk, json.loads(spec)), "presses": _presses_on_full_disk(disk)}
    print(json.dumps(report))


# ---------------------------------------------------------------- the tests
@pytest.fixture(scope="module")
def full_disk(tmp_path_factory) -> tuple[Path, dict]:
    """The tmpfs's path and the report of :func:`_on_full_disk` (one process for both tests: Python and probekit
    start once)."""
    base = tmp_path_factory.mktemp("full")
    docs = base / "notes"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text)
    (base / "facts.csv").write_text(FACTS)
    spec = {"docs": str(docs), "facts": str(base / "facts.csv")}
    disk = base / "disk"
    proc = on_small_disk(disk, 16, [sys.executable, __file__, str(disk), json.dumps(spec)],
                         env={"PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    return disk, json.loads(out.strip().splitlines()[-1])


def test_every_writing_command_says_disk_full_in_one_line_and_keeps_what_was_stored(full_disk):
    disk, report = full_disk
    report = report["commands"]
    assert report["before"]["rc"] == 0, report["before"]
    said = {}
    for name, res in report["full"].items():
        lines = res["err"].strip().splitlines()
        assert res["rc"] == 2 and len(lines) == 1, (name, res)
        match = MESSAGE.match(lines[0])
        assert match and match.group(2) == "0.0", (name, lines[0])
        said[name] = match.group(1)
    assert said == {"tour export": str(disk / "talk.yaml"), "corpus index": str(disk / "cache"),
                    "tour add": str(disk / "probekit.duckdb.wal")}
    assert report["export_then"] == "an earlier export\n"  # the file at the export's path, untouched
    for name, res in report["freed"].items():
        assert res["rc"] == 0, (name, res)
    assert report["steps"] == ["stored before", "added"]  # kept, and the step refused on the full disk added once


def test_presses_on_a_full_disk_wait_unacknowledged_and_apply_once_when_space_returns(full_disk):
    """5 and 4 stored; then U and 3 typed on the full disk and sent twice: not acknowledged (the browser keeps
    them), "not saved — disk full"; once freed, the U undoes the 4 and the 3 rates that answer again, each press
    stored once. (DuckDB answered ``max()`` wrongly on the connection whose commits had failed: the U's number
    was found stored and the U was skipped.)"""
    report = full_disk[1]["presses"]
    assert report["acks"] == [2, 2, 2, 4]
    assert report["problem"].startswith("not saved — disk full (0.0 MB free for ") and report["problem_after"] is None
    assert report["events"] == [["rate", 5], ["rate", 4], ["undo", None], ["rate", 3]]
    assert report["scores"] == [5, 3, None]
    assert report["presses"] == [[1, "5", True], [2, "4", True], [3, "u", True], [4, "3", True]]


def _bench_on_full_disk(disk: str, spec: str) -> None:
    """Run inside the namespace: ``bench --save`` once with space, once on the full disk, once after freeing it;
    prints a JSON report with the stored runs."""
    from probekit.bench import results

    s = json.loads(spec)
    os.environ.update(PROBEKIT_DB=f"{disk}/probekit.duckdb", PROBEKIT_DATA_DIR=f"{disk}/data",
                      PROBEKIT_CACHE_DIR=f"{disk}/cache")
    bench = ["bench", "--model", s["model"], "--dataset", "triples", "--data-dir", s["facts"], "--save", "--fresh",
             "--quiet", "--format", "json"]
    first = _cli(bench)
    from probekit import store

    store.close_all()
    filler = fill(disk)
    full = _cli(bench)
    filler.unlink()
    freed = _cli(bench)
    runs = results.list_runs()
    print(json.dumps({"first": first, "full": full, "freed": freed,
                      "runs": [[r, st] for r, st in zip(runs.run_id, runs.status)]}))


@pytest.mark.heavy
@pytest.mark.timeout(300)
def test_bench_save_on_a_full_disk_is_one_line_and_keeps_the_runs_stored_before(tmp_path, tiny_encoder_dir):
    """``bench --save`` on a full disk: one line, rc 2 (it was "unexpected TransactionException … a bug in
    probekit", rc 1); the run saved before is kept, finished; once space is freed the same command saves."""
    from conftest import TINY_TRIPLES

    (tmp_path / "facts.csv").write_text(TINY_TRIPLES)
    disk = tmp_path / "disk"
    spec = {"model": str(tiny_encoder_dir), "facts": str(tmp_path / "facts.csv")}
    proc = on_small_disk(disk, 32, [sys.executable, __file__, str(disk), json.dumps(spec), "bench"],
                         env={"PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    report = json.loads(out.strip().splitlines()[-1])
    assert report["first"]["rc"] == 0 and report["freed"]["rc"] == 0, report
    lines = report["full"]["err"].strip().splitlines()
    assert report["full"]["rc"] == 2 and len(lines) == 1, report["full"]
    match = MESSAGE.match(lines[0])
    assert match and match.group(1).startswith(str(disk / "probekit.duckdb")), lines[0]
    first, last = json.loads(report["first"]["out"])["run_id"], json.loads(report["freed"]["out"])["run_id"]
    statuses = dict(report["runs"])
    assert statuses[first] == "done" and statuses[last] == "done", report["runs"]


if __name__ == "__main__":
    if sys.argv[3:] == ["bench"]:
        _bench_on_full_disk(*sys.argv[1:3])
    else:
        _on_full_disk(*sys.argv[1:3])
