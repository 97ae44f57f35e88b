"""The package's shared plumbing: the one atomic file writer, the one bounded memo, the one positive-int check."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from probekit import atomic
from probekit.errors import ProbekitError


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
