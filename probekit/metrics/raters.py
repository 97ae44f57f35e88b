"""Rater quality: each expert's bias and consistency against the others, a latent reliability (Dawid–Skene),
and acc@k from ratings weighted by that reliability.

Agreement (:mod:`.agreement`, :mod:`.agreement_ordinal`) says how far the panel agrees; this says *who* pulls it
apart, so an organiser can see that one expert rated at random before trusting the expert acc@k.

- **bias**: the mean of (own score − mean score of the *other* raters of the same answer) over the answers the
  rater shares with someone: +1 means "one point more generous than the rest of the panel".
- **consistency**: Pearson's correlation of the rater's scores with that leave-one-out mean: whether they order
  the answers as the others do, whatever their bias.
- **reliability**: Dawid & Skene (1979), "Maximum likelihood estimation of observer error-rates using the EM
  algorithm" (Applied Statistics 28:20–28): every answer has an unknown true score c in 1..5 with prior p_c, and
  each rater j reports score l with probability π_j(c, l) (their confusion matrix). EM alternates the answers'
  posteriors over c (E-step) with the priors and confusion matrices given those posteriors (M-step), starting
  from the raters' vote shares. A rater's reliability is their probability of reporting the true score,
  Σ_c p_c π_j(c, c): near 1/5 for a rater who picks scores at random. The M-step adds a small pseudo-count to
  every confusion cell (:data:`SMOOTHING`) so that a score a rater never used keeps a non-zero probability.

**Expert-adjusted acc@k** (:func:`adjusted_accuracy`): each answer's score is the reliability-weighted lower
median of its ratings (:func:`weighted_consensus`; with equal weights it is the plain lower-median consensus),
then acc@k per query exactly as :func:`probekit.metrics.agreement.expert_accuracy`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ProbekitError, positive_int
from .agreement import KS, SCORES, _check_scores, _check_threshold, consensus, expert_accuracy

SMOOTHING = 0.01
"""Pseudo-count added to every cell of a rater's confusion matrix in each M-step."""
MAX_ITER = 200
TOL = 1e-6
"""EM stops when no answer's posterior moves by more than this (or after :data:`MAX_ITER` rounds)."""


@dataclass(frozen=True)
class DawidSkene:
    """A fitted Dawid–Skene model: ``priors`` (5,) over the scores 1..5, ``confusion`` per rater (5, 5) with rows
    the true score and columns the reported one, ``posteriors`` (answers × 5, indexed by item id),
    ``reliability`` per rater (Σ_c p_c π(c, c)), and ``iterations`` run."""

    priors: np.ndarray
    confusion: dict
    posteriors: pd.DataFrame
    reliability: pd.Series
    iterations: int


def _labels(ratings: pd.DataFrame) -> tuple[np.ndarray, list, list]:
    """answers × raters score indices 0..4 (-1: not rated), with the item ids and rater names."""
    wide = ratings.pivot_table(index="item_id", columns="annotator", values="score", aggfunc="last")
    return np.nan_to_num(wide.to_numpy(dtype=float), nan=0.0).astype(int) - 1, list(wide.index), list(wide.columns)


def dawid_skene(ratings: pd.DataFrame, *, max_iter: int = MAX_ITER, tol: float = TOL,
                smoothing: float = SMOOTHING) -> DawidSkene:
    """Fit :class:`DawidSkene` to long 1..5 ratings (``item_id``, ``annotator``, ``score``) by EM."""
    ratings = _check_scores(ratings)
    max_iter = positive_int("max_iter", max_iter)
    if not (isinstance(tol, float | int) and tol > 0) or not (isinstance(smoothing, float | int) and smoothing > 0):
        raise ProbekitError(f"tol and smoothing must be positive numbers, got {tol!r} and {smoothing!r}")
    if ratings.empty:
        raise ProbekitError("no ratings to fit")
    labels, items, raters = _labels(ratings)
    c = len(SCORES)
    onehot = np.zeros(labels.shape + (c,))  # (answers, raters, scores)
    rated = labels >= 0
    onehot[rated, labels[rated]] = 1.0
    post = onehot.sum(axis=1)
    post /= post.sum(axis=1, keepdims=True)  # vote shares
    it = 0
    while it < max_iter:
        it += 1
        priors = post.mean(axis=0)
        counts = np.einsum("ic,ijl->jcl", post, onehot) + smoothing
        confusion = counts / counts.sum(axis=2, keepdims=True)
        log_post = np.log(np.maximum(priors, 1e-300)) + np.einsum("ijl,jcl->ic", onehot, np.log(confusion))
        log_post -= log_post.max(axis=1, keepdims=True)
        new = np.exp(log_post)
        new /= new.sum(axis=1, keepdims=True)
        moved = float(np.abs(new - post).max())
        post = new
        if moved < tol:
            break
    priors = post.mean(axis=0)
    reliability = pd.Series(np.einsum("c,jcc->j", priors, confusion), index=raters, name="reliability")
    return DawidSkene(priors=priors, confusion=dict(zip(raters, confusion)),
                      posteriors=pd.DataFrame(post, index=items, columns=list(SCORES)), reliability=reliability,
                      iterations=it)


def weighted_consensus(ratings: pd.DataFrame, weights: pd.Series | dict) -> pd.Series:
    """One score per answer: the weighted lower median of its ratings (the smallest score whose raters carry at
    least half the answer's weight). Raters missing from ``weights`` weigh 0; an answer whose raters all weigh 0
    falls back to equal weights. Integer Series indexed by item id."""
    ratings = _check_scores(ratings)
    w = pd.Series(weights, dtype=float)
    if (w < 0).any() or not np.isfinite(w).all():
        raise ProbekitError("rater weights must be finite and non-negative")
    if ratings.empty:
        return pd.Series([], dtype="int64", name="score")
    frame = ratings.assign(weight=ratings["annotator"].map(w).fillna(0.0))

    def one(group: pd.DataFrame) -> int:
        g = group.sort_values("score")
        weight = g["weight"].to_numpy()
        if weight.sum() <= 0:
            weight = np.ones(len(g))
        cum = np.cumsum(weight)
        return int(g["score"].to_numpy()[np.searchsorted(cum, cum[-1] / 2 - 1e-12 * cum[-1])])

    return frame.groupby("item_id", sort=False)[["score", "weight"]].apply(one).astype("int64").rename("score")


def rater_quality(ratings: pd.DataFrame, *, model: DawidSkene | None = None) -> pd.DataFrame:
    """Per rater: ``ratings``, ``shared`` (answers someone else rated too), ``bias``, ``consistency`` and
    ``reliability`` (Dawid–Skene; pass a fitted ``model`` to reuse it). Bias and consistency are NaN without
    shared answers; consistency also with fewer than three, or when either side has a single value."""
    ratings = _check_scores(ratings)
    columns = ["annotator", "ratings", "shared", "bias", "consistency", "reliability"]
    if ratings.empty:
        return pd.DataFrame(columns=columns)
    model = model or dawid_skene(ratings)
    wide = ratings.pivot_table(index="item_id", columns="annotator", values="score", aggfunc="last")
    total, count = wide.sum(axis=1), wide.count(axis=1)
    rows = []
    for rater in wide.columns:
        own = wide[rater]
        others = (total - own.fillna(0)) / (count - own.notna())
        both = own.notna() & (count - own.notna() > 0)
        x, y = own[both].to_numpy(dtype=float), others[both].to_numpy(dtype=float)
        r = np.nan
        if len(x) >= 3 and x.std() > 0 and y.std() > 0:
            r = float(np.corrcoef(x, y)[0, 1])
        rows.append({"annotator": rater, "ratings": int(own.notna().sum()), "shared": int(both.sum()),
                     "bias": float((x - y).mean()) if len(x) else np.nan, "consistency": r,
                     "reliability": float(model.reliability[rater])})
    return pd.DataFrame(rows, columns=columns)


def adjusted_accuracy(queries: pd.DataFrame, answers: pd.DataFrame, ratings: pd.DataFrame,
                      reliability: pd.Series | dict, *, threshold: int = 5, ks: Sequence[int] = KS,
                      scores: pd.Series | None = None, weighted: pd.Series | None = None,
                      plain: pd.DataFrame | None = None) -> pd.DataFrame:
    """Expert acc@k per query from the plain lower-median consensus and from the reliability-weighted one,
    side by side (with gold acc on the same queries). ``scores`` / ``weighted`` replace the two consensus
    series where given (e.g. with a reviewer's verdicts applied); ``plain`` is :func:`~.agreement.
    expert_accuracy` of ``scores`` when the caller has it already. Rows as that function's."""
    threshold = _check_threshold(threshold)
    adjusted = weighted_consensus(ratings, reliability) if weighted is None else weighted
    a = plain if plain is not None else expert_accuracy(
        queries, answers, consensus(ratings) if scores is None else scores, threshold=threshold, ks=ks)
    b = expert_accuracy(queries, answers, adjusted, threshold=threshold, ks=ks)
    col = f"expert acc (≥{threshold})"
    out = a[["k", "relation", "n", "gold acc", col]].copy()
    out[f"reliability-weighted expert acc (≥{threshold})"] = b[col].to_numpy()
    return out
