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
        comparison over the block replace a partition of all of it."""
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
                maxima = part[:, :g * groups].reshape(n_rows, groups, g).max(axis=2)  # (n_rows, groups)
                bound = np.partition(maxima, groups - kk, axis=1)[:, groups - kk]  # the kk-th largest group max
                mask = part >= bound[:, None]
            if self.scores.shape[1] >= kk:
                mask = mask & (part > self.scores.min(axis=1)[:, None])
            rows, cols = np.nonzero(mask)
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
    ``tol``: (n_queries,) the tie tolerance of each query's scores; ``n``: the number of candidates."""
    n_q = len(q)
    kk = search_width(k, exclude, n)
    todo = np.arange(n_q)
    found: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    while len(todo):
        scores, ids = search(q[todo], kk)  # (len(todo), kk)
        again = []
        for r, i in enumerate(todo.tolist()):
            keep = ids[r] >= 0
            s, d = scores[r][keep], ids[r][keep]
            if exclude[i]:
                ok = ~np.isin(d, exclude[i])
                s, d = s[ok], d[ok]
            kth = s[min(k, len(s)) - 1] if len(s) else -np.inf
            if kk < n and len(s) and s[-1] >= kth - 2 * tol[i]:
                again.append(i)  # the tie group at the k-th place may go on past the search
            else:
                found[i] = (d, s)
        todo = np.array(again, dtype=np.int64)
        kk = min(n, kk * 4)
    out = []
    for i in range(n_q):
        d, s = found[i]
        ids_i = d.tolist()
        sc = dict(zip(ids_i, s.tolist()))
        gold_set = {g for g, r in zip(golds[i], ranks[i]) if g is not None and r is not None}
        for gid, rk in zip(golds[i], ranks[i]):
            if gid is not None and rk is not None and rk <= k and gid not in sc:  # a gold the search left out
                sc[gid] = gold_score(i, gid)
                ids_i.append(gid)
        arr = np.array(ids_i, dtype=np.int64)
        s_arr = np.array([sc[c] for c in ids_i], dtype=np.float64)
        is_gold = np.array([c in gold_set for c in ids_i], dtype=bool)
        eff = s_arr + np.where(is_gold, tol[i], 0.0)  # near-ties go to the gold
        order = np.lexsort((arr, ~is_gold, -eff))[:k]
        out.append((arr[order].tolist(), [float(sc[c]) for c in arr[order]]))
    return out


__all__ = ["TIE_TOLERANCE", "GoldCounter", "RunningTop", "partial_scores", "prepare", "score_scale", "search_width",
           "to_float32", "top_k_by_rule"]
