"""The one acc@k: pure functions over gold ranks, used for rankings, results frames and hit counts.

Two counting conventions (:data:`COUNTINGS`), always labelled where a number is shown:

- ``query`` (the default; MedLAMA's evaluation scripts): a query (S, R) is one item, a hit when *any*
  of its golds ranks within the top k (a missing rank, no gold among the candidates, is a miss).
- ``triple`` (LAMA, mLAMA): each (S, R, O) triple is one item, a hit when *its* O ranks within the top k
  (the query's other golds still compete for the k places). A query with 3 golds is 3 items.

*Macro* averages per-relation accuracies (MedLAMA's headline number); *micro* averages over all items.
A method that gives fewer answers than k asks (``depth``: X-FACTR's code gives one) has no acc@k above its
depth: NaN, shown as "-". Every other acc@k in probekit (run tables, layer sweeps, stored-run listings,
context summaries) calls these.

>>> from probekit.types import Query, Ranking
>>> q = Query("a", "s", "r1", "[X] [Y]", golds=("x",))
>>> rs = [Ranking(q, (0,), ("x",), (1.0,), (1,)), Ranking(q, (0,), ("y",), (1.0,), (3,))]
>>> acc_at_k(rs, k=1), acc_at_k(rs, k=5)
(0.5, 1.0)
>>> rank_summary([1, 7, None], ["a", "a", "b"], metrics=("acc@1", "acc@10"))["macro"]
{'acc@1': 0.25, 'acc@10': 0.5}

Every function that reports several metrics takes ``metrics`` (names in :data:`probekit.metrics.registry.METRICS`,
default: all of them) and keys its numbers by those names; :func:`metric_value` is the one computation behind them.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import TypedDict

import numpy as np
import pandas as pd

from ..errors import ProbekitError, positive_int
from ..types import Ranking
from .registry import Metric, get_metric, metric_names

AVERAGES = ("macro", "micro")
COUNTINGS = {
    "query": "a query is a hit when any gold is in the top k (MedLAMA)",
    "triple": "each (S, R, O) triple counts once (LAMA, mLAMA)",
}
"""The counting conventions of acc@k and the label shown with every number counted so."""
DEFAULT_COUNTING = "query"


def check_counting(counting) -> str:
    """``counting`` when known, else the registry's error.

    >>> check_counting("tripel")
    Traceback (most recent call last):
    ...
    probekit.errors.ProbekitError: unknown counting 'tripel'; did you mean 'triple'? available: query, triple
    """
    if counting not in COUNTINGS:
        import difflib

        close = difflib.get_close_matches(str(counting), list(COUNTINGS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ";"
        raise ProbekitError(f"unknown counting {counting!r}{hint} available: {', '.join(COUNTINGS)}")
    return counting


def counting_label(counting: str) -> str:
    """``'counting: query (a query is a hit when any gold is in the top k (MedLAMA))'``."""
    return f"counting: {check_counting(counting)} ({COUNTINGS[counting]})"


def check_k(k) -> int:
    return positive_int("k", k)


def _check_average(average: str) -> None:
    if average not in AVERAGES:
        raise ProbekitError(f"unknown average {average!r}; available: {', '.join(AVERAGES)}")


def hits(ranks, k: int) -> np.ndarray:
    """(n,) bool: best gold rank within ``k``; ``None``/NaN/missing ranks are misses.

    >>> hits([1, None, 4, float("nan")], 3).tolist()
    [True, False, False, False]
    """
    k = check_k(k)
    r = pd.to_numeric(pd.Series(list(ranks) if not isinstance(ranks, (pd.Series, np.ndarray)) else ranks,
                                dtype=object), errors="coerce").astype("Float64")
    return np.asarray(r.le(k).fillna(False), dtype=bool)


def counts_accuracy(n, hit_counts, relations, *, average: str = "macro") -> float:
    """acc from per-group counts (``n`` queries and ``hit_counts`` hits per row, rows grouped by ``relations``):
    macro = mean over relations of (hits / n), micro = all hits / all queries; NaN when empty.

    >>> counts_accuracy([4, 2], [1, 2], ["a", "b"]), counts_accuracy([4, 2], [1, 2], ["a", "b"], average="micro")
    (0.625, 0.5)
    """
    _check_average(average)
    frame = pd.DataFrame({"relation": list(relations), "n": np.asarray(n, dtype=float),
                          "hits": np.asarray(hit_counts, dtype=float)})
    if frame["n"].sum() == 0:
        return float("nan")
    if average == "micro":
        return float(frame["hits"].sum() / frame["n"].sum())
    per = frame.groupby("relation", sort=False)[["hits", "n"]].sum()
    per = per[per["n"] > 0]
    return float((per["hits"] / per["n"]).mean())


def rank_accuracy(ranks, relations, *, k: int, average: str = "macro") -> float:
    """acc@k of queries given their best gold ranks and relations."""
    _check_average(average)
    h = hits(ranks, k)
    if len(h) == 0:
        return float("nan")
    return counts_accuracy(np.ones(len(h)), h.astype(float), relations, average=average)


def rank_summary(ranks, relations, *, metrics: Sequence[str] | None = None) -> dict:
    """Per-relation, macro and micro values of ``metrics`` (fractions) from best gold ranks (one item per
    query): ``{"relations", "macro", "micro"}``."""
    ranks, relations = list(ranks), list(relations)
    names = metric_names(metrics)
    per_query = [[r] for r in ranks]
    by_rel: dict[str, list[int]] = {}
    for i, rel in enumerate(relations):
        by_rel.setdefault(rel, []).append(i)
    return {
        "relations": {rel: {n: metric_value([per_query[i] for i in idx], [rel] * len(idx), metric=n,
                                            average="micro") for n in names} for rel, idx in by_rel.items()},
        "macro": {n: metric_value(per_query, relations, metric=n, average="macro") for n in names},
        "micro": {n: metric_value(per_query, relations, metric=n, average="micro") for n in names},
    }


# ---------------------------------------------------------------- over every gold's rank, either counting
def _flat(gold_ranks) -> tuple[np.ndarray, np.ndarray]:
    """``(sizes, flat)``: each query's number of gold ranks, and all of them in turn as floats (a missing rank
    kept as NaN: the gold is an item that scores 0). One pass, no list per query (19,000 lists per metric and
    average made a page listing one MedLAMA run take seconds)."""
    lists = [g if isinstance(g, (list, tuple, np.ndarray)) else () for g in gold_ranks]
    sizes = np.fromiter(map(len, lists), dtype=int, count=len(lists))
    flat = np.array(list(chain.from_iterable(lists)), dtype=float)  # None -> NaN
    return sizes, flat


def item_scores(gold_ranks, *, metric: str | Metric, counting: str = DEFAULT_COUNTING) -> tuple[np.ndarray,
                                                                                                 np.ndarray]:
    """``(items, score sums)`` per query from each query's gold ranks: under ``query`` one item scored by its best
    gold (a query without any gold rank scores 0); under ``triple`` one item per gold, each scored by its own rank.

    >>> n, s = item_scores([[1, 4], [None], []], metric="MRR", counting="triple")
    >>> n.tolist(), s.tolist()
    ([2, 1, 0], [1.25, 0.0, 0.0])
    >>> item_scores([[1, 4], [None], []], metric="MRR")[1].tolist()
    [1.0, 0.0, 0.0]
    """
    m, counting = get_metric(metric), check_counting(counting)
    sizes, flat = _flat(gold_ranks)  # (n_queries,), (n_golds,) every query's golds in turn
    n_queries = len(sizes)
    owner = np.repeat(np.arange(n_queries), sizes)  # (n_golds,) the query each gold belongs to
    if counting == "query":  # the best rank per query in one pass (a per-query nanmin took ~1 s per 19,000 queries)
        best = np.full(n_queries, np.inf)  # (n_queries,)
        np.minimum.at(best, owner, np.where(np.isnan(flat), np.inf, flat))
        best[np.isinf(best)] = np.nan  # no gold ranked: the item scores 0
        return np.ones(n_queries, dtype=int), m.score(best)
    scored = m.score(flat) if len(flat) else np.zeros(0)
    return sizes, np.bincount(owner, weights=scored, minlength=n_queries).astype(float)


def metric_value(gold_ranks, relations, *, metric: str | Metric, average: str = "macro",
                 counting: str = DEFAULT_COUNTING, depth: int | None = None) -> float:
    """``metric`` over queries given each one's gold ranks, under ``counting``, ``macro`` (mean over relations of
    each relation's mean item score) or ``micro`` (mean over all items); NaN when empty, or when the metric needs
    more answers per query than ``depth`` gives (:meth:`Metric.defined_at`).

    >>> metric_value([[1, 7], [None]], ["a", "a"], metric="acc@5"), metric_value([[2], [4]], ["a", "b"], metric="MRR")
    (0.5, 0.375)
    >>> metric_value([[1]], ["a"], metric="acc@10", depth=1), metric_value([], [], metric="MRR")
    (nan, nan)
    """
    m = get_metric(metric)
    _check_average(average)
    gold_ranks = list(gold_ranks)
    if not m.defined_at(depth) or not gold_ranks:
        return float("nan")
    n, s = item_scores(gold_ranks, metric=m, counting=counting)
    return counts_accuracy(n, s, relations, average=average)


def counted_hits(gold_ranks, *, k: int, counting: str = DEFAULT_COUNTING) -> tuple[np.ndarray, np.ndarray]:
    """``(items, hits)`` per query from each query's gold ranks: under ``query`` 1 item, a hit when any gold
    ranks within ``k``; under ``triple`` one item per gold, one hit per gold within ``k``.

    >>> n, h = counted_hits([[1, 7], [None], []], k=5, counting="triple")
    >>> n.tolist(), h.tolist()
    ([2, 1, 0], [1, 0, 0])
    >>> counted_hits([[1, 7], [None], []], k=5)[1].tolist()
    [1, 0, 0]
    """
    k, counting = check_k(k), check_counting(counting)
    rows = [[r for r in (g if isinstance(g, (list, tuple, np.ndarray)) else []) if r is not None and r == r]
            for g in gold_ranks]
    if counting == "query":
        return np.ones(len(rows), dtype=int), np.array([int(any(r <= k for r in g)) for g in rows], dtype=int)
    sizes = [len(g) if isinstance(g, (list, tuple, np.ndarray)) else 0 for g in gold_ranks]
    return np.array(sizes, dtype=int), np.array([sum(int(r <= k) for r in g) for g in rows], dtype=int)


def gold_rank_accuracy(gold_ranks, relations, *, k: int, average: str = "macro", counting: str = DEFAULT_COUNTING,
                       depth: int | None = None) -> float:
    """acc@k from each query's gold ranks under ``counting``; NaN when empty or when ``k`` exceeds ``depth``
    (the answers the method gives per query).

    >>> gold_rank_accuracy([[1, 7], [None]], ["a", "a"], k=5), gold_rank_accuracy([[1, 7], [None]], ["a", "a"],
    ...                                                                        k=5, counting="triple")
    (0.5, 0.3333333333333333)
    >>> gold_rank_accuracy([[1]], ["a"], k=10, depth=1)
    nan
    """
    return metric_value(gold_ranks, relations, metric=f"acc@{check_k(k)}", average=average, counting=counting,
                        depth=depth)


# ---------------------------------------------------------------- over rankings
def _gold_ranks(rankings: Sequence[Ranking]) -> tuple[list, list]:
    return [list(r.gold_ranks) for r in rankings], [r.query.relation for r in rankings]


def depth_of(rankings: Sequence[Ranking]) -> int | None:
    """The fewest answers per query any of ``rankings``' methods gives (None: no limit)."""
    depths = [r.depth for r in rankings if r.depth is not None]
    return min(depths) if depths else None


def acc_at_k(rankings: Sequence[Ranking], *, k: int, average: str = "macro",
             counting: str = DEFAULT_COUNTING) -> float:
    """Share of items (queries, or triples: see :data:`COUNTINGS`) hit in the top ``k``; ``average`` is
    ``macro`` or ``micro``; NaN above the rankings' :func:`depth_of`."""
    check_k(k)
    _check_average(average)
    if not rankings:
        return float("nan")
    return gold_rank_accuracy(*_gold_ranks(rankings), k=k, average=average, counting=counting,
                              depth=depth_of(rankings))


def per_relation(rankings: Sequence[Ranking], *, metrics: Sequence[str] | None = None,
                 counting: str = DEFAULT_COUNTING) -> dict[str, dict[str, float]]:
    """{relation: {metric name: value}} in relation order of first appearance."""
    names = metric_names(metrics)
    ranks, relations = _gold_ranks(rankings)
    depth = depth_of(rankings)
    out: dict[str, dict[str, float]] = {}
    for rel in dict.fromkeys(relations):
        mine = [g for g, r in zip(ranks, relations) if r == rel]
        out[rel] = {n: metric_value(mine, [rel] * len(mine), metric=n, average="micro", counting=counting,
                                    depth=depth) for n in names}
    return out


class Summary(TypedDict):
    """What :func:`summary` returns: counts, then ``relations`` ({relation: {"n", "n_items", metric: value}}),
    ``macro`` and ``micro`` ({metric name: value}), every value keyed by its registered metric's name."""

    n_queries: int
    counting: str
    n_items: int
    depth: int | None
    metrics: list[str]
    relations: dict[str, dict[str, float]]
    macro: dict[str, float]
    micro: dict[str, float]


def summary(rankings: Sequence[Ranking], *, metrics: Sequence[str] | None = None,
            counting: str = DEFAULT_COUNTING) -> Summary:
    """Per-relation, macro and micro value of every metric (default: every registered one) plus counts: the
    shape of MedLAMA Table 4.

    ``counting`` names the convention (:data:`COUNTINGS`); ``n`` counts queries, ``n_items`` what the metrics
    count; ``depth`` is the answers per query the method gives (a metric needing more is NaN)."""
    check_counting(counting)
    names = metric_names(metrics)
    ranks, relations = _gold_ranks(rankings)
    depth = depth_of(rankings)
    counts = pd.Series(relations, dtype=object).value_counts(sort=False).to_dict() if relations else {}
    items = {rel: int(sum(counted_hits([g], k=1, counting=counting)[0][0] for g, r in zip(ranks, relations)
                          if r == rel)) for rel in counts}

    def values(average: str) -> dict[str, float]:
        return {n: metric_value(ranks, relations, metric=n, average=average, counting=counting, depth=depth)
                for n in names}

    return {
        "n_queries": len(rankings),
        "counting": counting,
        "n_items": int(sum(items.values())),
        "depth": depth,
        "metrics": names,
        "relations": {rel: {"n": int(counts[rel]), "n_items": items[rel], **v}
                      for rel, v in per_relation(rankings, metrics=names, counting=counting).items()},
        "macro": values("macro"),
        "micro": values("micro"),
    }


# ---------------------------------------------------------------- over results frames
def frame_metric(frame: pd.DataFrame, *, metric: str | Metric, average: str = "macro",
                 counting: str = DEFAULT_COUNTING, depth: int | None = None) -> float:
    """``metric`` of a results frame (columns ``relation``, ``best_gold_rank``; ``gold_ranks`` for ``triple``
    counting); NaN if empty or when the metric needs more answers than ``depth``."""
    if check_counting(counting) == "query" and "gold_ranks" not in frame.columns:
        ranks = [[r] for r in pd.to_numeric(frame["best_gold_rank"], errors="coerce").astype(float).to_numpy()]
        return metric_value(ranks, frame["relation"].to_numpy(), metric=metric, average=average, depth=depth)
    return metric_value(frame["gold_ranks"].tolist(), frame["relation"].to_numpy(), metric=metric, average=average,
                        counting=counting, depth=depth)


def frame_accuracy(frame: pd.DataFrame, *, k: int, average: str = "macro", counting: str = DEFAULT_COUNTING,
                   depth: int | None = None) -> float:
    """acc@k of a results frame (:func:`frame_metric`)."""
    return frame_metric(frame, metric=f"acc@{check_k(k)}", average=average, counting=counting, depth=depth)
