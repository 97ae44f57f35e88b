"""vocab.search: the sharded index ranks exactly as EntityIndex (same rule, probekit.index_rank), approximate kinds
measure their recall, twins are found by row hashes, and a saved index never loads half-written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from probekit import cache
from probekit.datasets import load_dataset
from probekit.errors import ProbekitError
from probekit.index import EntityIndex, candidate_embeddings, row_hashes, twin_groups
from probekit.ranking import Excluded, gold_indices
from probekit.vocab import index_shards
from probekit.vocab.index_kinds import AUTO_EXACT_MAX, KIND_NAMES
from probekit.vocab.search import TUNING_QUERIES, ShardedIndex

ROOT = Path(__file__).resolve().parent.parent


def _split(vectors: np.ndarray, cuts) -> list[np.ndarray]:
    return [vectors[a:b] for a, b in zip([0, *cuts], [*cuts, len(vectors)])]


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 1,024 rows: a pass crosses many blocks and shard boundaries inside blocks' reach."""
    monkeypatch.setattr(index_shards, "BLOCK_BYTES", 1024 * 4)


def _synthetic(n: int, dim: int, *, seed: int = 0, twins: int = 0, clusters: int = 0) -> np.ndarray:
    """(n + twins, dim) float16 names: random (or around ``clusters`` centres), the first ``twins`` rows repeated
    at the end (an uncased model's case variants share a vector)."""
    rng = np.random.default_rng(seed)
    if clusters:
        centres = rng.normal(size=(clusters, dim))
        x = centres[rng.integers(0, clusters, n)] + 0.35 * rng.normal(size=(n, dim))
    else:
        x = rng.normal(size=(n, dim))
    x = x.astype(np.float16)
    return np.concatenate([x, x[:twins]])


# ---------------------------------------------------------------- exact streaming == EntityIndex
@pytest.mark.parametrize("similarity", ["cosine", "l2", "dot"])
def test_exact_streaming_equals_entity_index_on_50k_names(similarity, small_blocks):
    vec = _synthetic(50_000, 48, seed=1, twins=300)
    n = len(vec)
    rng = np.random.default_rng(2)
    queries = rng.normal(size=(120, 48)).astype(np.float32)
    queries[:40] = vec[rng.integers(0, 300, 40)].astype(np.float32) + 0.02 * queries[:40]  # best answers twinned
    golds = [[int(g) for g in rng.choice(n, size=int(rng.integers(0, 4)), replace=False)] + [None]
             for _ in range(120)]
    golds[0] = [50_000, 0]  # a twin pair: both golds
    exclude = [[int(e) for e in rng.choice(n, size=int(rng.integers(0, 3)), replace=False)] for _ in range(120)]
    want_idx = EntityIndex(vec.astype(np.float32), similarity=similarity)
    got_idx = ShardedIndex.build(_split(vec, [7_001, 20_000, 20_500, 41_999]), similarity=similarity)
    assert len(got_idx) == n and got_idx.info()["approximate"] is False
    for k in (1, 10):
        assert got_idx.rank(queries, golds, k, exclude=exclude) == want_idx.rank(queries, golds, k, exclude=exclude)


def test_exact_streaming_equals_entity_index_on_the_demo(tiny_encoder, small_blocks):
    """The shipped demo through a real (tiny) encoder, in three float32 shards."""
    ds = load_dataset("demo")
    cands = ds.candidates("heads+tails")
    layer = tiny_encoder.num_layers
    vec = candidate_embeddings(tiny_encoder, cands, layers=[layer], pooling="mean")[layer]
    queries = ds.queries[:150]
    qvec = cache.embeddings(tiny_encoder, [q.text(tiny_encoder.mask_token) for q in queries], layers=[layer],
                            pooling="mean", max_length=50)[layer]
    none = Excluded()
    golds = [gold_indices(q, cands, none) for q in queries]
    want_idx = EntityIndex(vec, similarity="cosine")
    third = len(vec) // 3
    got_idx = ShardedIndex.build(_split(vec.astype(np.float32), [third, 2 * third]), similarity="cosine")
    assert got_idx._twins == want_idx._twins
    for k in (1, 10):
        assert got_idx.rank(qvec, golds, k) == want_idx.rank(qvec, golds, k)


@pytest.mark.parametrize("similarity", ["cosine", "l2"])
def test_torch_gold_counts_follow_the_same_rule(similarity, small_blocks):
    """The torch counter (a GPU's, here on the CPU) against the numpy one: equal ranks wherever no candidate lies
    within float32 noise of a gold's threshold (none does on random data), twins and exclusions included."""
    vec = _synthetic(6_000, 32, seed=11, twins=50)
    rng = np.random.default_rng(12)
    q = rng.normal(size=(40, 32)).astype(np.float32)
    q[:10] = vec[:10].astype(np.float32)  # golds with twins, at the top
    golds = [[int(i), 6_000 + int(i) if i < 50 else None] for i in rng.integers(0, 6_050, 40)]
    golds[:10] = [[i, 6_000 + i] for i in range(10)]
    exclude = [[int(rng.integers(0, 6_050))] for _ in range(40)]
    shards = _split(vec, [2_500])
    want = ShardedIndex.build(shards, similarity=similarity, device="numpy").rank(q, golds, 10, exclude=exclude)
    got = ShardedIndex.build(shards, similarity=similarity, device="cpu").rank(q, golds, 10, exclude=exclude)
    assert got == want
    assert [r[2] for r in got[:10]] == [[1, 1]] * 10


def test_exact_search_is_the_faiss_top_k():
    vec = _synthetic(3_000, 16, seed=3)
    q = np.random.default_rng(4).normal(size=(5, 16)).astype(np.float32)
    s_want, i_want = EntityIndex(vec.astype(np.float32), similarity="l2").search(q, 7)
    s_got, i_got = ShardedIndex.build(_split(vec, [1_000]), similarity="l2").search(q, 7)
    assert (i_got == i_want).all() and np.allclose(s_got, s_want, rtol=1e-6)


# ---------------------------------------------------------------- approximate kinds: recall measured
@pytest.mark.parametrize("kind,n,params,bound", [("ivf-flat", 20_000, {}, 0.98),
                                                 ("ivf-pq", 20_000, {"m": 16, "nlist": 64}, 0.95),
                                                 ("hnsw", 4_000, {}, 0.95)])
def test_approximate_recall_is_measured_and_gold_ranks_stay_exact(kind, n, params, bound):
    """On clustered names (real embeddings cluster; uniform noise is the worst case for any ANN index)."""
    vec = _synthetic(n, 32, seed=5, clusters=100)
    shards = _split(vec, [n // 3, n // 2])
    rng = np.random.default_rng(6)
    q = vec[rng.integers(0, n, 60)].astype(np.float32) + 0.2 * rng.normal(size=(60, 32)).astype(np.float32)
    approx = ShardedIndex.build(shards, similarity="cosine", kind=kind, params=params)
    exact = ShardedIndex.build(shards, similarity="cosine")
    recall = approx.recall_at_k(q, 10)
    _, want = exact.search(q, 10)
    _, got = approx.search(q, 10)
    assert recall == pytest.approx(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(want.tolist(), got.tolist())]))
    assert recall >= bound
    info = approx.info()
    assert info["approximate"] is True and info["kind"] == kind and info["recall"] == {"k": 10, "queries": 60,
                                                                                         "recall": recall}
    golds = [[int(g)] for g in rng.integers(0, n, 60)]
    golds[:20] = [[int(i[3])] for i in want[:20]]  # golds inside the top-10: always listed, exactly ranked
    got_rank, want_rank = approx.rank(q, golds, 10), exact.rank(q, golds, 10)
    assert [r for _, _, r in got_rank] == [r for _, _, r in want_rank]
    for (ids, scores, ranks), g in zip(got_rank[:20], golds[:20]):
        assert g[0] in ids and ids.index(g[0]) == ranks[0] - 1 and scores == sorted(scores, reverse=True)


def test_kinds_registry_and_parameters():
    vec = _synthetic(500, 8)
    with pytest.raises(ProbekitError, match=r"unknown index kind 'hnws'; did you mean 'hnsw'.*available: .*exact"):
        ShardedIndex.build([vec], kind="hnws")
    with pytest.raises(ProbekitError, match="has no parameter 'nlsit'"):
        ShardedIndex.build([vec], kind="ivf-flat", params={"nlsit": 4})
    with pytest.raises(ProbekitError, match="nprobe must be a positive integer"):
        ShardedIndex.build([vec], kind="ivf-flat", params={"nprobe": 0})
    with pytest.raises(ProbekitError, match="float16 or float32"):
        ShardedIndex.build([vec.astype(np.int8)])
    assert ShardedIndex.build([vec], kind="auto").info()["kind"] == "exact"
    assert AUTO_EXACT_MAX > 500 and set(KIND_NAMES) >= {"exact", "auto"}
    idx = ShardedIndex.build([vec], kind="ivf-flat", params={"nlist": 4, "nprobe": 4})
    assert idx.info()["params"]["nlist"] == 4 and idx.recall_at_k(vec[:20], 5) == 1.0  # all cells probed


def test_ivf_build_tunes_nprobe_to_the_measured_recall_within_a_quarter():
    """The rule (``ShardedIndex._tune_to_recall``): nprobe doubles until the recall measured on the build's sample
    reaches the target, then the last step is bisected "while the bracket is wider than a quarter of its lower
    end": the kept nprobe reached the target (or is nlist), and an nprobe a quarter below it did not."""
    vec = _synthetic(8_000, 32, seed=13, clusters=400)
    nlist, target = 64, 0.99

    def built(nprobe: int, target_recall):
        return ShardedIndex.build([vec], kind="ivf-flat", params={"nlist": nlist, "nprobe": nprobe,
                                                                    "target_recall": target_recall})
    fixed = built(1, None)
    assert fixed.params["nprobe"] == 1 and fixed.recall is not None and fixed.recall["recall"] < target
    tuned = built(1, target)
    nprobe = tuned.params["nprobe"]
    assert tuned.recall is not None and (tuned.recall["recall"] >= target or nprobe == nlist)
    assert built(nprobe, None).recall == tuned.recall  # the recall kept is the one of the nprobe kept
    below = built(nprobe - max(1, (nprobe - 1) // 4), None)
    assert below.recall is not None and below.recall["recall"] < target
    assert tuned.recall == {"k": 10, "queries": 200, "recall": tuned.recall["recall"], "on": TUNING_QUERIES}


# ---------------------------------------------------------------- twins by row hashes
def _unique_groups(rows: np.ndarray) -> list[list[int]]:
    """The grouping EntityIndex used before: np.unique over whole rows as bytes."""
    view = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.shape[1] * rows.dtype.itemsize))).ravel()
    _, group, sizes = np.unique(view, return_inverse=True, return_counts=True)
    out: dict[int, list[int]] = {}
    for i, g in enumerate(group.ravel().tolist()):
        if sizes[g] > 1:
            out.setdefault(g, []).append(i)
    return sorted(out.values())


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_twin_hashing_equals_the_unique_grouping(dtype):
    rng = np.random.default_rng(8)
    base = rng.normal(size=(400, 24)).astype(dtype)
    rows = np.concatenate([base, base[[5, 5, 17, 399]], base[:3] * 2])  # case variants; doubled rows differ
    rows[-1, 0] = np.nextafter(rows[3, 0], np.inf).astype(dtype)  # a near-duplicate is no twin
    assert twin_groups(row_hashes(rows), lambda ids: rows[ids]) == _unique_groups(rows) == [[5, 400, 401],
                                                                                             [17, 402], [399, 403]]


def test_twin_hashing_survives_hash_collisions():
    rows = np.arange(40, dtype=np.float32).reshape(10, 4)
    rows[7] = rows[2]
    colliding = np.zeros(10, dtype=np.uint64)  # every row in one bucket: bytes decide
    assert twin_groups(colliding, lambda ids: rows[ids]) == [[2, 7]]


# ---------------------------------------------------------------- saved indexes: atomic, never half-read
def test_save_load_round_trip_and_refusals(tmp_path):
    vec = _synthetic(2_000, 16, seed=9, clusters=20, twins=5)
    shards = _split(vec, [900])
    idx = ShardedIndex.build(shards, kind="ivf-flat")
    idx.recall_at_k(vec[:30].astype(np.float32), 5)
    idx.save(tmp_path / "i")
    back = ShardedIndex.load(tmp_path / "i", shards)
    q = vec[:10].astype(np.float32)
    assert back.info() == idx.info() and back._twins == idx._twins
    assert all((a == b).all() for a, b in zip(back.search(q, 5), idx.search(q, 5)))
    with pytest.raises(ProbekitError, match="built over other vectors"):
        ShardedIndex.load(tmp_path / "i", _split(vec, [901]))
    data = (tmp_path / "i" / "index.faiss").read_bytes()
    (tmp_path / "i" / "index.faiss").write_bytes(data[: len(data) // 2])  # a file cut short
    with pytest.raises(ProbekitError, match="missing or incomplete"):
        ShardedIndex.load(tmp_path / "i", shards)
    (tmp_path / "i" / "index.json").unlink()
    with pytest.raises(ProbekitError, match="no complete index"):
        ShardedIndex.load(tmp_path / "i", shards)


def test_a_save_killed_midway_never_loads_as_complete(tmp_path):
    """SIGKILL a process that keeps re-saving an index: what is on disk then loads whole, or is refused."""
    folder, data = tmp_path / "idx", tmp_path / "v.npy"
    np.save(data, _synthetic(30_000, 64, seed=10, clusters=50))
    code = textwrap.dedent(f"""
        import sys, numpy as np
        from probekit.vocab.search import ShardedIndex
        v = np.load({str(data)!r}, mmap_mode="r")
        idx = ShardedIndex.build([v], kind="ivf-flat")
        print("built", flush=True)
        while True:
            idx.save({str(folder)!r})
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "built"
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    v = np.load(data, mmap_mode="r")
    try:
        back = ShardedIndex.load(folder, [v])
    except ProbekitError as e:
        assert "no complete index" in str(e) or "missing or incomplete" in str(e)
    else:
        fresh = ShardedIndex.build([v], kind="ivf-flat")
        q = np.asarray(v[:20], dtype=np.float32)
        assert (back.search(q, 5)[1] == fresh.search(q, 5)[1]).all()


@pytest.mark.parametrize("kind", ["ivf-flat", "ivf-pq"])
def test_ivf_lists_sized_before_filling_equal_faiss_add(kind, small_blocks, monkeypatch):
    """The rule of the IVF fill (index_kinds._fill_ivf): every vector goes to the cell the quantizer assigns it,
    each list holds its ids in increasing order with the codes faiss's own ``add`` writes, so list by list (ids and
    code bytes) and answer by answer the index equals one filled by ``index.add`` block by block; only its lists
    are sized once instead of growing by doubling."""
    import faiss

    from probekit.vocab import index_kinds as kinds

    vec = _synthetic(6000, 32, seed=3, clusters=40)
    shards = index_shards.Shards(_split(vec, [2500, 2600]), similarity="cosine")
    params = {"nlist": 32, "nprobe": 4, "m": 8, "fp16": True, "refine": 2, "target_recall": None}
    build = kinds.KINDS[kind].build
    assert build is not None
    ours = build(shards, params, faiss.METRIC_INNER_PRODUCT, None)
    monkeypatch.setattr(kinds, "_fill_ivf", kinds._fill)  # the same training, filled by faiss's add
    theirs = build(shards, params, faiss.METRIC_INNER_PRODUCT, None)
    a, b = faiss.extract_index_ivf(ours), faiss.extract_index_ivf(theirs)
    assert a.ntotal == b.ntotal == shards.n
    for cell in range(a.nlist):
        n = a.invlists.list_size(cell)
        assert n == b.invlists.list_size(cell)
        if n:
            size = a.invlists.code_size
            assert np.array_equal(faiss.rev_swig_ptr(a.invlists.get_ids(cell), n),
                                  faiss.rev_swig_ptr(b.invlists.get_ids(cell), n))
            assert np.array_equal(faiss.rev_swig_ptr(a.invlists.get_codes(cell), n * size),
                                  faiss.rev_swig_ptr(b.invlists.get_codes(cell), n * size))
    q = shards.rows(np.arange(0, shards.n, 97))
    a.nprobe = b.nprobe = 4
    assert np.array_equal(ours.search(q, 10)[1], theirs.search(q, 10)[1])


def test_measured_recall_is_the_mean_overlap_with_exact_and_leaves_the_index_alone():
    """recall@k = mean over queries of |exact top-k ∩ this index's top-k| / k (a naive loop over the two
    searches); measuring on other queries does not replace the recall the index was built with."""
    vec = _synthetic(4_000, 32, seed=5, clusters=200)
    idx = ShardedIndex.build([vec], kind="ivf-flat", params={"nlist": 32, "nprobe": 2, "target_recall": None})
    exact = ShardedIndex.build([vec], kind="exact")
    built = dict(idx.recall or {})
    q = np.random.default_rng(1).normal(size=(30, 32)).astype(np.float32)
    got = idx.measure_recall(q, 7)
    want_ids, ids = exact.search(q, 7)[1], idx.search(q, 7)[1]
    naive = sum(len(set(w.tolist()) & set(g.tolist())) / 7 for w, g in zip(want_ids, ids)) / len(q)
    assert got == {"k": 7, "queries": 30, "recall": pytest.approx(naive, abs=1e-12)}
    assert 0.0 < got["recall"] < 1.0  # an index that misses some: the measurement is not trivially 1
    assert idx.recall == built
    assert exact.measure_recall(q, 7)["recall"] == 1.0
