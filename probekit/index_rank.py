"""The exact ranking rule over candidate vectors seen block by block: one implementation for every index.

:class:`probekit.index.EntityIndex` (all candidates in one faiss index) and
:class:`probekit.vocab.search.ShardedIndex` (candidates streamed from memory-mapped shards) both rank with the
pieces here, so they agree by construction:

- :class:`GoldCounter`: a gold's score is computed from its own vector, and the candidates beating it are
  counted in matrix products over blocks of candidates (never the full query x candidate matrix);
- :func:`top_k_by_rule`: the top-k from any search (faiss, streamed, approximate), re-ordered by the tie rule,
  the search widened while a tie group reaches past its end.

Tie rule (as :func:`probekit.probes.base.top_k_and_gold_ranks`): a gold's rank is 1 + the number of
candidates scoring strictly higher; among equal scores the top-k lists golds first, then lower ids. Two kernels
sum the same products in different orders, so scores closer than :data:`TIE_TOLERANCE` times the scale of the
scores are ties, settled in favour of the gold on both paths; identical vectors (an uncased model's case
variants: "twins") always tie.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import faiss
import numpy as np

TIE_TOLERANCE = 2.5e-7
"""Scores closer than this, relative to the largest term of the score (|q||x|, or (|q|+|x|)^2 for l2), are ties:
2 float32 ulps, the noise between two kernels summing the same products in different orders. Identical
vectors are exact ties whatever the noise (see :class:`GoldCounter`)."""

RowsOf = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
"""rows_of(ids) -> (prepared float32 vectors (len(ids), dim), their squared norms (len(ids),))."""
Search = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]
"""search(queries, kk) -> scores, ids: (n_queries, kk), best first, ids -1 past the end."""


FAST_CONVERT_MIN = 4096
"""float16 values from which :func:`to_float32` converts with torch (below it the call costs more than it saves)."""


def to_float32(vectors: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``vectors`` as C-contiguous float32 (into ``out`` when given: same shape); float16 converted by torch.

    Why: numpy converts float16 one value at a time (about 1.1 s for 384 M values on this machine), torch with the
    CPU's vector instructions (about 60 ms); float16 -> float32 is exact, so the values are the same."""
    a = np.asarray(vectors)
    if a.dtype != np.float16 or a.size < FAST_CONVERT_MIN:
        if out is None:
            return np.ascontiguousarray(a, dtype=np.float32)
        out[...] = a
        return out
    import warnings

    import torch

    if out is None:
        out = np.empty(a.shape, dtype=np.float32)
    with warnings.catch_warnings():  # a read-only memory map: torch only reads it
        warnings.simplefilter("ignore", UserWarning)
        src = torch.from_numpy(np.ascontiguousarray(a))
    torch.from_numpy(out).copy_(src)
    return out


def prepare(vectors: np.ndarray, similarity: str) -> np.ndarray:
    """float32 copy of ``vectors`` (normalised for cosine); row by row, so a block prepares like the whole."""
    out = to_float32(vectors)
    if similarity == "cosine":
        norms = np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)
        if np.shares_memory(out, vectors):  # never write into the caller's array
            out = out / norms
        else:  # a converted copy of our own: divide in place (the same values, half the memory)
            out /= norms
    return out


def partial_scores(similarity: str, q: np.ndarray, x: np.ndarray, sq: np.ndarray) -> np.ndarray:
    """(n_queries, n_rows) scores up to a per-query constant: q·x (ip), 2 q·x - |x|^2 (l2: score = this - |q|^2)."""
    dots = q @ x.T
    return dots if similarity != "l2" else 2 * dots - sq[None, :]


def pair_scores(q: np.ndarray, y: np.ndarray, ids: np.ndarray, similarity: str) -> np.ndarray:
    """(n_queries, w) exact scores of each prepared query ``q[i]`` against rows ``y[ids[i, j]]`` (ids -1: none,
    scored -inf), by faiss's flat kernel one pair at a time (``fvec_inner_product`` / ``fvec_L2sqr``: what a faiss
    search computes for one query against a few rows). A pair's score depends on neither the other rows nor the
    other queries, so the listed scores are the ones a faiss search reports, identical vectors score alike, and
    every index lists the same scores (:meth:`probekit.index.EntityIndex._exact`, :func:`probekit.vocab.scan.
    rescore`). All pairs in one call (a loop of one-query searches cost ~20 µs a query in Python)."""
    q = np.ascontiguousarray(q, dtype=np.float32)
    y = np.ascontiguousarray(y, dtype=np.float32)
    valid = ids >= 0
    safe = np.ascontiguousarray(np.where(valid, ids, 0), dtype=np.int64)  # (n_queries, w)
    n_q, w = safe.shape
    out = np.empty((n_q, w), dtype=np.float32)
    if n_q and w and len(y):
        # (faiss's SWIG functions, absent from its type stubs)
        kernel = getattr(faiss, "fvec_L2sqr_by_idx" if similarity == "l2" else "fvec_inner_products_by_idx")
        kernel(faiss.swig_ptr(out), faiss.swig_ptr(q), faiss.swig_ptr(y), faiss.swig_ptr(safe), q.shape[1], n_q, w)
    if similarity == "l2":
        np.negative(out, out=out)  # higher is better: minus the squared distance
    out[~valid] = -np.inf
    return out


def score_scale(similarity: str, q: np.ndarray, max_norm: float) -> np.ndarray:
    """(n_queries,) magnitude of the scores of each query: the unit of the tie tolerance."""
    qn = np.linalg.norm(q, axis=1)
    m = max_norm
    scale = qn * m if similarity != "l2" else qn * qn + 2 * qn * m + m * m
    return np.maximum(scale, 1e-30)


class GoldCounter:
    """Gold ranks of prepared queries ``q``, counted over candidate blocks fed to :meth:`add` in any order.

    ``twins``: id -> the ids sharing its vector (ids with twins only); a gold's twins never count against it.
    ``rows_of``: fetches gold and excluded rows. Every candidate must be fed exactly once before :meth:`ranks`.
    """

    def __init__(self, q: np.ndarray, golds: Sequence[Sequence[int | None]], exclude: Sequence[Sequence[int]], *,
                 similarity: str, max_norm: float, rows_of: RowsOf, twins: Mapping[int, list[int]]):
        self.similarity, self.rows_of, self.twins, self.exclude = similarity, rows_of, twins, exclude
        n_q = len(q)
        width = max((len(g) for g in golds), default=0)
        self.out: list[list[int | None]] = [[None] * len(g) for g in golds]
        # gold_ids: (n_q, width), -1 where there is no gold (or it is excluded / not a candidate)
        gold_ids = np.full((n_q, width), -1, dtype=np.int64)
        for i, (g, ex) in enumerate(zip(golds, exclude)):
            for j, gid in enumerate(g):
                if gid is not None and gid not in ex:
                    gold_ids[i, j] = gid
        self.rows = np.flatnonzero((gold_ids >= 0).any(1)) if width else np.zeros(0, dtype=np.int64)
        self.idle = not len(self.rows)
        if self.idle:
            return
        q, gold_ids = q[self.rows], gold_ids[self.rows]
        self.q, self.gold_ids, self.width = q, gold_ids, width
        tol = TIE_TOLERANCE * score_scale(similarity, q, max_norm)  # (n_rows,)
        safe = np.where(gold_ids >= 0, gold_ids, 0)
        # gold partial scores: (n_rows, width), each from the gold's own vector only
        gp = np.empty((len(self.rows), width), dtype=np.float32)
        for j in range(width):
            xg, sqg = rows_of(safe[:, j])
            gp[:, j] = np.einsum("id,id->i", q, xg)
            if similarity == "l2":
                gp[:, j] = 2 * gp[:, j] - sqg
        # (n_rows, width) float32 like the chunk scores, so comparisons need no float64 copy of a chunk
        self.thr = np.where(gold_ids >= 0, gp + tol[:, None], np.inf).astype(np.float32)
        self.counts = np.zeros((len(self.rows), width), dtype=np.int64)
        self.active = [np.flatnonzero(self.thr[:, j] < np.inf) for j in range(width)]
        # (row, slot, id) of each gold and its twins: never counted against the gold, whatever the noise
        pr, ps = np.nonzero(gold_ids >= 0)
        own = [(r, j, t) for r, j in zip(pr.tolist(), ps.tolist())
               for t in twins.get(int(gold_ids[r, j]), [int(gold_ids[r, j])])]
        self.own_r, self.own_s, self.own_id = (np.array(x, dtype=np.int64) for x in zip(*own))

    def add(self, c0: int, x: np.ndarray, sq: np.ndarray, *, chunk: int) -> None:
        """Count block ``x`` (prepared (n_rows, dim), global ids from ``c0``; ``sq`` its squared norms), ``chunk``
        candidates per matrix product."""
        if self.idle:
            return
        for s0 in range(0, len(x), chunk):
            self.count(c0 + s0, partial_scores(self.similarity, self.q, x[s0:s0 + chunk], sq[s0:s0 + chunk]))

    def count(self, lo: int, part: np.ndarray) -> None:
        """Count candidates ``lo ..`` from their partial scores ``part``: (n_rows, n_candidates), one row per query
        with a gold (:attr:`rows`), as :func:`partial_scores` gives them (or within float32 noise of it)."""
        thr, counts = self.thr, self.counts
        n_rows = len(self.rows)
        for j, act in enumerate(self.active):
            if len(act) == n_rows:
                counts[:, j] += np.count_nonzero(part > thr[:, j, None], axis=1)
            elif len(act):
                counts[act, j] += np.count_nonzero(part[act] > thr[act, j, None], axis=1)
        inside = (self.own_id >= lo) & (self.own_id < lo + part.shape[1])
        r_, s_, i_ = self.own_r[inside], self.own_s[inside], self.own_id[inside]
        np.subtract.at(counts, (r_, s_), (part[r_, i_ - lo] > thr[r_, s_]).astype(np.int64))

    def count_some(self, r: int, ids: np.ndarray, part: np.ndarray) -> None:
        """Count, for query row ``r`` only, the candidates ``ids`` (distinct) from their partial scores ``part``
        ((len(ids),)): for a caller that has shown every other candidate scores at most the row's lowest threshold
        (:func:`probekit.vocab.scan.count_by_range`)."""
        thr = self.thr[r]  # (width,), inf where no gold
        self.counts[r] += np.count_nonzero(part[None, :] > thr[:, None], axis=1)
        mine = np.flatnonzero(self.own_r == r)
        pos = np.searchsorted(ids, self.own_id[mine]) if len(ids) else np.zeros(len(mine), dtype=np.int64)
        for m, p in zip(mine.tolist(), pos.tolist()):
            if p < len(ids) and ids[p] == self.own_id[m]:
                self.counts[r, self.own_s[m]] -= int(part[p] > thr[self.own_s[m]])

    def ranks(self) -> list[list[int | None]]:
        """Per query, the rank of each gold (``None``: no gold there, or excluded); excluded candidates do not
        count against a gold."""
        if self.idle:
            return self.out
        for r, i in enumerate(self.rows.tolist()):
            ex = list(self.exclude[i])
            if ex:
                xe, sqe = self.rows_of(np.array(ex, dtype=np.int64))
                ep = partial_scores(self.similarity, self.q[r:r + 1], xe, sqe)[0]  # (n_excluded,)
            for j in range(self.width):
                gid = int(self.gold_ids[r, j])
                if gid >= 0:
                    twins = set(self.twins.get(gid, ()))
                    beaten = int(sum(1 for e, v in zip(ex, ep) if v > self.thr[r, j] and e not in twins)) if ex else 0
                    self.out[i][j] = int(self.counts[r, j]) - beaten + 1
        return self.out


TOP_GROUP = 64
"""Candidates per column group whose maxima bound a block's top (:meth:`RunningTop.add`)."""


class RunningTop:
    """The ``kk`` best partial scores of each query row over candidate blocks fed in id order, kept from the same
    products :class:`GoldCounter` counts with, so one pass over the candidates yields both the gold ranks and the
    top-k (a second full product, e.g. a faiss search, scored every candidate again).

    Exact by value: a block's candidate enters only if it beats the row's current ``kk``-th best; among equal
    scores at the ``kk``-th place any may stay, which :func:`top_k_by_rule` settles by widening the search."""

    def __init__(self, n_rows: int, kk: int):
        self.kk = kk
        self.scores = np.zeros((n_rows, 0), dtype=np.float32)
        self.ids = np.zeros((n_rows, 0), dtype=np.int64)

    def add(self, lo: int, part: np.ndarray) -> None:
        """Candidates ``lo ..`` with their partial scores ``part``: (n_rows, n_candidates).

        Only the candidates that can still be among the best are gathered: those above the row's kept ``kk``-th
        score and at least the block's bound, the ``kk``-th largest of the maxima of disjoint column groups (``kk``
        candidates of the block score at least that, so nothing below it can make the top ``kk``). A max and a
        comparison over the block replace a partition of all of it. The groups are strided (column c in group
        c mod groups): the maxima are then taken across rows of a (g, groups) view, element by element, twice as
        fast as along contiguous runs."""
        n_rows, m = part.shape
        if not m:
            return
        kk = self.kk
        if m < kk and self.scores.shape[1] < kk:  # a short block while not full: every candidate competes
            s = np.concatenate([self.scores, part], axis=1)
            i = np.concatenate([self.ids, np.broadcast_to(np.arange(lo, lo + m), (n_rows, m))], axis=1)
        else:
            mask = np.ones((1, 1), dtype=bool)  # (broadcasts) nothing ruled out yet
            if m >= kk:
                groups = max(kk, min(m // TOP_GROUP, 1024))
                g = m // groups
                maxima = part[:, :g * groups].reshape(n_rows, g, groups).max(axis=1)  # (n_rows, groups)
                bound = np.partition(maxima, groups - kk, axis=1)[:, groups - kk]  # the kk-th largest group max
                mask = part >= bound[:, None]
            if self.scores.shape[1] >= kk:
                mask = mask & (part > self.scores.min(axis=1)[:, None])
            # mask: (n_rows, m); split its flat positions (a 2-d nonzero is ~15x slower on a sparse mask)
            rows, cols = np.divmod(np.flatnonzero(mask), m)
            if not len(rows):
                return
            counts = np.bincount(rows, minlength=n_rows)
            pos = np.arange(len(rows)) - (np.cumsum(counts) - counts)[rows]
            width = int(counts.max())
            pad_s = np.full((n_rows, width), -np.inf, dtype=part.dtype)
            pad_i = np.full((n_rows, width), -1, dtype=np.int64)
            pad_s[rows, pos] = part[rows, cols]
            pad_i[rows, pos] = cols + lo
            s, i = np.concatenate([self.scores, pad_s], axis=1), np.concatenate([self.ids, pad_i], axis=1)
        if s.shape[1] > kk:
            keep = np.argpartition(-s, kk - 1, axis=1)[:, :kk]
            s, i = np.take_along_axis(s, keep, 1), np.take_along_axis(i, keep, 1)
        self.scores, self.ids = np.ascontiguousarray(s), np.ascontiguousarray(i)

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids): (n_rows, kk) partial scores and ids, best first (as a :data:`Search` gives them)."""
        order = np.argsort(-self.scores, axis=1, kind="stable")
        return np.take_along_axis(self.scores, order, 1), np.take_along_axis(self.ids, order, 1)


def search_width(k: int, exclude: Sequence[Sequence[int]], n: int) -> int:
    """How many candidates :func:`top_k_by_rule` first asks its search for: k, room for the excluded, and a margin
    for ties at the k-th place."""
    extra = max((len(e) for e in exclude), default=0)
    return min(n, k + extra + 8)


def top_k_by_rule(search: Search, q: np.ndarray, golds: Sequence[Sequence[int | None]],
                  exclude: Sequence[Sequence[int]], ranks: Sequence[Sequence[int | None]], k: int, *, n: int,
                  tol: np.ndarray, gold_score: Callable[[int, int], float]) -> list[tuple[list[int], list[float]]]:
    """Per query: the top-k ids and scores from ``search`` re-ordered by the tie rule; the search widens while the
    tie group at the k-th place may go on past its end. A gold whose (exact) rank is within k but which the search
    left out (a near-tie, or an approximate search's miss) is added with ``gold_score(query_row, gold_id)``.
    ``tol``: (n_queries,) the tie tolerance of each query's scores; ``n``: the number of candidates.

    Whole arrays of queries at a time (a loop over queries cost about 80 µs each, a second of a MedLAMA bench);
    only the rare queries with excluded candidates or a gold the search left out are handled one by one."""
    n_q = len(q)
    if not n_q:
        return []
    kk = search_width(k, exclude, n)
    # found_ids/found_s: (n_q, width) each query's listed candidates (valid ones first, in the search's order);
    # -1 / -inf past them. Widened rounds are wider, so the arrays grow with them.
    found_ids = np.full((n_q, kk), -1, dtype=np.int64)
    found_s = np.full((n_q, kk), -np.inf, dtype=np.float64)
    todo = np.arange(n_q)
    while len(todo):
        scores, ids = search(q[todo], kk)  # (len(todo), kk)
        valid = ids >= 0
        for r, i in enumerate(todo.tolist()):
            if exclude[i]:
                valid[r] &= ~np.isin(ids[r], exclude[i])
        n_valid = valid.sum(axis=1)  # (len(todo),)
        keep = np.argsort(~valid, axis=1, kind="stable")  # the valid ones first, in order
        s_c = np.take_along_axis(scores, keep, 1)
        d_c = np.where(np.take_along_axis(valid, keep, 1), np.take_along_axis(ids, keep, 1), -1)
        rows = np.arange(len(todo))
        kth = np.where(n_valid > 0, s_c[rows, np.clip(np.minimum(k, n_valid) - 1, 0, None)], -np.inf)
        last = s_c[rows, np.clip(n_valid - 1, 0, None)]
        # the tie group at the k-th place may go on past the search
        again = (kk < n) & (n_valid > 0) & (last >= kth - 2 * tol[todo])
        done = todo[~again]
        width = d_c.shape[1]
        if width > found_ids.shape[1]:
            grow = width - found_ids.shape[1]
            found_ids = np.pad(found_ids, ((0, 0), (0, grow)), constant_values=-1)
            found_s = np.pad(found_s, ((0, 0), (0, grow)), constant_values=-np.inf)
        found_ids[done, :width] = d_c[~again]
        found_s[done, :width] = np.where(d_c[~again] >= 0, s_c[~again], -np.inf)
        todo = todo[again]
        kk = min(n, kk * 4)

    # gold_all: (n_q, n_golds) every gold with a rank (-1 elsewhere); gold_in: those ranked within k
    n_golds = max((len(g) for g in golds), default=0)
    gold_all = np.full((n_q, n_golds), -1, dtype=np.int64)
    gold_in = np.full((n_q, n_golds), -1, dtype=np.int64)
    for i, (g, rk) in enumerate(zip(golds, ranks)):
        for j, (gid, rank) in enumerate(zip(g, rk)):
            if gid is not None and rank is not None:
                gold_all[i, j] = gid
                if rank <= k:
                    gold_in[i, j] = gid
    listed = (found_ids[:, :, None] == gold_in[:, None, :]).any(axis=1)  # (n_q, n_golds)
    left_out = np.flatnonzero(((gold_in >= 0) & ~listed).any(axis=1))
    if len(left_out):  # golds within k the search left out (rare): appended with their own scores
        extra = max(len(golds[i]) for i in left_out.tolist())
        found_ids = np.pad(found_ids, ((0, 0), (0, extra)), constant_values=-1)
        found_s = np.pad(found_s, ((0, 0), (0, extra)), constant_values=-np.inf)
        for i in left_out.tolist():
            pos = int((found_ids[i] >= 0).sum())
            have = set(found_ids[i, :pos].tolist())
            for gid in gold_in[i].tolist():
                if gid >= 0 and gid not in have:
                    found_ids[i, pos], found_s[i, pos] = gid, gold_score(i, gid)
                    have.add(gid)
                    pos += 1
    valid = found_ids >= 0
    is_gold = (found_ids[:, :, None] == gold_all[:, None, :]).any(axis=2) & valid  # (n_q, width)
    eff = found_s + np.where(is_gold, tol[:, None], 0.0)  # near-ties go to the gold
    # best first: higher effective score, then golds, then lower ids; unlisted places last
    order = np.lexsort((found_ids, ~is_gold, -eff, ~valid), axis=1)[:, :k]
    top_ids = np.take_along_axis(found_ids, order, 1)
    top_s = np.take_along_axis(found_s, order, 1)
    n_top = np.minimum(valid.sum(axis=1), k).tolist()
    return [(top_ids[i, :m].tolist(), top_s[i, :m].tolist()) for i, m in enumerate(n_top)]


__all__ = ["TIE_TOLERANCE", "GoldCounter", "RunningTop", "pair_scores", "partial_scores", "prepare", "score_scale",
           "search_width", "to_float32", "top_k_by_rule"]
