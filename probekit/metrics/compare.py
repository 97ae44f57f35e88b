"""Accuracy tables and run comparisons over benchmark *results frames* (pure pandas, no I/O).

A results frame holds one row per query (see :data:`probekit.bench.frames.RESULT_COLUMNS`); these functions
need ``relation`` and ``best_gold_rank`` (1-based rank of the best gold answer among *all*
candidates, missing when no gold is a candidate) and, where named, ``hard`` (MedLAMA hardness of the
query), ``gold_length`` (mean gold-name length in characters), ``top_names`` (top-k, best first),
``query_id``, ``subject``, ``template`` and ``golds``. acc@k is :mod:`probekit.metrics.accuracy`'s: *macro*
is the mean of per-relation accuracies, *micro* the share over all queries; both are tested against
naive loops and against :func:`probekit.metrics.summary`.

Several runs are passed as a mapping ``{label: frame}`` so charts can group by label.

>>> import pandas as pd
>>> f = pd.DataFrame({"relation": ["a", "a", "b"], "best_gold_rank": [1, 7, None]})
>>> accuracy(f, k=1, average="micro"), accuracy(f, k=10, average="macro")
(0.3333333333333333, 0.5)
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import ProbekitError
from ..types import HARD_IN_FULL
from .accuracy import AVERAGES, DEFAULT_COUNTING, check_counting, check_k, frame_accuracy, frame_metric, item_scores
from .accuracy import hits as rank_hits
from .registry import get_metric, metric_names

SUBSETS = ("full", HARD_IN_FULL, "hard")
"""Which queries met which candidates (MedLAMA): ``full`` = every query of a run, ranked among its
set's vocabulary; ``hard-in-full`` = a full-set run's MedLAMA-hard queries, still ranked among the FULL set's
vocabulary (22,923 names); ``hard`` = a hard-set run, ranked among the hard files' own 17,532 names (the paper's
Table 4 "Hard"). The last two are different experiments, so they never share a label. A run has
:func:`run_subsets` of them: a full-set run (or any other set) ``full`` and ``hard-in-full``, a hard-set run
``hard`` alone."""
LENGTH_EDGES = (0, 10, 20, 30, 40, 50)
"""Bin edges (characters) for accuracy by gold-answer length; the last bin is open-ended."""


# ---------------------------------------------------------------- checks and basics
def _check_k(k) -> int:
    return check_k(k)


def _check_frame(frame, *columns: str) -> pd.DataFrame:
    if not isinstance(frame, pd.DataFrame):
        raise ProbekitError(f"expected a results DataFrame, got {type(frame).__name__}")
    missing = [c for c in ("relation", "best_gold_rank", *columns) if c not in frame.columns]
    if missing:
        raise ProbekitError(f"the results frame has no column {missing[0]!r}")
    return frame


def _check_runs(runs) -> dict[str, pd.DataFrame]:
    if not isinstance(runs, Mapping) or not runs:
        raise ProbekitError("give at least one run as {label: results frame}")
    return {str(label): _check_frame(f) for label, f in runs.items()}


def _rank_hits(ranks, k: int) -> np.ndarray:
    return rank_hits(ranks, k)


def hits(frame: pd.DataFrame, k: int) -> np.ndarray:
    """(n_queries,) bool: a gold answer ranks within the top ``k`` (missing ranks are misses)."""
    return rank_hits(_check_frame(frame)["best_gold_rank"].to_numpy(), _check_k(k))


def run_subsets(hard_set: bool) -> tuple[str, ...]:
    """The subsets a run has: ``("hard",)`` for a run on MedLAMA's hard set (all its queries, among its own
    vocabulary), else ``("full", "hard-in-full")``.

    >>> run_subsets(False), run_subsets(True)
    (('full', 'hard-in-full'), ('hard',))
    """
    return ("hard",) if hard_set else ("full", HARD_IN_FULL)


def _hard_set_of(hard_set, label) -> bool:
    """``hard_set`` for one run of a mapping: a bool for all runs, or the labels of the hard-set runs."""
    if isinstance(hard_set, (bool, np.bool_)) or hard_set is None:
        return bool(hard_set)
    return label in hard_set


def subset(frame: pd.DataFrame, which: str = "full", *, hard_set: bool = False) -> pd.DataFrame:
    """The rows of ``which`` subset (:data:`SUBSETS`) of a run; ``hard_set``: the run is on MedLAMA's hard set.

    A full-set run has ``full`` (all rows) and ``hard-in-full`` (rows whose ``hard`` is True); a hard-set run
    has ``hard`` (all its rows: every query of the hard set, ranked among the hard set's own names). A subset a
    run does not have is empty, so one run's "hard" block is never another experiment's.
    """
    if which not in SUBSETS:
        raise ProbekitError(f"unknown subset {which!r}; available: {', '.join(SUBSETS)}")
    if which not in run_subsets(hard_set):
        return frame.iloc[0:0]
    if which in ("full", "hard"):
        return frame
    if "hard" not in frame.columns:
        return frame.iloc[0:0]
    return frame[frame["hard"].astype("boolean").fillna(False).to_numpy(dtype=bool)]


def accuracy(frame: pd.DataFrame, *, k: int, average: str = "macro", counting: str = DEFAULT_COUNTING,
             depth: int | None = None) -> float:
    """acc@k of a results frame: ``macro`` (mean over relations) or ``micro`` (over items: queries, or triples
    under ``counting="triple"``); NaN if empty or above ``depth`` (:func:`probekit.metrics.accuracy.frame_accuracy`)."""
    return frame_accuracy(_check_frame(frame), k=k, average=average, counting=counting, depth=depth)


def value(frame: pd.DataFrame, *, metric: str, average: str = "macro", counting: str = DEFAULT_COUNTING,
          depth: int | None = None) -> float:
    """A registered ``metric`` of a results frame, ``macro`` or ``micro``, under ``counting``; NaN if empty or when
    the metric needs more answers than ``depth`` (:func:`probekit.metrics.accuracy.frame_metric`)."""
    return frame_metric(_check_frame(frame), metric=metric, average=average, counting=counting, depth=depth)


def _depth_of(depths, label) -> int | None:
    value = (depths or {}).get(label)
    return None if value is None or pd.isna(value) else int(value)


# ---------------------------------------------------------------- tables of one or several runs
def full_hard_table(runs: Mapping[str, pd.DataFrame], *, metrics: Sequence[str] | None = None, hard_set=False,
                    counting: str = DEFAULT_COUNTING, depths: Mapping[str, int | None] | None = None) -> pd.DataFrame:
    """MedLAMA Table 4 shape: one row per (run, average), every metric (default: all registered) of each subset.

    Columns: ``run``, ``average``, ``counting`` (every run of the table counted the one way), then
    ``{subset} {metric}``… and ``n {subset}`` (queries) for each of :data:`SUBSETS` that at least one run has
    (:func:`run_subsets`); NaN where a run lacks it, or above a run's ``depths[label]`` (answers per query).
    ``hard_set``: True when every run is on the hard set, or the labels of those that are.
    """
    counting = check_counting(counting)
    names = metric_names(metrics)
    runs = _check_runs(runs)
    present = [s for s in SUBSETS if any(s in run_subsets(_hard_set_of(hard_set, lab)) for lab in runs)]
    rows = []
    for label, frame in runs.items():
        mine = run_subsets(_hard_set_of(hard_set, label))
        parts = {s: subset(frame, s, hard_set=_hard_set_of(hard_set, label)) for s in present}
        for avg in AVERAGES:
            row: dict[str, object] = {"run": label, "average": avg, "counting": counting}
            for s, part in parts.items():
                row.update({f"{s} {n}": value(part, metric=n, average=avg, counting=counting,
                                              depth=_depth_of(depths, label)) if s in mine else np.nan
                            for n in names})
            row.update({f"n {s}": len(part) if s in mine else pd.NA for s, part in parts.items()})
            rows.append(row)
    out = pd.DataFrame(rows)
    for s in present:
        out[f"n {s}"] = out[f"n {s}"].astype("Int64")
    return out


def relation_accuracy(runs: Mapping[str, pd.DataFrame], *, metric: str, which: str = "full",
                      hard_set=False, counting: str = DEFAULT_COUNTING,
                      depths: Mapping[str, int | None] | None = None) -> pd.DataFrame:
    """Long table ``run, relation, n, value`` (MedLAMA Fig. 5 shape: grouped bars per relation) of a registered
    ``metric`` over the ``which`` subset of each run (``hard_set`` as in :func:`full_hard_table`; a run without
    that subset has no rows). ``n`` counts the items ``counting`` counts (queries, or triples); ``value`` is NaN
    when the metric needs more answers than a run's depth."""
    m, counting = get_metric(metric), check_counting(counting)
    parts = []
    for label, frame in _check_runs(runs).items():
        part = subset(frame, which, hard_set=_hard_set_of(hard_set, label))
        if counting == "query" and "gold_ranks" not in part.columns:
            ranks = [[r] for r in pd.to_numeric(part["best_gold_rank"], errors="coerce").astype(float).to_numpy()]
            n, s = item_scores(ranks, metric=m)
        else:
            n, s = item_scores(part["gold_ranks"].tolist(), metric=m, counting=counting)
        scores = pd.DataFrame({"relation": part["relation"].to_numpy(), "n": n, "s": s})
        g = scores.groupby("relation", sort=True)[["n", "s"]].sum().reset_index()
        g["value"] = g["s"] / g["n"].where(g["n"] > 0)
        if not m.defined_at(_depth_of(depths, label)):
            g["value"] = np.nan
        g = g.drop(columns="s").astype({"n": int})
        g.insert(0, "run", label)
        parts.append(g)
    return pd.concat(parts, ignore_index=True)


def length_bins(lengths, edges: Sequence[float] = LENGTH_EDGES) -> pd.Categorical:
    """Bin labels ``a–b`` for ``a <= length < b``, the last bin ``a+``; missing lengths stay missing.

    >>> list(length_bins([3, 10, 57.5], (0, 10, 50)))
    ['0–10', '10–50', '50+']
    """
    edges = [float(e) for e in edges]
    if len(edges) < 1 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ProbekitError(f"bin edges must be increasing numbers, got {list(edges)}")
    labels = [f"{a:g}–{b:g}" for a, b in zip(edges, edges[1:])] + [f"{edges[-1]:g}+"]
    bounds = edges + [np.inf]
    return pd.cut(pd.to_numeric(pd.Series(lengths), errors="coerce"), bins=bounds, labels=labels, right=False)


def accuracy_by_length(runs: Mapping[str, pd.DataFrame], *, metrics: Sequence[str] | None = None,
                       edges: Sequence[float] = LENGTH_EDGES) -> pd.DataFrame:
    """MedLAMA Fig. 3 shape: each metric (default: all registered), micro over queries, per bin of gold-answer
    length (characters).

    Long table ``run, bin, n, {metric}…``; every bin appears for every run (NaN where n = 0).
    """
    names = metric_names(metrics)
    parts = []
    for label, frame in _check_runs(runs).items():
        if "gold_length" not in frame.columns:
            raise ProbekitError("the results frame has no column 'gold_length'")
        bins = length_bins(frame["gold_length"].to_numpy(), edges)
        best = pd.to_numeric(frame["best_gold_rank"], errors="coerce").astype(float).to_numpy()
        data = pd.DataFrame({"bin": bins.to_numpy(), **{n: get_metric(n).score(best) for n in names}})
        g = data.groupby("bin", observed=False)
        out = g.mean().reset_index()
        out.insert(1, "n", g.size().to_numpy())
        out.insert(0, "run", label)
        parts.append(out)
    return pd.concat(parts, ignore_index=True)


def _join(values) -> str:
    return "; ".join(map(str, values)) if isinstance(values, (list, tuple, np.ndarray)) else str(values)


def relation_queries(frame: pd.DataFrame, relation: str, *, k: int) -> pd.DataFrame:
    """A relation's queries for drill-down: id, subject, golds, best gold rank, hit@k, top-1 and top-k."""
    k = _check_k(k)
    frame = _check_frame(frame, "query_id", "subject", "golds", "top_names")
    part = frame[frame["relation"] == relation]
    if part.empty and relation not in set(frame["relation"]):
        raise ProbekitError(f"no relation {relation!r} in this run")
    return pd.DataFrame({
        "query_id": part["query_id"].to_numpy(),
        "subject": part["subject"].to_numpy(),
        "golds": [_join(g) for g in part["golds"]],
        "best rank": part["best_gold_rank"].astype("Int64").to_numpy(),
        f"hit@{k}": hits(part, k),
        "top-1": [t[0] if len(t) else "" for t in part["top_names"]],
        f"top-{k}": [_join(list(t)[:k]) for t in part["top_names"]],
    })


def short_labels(labels: Mapping[str, str], *, sep: str = " · ") -> dict[str, str]:
    """Labels without the parts every label shares (model, dataset… when only a setting differs).

    >>> short_labels({"a": "MiniLM · medlama · cosine [x1]", "b": "MiniLM · medlama · l2 [x2]"})
    {'a': 'cosine [x1]', 'b': 'l2 [x2]'}
    """
    parts = {key: str(label).split(sep) for key, label in labels.items()}
    if len(parts) < 2:
        return {key: str(label) for key, label in labels.items()}
    common = set.intersection(*(set(p) for p in parts.values()))
    out = {key: sep.join(x for x in p if x not in common) or str(labels[key]) for key, p in parts.items()}
    return out if len(set(out.values())) == len(out) else {key: str(label) for key, label in labels.items()}


# ---------------------------------------------------------------- comparing runs
def query_keys(frame: pd.DataFrame) -> pd.Series:
    """A key naming the same query across runs and sets (MedLAMA full and hard ids differ)."""
    frame = _check_frame(frame, "subject", "template", "golds")
    return pd.Series([json.dumps([r, s, t, list(g)]) for r, s, t, g in
                      zip(frame["relation"], frame["subject"], frame["template"], frame["golds"])], index=frame.index)


def align(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Queries present in both runs, one row each, columns suffixed ``_a`` / ``_b`` (plus ``key``)."""
    fa = a.assign(key=query_keys(a)).drop_duplicates("key")
    fb = b.assign(key=query_keys(b)).drop_duplicates("key")
    return fa.merge(fb, on="key", suffixes=("_a", "_b"), how="inner")


def hit_miss(a: pd.DataFrame, b: pd.DataFrame, *, k: int, which: str = "full",
             hard_set: tuple[bool, bool] = (False, False)) -> pd.DataFrame:
    """Shared queries (of ``which`` subset) that run ``a`` gets (gold in its top-k) and run ``b`` misses;
    ``hard_set``: whether a and b are hard-set runs."""
    k = _check_k(k)
    m = align(subset(a, which, hard_set=hard_set[0]), subset(b, which, hard_set=hard_set[1]))
    m = m[_rank_hits(m["best_gold_rank_a"].to_numpy(), k) & ~_rank_hits(m["best_gold_rank_b"].to_numpy(), k)]
    return pd.DataFrame({
        "relation": m["relation_a"].to_numpy(), "query_id": m["query_id_a"].to_numpy(),
        "subject": m["subject_a"].to_numpy(), "golds": [_join(g) for g in m["golds_a"]],
        "rank a": m["best_gold_rank_a"].astype("Int64").to_numpy(),
        "rank b": m["best_gold_rank_b"].astype("Int64").to_numpy(),
        "top-1 a": [t[0] if len(t) else "" for t in m["top_names_a"]],
        "top-1 b": [t[0] if len(t) else "" for t in m["top_names_b"]],
    })


def _jaccard(x, y) -> float:
    x, y = set(x), set(y)
    return len(x & y) / len(x | y) if (x or y) else float("nan")


def rank_agreement(a: pd.DataFrame, b: pd.DataFrame, *, k: int, which: str = "full",
                   hard_set: tuple[bool, bool] = (False, False)) -> dict:
    """How alike two runs rank the same queries.

    ``n`` shared queries; hit@k contingency (``both``, ``only_a``, ``only_b``, ``neither``); Spearman
    and Kendall (tau-b) correlation of best gold ranks over the ``n_ranked`` queries where both runs
    rank a gold; ``top1_agreement``: share with the same top-1 name; ``jaccard``: mean Jaccard overlap
    of the top-k name sets.
    """
    from scipy import stats

    k = _check_k(k)
    m = align(subset(a, which, hard_set=hard_set[0]), subset(b, which, hard_set=hard_set[1]))
    ha, hb = _rank_hits(m["best_gold_rank_a"].to_numpy(), k), _rank_hits(m["best_gold_rank_b"].to_numpy(), k)
    ra = pd.to_numeric(m["best_gold_rank_a"], errors="coerce").astype(float).to_numpy()
    rb = pd.to_numeric(m["best_gold_rank_b"], errors="coerce").astype(float).to_numpy()
    ok = ~(np.isnan(ra) | np.isnan(rb))
    spearman = kendall = float("nan")
    if ok.sum() >= 2 and np.ptp(ra[ok]) > 0 and np.ptp(rb[ok]) > 0:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spearman = float(stats.spearmanr(ra[ok], rb[ok]).statistic)
            kendall = float(stats.kendalltau(ra[ok], rb[ok]).statistic)
    tops_a, tops_b = list(m["top_names_a"]), list(m["top_names_b"])
    top1 = [bool(len(x) and len(y) and x[0] == y[0]) for x, y in zip(tops_a, tops_b)]
    jac = [_jaccard(list(x)[:k], list(y)[:k]) for x, y in zip(tops_a, tops_b)]
    jac = [j for j in jac if not np.isnan(j)]
    return {
        "n": len(m), "both": int((ha & hb).sum()), "only_a": int((ha & ~hb).sum()),
        "only_b": int((~ha & hb).sum()), "neither": int((~ha & ~hb).sum()), "n_ranked": int(ok.sum()),
        "spearman": spearman, "kendall": kendall,
        "top1_agreement": float(np.mean(top1)) if top1 else float("nan"),
        "jaccard": float(np.mean(jac)) if jac else float("nan"),
    }


def agreement_table(runs: Mapping[str, pd.DataFrame], *, k: int, which: str = "full",
                    hard_set=False) -> pd.DataFrame:
    """:func:`rank_agreement` for every pair of runs (``a``, ``b`` in the mapping's order)."""
    runs = _check_runs(runs)
    labels = list(runs)
    hs = {lab: _hard_set_of(hard_set, lab) for lab in labels}
    rows = [{"a": x, "b": y, **rank_agreement(runs[x], runs[y], k=k, which=which, hard_set=(hs[x], hs[y]))}
            for i, x in enumerate(labels) for y in labels[i + 1:]]
    cols = ["a", "b", "n", "both", "only_a", "only_b", "neither", "n_ranked", "spearman", "kendall",
            "top1_agreement", "jaccard"]
    return pd.DataFrame(rows, columns=cols)


def relation_differences(runs: Mapping[str, pd.DataFrame], *, metric: str, which: str = "full",
                         hard_set=False, counting: str = DEFAULT_COUNTING,
                         depths: Mapping[str, int | None] | None = None) -> pd.DataFrame:
    """Per-relation value of a registered ``metric`` for each run and its difference to the first run
    (``Δ label``), every run counted by ``counting``.

    Index: relation (union over runs; NaN where a run lacks it or lacks the ``which`` subset, or above a run's
    depth), plus a ``macro`` row.
    """
    long = relation_accuracy(runs, metric=metric, which=which, hard_set=hard_set, counting=counting, depths=depths)
    wide = long.pivot(index="relation", columns="run", values="value")
    labels = list(_check_runs(runs))
    wide = wide.reindex(columns=labels)
    wide.loc["macro"] = [value(subset(runs[label], which, hard_set=_hard_set_of(hard_set, label)), metric=metric,
                               average="macro", counting=counting, depth=_depth_of(depths, label))
                         for label in labels]
    base = labels[0]
    for label in labels[1:]:
        wide[f"Δ {label}"] = wide[label] - wide[base]
    wide.columns.name = None
    return wide
