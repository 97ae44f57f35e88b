"""Top-k bookkeeping of the sharded index: the pass's top-k handed to the tie rule's first search, and how much of
one top-k another holds (the recall an approximate index is measured by).

Why apart from :mod:`probekit.vocab.search`: both are pure array rules, tested through the index's answers
(equal to faiss's flat search and to :class:`probekit.index.EntityIndex`), and shared by its exact search, its
ranking pass and its recall measurements (the pass itself: :mod:`probekit.vocab.scan`).
"""

from __future__ import annotations

import numpy as np


def overlap(want: np.ndarray, got: np.ndarray) -> float:
    """Mean fraction of each row of ``want`` (exact top-k ids) found in the same row of ``got``."""
    k = want.shape[1]
    return float(np.mean([len(set(w.tolist()) & set(g.tolist())) / k for w, g in zip(want, got)]))


def first_then(search, first: tuple[np.ndarray, np.ndarray], n_q: int, kk: int):
    """A search answering its first call for all n_q queries at kk with ``first`` (computed in the pass that also
    counted the gold ranks), later ones (a wider look past a tie group) by ``search``."""
    pending = [True]

    def answer(q: np.ndarray, want: int) -> tuple[np.ndarray, np.ndarray]:
        if pending[0] and want == kk and len(q) == n_q:
            pending[0] = False
            return first
        return search(q, want)
    return answer
