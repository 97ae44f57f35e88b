"""index: faiss search against brute-force numpy, and the embedding cache (memo, disk, keys, corrupt files)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from probekit import cache, config, index
from probekit.errors import ProbekitError
from probekit.index import EntityIndex, build_index, candidate_embeddings, embedding_key
from probekit.types import CandidateSet

NAMES = ["aspirin", "type 2 diabetes", "pain", "fever", "myocardial infarction", "stroke", "rickets", "insulin"]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _brute(vectors, queries, similarity):
    """(n_queries, n_names) scores, higher is better, computed the obvious way."""
    v, q = vectors.astype(np.float64), queries.astype(np.float64)
    if similarity == "cosine":
        v = v / np.linalg.norm(v, axis=1, keepdims=True)
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
    if similarity == "l2":
        return -np.array([[((qi - vj) ** 2).sum() for vj in v] for qi in q])
    return np.array([[qi @ vj for vj in v] for qi in q])


@pytest.mark.parametrize("similarity", ["cosine", "dot", "l2"])
def test_search_equals_brute_force(similarity):
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(60, 8)).astype(np.float32)
    queries = rng.normal(size=(5, 8)).astype(np.float32)
    idx = EntityIndex(vectors, similarity=similarity)
    scores, ids = idx.search(queries, 7)
    want = _brute(vectors, queries, similarity)
    assert scores.shape == ids.shape == (5, 7)
    for row in range(5):
        order = np.argsort(-want[row], kind="stable")[:7]
        assert list(ids[row]) == list(order)
        np.testing.assert_allclose(scores[row], want[row][order], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(idx.all_scores(queries), want, rtol=1e-4, atol=1e-4)
    assert len(idx) == 60


def test_k_larger_than_index_and_bad_similarity():
    vectors = np.eye(3, dtype=np.float32)
    scores, ids = EntityIndex(vectors).search(vectors[:1], 10)
    assert ids.shape == (1, 3) and ids[0, 0] == 0
    with pytest.raises(ProbekitError, match="unknown similarity 'jaccard'"):
        EntityIndex(vectors, similarity="jaccard")


@pytest.fixture
def count_encodes(monkeypatch):
    """Count the candidate-encoding passes that the index asks for (and which layers)."""
    calls = []
    real = cache.encode_layers

    def counting(model, texts, *, layers, **kw):
        calls.append(list(layers))
        return real(model, texts, layers=layers, **kw)

    monkeypatch.setattr(cache, "encode_layers", counting)
    return calls


def test_index_vectors_equal_encoder(tiny_encoder):
    from probekit.encode import encode

    cands = CandidateSet.from_names(NAMES)
    idx = build_index(tiny_encoder, cands, layer=1, pooling="cls", similarity="dot")
    np.testing.assert_allclose(idx.vectors, encode(tiny_encoder, NAMES, layer=1, pooling="cls", max_length=25),
                               atol=1e-6)


def test_cache_hits_skip_encoding(tiny_encoder, count_encodes):
    cands = CandidateSet.from_names(NAMES)
    first = build_index(tiny_encoder, cands, pooling="mean")
    assert count_encodes == [[2]]
    assert build_index(tiny_encoder, cands, pooling="mean") is first  # in-process memo
    index.clear_memo()
    again = build_index(tiny_encoder, cands, pooling="mean")  # from the disk cache
    assert count_encodes == [[2]]
    np.testing.assert_array_equal(again.vectors, first.vectors)
    build_index(tiny_encoder, cands, pooling="mean", similarity="l2")  # another similarity: same embeddings
    assert count_encodes == [[2]]
    files = list((config.cache_dir() / "embeddings").glob("*.npy"))
    assert len(files) == 1 and not list((config.cache_dir() / "embeddings").glob("*.tmp.npy"))


def test_cache_key_changes(tiny_encoder, tiny_mlm, count_encodes):
    cands = CandidateSet.from_names(NAMES)
    base = embedding_key(tiny_encoder, cands, layer=2, pooling="mean")
    variants = {
        embedding_key(tiny_encoder, cands, layer=1, pooling="mean"),
        embedding_key(tiny_encoder, cands, layer=2, pooling="cls"),
        embedding_key(tiny_encoder, CandidateSet.from_names(NAMES[:-1]), layer=2, pooling="mean"),
        embedding_key(tiny_encoder, CandidateSet.from_names(NAMES[::-1]), layer=2, pooling="mean"),
        embedding_key(tiny_encoder, cands, layer=2, pooling="mean", max_length=10),
        embedding_key(tiny_mlm, cands, layer=2, pooling="mean"),
    }
    assert base not in variants and len(variants) == 6
    assert base == embedding_key(tiny_encoder, CandidateSet.from_names(NAMES), layer=2, pooling="mean")
    build_index(tiny_encoder, cands, layer=2, pooling="mean")
    build_index(tiny_encoder, cands, layer=1, pooling="mean")
    build_index(tiny_encoder, cands, layer=1, pooling="cls")
    build_index(tiny_encoder, CandidateSet.from_names(NAMES[:-1]), layer=1, pooling="cls")
    assert count_encodes == [[2], [1], [1], [1]]


def test_only_missing_layers_encoded(tiny_encoder, count_encodes):
    cands = CandidateSet.from_names(NAMES)
    candidate_embeddings(tiny_encoder, cands, layers=[1], pooling="mean")
    out = candidate_embeddings(tiny_encoder, cands, layers=[0, 1, 2], pooling="mean")
    assert count_encodes == [[1], [0, 2]] and sorted(out) == [0, 1, 2]
    assert all(v.shape == (len(NAMES), 32) for v in out.values())


@pytest.mark.parametrize("damage", ["garbage", "truncated", "wrong_shape"])
def test_corrupt_cache_file_is_rebuilt(tiny_encoder, count_encodes, damage):
    cands = CandidateSet.from_names(NAMES)
    good = build_index(tiny_encoder, cands).vectors.copy()
    path = config.cache_dir() / "embeddings" / f"{embedding_key(tiny_encoder, cands, layer=2, pooling='mean')}.npy"
    if damage == "garbage":
        path.write_bytes(b"not a numpy file at all")
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:200])
    else:
        np.save(path, np.zeros((3, 32), dtype=np.float32))
    index.clear_memo()
    rebuilt = build_index(tiny_encoder, cands)
    assert count_encodes == [[2], [2]]
    np.testing.assert_allclose(rebuilt.vectors, good, atol=1e-6)
    assert np.load(path).shape == (len(NAMES), 32)  # the file is whole again


def test_no_cache(tiny_encoder, count_encodes):
    cands = CandidateSet.from_names(NAMES)
    build_index(tiny_encoder, cands, use_cache=False)
    build_index(tiny_encoder, cands, use_cache=False)
    assert count_encodes == [[2], [2]]
    assert not (config.cache_dir() / "embeddings").exists() or not list((config.cache_dir() / "embeddings").iterdir())


def test_empty_candidates(tiny_encoder):
    with pytest.raises(ProbekitError, match="candidate set is empty"):
        build_index(tiny_encoder, CandidateSet.from_names([]))


def test_fast_mode_has_its_own_cache_entry(tiny_encoder, count_encodes):
    cands = CandidateSet.from_names(NAMES)
    assert embedding_key(tiny_encoder, cands, layer=2, pooling="mean", fast=True) != \
        embedding_key(tiny_encoder, cands, layer=2, pooling="mean")
    exact = build_index(tiny_encoder, cands)
    fast = build_index(tiny_encoder, cands, fast=True)
    assert count_encodes == [[2], [2]] and fast is not exact
    cos = (exact.vectors * fast.vectors).sum(1)  # both normalised (cosine)
    assert cos.min() > 0.99  # int8 weights: close, not equal
