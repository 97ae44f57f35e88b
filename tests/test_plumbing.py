"""The package's shared plumbing: the one atomic file writer, the one bounded memo, the one positive-int check."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from probekit import atomic
from probekit.errors import ProbekitError, positive_int
from probekit.memo import Memo


# ---------------------------------------------------------------- the atomic writer
def test_write_forms_and_a_new_file_in_a_new_folder(tmp_path):
    target = tmp_path / "a" / "b" / "x.json"
    assert atomic.write_json(target, {"a": 1}) == target and target.read_text() == '{"a": 1}'
    atomic.write_text(target, "été")
    assert target.read_bytes() == "été".encode()
    atomic.write_bytes(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    vec = np.arange(6, dtype=np.float32).reshape(2, 3)
    atomic.write(tmp_path / "v.npy", lambda fh: np.save(fh, vec, allow_pickle=False))
    assert np.array_equal(np.load(tmp_path / "v.npy"), vec)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "v.npy"]


def test_an_error_mid_write_removes_the_temp_file_and_keeps_the_old_file(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("previous")

    def half(fh):
        fh.write(b"half of the new")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic.write(target, half)
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"] and target.read_text() == "previous"


def test_a_refused_check_removes_the_temp_file_and_keeps_the_old_file(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("previous")
    seen = []

    def check(tmp: Path):
        seen.append((tmp.parent, tmp.name.startswith(".out.txt."), tmp.read_bytes()))
        raise ProbekitError("not a corpus")

    with pytest.raises(ProbekitError, match="not a corpus"):
        atomic.write_bytes(target, b"new", check=check)
    assert seen == [(tmp_path, True, b"new")]
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"] and target.read_text() == "previous"


def test_a_crash_mid_write_leaves_the_old_file_whole(tmp_path):
    """A process killed while writing (no cleanup runs) leaves the target as it was: the new content only ever
    reaches the target by the rename."""
    target = tmp_path / "out.txt"
    target.write_text("previous")
    code = ("import os, sys\nfrom probekit import atomic\n"
            "def crash(fh):\n    fh.write(b'partial new content'); fh.flush(); os._exit(3)\n"
            "atomic.write(sys.argv[1], crash)\n")
    res = subprocess.run([sys.executable, "-c", code, str(target)], cwd=ROOT, capture_output=True, timeout=120)
    assert res.returncode == 3, res.stderr
    assert target.read_text() == "previous"
    left = [p.name for p in tmp_path.iterdir() if p != target]
    assert len(left) == 1 and left[0].startswith(".out.txt.") and left[0].endswith(".tmp")  # hidden, never the target


def test_fifos_devices_folders_and_links_to_them_are_refused(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link-to-pipe"
    link.symlink_to(fifo)
    for target in (fifo, link, Path("/dev/null")):
        with pytest.raises(ProbekitError, match="refusing to write .*: it is not a regular file"):
            atomic.write_text(target, "x")
    with pytest.raises(ProbekitError, match="it is a folder"):
        atomic.write_text(tmp_path, "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link-to-pipe", "pipe"]
    assert fifo.is_fifo() and link.is_symlink()


def test_a_symlink_to_a_file_stays_a_link_and_its_target_is_replaced(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    assert atomic.write_text(link, "new") == real
    assert link.is_symlink() and real.read_text() == "new"


def test_concurrent_writers_never_show_a_torn_file(tmp_path):
    """Four writers replace one file with their own 256 KiB content while a reader reads it: every read is one
    writer's whole content (a torn or partial file would mix letters or be short)."""
    target = tmp_path / "shared.bin"
    payloads = [bytes([ord("a") + i]) * 2**18 for i in range(4)]
    target.write_bytes(payloads[0])
    writers_done = threading.Event()
    reads: list[bytes] = []
    errors: list[BaseException] = []

    def writer(data: bytes) -> None:
        try:
            for _ in range(25):
                atomic.write_bytes(target, data)
        except BaseException as e:  # pragma: no cover - reported by the assert below
            errors.append(e)

    def reader() -> None:
        while not writers_done.is_set() or not reads:
            reads.append(target.read_bytes())

    threads = [threading.Thread(target=writer, args=(p,)) for p in payloads]
    r = threading.Thread(target=reader)
    r.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writers_done.set()
    r.join()
    assert errors == []
    assert reads and all(data in payloads for data in reads)
    assert target.read_bytes() in payloads and [p.name for p in tmp_path.iterdir()] == ["shared.bin"]


def test_every_file_writer_of_the_package_uses_the_atomic_writer():
    """No module but probekit.atomic renames a temporary file over a target by hand."""
    hand_made = []
    for path in (ROOT / "probekit").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path.name != "atomic.py" and ("mkstemp" in text or ".tmp\")" in text or 'tmp.write_' in text):
            hand_made.append(str(path.relative_to(ROOT)))
    assert hand_made == []


# ---------------------------------------------------------------- the bounded memo
class NaiveLRU:
    """The rule stated plainly: a list, most recently used last; after a put, drop from the front while over a
    bound and more than one entry is kept; an oversized value is dropped instead when not admitted."""

    def __init__(self, max_entries, max_bytes, admit_oversize=True):
        self.items: list[tuple[str, int]] = []
        self.max_entries, self.max_bytes, self.admit = max_entries, max_bytes, admit_oversize

    def get(self, key):
        for i, (k, v) in enumerate(self.items):
            if k == key:
                self.items.append(self.items.pop(i))
                return v
        return None

    def put(self, key, value):
        self.items = [(k, v) for k, v in self.items if k != key]
        if self.admit or self.max_bytes is None or value <= self.max_bytes:
            self.items.append((key, value))

        def over():
            return ((self.max_entries is not None and len(self.items) > self.max_entries)
                    or (self.max_bytes is not None and sum(v for _, v in self.items) > self.max_bytes))

        while len(self.items) > 1 and over():
            self.items.pop(0)


@pytest.mark.parametrize("max_entries,max_bytes,admit", [(3, None, True), (None, 50, True), (4, 40, True),
                                                          (None, 30, False), (1, None, True)])
def test_memo_follows_the_naive_lru_model(max_entries, max_bytes, admit):
    import random

    rng = random.Random(f"{max_entries}-{max_bytes}-{admit}")
    sizeof = (lambda v: v) if max_bytes is not None else None
    memo: Memo[str, int] = Memo(max_entries=max_entries, max_bytes=max_bytes, sizeof=sizeof, admit_oversize=admit)
    model = NaiveLRU(max_entries, max_bytes, admit)
    for step in range(2000):
        key = f"k{rng.randrange(8)}"
        if rng.random() < 0.5:
            assert memo.get(key) == model.get(key), step
        else:
            value = rng.randrange(1, 45)
            memo.put(key, value)
            model.put(key, value)
        assert memo.keys() == [k for k, _ in model.items], step
        assert memo.values() == [v for _, v in model.items]
        if sizeof is not None:
            assert memo.bytes == sum(v for _, v in model.items)


def test_memo_eviction_callbacks_pop_clear_and_a_bound_that_follows_a_setting():
    gone: list[str] = []
    limit = {"n": 2}
    memo: Memo[str, str] = Memo(max_entries=lambda: limit["n"], on_evict=gone.append)
    memo.put("a", "A")
    memo.put("b", "B")
    memo.put("a", "A2")  # a replaced value leaves too
    memo.put("c", "C")
    assert gone == ["A", "B"] and memo.keys() == ["a", "c"]
    limit["n"] = 1
    memo.put("d", "D")
    assert gone == ["A", "B", "A2", "C"] and memo.keys() == ["d"]
    assert memo.pop("d") == "D" and memo.pop("d") is None and gone[-1] == "C"  # pop hands the value back
    memo.put("e", "E")
    memo.clear()
    assert gone[-1] == "E" and len(memo) == 0 and "e" not in memo
    with pytest.raises(ValueError, match="sizeof"):
        Memo(max_bytes=10)


def test_memo_is_thread_safe():
    """Eight threads put and get at once: the byte count stays the sum of the kept sizes, every bound holds and
    every hit is a value that was put under that key."""
    memo: Memo[int, tuple[int, bytes]] = Memo(max_entries=16, max_bytes=4000, sizeof=lambda v: len(v[1]))
    start = threading.Barrier(8)
    wrong: list = []

    def work(seed: int) -> None:
        import random

        rng = random.Random(seed)
        start.wait()
        for _ in range(3000):
            key = rng.randrange(40)
            if rng.random() < 0.5:
                memo.put(key, (key, b"x" * rng.randrange(1, 400)))
            else:
                hit = memo.get(key)
                if hit is not None and hit[0] != key:
                    wrong.append((key, hit[0]))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    values = memo.values()
    assert wrong == []
    assert memo.bytes == sum(len(v[1]) for v in values) <= 4000 and 1 <= len(values) <= 16


# ---------------------------------------------------------------- one Progress type
def test_progress_is_defined_once():
    """``progress(done, total, stage)`` has one definition (probekit.jobs); every other module imports it."""
    import ast

    defined = []
    for path in (ROOT / "probekit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) else []
            if any(isinstance(t, ast.Name) and t.id == "Progress" for t in targets):
                defined.append(str(path.relative_to(ROOT)))
    assert defined == ["probekit/jobs.py"]


# ---------------------------------------------------------------- one positive-int check
def test_positive_int_accepts_whole_numbers_and_refuses_bools_floats_and_out_of_range():
    assert positive_int("k", 3) == 3 and type(positive_int("k", np.int64(3))) is int
    assert positive_int("seed", 0, minimum=0) == 0 and positive_int("beam", 50, maximum=50) == 50
    for value in (True, False, 2.0, 2.5, "3", None, 0, -1, np.float32(2)):
        with pytest.raises(ProbekitError) as e:
            positive_int("k", value)
        assert str(e.value) == f"k must be a positive integer, got {value!r}"
    with pytest.raises(ProbekitError, match=r"^beam must be an integer from 1 to 50, got 51$"):
        positive_int("beam", 51, maximum=50)
    with pytest.raises(ProbekitError, match=r"^max_length must be an integer of at least 2, got 1$"):
        positive_int("max_length", 1, minimum=2)


def test_the_former_copies_agree_that_true_is_no_count():
    """The checks of k, n, limit… used to disagree on ``True`` (an int to Python); each now refuses it."""
    import pandas as pd

    from probekit.bench.settings import check_vocab_and_k
    from probekit.context.sources import CorpusScan
    from probekit.metrics.accuracy import check_k
    from probekit.templates.frequency import top_share

    frame = pd.DataFrame({"top_names": [["a"]]})
    checks = [check_k, lambda v: check_vocab_and_k("tails", v), lambda v: top_share(frame, k=1, n=v),
              lambda v: CorpusScan(texts=["a b"], limit=v), lambda v: CorpusScan(texts=["a b"], window=v)]
    for check in checks:
        with pytest.raises(ProbekitError, match="must be .*integer.*got True"):
            check(True)
        check(1)


def test_a_jobs_id_is_unguessable_and_a_valid_widget_key():
    """A job's id is told to its browser (the status endpoint's address) and names its progress bar's widget:
    32 hex digits, so never Streamlit's reserved ``__`` (an id drawn from URL-safe base64 once held one, and the
    page raised BidiComponentInvalidIdError), and distinct between jobs."""
    from probekit.jobs import Job

    ids = [Job(lambda progress, cancelled: None).id for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and set(i) <= set("0123456789abcdef") for i in ids)


# ---------------------------------------------------------------- every PROBEKIT_* setting is read in config
def _environ(node) -> bool:
    """``os.environ``, or ``environ`` imported from os."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os") or (isinstance(node, ast.Name) and node.id == "environ")


def _getenv(node) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "getenv" and isinstance(node.value, ast.Name)
            and node.value.id == "os") or (isinstance(node, ast.Name) and node.id == "getenv")


def _setting(node, names: dict[str, str]) -> str | None:
    """The PROBEKIT_* variable ``node`` names: a string, a name bound to one (``names``), an f-string or sum that
    starts with one."""
    if isinstance(node, (ast.JoinedStr, ast.BinOp)):
        head = node.values[0] if isinstance(node, ast.JoinedStr) and node.values else getattr(node, "left", None)
        start = _setting(head, names) if head is not None else None
        return start + "…" if start else None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        value = node.value
    elif isinstance(node, ast.Name):
        value = names.get(node.id, "")
    else:
        return None
    return value if value.startswith("PROBEKIT_") else None


def setting_names(source: str) -> dict[str, str]:
    """Module-level names bound to a PROBEKIT_* string (``DTYPE_ENV = "PROBEKIT_DTYPE"``)."""
    return {t.id: node.value.value for node in ast.parse(source).body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            and node.value.value.startswith("PROBEKIT_") for t in node.targets if isinstance(t, ast.Name)}


def env_reads(source: str, names: dict[str, str] | None = None) -> list[tuple[int, str]]:
    """(line, variable) of each read of a PROBEKIT_* environment variable in ``source``: ``os.environ.get(V)``,
    ``.setdefault``, ``os.environ[V]``, ``os.getenv(V)``, ``V in os.environ`` (also through ``from os import
    environ, getenv``), V a string, a name bound to one (here or in ``names``) or an f-string starting with one.
    Writing a variable and forwarding the whole environment (``os.environ.items()``) are not reads."""
    names = {**(names or {}), **setting_names(source)}
    found = []
    for node in ast.walk(ast.parse(source)):
        key = None
        if isinstance(node, ast.Call) and node.args:
            f = node.func
            if _getenv(f) or (isinstance(f, ast.Attribute) and f.attr in ("get", "setdefault") and _environ(f.value)):
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _environ(node.value):
            key = node.slice
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and any(
                _environ(c) for c in node.comparators):
            key = node.left
        var = _setting(key, names) if key is not None else None
        if var:
            found.append((node.lineno, var))
    return sorted(found)


PLANTED = '''\
import os
from os import environ, getenv
VAR = "PROBEKIT_PLANTED"
a = os.environ.get("PROBEKIT_A")
b = os.environ["PROBEKIT_B"]
c = os.getenv("PROBEKIT_C", "1")
d = "PROBEKIT_D" in os.environ
e = environ.get(VAR)
f = getenv(f"PROBEKIT_{e}_DIR")
g = os.environ.get(IMPORTED)
os.environ["PROBEKIT_E"] = "1"
h = os.environ.get("HF_HOME")
i = {k: v for k, v in os.environ.items() if k.startswith("PROBEKIT_")}
'''


def test_the_env_scanner_finds_every_planted_read():
    assert env_reads(PLANTED, {"IMPORTED": "PROBEKIT_DTYPE"}) == [
        (4, "PROBEKIT_A"), (5, "PROBEKIT_B"), (6, "PROBEKIT_C"), (7, "PROBEKIT_D"), (8, "PROBEKIT_PLANTED"),
        (9, "PROBEKIT_…"), (10, "PROBEKIT_DTYPE")]


def test_every_probekit_setting_is_read_in_config():
    """``probekit.config`` reads every PROBEKIT_* variable, at call time; elsewhere a module calls its accessor.
    (Forwarding the environment to Ray workers, ``probekit.ray_session``, reads none by name.)"""
    files = {p: p.read_text(encoding="utf-8") for p in sorted((ROOT / "probekit").rglob("*.py"))}
    names: dict[str, str] = {}
    for source in files.values():
        names.update(setting_names(source))
    found = [f"{p.relative_to(ROOT)}:{line} reads {var}" for p, source in files.items()
             if p != ROOT / "probekit" / "config.py" for line, var in env_reads(source, names)]
    assert not found, "read PROBEKIT_* settings through probekit.config: " + "; ".join(found)


def test_config_reads_the_settings_when_called(monkeypatch):
    from probekit import config
    from probekit.store import owner
    from probekit.store.db import Store

    for var in ("PROBEKIT_STALE_RUN_S", "PROBEKIT_DB_IDLE_CLOSE_S", "PROBEKIT_DB_LOCK_WAIT_S",
                "PROBEKIT_DB_MAX_HOLD_S", "PROBEKIT_DEBUG", "PROBEKIT_DTYPE", "PROBEKIT_DEMO_DIR"):
        monkeypatch.delenv(var, raising=False)
    assert (config.stale_run_s(), config.db_idle_close_s(), config.db_lock_wait_s(), config.db_max_hold_s()) == (
        6 * 3600.0, 1.0, 20.0, 2.0)
    assert not config.debug() and config.causal_dtype() is None and not config.set_in_env("PROBEKIT_DEMO_DIR")
    monkeypatch.setenv("PROBEKIT_STALE_RUN_S", "60")
    monkeypatch.setenv("PROBEKIT_DB_IDLE_CLOSE_S", "0")
    monkeypatch.setenv("PROBEKIT_DB_LOCK_WAIT_S", "0.5")
    monkeypatch.setenv("PROBEKIT_DB_MAX_HOLD_S", "7")
    monkeypatch.setenv("PROBEKIT_DEBUG", "1")
    monkeypatch.setenv("PROBEKIT_DTYPE", "bfloat16")
    monkeypatch.setenv("PROBEKIT_DEMO_DIR", "/elsewhere")
    assert owner.stale_after() == 60 and config.debug() and config.causal_dtype() == "bfloat16"
    assert config.set_in_env("PROBEKIT_DEMO_DIR")
    store = Store(":memory:")
    assert (store.idle_close, store.lock_wait, store.max_hold) == (0, 0.5, 7)
    monkeypatch.setenv("PROBEKIT_DB_LOCK_WAIT_S", "3")
    assert store.lock_wait == 3  # a change reaches a store made before it
    store.close()
    for var, value, says in (("PROBEKIT_DB_MAX_HOLD_S", "soon", "must be a number of seconds, got 'soon'"),
                             ("PROBEKIT_DB_MAX_HOLD_S", "-1", "must be 0 or more"),
                             ("PROBEKIT_STALE_RUN_S", "0", "must be positive")):
        monkeypatch.setenv(var, value)
        with pytest.raises(ProbekitError, match=f"^{var} {says}"):
            config.stale_run_s() if var == "PROBEKIT_STALE_RUN_S" else Store(":memory:")
        monkeypatch.delenv(var)
