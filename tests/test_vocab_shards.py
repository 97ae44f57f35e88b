"""Encoding a vocabulary in shards: published atomically with receipts, memory-mapped, resumable after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from probekit.vocab import shards
from probekit.vocab.sources import open_source

ROOT = Path(__file__).resolve().parent.parent
NAMES = [f"{w} {i}" for i in range(47) for w in ("aspirin", "heart attack", "fever")[i % 3:i % 3 + 1]]


def names_file(tmp_path: Path) -> Path:
    path = tmp_path / "names.txt"
    path.write_text("\n".join(NAMES) + "\n")
    return path


def test_rows_are_sharded_and_fingerprinted(tmp_path):
    path = names_file(tmp_path)
    src = open_source("names", path)
    rows = shards.read_rows(src, shard_size=10)
    assert (rows.n_rows, rows.n_shards, rows.has_cuis) == (47, 5, False)
    assert rows.names() == NAMES and len(rows.shard(4)) == 7
    assert shards.read_rows(src, shard_size=10) == rows  # complete: read back, not re-read
    path.write_text("\n".join(NAMES[:-1]) + "\n")
    changed = shards.read_rows(open_source("names", path), shard_size=10)
    assert changed.fingerprint != rows.fingerprint and changed.n_rows == 46  # a changed file is never used stale


def test_vectors_equal_one_pass_encoding_and_are_memory_mapped(tmp_path, tiny_encoder):
    from probekit.encode import encode_layers

    rows = shards.read_rows(open_source("names", names_file(tmp_path)), shard_size=10)
    vec = shards.encode(tiny_encoder, rows, dtype="float32", batch_size=4)
    got = vec.shards()
    assert [len(s) for s in got] == [10, 10, 10, 10, 7] and all(isinstance(s, np.memmap) for s in got)
    whole = encode_layers(tiny_encoder, NAMES, layers=[tiny_encoder.num_layers], pooling=tiny_encoder.spec.pooling,
                          max_length=shards.NAME_MAX_LENGTH)[0]
    # the same names in other batches: float32 noise of the encoder only
    np.testing.assert_allclose(np.concatenate(got), whole, rtol=0, atol=1e-5)
    half = shards.encode(tiny_encoder, rows, dtype="float16", batch_size=4)
    assert half.folder != vec.folder and half.shards()[0].dtype == np.float16


def test_a_shard_without_its_receipt_or_with_a_short_file_is_not_done(tmp_path, tiny_encoder):
    rows = shards.read_rows(open_source("names", names_file(tmp_path)), shard_size=10)
    vec = shards.encode(tiny_encoder, rows, batch_size=8)
    vec.receipt(1).unlink()
    vec.npy(3).write_bytes(vec.npy(3).read_bytes()[:200])  # a torn file (what a non-atomic writer could leave)
    assert vec.missing() == [1, 3]
    with pytest.raises(Exception, match="2 of 5 shards are not encoded yet"):
        vec.shards()


KILLED = """
import sys, time
from probekit import models
from probekit.vocab import shards
from probekit.vocab.sources import open_source
import torch
torch.set_num_threads(1)
real = shards.encode_shard
def slow(*a, **kw):
    seconds = real(*a, **kw)
    print("published", a[2], flush=True)
    time.sleep(0.4)  # time for the parent to kill this process between, or during, shards
    return seconds
shards.encode_shard = slow
model = models.load(sys.argv[1], device="cpu")
rows = shards.read_rows(open_source("names", sys.argv[2]), shard_size=10)
shards.encode(model, rows, batch_size=4)
"""


def test_sigkill_mid_run_then_the_rerun_encodes_only_missing_shards(tmp_path, tiny_encoder, tiny_encoder_dir,
                                                                     monkeypatch):
    """A real subprocess is SIGKILLed after two shards are published; the rerun encodes the rest only and the
    vectors equal an uninterrupted run's."""
    path = names_file(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(KILLED), str(tiny_encoder_dir), str(path)],
                            env=env, stdout=subprocess.PIPE, text=True)
    try:
        published = []
        deadline = time.monotonic() + 240
        while len(published) < 2 and time.monotonic() < deadline:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            if not line:
                break
            published.append(line)
        assert len(published) == 2, f"the child did not publish two shards: {published}"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(60)
    assert proc.returncode == -signal.SIGKILL
    rows = shards.read_rows(open_source("names", path), shard_size=10)
    key = shards.vector_key(tiny_encoder, fingerprint=rows.fingerprint, layer=tiny_encoder.num_layers,
                            pooling=tiny_encoder.spec.pooling, dtype="float32", shard_size=10)
    partial = shards.vectors_for(rows, key, "float32")
    done_before = [i for i in range(rows.n_shards) if partial.is_done(i)]
    assert 2 <= len(done_before) < rows.n_shards  # the kill came before the end
    encoded: list[int] = []
    real = shards.encode_shard

    def counting(model, vectors, i, **kw):
        encoded.append(i)
        return real(model, vectors, i, **kw)

    monkeypatch.setattr(shards, "encode_shard", counting)
    resumed = shards.encode(tiny_encoder, rows, batch_size=4)
    assert sorted(encoded) == [i for i in range(rows.n_shards) if i not in done_before]
    monkeypatch.setenv("PROBEKIT_CACHE_DIR", str(tmp_path / "fresh"))
    fresh_rows = shards.read_rows(open_source("names", path), shard_size=10)
    fresh = shards.encode(tiny_encoder, fresh_rows, batch_size=4)
    for a, b in zip(resumed.shards(), fresh.shards()):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)  # other process, same threads and batches
    receipt = json.loads(resumed.receipt(0).read_text())
    assert receipt["rows"] == 10 and receipt["dtype"] == "float32"


def test_progress_reports_rate_and_eta(tmp_path, tiny_encoder):
    rows = shards.read_rows(open_source("names", names_file(tmp_path)), shard_size=10)
    seen: list[tuple[int, int, str]] = []
    shards.encode(tiny_encoder, rows, batch_size=8, progress=lambda d, t, s: seen.append((d, t, s)))
    assert seen[0][:2] == (0, 47) and seen[-1][:2] == (47, 47)
    assert any("names/s, ETA" in s for _, _, s in seen[1:])


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_two_ray_workers_encode_each_missing_shard_once(tmp_path, tiny_encoder, tiny_encoder_dir):
    """Shards as Ray tasks over 2 local workers (one model each): every missing shard handed out once, the
    vectors those of in-process encoding, and a shard already done is not encoded again."""
    pytest.importorskip("ray")
    from probekit.vocab.ray_shards import encode_on_ray

    rows = shards.read_rows(open_source("names", names_file(tmp_path)), shard_size=10)
    local = shards.encode(tiny_encoder, rows, batch_size=4)
    expected = [np.array(s) for s in local.shards()]  # copies: the Ray workers replace shards 2 and 4
    local.receipt(2).unlink()
    local.receipt(4).unlink()
    vectors, how = encode_on_ray(str(tiny_encoder_dir), rows, workers=2, batch_size=4)
    assert vectors.folder == local.folder and sorted(how["assigned"]) == [2, 4] and vectors.complete
    for a, b in zip(vectors.shards(), expected):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)  # other processes, same threads and batches
