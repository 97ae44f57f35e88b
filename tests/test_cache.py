"""cache: the one embedding cache for names and queries (keys, memo bound, atomic files, live queries)."""

from __future__ import annotations

import numpy as np
import pytest

from probekit import cache, config
from probekit.probes import get_probe
from probekit.types import CandidateSet, Query

TEXTS = ["aspirin might treat [MASK].", "metformin might treat [MASK].", "insulin may prevent [MASK]."]


@pytest.fixture
def calls(monkeypatch):
    seen = []
    real = cache.encode_layers

    def counting(model, texts, *, layers, **kw):
        seen.append((len(texts), tuple(layers)))
        return real(model, texts, layers=layers, **kw)

    monkeypatch.setattr(cache, "encode_layers", counting)
    return seen


def test_one_pass_for_missing_layers_then_memo_then_disk(tiny_encoder, calls):
    a = cache.embeddings(tiny_encoder, TEXTS, layers=[1, 2], pooling="mean", max_length=50)
    b = cache.embeddings(tiny_encoder, TEXTS, layers=[0, 1, 2], pooling="mean", max_length=50)
    assert calls == [(3, (1, 2)), (3, (0,))]
    assert b[1] is a[1]  # memo
    cache.clear_memo()
    c = cache.embeddings(tiny_encoder, TEXTS, layers=[2], pooling="mean", max_length=50)
    assert len(calls) == 2 and c[2] is not a[2]
    np.testing.assert_array_equal(c[2], a[2])
    files = list(cache.folder().iterdir())
    assert len(files) == 3 and all(f.suffix == ".npy" and not f.name.startswith(".") for f in files)


def test_key_covers_what_produced_the_vectors(tiny_encoder, tiny_mlm):
    key = cache.texts_key(TEXTS)
    base = cache.embedding_key(tiny_encoder, texts=key, layer=2, pooling="mean", max_length=50)
    others = {
        cache.embedding_key(tiny_encoder, texts=cache.texts_key(TEXTS[::-1]), layer=2, pooling="mean", max_length=50),
        cache.embedding_key(tiny_encoder, texts=key, layer=1, pooling="mean", max_length=50),
        cache.embedding_key(tiny_encoder, texts=key, layer=2, pooling="cls", max_length=50),
        cache.embedding_key(tiny_encoder, texts=key, layer=2, pooling="mean", max_length=25),
        cache.embedding_key(tiny_encoder, texts=key, layer=2, pooling="mean", max_length=50, fast=True),  # int8
        cache.embedding_key(tiny_mlm, texts=key, layer=2, pooling="mean", max_length=50),
    }
    assert base not in others and len(others) == 6
    assert cache.texts_key(CandidateSet.from_names(["a", "b"]).names) == CandidateSet.from_names(["a", "b"]).key


def test_memo_is_bounded(tiny_encoder, monkeypatch):
    one = cache.embeddings(tiny_encoder, TEXTS, layers=[2], pooling="mean", max_length=50)[2]
    monkeypatch.setattr(cache, "MEMO_BYTES", one.nbytes + 1)
    cache.embeddings(tiny_encoder, TEXTS[:2], layers=[2], pooling="mean", max_length=50)
    assert sum(v.nbytes for v in cache._MEMO.values()) <= one.nbytes + 1
    monkeypatch.setattr(cache, "MEMO_BYTES", 10)  # too large to memoise at all: the disk cache still has it
    cache.clear_memo()
    cache.embeddings(tiny_encoder, TEXTS, layers=[1], pooling="mean", max_length=50)
    assert not cache._MEMO and len(list(config.cache_dir().joinpath("embeddings").glob("*.npy"))) == 3


def test_a_failed_write_leaves_no_file(tmp_path, monkeypatch):
    def broken(f, vec, allow_pickle):
        f.write(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(np, "save", broken)
    with pytest.raises(OSError, match="disk full"):
        cache.save_npy(np.zeros((2, 2), dtype=np.float32), tmp_path / "x.npy")
    assert list(tmp_path.iterdir()) == []


def test_a_single_live_query_is_not_cached_but_query_sets_are(tiny_encoder, calls):
    cands = CandidateSet.from_names(["pain", "fever", "stroke"])
    q = [Query(f"q{i}", "aspirin", "r", "[X] treats [Y].", golds=("pain",)) for i in range(2)]
    probe = get_probe("retrieval")
    probe.rank(tiny_encoder, q[:1], cands, k=2)
    probe.rank(tiny_encoder, q[:1], cands, k=2)
    assert [n for n, _ in calls] == [3, 1, 1]  # names once; the live query each time
    probe.rank(tiny_encoder, q, cands, k=2)
    probe.rank(tiny_encoder, q, cands, k=2)
    assert [n for n, _ in calls] == [3, 1, 1, 2]
