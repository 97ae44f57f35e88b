"""index: faiss search against brute-force numpy, and the embedding cache (memo, disk, keys, corrupt files)."""

from __future__ import annotations

import numpy as np
import pytest

from probekit import cache, config, index
from probekit.errors import ProbekitError
from probekit.index import EntityIndex, build_index, candidate_embeddings, embedding_key
from probekit.types import CandidateSet

NAMES = ["aspirin", "type 2 diabetes", "pain", "fever", "myocardial infarction", "stroke", "rickets", "insulin"]


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


# ---------------------------------------------------------------- EntityIndex.rank: faiss top-k + counted gold ranks
def _reference(scores: np.ndarray, k: int, golds, exclude=()):
    """The documented rule on one row of exact (float64) scores, written as a plain loop."""
    ids = [i for i in range(len(scores)) if i not in set(exclude)]
    gold_set = {g for g in golds if g is not None and g not in set(exclude)}
    top = sorted(ids, key=lambda i: (-scores[i], i not in gold_set, i))[:k]
    ranks = [None if g is None or g in set(exclude) else 1 + sum(scores[i] > scores[g] for i in ids) for g in golds]
    return top, ranks


def _exact(vectors, queries, similarity):
    return _brute(vectors, queries, similarity)


@pytest.mark.parametrize("similarity", ["cosine", "dot", "l2"])
@pytest.mark.parametrize("name_chunk", [7, 8192])
def test_rank_equals_the_tie_rule(similarity, name_chunk, monkeypatch):
    """Gold rank = 1 + number of candidates scoring strictly higher; top-k lists golds first among equal scores,
    then lower ids (probes/base.py). Exact duplicates (an uncased model's case variants) are exact ties."""
    monkeypatch.setattr(index, "NAME_CHUNK", name_chunk)  # several candidate chunks: no full score matrix
    rng = np.random.default_rng(7)
    base = rng.normal(size=(40, 16)).astype(np.float32)
    vectors = np.concatenate([base, base[[3, 3, 10, 25]]])  # ids 40, 41 duplicate 3; 42 dup 10; 43 dup 25
    queries = rng.normal(size=(30, 16)).astype(np.float32)
    queries[:5] = base[[3, 10, 25, 0, 1]] + 0.01 * queries[:5]  # queries whose best answers are duplicated
    golds = [[int(g) for g in rng.choice(44, size=int(rng.integers(0, 4)), replace=False)] + [None]
             for _ in range(30)]
    golds[0] = [41, 3]  # the gold is one of three identical vectors at the top
    golds[1] = [42]
    golds[2] = [43, 25, 40]
    idx = EntityIndex(vectors, similarity=similarity)
    exact = _exact(vectors, queries, similarity)
    for k in (1, 3, 10):
        for (ids, scores, ranks), row, g in zip(idx.rank(queries, golds, k), exact, golds):
            want_top, want_ranks = _reference(row, k, g)
            assert ranks == want_ranks
            assert ids == want_top
            np.testing.assert_allclose(scores, row[want_top], rtol=1e-4, atol=1e-4)
    top, _, ranks = idx.rank(queries[:1], [[41, 3]], 3)[0]
    assert top[:2] == [3, 41] and ranks == [1, 1]  # both golds first, then the third copy
    assert top[2] == 40


def test_rank_near_ties_across_paths_go_to_the_gold():
    """faiss and numpy sum the same products in different orders; a gold whose vector equals another's must
    not lose the tie to float noise on either path (top-1 and rank 1 agree)."""
    rng = np.random.default_rng(0)
    base = rng.normal(size=(500, 384)).astype(np.float32)
    vectors = np.concatenate([base, base[:50]])  # 50 exact duplicates
    queries = base[:50] + 1e-3 * rng.normal(size=(50, 384)).astype(np.float32)
    idx = EntityIndex(vectors, similarity="cosine")
    for gold_is_copy in (False, True):
        golds = [[500 + i if gold_is_copy else i] for i in range(50)]
        for i, (ids, _, ranks) in enumerate(idx.rank(queries, golds, 1)):
            assert ranks == [1] and ids == golds[i]


def test_rank_exclude_is_as_if_absent():
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(60, 8)).astype(np.float32)
    queries = rng.normal(size=(6, 8)).astype(np.float32)
    exact = _exact(vectors, queries, "dot")
    exclude = [[int(np.argmax(row))] for row in exact]  # every query's best candidate
    exclude[1] += [5, 6]
    golds = [[int(np.argmax(row)), int(np.argsort(-row)[4]), None] for row in exact]
    idx = EntityIndex(vectors, similarity="dot")
    for (ids, _, ranks), row, g, ex in zip(idx.rank(queries, golds, 4, exclude=exclude), exact, golds, exclude):
        assert ranks[0] is None  # an excluded gold is not a candidate
        want_top, want_ranks = _reference(row, 4, g, ex)
        assert ids == want_top and ranks == want_ranks and not set(ids) & set(ex)
        assert ranks[1] == 4  # the 5th best, with the best left out


def test_rank_widens_the_search_over_long_ties():
    vectors = np.ones((100, 4), dtype=np.float32)  # all tied
    idx = EntityIndex(vectors, similarity="dot")
    ids, scores, ranks = idx.rank(np.ones((1, 4), dtype=np.float32), [[97]], 3)[0]
    assert ids == [97, 0, 1] and ranks == [1] and scores == [4.0, 4.0, 4.0]


def test_index_holds_one_copy_of_the_vectors():
    vectors = np.random.default_rng(0).normal(size=(1000, 32)).astype(np.float32)
    idx = EntityIndex(vectors, similarity="cosine")
    view = idx.vectors
    assert not view.flags.owndata and not view.flags.writeable  # a view into faiss' own storage
    assert view.__array_interface__["data"][0] == idx.vectors.__array_interface__["data"][0]
    np.testing.assert_allclose(np.linalg.norm(view, axis=1), 1, rtol=1e-5)
