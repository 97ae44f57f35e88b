"""The exact index's one streamed pass: fast scores per block, their top candidates re-scored exactly, and the gold
counts taken from the same scores.

Why not faiss's flat kernel on normalised blocks, as before: every query then converted every float16 vector to
float32 (numpy converts float16 one value at a time) and divided it by its norm (one division per component):
~95 % of a query's time, 14-33x faiss's ``IndexFlatIP`` over vectors held in memory. Here each block is converted
by torch (vectorised) into one reused buffer, multiplied by the queries as stored, and a cosine score is that
product times the row's reciprocal norm, computed once at build: one multiplication per score, not a division per
component.

Those *fast* scores differ from the exact ones (faiss's flat kernel on the normalised row, what
:class:`probekit.index.EntityIndex` reports) by float32 rounding only, bounded by :func:`margin`. The top-kk is
taken from every row within twice that margin of the kk-th fast score (a row further below cannot reach the exact
top-kk) and re-scored exactly by :func:`rescore`, so ids, order and scores are the flat kernel's. Gold counts
compare the fast scores with the gold's threshold (its own score plus the tie tolerance): the tolerance exists to
absorb exactly this kind of kernel noise (:mod:`probekit.index_rank`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import faiss
import numpy as np

from ..index_rank import GoldCounter, pair_scores, partial_scores, score_scale
from .index_shards import Shards

STEP_BYTES = 8 * 2**20
"""float32 scores held at once (n_queries x rows of a step)."""
STEP_ROWS = 2048
"""Rows converted per step at most: the float32 buffer (3 MiB at 384-d) stays in cache for the product."""
PAD = 16
"""Candidates kept per query beyond kk, so the margin check rarely has to widen the pass."""

RowsOf = Callable[[np.ndarray], np.ndarray]


def row_norms(raw: np.ndarray) -> np.ndarray:
    """(rows,) float32 norms of float32 rows as :func:`probekit.index_rank.prepare` divides by them."""
    return np.clip(np.linalg.norm(raw, axis=1), 1e-12, None).astype(np.float32)


def norms_of(shards: Shards) -> np.ndarray:
    """(n,) :func:`row_norms` of every stored row (an index saved before they were kept computes them once)."""
    out = np.empty(shards.n, dtype=np.float32)
    for c0, raw in shards.raw_blocks(shards.block_rows):
        out[c0:c0 + len(raw)] = row_norms(raw)
    return out


def step_rows(n_q: int) -> int:
    return int(max(256, min(STEP_ROWS, STEP_BYTES // (4 * max(n_q, 1)))))


def margin(similarity: str, q: np.ndarray, max_norm: float, dim: int) -> np.ndarray:
    """(n_queries,) a bound on |fast score - exact score| per query.

    Both scores are float32 dot products of ``dim`` terms (error at most gamma_dim = dim u / (1 - dim u) of the
    sum of |terms|, u = 2^-24, by the classical bound for recursive or blocked summation), one of them on the row
    normalised (one rounding per component) and the other scaled by the rounded reciprocal norm (two roundings):
    twice gamma_(dim + 2) of the score's scale, with a factor 1.5 to spare."""
    u = 2.0 ** -24
    gamma = (dim + 2) * u / (1 - (dim + 2) * u)
    return 3.0 * gamma * score_scale(similarity, q, max_norm)


class Pass:
    """One pass over ``shards`` for prepared queries ``q``: fast scores block by block fed to a top-kk heap (when
    ``kk``) and to ``counter`` (when given). ``inv``: (n,) reciprocal norms (cosine) or None; ``sq``: (n,) squared
    norms of the prepared rows (used by l2)."""

    def __init__(self, shards: Shards, q: np.ndarray, *, inv: np.ndarray | None, sq: np.ndarray, kk: int = 0,
                 counter: GoldCounter | None = None):
        self.shards, self.q, self.inv, self.sq, self.counter = shards, q, inv, sq, counter
        self.similarity = shards.similarity
        self.width = min(shards.n, kk + PAD) if kk else 0
        self.heap = faiss.ResultHeap(len(q), self.width, keep_max=True) if self.width else None

    def run(self) -> None:
        q, counter, heap, inv = self.q, self.counter, self.heap, self.inv
        every = np.arange(len(q), dtype=np.int64)
        gpu = counter is not None and not counter.idle and hasattr(counter, "tq")
        for c0, x in self.shards.raw_blocks(step_rows(len(q))):  # x: (rows, dim) float32 as stored
            rows = len(x)
            s = q @ x.T  # (n_q, rows)
            if inv is not None:  # cosine
                s *= inv[c0:c0 + rows]
            elif self.similarity == "l2":
                s = 2 * s - self.sq[c0:c0 + rows]
            if heap is not None:
                ids = np.arange(c0, c0 + rows, dtype=np.int64)
                heap.add_result_subset(every, s, ids)
            if counter is not None and not counter.idle:
                if gpu:  # the device counts its own products (of the normalised rows)
                    xp = x * inv[c0:c0 + rows, None] if inv is not None else x
                    counter.add(c0, xp, self.sq[c0:c0 + rows], chunk=rows)
                else:
                    counter.count(c0, s if len(counter.rows) == len(q) else s[counter.rows])
        if heap is not None:
            heap.finalize()


def rescore(q: np.ndarray, cand: np.ndarray, rows_of: RowsOf, similarity: str) -> np.ndarray:
    """(n_queries, w) exact scores of candidate ids ``cand`` (-1: none, scored -inf): faiss's flat kernel on the
    normalised rows, pair by pair (:func:`probekit.index_rank.pair_scores`, as :class:`probekit.index.EntityIndex`
    lists them)."""
    out = np.full(cand.shape, -np.inf, dtype=np.float32)
    valid = cand >= 0
    uniq = np.unique(cand[valid])
    if not len(uniq):
        return out
    x = rows_of(uniq)  # (n_unique, dim) prepared
    local = np.where(valid, np.searchsorted(uniq, np.where(valid, cand, uniq[0])), -1)  # rows of x
    return pair_scores(q, x, local, similarity)


def best(scores: np.ndarray, cand: np.ndarray, kk: int) -> tuple[np.ndarray, np.ndarray]:
    """The kk best per query by exact score, lower ids first among equal scores; -inf / -1 past the candidates."""
    key = np.where(cand >= 0, cand, np.iinfo(np.int64).max)
    order = np.lexsort((key, -scores), axis=1)[:, :kk]
    return np.take_along_axis(scores, order, 1), np.take_along_axis(cand, order, 1)


def exact_top(shards: Shards, q: np.ndarray, kk: int, *, inv: np.ndarray | None, sq: np.ndarray, max_norm: float,
              rows_of: RowsOf, counter: GoldCounter | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Prepared queries -> (n_q, kk) exact scores and ids of the exact top-kk (the flat kernel's), in one pass
    that also feeds ``counter``; queries whose candidates do not clear the margin are passed again wider."""
    n_q, kk = len(q), min(kk, shards.n)
    scores = np.full((n_q, kk), -np.inf, dtype=np.float32)
    ids = np.full((n_q, kk), -1, dtype=np.int64)
    if not n_q:
        return scores, ids
    p = Pass(shards, q, inv=inv, sq=sq, kk=kk, counter=counter)
    p.run()
    assert p.heap is not None
    fast, cand = p.heap.D, p.heap.I  # (n_q, width), best first
    slack = 2 * margin(shards.similarity, q, max_norm, shards.dim)  # (n_q,)
    kth = fast[:, kk - 1]
    cleared = (p.width >= shards.n) | (fast[:, -1] < kth - slack)
    keep = np.where(fast >= (kth - slack)[:, None], cand, -1)
    scores[cleared], ids[cleared] = best(rescore(q[cleared], keep[cleared], rows_of, shards.similarity),
                                         keep[cleared], kk)
    wide = np.flatnonzero(~cleared)
    if len(wide):  # a dense group of near-ties (twins) at the kk-th place: look further for those queries
        s2, i2 = exact_top(shards, q[wide], min(shards.n, 4 * p.width), inv=inv, sq=sq, max_norm=max_norm,
                           rows_of=rows_of)
        scores[wide], ids[wide] = s2[:, :kk], i2[:, :kk]
    return scores, ids


RANGE_QUERIES = 4
"""Queries with golds up to which an approximate index's stored vectors count the golds' rivals (a live query)."""
RANGE_SHARE = 1 / 16
"""A range search returning more than this share of the candidates gives way to the streamed pass."""


def _exhaustive(approx) -> tuple[Any, Any] | None:
    """An exhaustive faiss view of an approximate index's stored vectors (float16 or float32 copies of the
    normalised rows: an error bound is known), and its search parameters; None for product-quantised codes."""
    fp16 = faiss.ScalarQuantizer.QT_fp16
    if hasattr(approx, "hnsw"):
        storage = faiss.downcast_index(approx.storage)
        return (storage, None) if isinstance(storage, faiss.IndexScalarQuantizer) and storage.sq.qtype == fp16 \
            else None
    if isinstance(approx, faiss.IndexIVFFlat) or isinstance(approx, faiss.IndexIVFScalarQuantizer) \
            and approx.sq.qtype == fp16:
        params = faiss.SearchParametersIVF()
        params.nprobe = approx.nlist
        return approx, params
    return None


def count_by_range(approx, counter: GoldCounter, *, n: int, similarity: str, max_norm: float, sq: np.ndarray,
                   rows_of: RowsOf) -> bool:
    """Count the golds' rivals from the approximate index's own stored vectors instead of a pass over the shards;
    False (nothing counted) where that does not apply or would not be cheaper.

    Why it is exact: a stored vector is the normalised row rounded to float16 (each component within 2^-11 of its
    value) and faiss sums in float32, so its score is within |q| max_norm (2^-11 + 2 gamma_dim) of the exact one;
    a range search below the lowest gold threshold by 2^-10 |q| max_norm therefore returns every row that may
    beat a gold, and only those are scored exactly (:func:`probekit.index_rank.partial_scores`) and counted."""
    view = _exhaustive(approx)
    if (view is None or similarity == "l2" or counter.idle or hasattr(counter, "tq")
            or len(counter.rows) > RANGE_QUERIES):
        return False
    index, params = view
    q = counter.q
    slack = score_scale(similarity, q, max_norm) * 2.0 ** -10 + margin(similarity, q, max_norm, q.shape[1])
    found = []
    for r in range(len(q)):
        low = float(np.min(counter.thr[r])) - float(slack[r])
        lims, _, ids = index.range_search(q[r:r + 1], low, params=params)
        if lims[1] - lims[0] > RANGE_SHARE * n:
            return False
        found.append(np.sort(ids[lims[0]:lims[1]]))
    for r, ids in enumerate(found):
        part = partial_scores(similarity, q[r:r + 1], rows_of(ids), sq[ids])[0] if len(ids) else np.zeros(0)
        counter.count_some(r, ids, part.astype(np.float32))
    return True


__all__ = ["Pass", "count_by_range", "exact_top", "margin", "norms_of", "rescore", "row_norms"]
