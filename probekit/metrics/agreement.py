"""Statistics over expert ratings: MedLAMA Table 5, expert-adjusted acc@k, agreement, candidate missing facts.

Pure functions over plain frames so that each is checked on hand-made data (``tests/test_agreement.py``):

- ``answers``: one row per rated answer (an *item*): ``item_id``, ``query`` (any query key), ``relation``,
  ``rank`` (1-based rank the probe gave it) and ``is_gold``; extra columns (answer text, query text) are kept.
- ``ratings``: long format, one row per (item, annotator): ``item_id``, ``annotator``, ``score`` (1..5).
- ``queries``: one row per query: ``query``, ``relation``, ``best_gold_rank`` (rank of the best gold among
  *all* candidates, so gold-based acc@k does not depend on how many answers were shown).

Agreement uses maintained implementations: Krippendorff's alpha from the ``krippendorff`` package (ordinal
distance, since 1..5 is an ordered scale with unequal steps) and quadratic-weighted Cohen's kappa from
scikit-learn for every pair of annotators (partial credit for near misses, as for any ordinal scale).

Two accuracies under expert labels, both shown (labelled) on the Annotation results page:

- *per query* (:func:`expert_accuracy`): a query is a hit at k when one of its top-k answers is rated ≥ the
  threshold, the same unit as gold acc@k;
- *share of answers* (:func:`shares`, :func:`answer_shares`): the fraction of all rated top-k answers rated
  ≥ the threshold. This is what MedLAMA §5.3 calls "acc@10 under the expert annotation".

MedLAMA §5.3 prints that figure as "25.3% (38/150)", but its own Table 5 (:data:`MEDLAMA_TABLE5`) has 33
top-10 answers rated 5 (13 gold hits + 20 not gold): the 38 is the table's "Sum" column, which adds the top-1
columns to the top-10 ones and so counts the five top-1 answers rated 5 (4 + 1) twice. The consistent figure
is 33/150 = 22.0% (gold: 16/150 = 10.7%, printed 10.6%).

>>> ratings = pd.DataFrame({"item_id": [1, 1, 2, 2], "annotator": ["a", "b", "a", "b"], "score": [5, 4, 2, 2]})
>>> consensus(ratings).to_dict()
{1: 4, 2: 2}
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from itertools import combinations
from typing import Literal

import numpy as np
import pandas as pd

from ..errors import ProbekitError, positive_int
from .intervals import bracket, hit_intervals, wilson

SCORES = (1, 2, 3, 4, 5)
CONSENSUS = ("median", "mean", "min", "max")
KS = (1, 10)

MEDLAMA_TABLE5 = {
    ("top-1", "gold hit"): {5: 4, 4: 1, 3: 0, 2: 0, 1: 0},
    ("top-1", "not gold"): {5: 1, 4: 2, 3: 5, 2: 2, 1: 0},
    ("top-10", "gold hit"): {5: 13, 4: 3, 3: 0, 2: 0, 1: 0},
    ("top-10", "not gold"): {5: 20, 4: 8, 3: 54, 2: 52, 1: 0},
}
"""MedLAMA Table 5 as printed (Meng et al. 2022): answers by expert score, for the top-1 and the top-10
answers of 15 queries, gold hit ("Yes") or not ("No"). Its "Sum" column (38, 14, 59, 54, 0) adds the top-1
and top-10 columns although the top-1 answers are among the top-10 ones; see the module docstring."""
MEDLAMA_NOTE = ("MedLAMA §5.3 reports expert acc@10 as 25.3% (38/150), but its Table 5 has 33 top-10 answers rated "
                "5 (13 gold + 20 not gold): the 38 adds the top-1 columns to the top-10 ones and counts the five "
                "top-1 answers rated 5 twice. The consistent figure is 33/150 = 22.0%.")
"""One line for the pages that show Table 5."""


def _need(frame: pd.DataFrame, what: str, *columns: str) -> pd.DataFrame:
    if not isinstance(frame, pd.DataFrame):
        raise ProbekitError(f"{what} must be a table (pandas DataFrame)")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ProbekitError(f"{what} lacks column(s) {', '.join(missing)}")
    return frame


def _check_scores(ratings: pd.DataFrame) -> pd.DataFrame:
    _need(ratings, "ratings", "item_id", "annotator", "score")
    ratings = ratings.dropna(subset=["score"])
    bad = ~ratings["score"].isin(SCORES)
    if bad.any():
        raise ProbekitError(f"scores must be whole numbers 1..5; got {ratings['score'][bad].iloc[0]!r}")
    return ratings.astype({"score": int})


def _check_ks(ks) -> tuple[int, ...]:
    ks = tuple(ks)
    if not ks:
        raise ProbekitError("ks must be positive integers, got ()")
    return tuple(positive_int("ks", k) for k in ks)


def _check_threshold(threshold) -> int:
    if threshold not in SCORES or isinstance(threshold, bool):
        raise ProbekitError(f"threshold must be a score 1..5, got {threshold!r}")
    return int(threshold)


# ---------------------------------------------------------------- consensus
def consensus(ratings: pd.DataFrame, *, method: str = "median") -> pd.Series:
    """One score per item from its raters: ``median`` (the *lower* median, so that with two raters an answer
    counts as 5 only when both gave 5), ``mean`` (rounded half down), ``min`` or ``max``. Integer Series
    indexed by item id; items nobody rated are absent."""
    if method not in CONSENSUS:
        raise ProbekitError(f"unknown consensus {method!r}; available: {', '.join(CONSENSUS)}")
    ratings = _check_scores(ratings)
    if ratings.empty:
        return pd.Series([], dtype="int64", name="score")
    groups = ratings.groupby("item_id", sort=False)["score"]
    if method == "median":
        out = groups.agg(lambda s: int(np.sort(s.to_numpy())[(len(s) - 1) // 2]))
    elif method == "mean":
        out = groups.mean().apply(lambda m: int(np.ceil(m - 0.5)))
    else:
        out = groups.agg(method)
    return out.astype("int64").rename("score")


def _scored(answers: pd.DataFrame, scores: pd.Series) -> pd.DataFrame:
    _need(answers, "answers", "item_id", "query", "relation", "rank", "is_gold")
    out = answers.copy()
    out["score"] = out["item_id"].map(scores).astype("Int64")
    out["is_gold"] = out["is_gold"].astype(bool)
    return out


# ---------------------------------------------------------------- Table 5 and shares
def table5(answers: pd.DataFrame, scores: pd.Series, *, ks: Sequence[int] = KS) -> pd.DataFrame:
    """Expert score × gold hit for the top-1 and top-10 answers, with totals (the shape of MedLAMA Table 5).

    Rows: for each k, ``gold hit`` / ``not gold`` / ``all``; columns: the number of answers with each score
    1..5 and their ``total``. Only rated answers are counted (unrated ones are reported by :func:`shares`).
    """
    ks = _check_ks(ks)
    data = _scored(answers, scores).dropna(subset=["score"])
    rows = []
    for k in ks:
        top = data[data["rank"] <= k]
        for label, part in (("gold hit", top[top.is_gold]), ("not gold", top[~top.is_gold]), ("all", top)):
            counts = part["score"].value_counts()
            row: dict[str, object] = {"answers": f"top-{k}", "gold": label}
            row.update({str(s): int(counts.get(s, 0)) for s in SCORES})
            row["total"] = int(len(part))
            rows.append(row)
    return pd.DataFrame(rows, columns=["answers", "gold", *map(str, SCORES), "total"])


def shares(answers: pd.DataFrame, scores: pd.Series, *, k: int = 10, threshold: int = 5) -> dict:
    """Among the rated top-``k`` answers: how many are gold hits and how many experts rated ≥ ``threshold``.

    This is MedLAMA §5.3's acc@10 (a share of answers, not of queries). In its Table 5, of 150 top-10 answers
    16 are gold hits (10.7%, printed 10.6%) and 33 are rated 5 (22.0%; §5.3 prints 38/150 = 25.3%, counting
    the five top-1 answers rated 5 twice, see the module docstring).
    """
    (k,) = _check_ks([k])
    threshold = _check_threshold(threshold)
    data = _scored(answers, scores)
    top = data[data["rank"] <= k]
    rated = top.dropna(subset=["score"])
    n = len(rated)
    gold, expert = int(rated.is_gold.sum()), int((rated.score >= threshold).sum())
    return {"k": k, "threshold": threshold, "answers": int(len(top)), "rated": n, "unrated": int(len(top) - n),
            "gold_hits": gold, "expert_hits": expert,
            "gold_and_expert": int((rated.is_gold & (rated.score >= threshold)).sum()),
            "gold_share": gold / n if n else float("nan"), "expert_share": expert / n if n else float("nan")}


def answer_shares(answers: pd.DataFrame, scores: pd.Series, *, ks: Sequence[int] = KS,
                  threshold: int = 5) -> pd.DataFrame:
    """:func:`shares` for each k as a table: the share of rated top-k answers that are gold hits and the
    share rated ≥ ``threshold`` (MedLAMA §5.3's "acc@10": a share of answers, not of queries)."""
    rows = []
    for k in _check_ks(ks):
        s = shares(answers, scores, k=k, threshold=threshold)
        rows.append({"k": k, "rated answers": s["rated"], "gold hits": s["gold_hits"],
                     "gold share": s["gold_share"], f"rated ≥{s['threshold']}": s["expert_hits"],
                     f"expert share (≥{s['threshold']})": s["expert_share"]})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- accuracy under expert labels
def _expert_hits(queries: pd.DataFrame, data: pd.DataFrame, *, k: int, threshold: int) -> pd.DataFrame:
    """One row per query whose top-k answers are all shown and rated: ``relation``, ``gold``, ``expert``,
    ``either`` (bools), as :func:`expert_accuracy` counts them."""
    shown = data.groupby("query")["rank"].max()
    per_query = []
    for q in queries.itertuples(index=False):
        top = data[(data["query"] == q.query) & (data["rank"] <= k)]
        n_shown = int(shown.get(q.query, 0))
        if n_shown < k or top.empty or top["score"].isna().any():
            continue  # top-k not fully shown or not fully rated
        gold = not pd.isna(q.best_gold_rank) and int(q.best_gold_rank) <= k
        expert = bool((top["score"] >= threshold).any())
        per_query.append((q.relation, gold, expert))
    frame = pd.DataFrame(per_query, columns=["relation", "gold", "expert"])
    frame["either"] = frame.gold | frame.expert
    return frame


def _accuracy_columns(threshold: int) -> dict[str, str]:
    return {"gold": "gold acc", "expert": f"expert acc (≥{threshold})", "either": "gold or expert acc"}


def expert_accuracy(queries: pd.DataFrame, answers: pd.DataFrame, scores: pd.Series, *, threshold: int = 5,
                    ks: Sequence[int] = KS) -> pd.DataFrame:
    """Query-level acc@k under expert labels next to the gold-based numbers, per relation and over all
    (per query, like gold acc@k; MedLAMA §5.3's "acc@10" is a share of answers instead: :func:`answer_shares`).

    A query is an expert hit at k when one of its top-k answers has a score ≥ ``threshold``; it counts only
    once all of its top-k answers are rated (so partly rated queries do not pull the number down), and
    gold acc@k is computed on the same queries. ``gold or expert`` credits either. Rows: one per relation,
    then ``all`` (micro: over queries) and ``macro`` (mean over relations).
    """
    ks = _check_ks(ks)
    threshold = _check_threshold(threshold)
    _need(queries, "queries", "query", "relation", "best_gold_rank")
    data = _scored(answers, scores)
    rows = []
    for k in ks:
        frame = _expert_hits(queries, data, k=k, threshold=threshold)
        by_rel = frame.groupby("relation").agg(n=("gold", "size"), gold=("gold", "mean"), expert=("expert", "mean"),
                                               either=("either", "mean")).reset_index()
        micro = {"relation": "all", "n": len(frame), "gold": frame.gold.mean() if len(frame) else np.nan,
                 "expert": frame.expert.mean() if len(frame) else np.nan,
                 "either": frame.either.mean() if len(frame) else np.nan}
        macro = {"relation": "macro", "n": len(frame), **{c: by_rel[c].mean() if len(by_rel) else np.nan
                                                          for c in ("gold", "expert", "either")}}
        block = pd.concat([by_rel, pd.DataFrame([micro, macro])], ignore_index=True)
        block.insert(0, "k", k)
        rows.append(block)
    out = pd.concat(rows, ignore_index=True)
    out = out.rename(columns=_accuracy_columns(threshold))
    return out.astype({"n": int})


def expert_accuracy_intervals(queries: pd.DataFrame, answers: pd.DataFrame, scores: pd.Series, *,
                              threshold: int = 5, ks: Sequence[int] = KS, confidence: float = 0.95,
                              n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The 95 % intervals of :func:`expert_accuracy`'s values, in its rows (``k``, ``relation``): a ``{column}
    [lo, hi]`` text column (in %) per accuracy column. A relation's and ``all``'s share: Wilson; ``macro``: a
    bootstrap over queries within relations (:func:`probekit.metrics.intervals.hit_intervals`)."""
    ks = _check_ks(ks)
    threshold = _check_threshold(threshold)
    _need(queries, "queries", "query", "relation", "best_gold_rank")
    data = _scored(answers, scores)
    names = _accuracy_columns(threshold)
    rows = []
    for k in ks:
        frame = _expert_hits(queries, data, k=k, threshold=threshold)
        got = {c: hit_intervals(frame[c], frame["relation"], confidence=confidence, n_boot=n_boot, seed=seed)
               for c in names}
        for rel, g in frame.groupby("relation"):
            rows.append({"k": k, "relation": rel, **{f"{names[c]} [lo, hi]": bracket(*wilson(
                float(g[c].sum()), float(len(g)), confidence=confidence)) for c in names}})
        for rel, a in (("all", "micro"), ("macro", "macro")):
            rows.append({"k": k, "relation": rel, **{f"{names[c]} [lo, hi]": bracket(*got[c][a]) for c in names}})
    return pd.DataFrame(rows, columns=["k", "relation", *[f"{v} [lo, hi]" for v in names.values()]])


# ---------------------------------------------------------------- agreement
def reliability_matrix(ratings: pd.DataFrame) -> tuple[np.ndarray, list, list]:
    """Annotators × items matrix of scores (NaN where an annotator did not rate an item)."""
    ratings = _check_scores(ratings)
    wide = ratings.pivot_table(index="annotator", columns="item_id", values="score", aggfunc="last")
    return wide.to_numpy(dtype=float), list(wide.index), list(wide.columns)


Level = Literal["nominal", "ordinal", "interval", "ratio"]
"""Krippendorff's levels of measurement (the ``krippendorff`` package's names)."""


def krippendorff_alpha(ratings: pd.DataFrame, *, level: Level = "ordinal") -> float | None:
    """Krippendorff's alpha over all annotators (missing ratings allowed); None when it is undefined
    (fewer than two annotators, no item rated twice, or a single score value used throughout)."""
    import krippendorff

    matrix, annotators, _ = reliability_matrix(ratings)
    if len(annotators) < 2:
        return None
    pairable = (~np.isnan(matrix)).sum(axis=0) >= 2
    values = matrix[:, pairable]
    if values.size == 0 or len(np.unique(values[~np.isnan(values)])) < 2:
        return None
    try:
        return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=level,
                                        value_domain=list(SCORES)))
    except (ValueError, ZeroDivisionError):
        return None


def pairwise_kappa(ratings: pd.DataFrame, *, weights: str = "quadratic") -> pd.DataFrame:
    """Weighted Cohen's kappa for every pair of annotators over the items both rated.

    Columns: ``annotator_a``, ``annotator_b``, ``n`` (items both rated), ``kappa`` (NaN when undefined:
    fewer than two shared items, or both used one single score).
    """
    from sklearn.metrics import cohen_kappa_score

    ratings = _check_scores(ratings)
    wide = ratings.pivot_table(index="item_id", columns="annotator", values="score", aggfunc="last")
    rows = []
    for a, b in combinations(sorted(wide.columns), 2):
        both = wide[[a, b]].dropna()
        kappa = np.nan
        if len(both) >= 2 and (both[a].nunique() > 1 or both[b].nunique() > 1):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                kappa = float(cohen_kappa_score(both[a].astype(int), both[b].astype(int), labels=list(SCORES),
                                                weights=weights))
        rows.append({"annotator_a": a, "annotator_b": b, "n": int(len(both)), "kappa": kappa})
    return pd.DataFrame(rows, columns=["annotator_a", "annotator_b", "n", "kappa"])


def agreement(ratings: pd.DataFrame, answers: pd.DataFrame | None = None) -> pd.DataFrame:
    """Alpha (ordinal), mean pairwise kappa and counts, over all items and per relation (``answers`` gives
    each item's relation). Rows: ``all`` then one per relation."""
    ratings = _check_scores(ratings)
    groups = [("all", ratings)]
    if answers is not None and len(ratings):
        _need(answers, "answers", "item_id", "relation")
        rel = ratings["item_id"].map(answers.set_index("item_id")["relation"])
        groups += [(r, ratings[rel == r]) for r in sorted(rel.dropna().unique())]
    rows = []
    for name, part in groups:
        kappas = pairwise_kappa(part)
        multi = part.groupby("item_id")["annotator"].nunique()
        rows.append({"relation": name, "items": int(part["item_id"].nunique()),
                     "items rated twice+": int((multi >= 2).sum()), "annotators": int(part["annotator"].nunique()),
                     "ratings": int(len(part)), "alpha (ordinal)": krippendorff_alpha(part),
                     "mean kappa (quadratic)": kappas["kappa"].mean() if kappas["kappa"].notna().any() else None})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- candidate missing facts
def missing_facts(answers: pd.DataFrame, ratings: pd.DataFrame, scores: pd.Series, *,
                  threshold: int = 5) -> pd.DataFrame:
    """Answers the experts rated ≥ ``threshold`` (consensus) that are not gold: facts the KB may lack.

    Keeps every column of ``answers`` and adds ``score`` (consensus), ``ratings`` (all scores, sorted) and
    ``raters`` (how many rated it). Sorted by query then rank.
    """
    threshold = _check_threshold(threshold)
    ratings = _check_scores(ratings)
    data = _scored(answers, scores)
    hits = data[(~data.is_gold) & (data["score"] >= threshold).fillna(False)].copy()
    per_item = ratings.groupby("item_id")["score"].agg(lambda s: sorted(int(v) for v in s))
    hits["ratings"] = hits["item_id"].map(per_item)
    hits["raters"] = hits["ratings"].map(len)
    return hits.sort_values(["query", "rank"]).reset_index(drop=True)
