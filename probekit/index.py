"""Exact faiss search over entity-name embeddings, built once per (model, layer, pooling, names, similarity).

The vectors live in ONE place: the faiss index (``IndexFlatIP``, or ``IndexFlatL2`` for ``l2``; cosine
is inner product on normalised vectors). :meth:`EntityIndex.rank` scores the candidates once, chunk by
chunk: each chunk's scores give both the count of candidates beating each gold (whose own score comes from
its vector alone) and a running top-k, so the full query x candidate matrix is never materialised and no
second product (a faiss search) scores every candidate again: faiss's flat kernel re-scores only the few kept
per query (the listed scores stay faiss's), and searches only when a tie group at the k-th place reaches past
the kept width. Raw vectors come from
the one embedding cache (:mod:`probekit.cache`); built indexes are kept in a small in-process memo so
warm queries skip encoding, disk and indexing.

Tie rule (as :func:`probekit.probes.base.top_k_and_gold_ranks`): a gold's rank is 1 + the number of
candidates scoring strictly higher; among equal scores the top-k lists golds first, then lower ids.
faiss and numpy compute the same dot products in different orders, so two scores are "equal" when
they differ by less than :data:`TIE_TOLERANCE` times the scale of the scores (float32 noise), and
such near-ties are settled in favour of the gold on both paths; candidates whose vector is identical
to the gold's (an uncased model's case variants) always tie with it.
"""

from __future__ import annotations

from collections.abc import Sequence

import faiss
import numpy as np

from . import cache
from .errors import ProbekitError
from .index_rank import (
    TIE_TOLERANCE,
    GoldCounter,
    RunningTop,
    pair_scores,
    partial_scores,
    prepare,
    score_scale,
    search_width,
    top_k_by_rule,
)
from .jobs import Progress
from .memo import Memo
from .models import LoadedModel
from .types import CandidateSet

SIMILARITIES = ("cosine", "l2", "dot")
NAME_MAX_LENGTH = 25
NAME_CHUNK = 8192
ADD_CHUNK = 8192
"""Rows prepared (normalised) and added to faiss at a time."""
QUERY_CHUNK = 1024
_INDEX_MEMO_SIZE = 4
_INDEX_MEMO: Memo[str, EntityIndex] = Memo(max_entries=_INDEX_MEMO_SIZE)


def embedding_key(model: LoadedModel, candidates: CandidateSet, *, layer: int, pooling: str,
                  max_length: int = NAME_MAX_LENGTH, fast: bool = False) -> str:
    """The cache key of the candidate names' vectors (see :func:`probekit.cache.embedding_key`)."""
    return cache.embedding_key(model, texts=candidates.key, layer=layer, pooling=pooling, max_length=max_length,
                               fast=fast)


def clear_memo() -> None:
    """Forget built indexes and memoised vectors (the disk cache stays)."""
    _INDEX_MEMO.clear()
    cache.clear_memo()


def candidate_embeddings(model: LoadedModel, candidates: CandidateSet, *, layers: Sequence[int],
                         pooling: str, batch_size: int = 128, progress: Progress | None = None,
                         use_cache: bool = True, fast: bool = False, memo: bool = True,
                         share_layers: Sequence[int] = ()) -> dict[int, np.ndarray]:
    """(n_names, dim) float32 per layer from the one embedding cache (names cut at :data:`NAME_MAX_LENGTH`);
    ``share_layers``: see :func:`probekit.cache.embeddings`."""
    return cache.embeddings(model, candidates.names, layers=layers, pooling=pooling, max_length=NAME_MAX_LENGTH,
                            fast=fast, batch_size=batch_size, progress=progress, use_cache=use_cache, memo=memo,
                            key=candidates.key, share_layers=share_layers)


_prepare = prepare


HASH_CHUNK = 2048
"""Rows hashed per step by :func:`row_hashes` (its uint64 temporaries are a few x HASH_CHUNK x dim x 8 bytes)."""


def row_hashes(rows: np.ndarray) -> np.ndarray:
    """(n_rows,) uint64 hash of each row's bytes: equal rows hash alike; unequal rows rarely collide.

    A fixed random odd multiplier per 32-bit (or 16-bit) word, summed with uint64 wrap-around: one pass over the
    rows in chunks of :data:`HASH_CHUNK`, no sort over whole rows (``np.unique`` over rows sorts byte strings and
    copies the vectors several times). Collisions only cost a byte comparison in :func:`twin_groups`.
    """
    rows = np.ascontiguousarray(rows)
    n = len(rows)
    words = rows.reshape(n, -1).view(np.uint32 if rows.dtype.itemsize == 4 else np.uint16) if n else rows
    out = np.zeros(n, dtype=np.uint64)
    if not n:
        return out
    mult = np.random.default_rng(0x5EED).integers(1, 2**63, size=words.shape[1], dtype=np.uint64) * 2 + 1
    for c0 in range(0, n, HASH_CHUNK):
        w = words[c0:c0 + HASH_CHUNK].astype(np.uint64)  # (chunk, n_words)
        w ^= w >> np.uint64(7)
        out[c0:c0 + HASH_CHUNK] = (w * mult).sum(axis=1, dtype=np.uint64)
    return out


def twin_groups(hashes: np.ndarray, rows_of) -> list[list[int]]:
    """Ids whose rows are byte-identical, as ascending lists (only groups of two or more).

    ``hashes``: (n_rows,) from :func:`row_hashes`; ``rows_of(ids)``: the rows of those ids (any shape per row).
    Only ids sharing a hash are fetched and compared, so the cost is one sort of n integers plus the
    (few) rows that share a hash.
    """
    n = len(hashes)
    if n < 2:
        return []
    order = np.argsort(hashes, kind="stable")  # ids ascending within equal hashes
    h = hashes[order]
    same = h[1:] == h[:-1]  # (n - 1,)
    if not same.any():
        return []
    starts = np.flatnonzero(np.diff(np.concatenate([[0], same.view(np.int8), [0]])) == 1)
    stops = np.flatnonzero(np.diff(np.concatenate([[0], same.view(np.int8), [0]])) == -1) + 1
    groups: list[list[int]] = []
    for a, b in zip(starts.tolist(), stops.tolist()):
        ids = np.sort(order[a:b])
        rows = np.ascontiguousarray(rows_of(ids))
        by_bytes: dict[bytes, list[int]] = {}
        for i, row in zip(ids.tolist(), rows):
            by_bytes.setdefault(row.tobytes(), []).append(i)
        groups += [g for g in by_bytes.values() if len(g) > 1]
    groups.sort()
    return groups


class EntityIndex:
    """Exact (Flat) faiss index over candidate vectors; scores are 'higher is better'.

    For ``l2`` the score is the negated squared distance, so one ranking rule fits all similarities.
    The index owns the only copy of the vectors (:attr:`vectors` is a read-only view into faiss).
    """

    def __init__(self, vectors: np.ndarray, *, similarity: str = "cosine"):
        if similarity not in SIMILARITIES:
            raise ProbekitError(f"unknown similarity {similarity!r}; available: {', '.join(SIMILARITIES)}")
        self.similarity = similarity
        if vectors.ndim != 2:
            raise ProbekitError(f"vectors must be (n_names, dim); got shape {vectors.shape}")
        n, dim = vectors.shape
        self.faiss = faiss.IndexFlatL2(dim) if similarity == "l2" else faiss.IndexFlatIP(dim)
        if n:  # faiss's own storage sized once and filled with prepared chunks: the only full copy, no regrowth
            self.faiss.codes.resize(n * dim * 4)
            store = faiss.rev_swig_ptr(self.faiss.codes.data(), n * dim * 4).view(np.float32).reshape(n, dim)
            for c0 in range(0, n, ADD_CHUNK):
                store[c0:c0 + ADD_CHUNK] = _prepare(vectors[c0:c0 + ADD_CHUNK], similarity)
            self.faiss.ntotal = n
        xb = self.vectors
        self._sq_norms = np.einsum("ij,ij->i", xb, xb)  # (n_names,): l2 scores and the tie scale
        self._max_norm = float(np.sqrt(self._sq_norms.max())) if n else 0.0
        # Identical vectors (an uncased model's case variants) tie exactly, whatever the float noise:
        # id -> the ids sharing its vector, for the ids that have twins.
        self._twins: dict[int, list[int]] = {}
        for ids in twin_groups(row_hashes(xb), lambda ids: xb[ids]):
            for i in ids:
                self._twins[i] = ids

    def __len__(self) -> int:
        return self.faiss.ntotal

    @property
    def dim(self) -> int:
        return self.faiss.d

    @property
    def vectors(self) -> np.ndarray:
        """(n_names, dim) float32: a view of the vectors stored in faiss (no copy; do not write to it)."""
        n, d = self.faiss.ntotal, self.faiss.d
        if n == 0:
            return np.zeros((0, d), dtype=np.float32)
        view = faiss.rev_swig_ptr(self.faiss.get_xb(), n * d).reshape(n, d)
        view.flags.writeable = False
        return view

    @property
    def nbytes(self) -> int:
        return len(self) * self.dim * 4

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """queries: (n_queries, dim) -> scores, ids: (n_queries, k), best first (faiss order)."""
        q = _prepare(queries, self.similarity)
        k = min(k, len(self))
        dist, ids = self.faiss.search(q, k)
        return (-dist if self.similarity == "l2" else dist), ids

    def all_scores(self, queries: np.ndarray) -> np.ndarray:
        """(n_queries, n_names) scores against every candidate; small inputs only (tests, tools)."""
        q = _prepare(queries, self.similarity)
        dots = q @ self.vectors.T  # (n_queries, n_names)
        if self.similarity != "l2":
            return dots
        return -((q * q).sum(1, keepdims=True) - 2 * dots + self._sq_norms[None, :])

    # ------------------------------------------------------------ ranking
    def _scale(self, q: np.ndarray) -> np.ndarray:
        """(n_queries,) magnitude of the scores of each query: the unit of the tie tolerance."""
        return score_scale(self.similarity, q, self._max_norm)

    def _rows_of(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.vectors[ids], self._sq_norms[ids]

    def describe(self) -> str | None:
        """None: an exact index scores every candidate (:meth:`probekit.vocab.search.ShardedIndex.describe`)."""
        return None

    def rank(self, queries: np.ndarray, golds: Sequence[Sequence[int | None]], k: int, *,
             exclude: Sequence[Sequence[int]] | None = None,
             progress: Progress | None = None) -> list[tuple[list[int], list[float], list[int | None]]]:
        """Per query: top-k ids, their scores, and the rank of every gold id (``None`` stays ``None``).

        ``exclude`` lists, per query, candidate ids treated as absent (neither listed nor counted).
        One product over chunks of :data:`NAME_CHUNK` candidates gives the gold ranks (the gold vectors' scores
        and a count of the candidates beating them) and the top-k (:meth:`_one_pass`, :mod:`probekit.index_rank`).
        """
        n_q = len(queries)
        if len(golds) != n_q:
            raise ProbekitError("one gold list per query is needed")
        exclude = [list(e) for e in exclude] if exclude is not None else [[] for _ in range(n_q)]
        out = []
        for start in range(0, n_q, QUERY_CHUNK):
            stop = min(start + QUERY_CHUNK, n_q)
            q = _prepare(queries[start:stop], self.similarity)  # (chunk, dim)
            g, ex = golds[start:stop], exclude[start:stop]
            counter = GoldCounter(q, g, ex, similarity=self.similarity, max_norm=self._max_norm,
                                  rows_of=self._rows_of, twins=self._twins)
            search = self._one_pass(q, counter, search_width(k, ex, len(self)))
            ranks = counter.ranks()
            tops = top_k_by_rule(search, q, g, ex, ranks, k, n=len(self),
                                 tol=TIE_TOLERANCE * self._scale(q), gold_score=self._gold_score(q))
            out += [(ids, scores, r) for (ids, scores), r in zip(tops, ranks)]
            if progress:
                progress(stop, n_q, "ranking")
        return out

    def _one_pass(self, q: np.ndarray, counter: GoldCounter, kk: int):
        """Score every candidate against the prepared query chunk ``q`` once, block by block: each block's scores
        feed both the gold counts (``counter``) and the running top ``kk``. Returns the search for
        :func:`top_k_by_rule`: its first call (all of ``q``, ``kk`` wide) answers from that pass; a widened one (a
        tie group reaching past ``kk``, rare) asks faiss."""
        top = RunningTop(len(q), kk)
        rows = None if counter.idle or len(counter.rows) == len(q) else counter.rows
        xb, sq = self.vectors, self._sq_norms
        for c0 in range(0, len(self), NAME_CHUNK):
            part = partial_scores(self.similarity, q, xb[c0:c0 + NAME_CHUNK], sq[c0:c0 + NAME_CHUNK])
            top.add(c0, part)
            if not counter.idle:
                counter.count(c0, part if rows is None else part[rows])
        pending = [top.result()]  # ids found by the pass; their scores are re-computed by faiss's kernel

        def search(qq: np.ndarray, kk_: int) -> tuple[np.ndarray, np.ndarray]:
            if pending and kk_ == kk and len(qq) == len(q):
                return self._exact(qq, pending.pop())
            return self._exact(qq, self._faiss_search(qq, kk_))
        return search

    def _exact(self, q: np.ndarray, found: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The found candidates re-scored by faiss's flat kernel pair by pair (:func:`pair_scores`) and listed best
        first, lower ids first among equal scores: the scores a faiss search reports (and :mod:`probekit.vocab.scan`
        lists), identical vectors scoring alike, so which spelling of a name comes first does not depend on the
        kernel that found it."""
        _, ids = found
        out = pair_scores(q, self.vectors, ids, self.similarity)  # (n_queries, kk)
        key = np.where(ids >= 0, ids, np.iinfo(np.int64).max)
        order = np.lexsort((key, -out), axis=1)
        return np.take_along_axis(out, order, 1), np.take_along_axis(ids, order, 1)

    def _faiss_search(self, q: np.ndarray, kk: int) -> tuple[np.ndarray, np.ndarray]:
        dist, ids = self.faiss.search(q, kk)
        return (-dist if self.similarity == "l2" else dist), ids

    def _gold_score(self, q: np.ndarray):
        """score(query_row, gold_id) of one prepared query chunk, from the gold's own vector."""
        q_norm2 = np.einsum("ij,ij->i", q, q)

        def score(i: int, g: int) -> float:
            p = float(partial_scores(self.similarity, q[i:i + 1], self.vectors[g:g + 1],
                                     self._sq_norms[g:g + 1])[0, 0])
            return p - float(q_norm2[i]) if self.similarity == "l2" else p
        return score


def build_index(model: LoadedModel, candidates: CandidateSet, *, layer: int | None = None, pooling: str = "mean",
                similarity: str = "cosine", batch_size: int = 128, progress: Progress | None = None,
                use_cache: bool = True, fast: bool = False, share_layers: Sequence[int] = ()) -> EntityIndex:
    """The index for one (model, layer, pooling, candidate set, similarity), from cache when possible.

    The raw vectors are not memoised beside it (``memo=False``): the index holds the only copy. An encoding pass
    also caches the vectors of ``share_layers`` (:func:`probekit.cache.embeddings`).
    """
    if len(candidates) == 0:
        raise ProbekitError("the candidate set is empty: pick another vocabulary or dataset")
    if similarity not in SIMILARITIES:
        raise ProbekitError(f"unknown similarity {similarity!r}; available: {', '.join(SIMILARITIES)}")
    layer = model.num_layers if layer is None else layer
    key = embedding_key(model, candidates, layer=layer, pooling=pooling, fast=fast) + ":" + similarity
    hit = _INDEX_MEMO.get(key) if use_cache else None
    if hit is not None:
        return hit
    vec = candidate_embeddings(model, candidates, layers=[layer], pooling=pooling, batch_size=batch_size,
                               progress=progress, use_cache=use_cache, fast=fast, memo=False,
                               share_layers=share_layers)[layer]
    index = EntityIndex(vec, similarity=similarity)
    del vec
    if use_cache:
        _INDEX_MEMO.put(key, index)
    return index
