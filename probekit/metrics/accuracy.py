"""The one acc@k: pure functions over best gold ranks, used for rankings, results frames and hit counts.

acc@k of a query is 1 when any gold answer ranks within the top k (a missing rank, no gold among the
candidates, is a miss). *Macro* averages per-relation accuracies (MedLAMA's headline number); *micro*
averages over all queries. Every other acc@k in probekit (run tables, layer sweeps, stored-run
listings, context summaries) calls these.

>>> from probekit.types import Query, Ranking
>>> q = Query("a", "s", "r1", "[X] [Y]", golds=("x",))
>>> rs = [Ranking(q, (0,), ("x",), (1.0,), (1,)), Ranking(q, (0,), ("y",), (1.0,), (3,))]
>>> acc_at_k(rs, k=1), acc_at_k(rs, k=5)
(0.5, 1.0)
>>> rank_summary([1, 7, None], ["a", "a", "b"], ks=(1, 10))["macro"]
{'acc@1': 0.25, 'acc@10': 0.5}
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..errors import ProbekitError, positive_int
from ..types import Ranking

DEFAULT_KS = (1, 5, 10)
AVERAGES = ("macro", "micro")


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


def relation_accuracy(ranks, relations, *, ks: Sequence[int] = DEFAULT_KS) -> dict[str, dict[int, float]]:
    """{relation: {k: acc@k}} in relation order of first appearance."""
    ks = [check_k(k) for k in ks]
    relations = list(relations)
    columns: dict[str | int, object] = {"relation": relations, **{k: hits(ranks, k) for k in ks}}
    frame = pd.DataFrame(columns)
    per = frame.groupby("relation", sort=False)[ks].mean()
    return {rel: {k: float(per.loc[rel, k]) for k in ks} for rel in per.index}


def rank_summary(ranks, relations, *, ks: Sequence[int] = DEFAULT_KS) -> dict:
    """Per-relation, macro and micro acc@k (fractions) from best gold ranks: ``{"relations", "macro", "micro"}``."""
    ranks, relations = list(ranks), list(relations)
    return {
        "relations": {rel: {f"acc@{k}": v for k, v in accs.items()}
                      for rel, accs in relation_accuracy(ranks, relations, ks=ks).items()},
        "macro": {f"acc@{k}": rank_accuracy(ranks, relations, k=k, average="macro") for k in ks},
        "micro": {f"acc@{k}": rank_accuracy(ranks, relations, k=k, average="micro") for k in ks},
    }


# ---------------------------------------------------------------- over rankings
def _ranks(rankings: Sequence[Ranking]) -> tuple[list, list]:
    return [r.best_gold_rank for r in rankings], [r.query.relation for r in rankings]


def acc_at_k(rankings: Sequence[Ranking], *, k: int, average: str = "macro") -> float:
    """Share of queries with a gold answer in the top ``k``; ``average`` is ``macro`` or ``micro``."""
    check_k(k)
    _check_average(average)
    if not rankings:
        return float("nan")
    return rank_accuracy(*_ranks(rankings), k=k, average=average)


def per_relation(rankings: Sequence[Ranking], *, ks: Sequence[int] = DEFAULT_KS) -> dict[str, dict[int, float]]:
    """{relation: {k: acc@k}} in relation order of first appearance."""
    return relation_accuracy(*_ranks(rankings), ks=ks)


def summary(rankings: Sequence[Ranking], *, ks: Sequence[int] = DEFAULT_KS) -> dict:
    """Per-relation, macro and micro acc@k (as fractions) plus counts: the shape of MedLAMA Table 4."""
    ranks, relations = _ranks(rankings)
    out = rank_summary(ranks, relations, ks=ks)
    counts = pd.Series(relations, dtype=object).value_counts(sort=False).to_dict() if relations else {}
    return {
        "n_queries": len(rankings),
        "relations": {rel: {"n": int(counts[rel]), **accs} for rel, accs in out["relations"].items()},
        "macro": out["macro"] if rankings else {f"acc@{k}": float("nan") for k in ks},
        "micro": out["micro"] if rankings else {f"acc@{k}": float("nan") for k in ks},
    }


# ---------------------------------------------------------------- over results frames
def frame_accuracy(frame: pd.DataFrame, *, k: int, average: str = "macro") -> float:
    """acc@k of a results frame (columns ``relation``, ``best_gold_rank``); NaN if empty."""
    return rank_accuracy(frame["best_gold_rank"].to_numpy(), frame["relation"].to_numpy(), k=k, average=average)
