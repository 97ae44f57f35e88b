"""Top-k bookkeeping of the sharded index: the best k per query merged over blocks seen in id order, and how much
of one top-k another holds (the recall an approximate index is measured by).

Why apart from :mod:`probekit.vocab.search`: both are pure array rules, tested through the index's answers
(equal to faiss's flat search and to :class:`probekit.index.EntityIndex`), and shared by its exact search, its
ranking pass and its recall measurements.
"""

from __future__ import annotations

import numpy as np


def overlap(want: np.ndarray, got: np.ndarray) -> float:
    """Mean fraction of each row of ``want`` (exact top-k ids) found in the same row of ``got``."""
    k = want.shape[1]
    return float(np.mean([len(set(w.tolist()) & set(g.tolist())) / k for w, g in zip(want, got)]))


class TopMerge:
    """The best kk (score, global id) per query over blocks seen in id order; lower ids first among equal scores."""

    def __init__(self, n_q: int, kk: int):
        self.kk = kk
        self.scores = np.full((n_q, kk), -np.inf, dtype=np.float32)
        self.ids = np.full((n_q, kk), -1, dtype=np.int64)

    def add(self, c0: int, scores: np.ndarray, ids: np.ndarray) -> None:
        s = np.where(ids >= 0, scores, -np.inf).astype(np.float32)
        ids = np.where(ids >= 0, ids + c0, -1)
        cat_s, cat_i = np.concatenate([self.scores, s], 1), np.concatenate([self.ids, ids], 1)
        order = np.argsort(-cat_s, axis=1, kind="stable")[:, :self.kk]  # earlier (lower) ids first on ties
        self.scores, self.ids = np.take_along_axis(cat_s, order, 1), np.take_along_axis(cat_i, order, 1)

    def first_then(self, search, n_q: int):
        """A search answering its first call for all n_q queries at kk from this merge, later ones by ``search``."""
        pending = [True]

        def answer(q: np.ndarray, kk: int) -> tuple[np.ndarray, np.ndarray]:
            if pending[0] and kk == self.kk and len(q) == n_q:
                pending[0] = False
                return self.scores, self.ids
            return search(q, kk)
        return answer
