"""Exact faiss search over entity-name embeddings, built once per (model, layer, pooling, names, similarity).

The vectors live in ONE place: the faiss index (``IndexFlatIP``, or ``IndexFlatL2`` for ``l2``; cosine
is inner product on normalised vectors). :meth:`EntityIndex.rank` takes the top-k from a faiss search
and the gold ranks from scoring only the gold vectors and counting, chunk by chunk over the candidates,
how many beat them, so the full query x candidate matrix is never materialised. Raw vectors come from
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
from .jobs import Progress
from .memo import Memo
from .models import LoadedModel
from .types import CandidateSet

SIMILARITIES = ("cosine", "l2", "dot")
NAME_MAX_LENGTH = 25
TIE_TOLERANCE = 2.5e-7
"""Scores closer than this, relative to the largest term of the score (|q||x|, or (|q|+|x|)^2 for l2), are ties:
2 float32 ulps, the noise between two kernels summing the same products in different orders. Identical
vectors are exact ties whatever the noise (see ``_twins``)."""
NAME_CHUNK = 8192
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


def _prepare(vectors: np.ndarray, similarity: str) -> np.ndarray:
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if similarity == "cosine":
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.clip(norms, 1e-12, None)
    return vectors


def _groups(group: np.ndarray, sizes: np.ndarray) -> list[list[int]]:
    """Lists of ids sharing a group, for the groups with more than one member."""
    multi = np.flatnonzero(sizes > 1)
    if not len(multi):
        return []
    members = np.flatnonzero(np.isin(group, multi))
    out: dict[int, list[int]] = {}
    for i in members.tolist():
        out.setdefault(int(group[i]), []).append(i)
    return list(out.values())


class EntityIndex:
    """Exact (Flat) faiss index over candidate vectors; scores are 'higher is better'.

    For ``l2`` the score is the negated squared distance, so one ranking rule fits all similarities.
    The index owns the only copy of the vectors (:attr:`vectors` is a read-only view into faiss).
    """

    def __init__(self, vectors: np.ndarray, *, similarity: str = "cosine"):
        if similarity not in SIMILARITIES:
            raise ProbekitError(f"unknown similarity {similarity!r}; available: {', '.join(SIMILARITIES)}")
        self.similarity = similarity
        prepared = _prepare(vectors, similarity)  # (n_names, dim); a temporary for cosine, released below
        n, dim = prepared.shape
        self.faiss = faiss.IndexFlatL2(dim) if similarity == "l2" else faiss.IndexFlatIP(dim)
        self.faiss.add(prepared)
        del prepared
        xb = self.vectors
        self._sq_norms = np.einsum("ij,ij->i", xb, xb)  # (n_names,): l2 scores and the tie scale
        self._max_norm = float(np.sqrt(self._sq_norms.max())) if n else 0.0
        # Identical vectors (an uncased model's case variants) tie exactly, whatever the float noise:
        # id -> the ids sharing its vector, for the ids that have twins.
        self._twins: dict[int, list[int]] = {}
        if n:
            _, group, sizes = np.unique(np.ascontiguousarray(xb).view(np.dtype((np.void, dim * 4))).ravel(),
                                        return_inverse=True, return_counts=True)
            for ids in _groups(group.ravel(), sizes):
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
    def _partial(self, q: np.ndarray, x: np.ndarray, sq: np.ndarray) -> np.ndarray:
        """Scores up to a per-query constant: q·x (ip), 2 q·x - |x|^2 (l2: score = this - |q|^2)."""
        dots = q @ x.T
        return dots if self.similarity != "l2" else 2 * dots - sq[None, :]

    def _scale(self, q: np.ndarray) -> np.ndarray:
        """(n_queries,) magnitude of the scores of each query: the unit of the tie tolerance."""
        qn = np.linalg.norm(q, axis=1)
        m = self._max_norm
        scale = qn * m if self.similarity != "l2" else qn * qn + 2 * qn * m + m * m
        return np.maximum(scale, 1e-30)

    def rank(self, queries: np.ndarray, golds: Sequence[Sequence[int | None]], k: int, *,
             exclude: Sequence[Sequence[int]] | None = None,
             progress: Progress | None = None) -> list[tuple[list[int], list[float], list[int | None]]]:
        """Per query: top-k ids, their scores, and the rank of every gold id (``None`` stays ``None``).

        ``exclude`` lists, per query, candidate ids treated as absent (neither listed nor counted).
        The top-k comes from a faiss search; gold ranks from the gold vectors' scores and a count of
        the candidates beating them, over chunks of :data:`NAME_CHUNK` candidates.
        """
        n_q = len(queries)
        if len(golds) != n_q:
            raise ProbekitError("one gold list per query is needed")
        exclude = [list(e) for e in exclude] if exclude is not None else [[] for _ in range(n_q)]
        out = []
        for start in range(0, n_q, QUERY_CHUNK):
            stop = min(start + QUERY_CHUNK, n_q)
            q = _prepare(queries[start:stop], self.similarity)  # (chunk, dim)
            ranks = self._gold_ranks(q, golds[start:stop], exclude[start:stop])
            tops = self._top_k(q, golds[start:stop], exclude[start:stop], ranks, k)
            out += [(ids, scores, r) for (ids, scores), r in zip(tops, ranks)]
            if progress:
                progress(stop, n_q, "ranking")
        return out

    def _gold_ranks(self, q, golds, exclude) -> list[list[int | None]]:
        """1 + number of (non-excluded) candidates scoring more than tolerance above each gold."""
        n_q, xb, sq = len(q), self.vectors, self._sq_norms
        width = max((len(g) for g in golds), default=0)
        ranks: list[list[int | None]] = [[None] * len(g) for g in golds]
        if width == 0:
            return ranks
        # gold_ids: (n_q, width), -1 where there is no gold (or it is excluded / not a candidate)
        gold_ids = np.full((n_q, width), -1, dtype=np.int64)
        for i, (g, ex) in enumerate(zip(golds, exclude)):
            for j, gid in enumerate(g):
                if gid is not None and gid not in ex:
                    gold_ids[i, j] = gid
        rows = np.flatnonzero((gold_ids >= 0).any(1))
        if not len(rows):
            return ranks
        q, gold_ids = q[rows], gold_ids[rows]
        tol = TIE_TOLERANCE * self._scale(q)  # (n_rows,)
        safe = np.where(gold_ids >= 0, gold_ids, 0)
        # gold partial scores: (n_rows, width), each from the gold's own vector only
        gp = np.empty((len(rows), width), dtype=np.float32)
        for j in range(width):
            gp[:, j] = np.einsum("id,id->i", q, xb[safe[:, j]])
        if self.similarity == "l2":
            gp = 2 * gp - sq[safe]
        # (n_rows, width) float32 like the chunk scores, so comparisons need no float64 copy of a chunk
        thr = np.where(gold_ids >= 0, gp + tol[:, None], np.inf).astype(np.float32)
        counts = np.zeros((len(rows), width), dtype=np.int64)
        active = [np.flatnonzero(thr[:, j] < np.inf) for j in range(width)]
        # (row, slot, id) of each gold and its twins: never counted against the gold, whatever the noise
        pr, ps = np.nonzero(gold_ids >= 0)
        own = [(r, j, t) for r, j in zip(pr.tolist(), ps.tolist())
               for t in self._twins.get(int(gold_ids[r, j]), [int(gold_ids[r, j])])]
        own_r, own_s, own_id = (np.array(x, dtype=np.int64) for x in zip(*own))
        for c0 in range(0, len(self), NAME_CHUNK):
            part = self._partial(q, xb[c0:c0 + NAME_CHUNK], sq[c0:c0 + NAME_CHUNK])  # (n_rows, chunk)
            for j, act in enumerate(active):
                if len(act) == len(rows):
                    counts[:, j] += np.count_nonzero(part > thr[:, j, None], axis=1)
                elif len(act):
                    counts[act, j] += np.count_nonzero(part[act] > thr[act, j, None], axis=1)
            inside = (own_id >= c0) & (own_id < c0 + part.shape[1])
            r_, s_, i_ = own_r[inside], own_s[inside], own_id[inside]
            np.subtract.at(counts, (r_, s_), (part[r_, i_ - c0] > thr[r_, s_]).astype(np.int64))
        for r, i in enumerate(rows.tolist()):
            ex = exclude[i]
            if ex:  # excluded candidates do not count against the gold
                ep = self._partial(q[r:r + 1], xb[ex], sq[ex])[0]  # (n_excluded,)
            for j in range(width):
                if gold_ids[r, j] >= 0:
                    twins = set(self._twins.get(int(gold_ids[r, j]), ()))
                    beaten = int(sum(1 for e, v in zip(ex, ep) if v > thr[r, j] and e not in twins)) if ex else 0
                    ranks[i][j] = int(counts[r, j]) - beaten + 1
        return ranks

    def _top_k(self, q, golds, exclude, ranks, k) -> list[tuple[list[int], list[float]]]:
        """faiss top-k, re-ordered by the tie rule; the search widens while ties reach past its end."""
        n = len(self)
        n_q = len(q)
        extra = max((len(e) for e in exclude), default=0)
        kk = min(n, k + extra + 8)
        tol = TIE_TOLERANCE * self._scale(q)
        q_norm2 = np.einsum("ij,ij->i", q, q)
        todo = np.arange(n_q)
        found: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        while len(todo):
            dist, ids = self.faiss.search(q[todo], kk)  # (len(todo), kk)
            scores = -dist if self.similarity == "l2" else dist
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
            ids = d.tolist()
            sc = dict(zip(ids, s.tolist()))
            gold_set = {g for g, r in zip(golds[i], ranks[i]) if g is not None and r is not None}
            for g, r in zip(golds[i], ranks[i]):
                if g is not None and r is not None and r <= k and g not in sc:  # a near-tie faiss left out
                    x = self.vectors[g:g + 1]
                    p = float(self._partial(q[i:i + 1], x, self._sq_norms[g:g + 1])[0, 0])
                    sc[g] = p - float(q_norm2[i]) if self.similarity == "l2" else p
                    ids.append(g)
            arr = np.array(ids, dtype=np.int64)
            s_arr = np.array([sc[c] for c in ids], dtype=np.float64)
            is_gold = np.array([c in gold_set for c in ids], dtype=bool)
            eff = s_arr + np.where(is_gold, tol[i], 0.0)  # near-ties go to the gold
            order = np.lexsort((arr, ~is_gold, -eff))[:k]
            out.append((arr[order].tolist(), [float(sc[c]) for c in arr[order]]))
        return out


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
