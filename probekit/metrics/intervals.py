"""How sure is a score? An interval for every reported metric of one run.

- **Wilson score interval** for a share of items (acc@k under micro averaging): with ``p = hits / n`` and ``z`` the
  normal quantile of the confidence, centre ``(p + z²/2n) / (1 + z²/n)`` and half-width
  ``z / (1 + z²/n) · sqrt(p(1 - p)/n + z²/4n²)`` (Wilson 1927). Unlike the normal ("Wald") interval it stays inside
  [0, 1] and is not degenerate at 0 or n hits, which probing meets often (acc@1 of a weak model is 0).
- **Bootstrap percentile interval** for everything else (macro averages over relations; MRR): queries resampled
  with replacement within each relation (the relations and their sizes stay the dataset's), the metric recomputed
  per resample, the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles. Seeded: the same run gives the
  same interval. For a 0/1 metric with one item per query (acc@k, query counting) a relation's resampled hit count
  is drawn as Binomial(n, hits / n), which is what resampling its n queries gives, in one draw instead of n.

>>> [round(x, 4) for x in wilson(0, 10)], [round(x, 4) for x in wilson(5, 10)]
([0.0, 0.2775], [0.2366, 0.7634])
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..errors import ProbekitError, positive_int
from .accuracy import DEFAULT_COUNTING, item_scores
from .compare import SUBSETS, _check_runs, _depth_of, _hard_set_of, run_subsets, subset
from .registry import get_metric, metric_names

_CELLS = 4_000_000  # resampled values held at once


def _z(confidence: float) -> float:
    """The normal quantile of a two-sided ``confidence`` (the standard library's, Wichura's AS241: scipy's
    ``norm.ppf`` to ~1e-15, without importing scipy.stats, seconds on a busy machine, on a page's first score)."""
    if not 0 < confidence < 1:
        raise ProbekitError(f"confidence must be between 0 and 1, got {confidence}")
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(hits: float, n: float, *, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of ``hits`` out of ``n`` (NaN, NaN when ``n`` is 0)."""
    if n <= 0:
        return float("nan"), float("nan")
    if not 0 <= hits <= n:
        raise ProbekitError(f"hits must be between 0 and n ({n}), got {hits}")
    z = _z(confidence)
    p = hits / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    lo, hi = max(0.0, centre - half), min(1.0, centre + half)
    return (0.0 if hits == 0 else lo), (1.0 if hits == n else hi)  # exact at the ends (float rounding aside)


def _resampled(items: np.ndarray, sums: np.ndarray, relations: np.ndarray, *, average: str, n_boot: int,
               rng: np.random.Generator) -> np.ndarray:
    """(n_boot,) the metric (``sums / items`` per relation, then macro or micro) over queries resampled within each
    relation.

    When every query is one item scoring 0 or 1 (acc@k under query counting), resampling a relation's ``n`` queries
    with replacement draws its hit count from Binomial(n, hits / n): drawn so, in one number per relation and
    resample rather than ``n`` (the same distribution; a MedLAMA-sized run in milliseconds, not seconds)."""
    rel_items, rel_sums = [], []
    one_item = bool(len(items)) and bool((items == 1).all()) and bool(np.isin(sums, (0.0, 1.0)).all())
    for r in pd.unique(relations):
        idx = np.flatnonzero(relations == r)
        if one_item:
            rel_items.append(np.full(n_boot, float(len(idx))))
            rel_sums.append(rng.binomial(len(idx), float(sums[idx].mean()), size=n_boot).astype(float))
            continue
        got_i, got_s = [], []
        step = max(1, _CELLS // max(1, len(idx)))
        for start in range(0, n_boot, step):
            draw = idx[rng.integers(0, len(idx), size=(min(step, n_boot - start), len(idx)))]  # (size, n_r)
            got_i.append(items[draw].sum(axis=1))
            got_s.append(sums[draw].sum(axis=1))
        rel_items.append(np.concatenate(got_i))
        rel_sums.append(np.concatenate(got_s))
    n_items, n_sums = np.vstack(rel_items), np.vstack(rel_sums)  # (relations, n_boot)
    if average == "micro":
        return n_sums.sum(axis=0) / np.where(n_items.sum(axis=0) > 0, n_items.sum(axis=0), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        per = n_sums / np.where(n_items > 0, n_items, np.nan)
    return np.nanmean(per, axis=0)


def _binary(name: str) -> bool:
    """Whether every item of the metric scores 0 or 1 (then its micro value is a share of items: Wilson)."""
    scores = get_metric(name).score(np.arange(1, 10_001, dtype=float))
    return bool(np.isin(scores, (0.0, 1.0)).all())


def intervals(gold_ranks, relations, *, metrics: Sequence[str] | None = None, counting: str = DEFAULT_COUNTING,
              depth: int | None = None, confidence: float = 0.95, n_boot: int = 1000,
              seed: int = 0) -> dict[str, dict[str, list[float]]]:
    """``{"macro": {metric: [lo, hi]}, "micro": {...}}`` for each metric (default: every registered one) of the
    queries' ``gold_ranks`` under ``counting``: Wilson for a binary metric's micro average, a bootstrap otherwise
    (module docstring). A metric the method cannot have (above its ``depth``) gets NaN, NaN."""
    gold_ranks, relations = list(gold_ranks), np.asarray(list(relations), dtype=object)
    n_boot = positive_int("n_boot", n_boot)
    _z(confidence)
    tail = (1 - confidence) / 2
    out: dict[str, dict[str, list[float]]] = {"macro": {}, "micro": {}}
    rng = np.random.default_rng(seed)
    for name in metric_names(metrics):
        m = get_metric(name)
        if not gold_ranks or not m.defined_at(depth):
            out["macro"][name] = out["micro"][name] = [float("nan"), float("nan")]
            continue
        items, sums = item_scores(gold_ranks, metric=m, counting=counting)
        items, sums = items.astype(float), np.asarray(sums, dtype=float)
        binary = _binary(m.name)  # acc@k: every item scores 0 or 1, a share of items
        for average in ("macro", "micro"):
            if average == "micro" and binary:
                lo, hi = wilson(float(sums.sum()), float(items.sum()), confidence=confidence)
            else:
                draws = _resampled(items, sums, relations, average=average, n_boot=n_boot, rng=rng)
                draws = draws[~np.isnan(draws)]
                lo, hi = (np.quantile(draws, [tail, 1 - tail]) if len(draws) else (np.nan, np.nan))
            out[average][name] = [float(lo), float(hi)]
    return out


def run_intervals(rankings, *, metrics: Sequence[str] | None = None, counting: str = DEFAULT_COUNTING,
                  confidence: float = 0.95, n_boot: int = 1000, seed: int = 0) -> dict:
    """:func:`intervals` of a run's rankings (their gold ranks, relations and depth), with how they were made:
    ``{"confidence", "method", "n_boot", "seed", "macro": {...}, "micro": {...}}``."""
    from .accuracy import depth_of

    got = intervals([list(r.gold_ranks) for r in rankings], [r.query.relation for r in rankings], metrics=metrics,
                    counting=counting, depth=depth_of(rankings), confidence=confidence, n_boot=n_boot, seed=seed)
    return {"confidence": confidence, "method": METHOD, "n_boot": n_boot, "seed": seed, **got}


METHOD = "Wilson for a share of items (micro acc@k); a bootstrap over queries within relations otherwise"


def interval_lines(summary_intervals: dict, names: Sequence[str]) -> list[str]:
    """Lines under a table of scores: each average's interval per metric, in percent, and how they were made."""
    level = f"{100 * summary_intervals['confidence']:g} %"
    out = []
    for average in ("macro", "micro"):
        cells = [f"{n} [{100 * lo:.2f}, {100 * hi:.2f}]" if lo == lo else f"{n} -"
                 for n in names for lo, hi in [summary_intervals[average][n]]]
        out.append(f"{level} interval, {average}: " + "  ".join(cells))
    out.append(f"({METHOD}; {summary_intervals['n_boot']:,} resamples, seed {summary_intervals['seed']})")
    return out


# ---------------------------------------------------------------- what the pages and the CLI show beside a score
def method_of(metric: str, average: str) -> str:
    """``"Wilson"`` for a binary metric's micro average (a share of items), else ``"bootstrap"`` (as
    :func:`intervals` computes them).

    >>> method_of("acc@10", "micro"), method_of("acc@10", "macro"), method_of("MRR", "micro")
    ('Wilson', 'bootstrap', 'bootstrap')
    """
    if average not in ("macro", "micro"):
        raise ProbekitError(f"unknown average {average!r}; available: macro, micro")
    return "Wilson" if average == "micro" and _binary(get_metric(metric).name) else "bootstrap"


def interval_note(metric: str | None, averages: Sequence[str] = ("macro", "micro"), *, confidence: float = 0.95,
                  n_boot: int = 1000, seed: int = 0) -> str:
    """The one line under a table with ``[lo, hi]`` columns: the level and, per average, how the interval is made
    (``metric`` None: a table of every metric, each by its own rule).

    >>> print(interval_note("acc@1", ["micro"]))
    [lo, hi]: 95 % intervals, in %; micro acc@1: Wilson score (Wilson 1927)
    >>> print(interval_note(None, ["macro"], n_boot=200))
    [lo, hi]: 95 % intervals, in %; macro: bootstrap over queries within relations (200 resamples, seed 0)
    """
    _z(confidence)
    how = {"Wilson": "Wilson score (Wilson 1927)",
           "bootstrap": f"bootstrap over queries within relations ({n_boot:,} resamples, seed {seed})"}
    if metric is None:
        parts = [f"{a}: {how['bootstrap']}" if a == "macro" else
                 f"{a}: {how['Wilson']} for acc@k, {how['bootstrap']} otherwise" for a in averages]
    else:
        name = get_metric(metric).name
        parts = [f"{a} {name}: {how[method_of(name, a)]}" for a in averages]
    return f"[lo, hi]: {100 * confidence:g} % intervals, in %; " + "; ".join(parts)


def bracket_columns(summary_intervals: dict | None, names: Sequence[str], *,
                    average: str = "macro") -> dict[str, str]:
    """``{"{metric} [lo, hi]": "[12.3, 45.6]"}`` for each of ``names`` from a :func:`run_intervals` result (a
    summary made before intervals were kept, None: "–"): the columns beside a row of scores.

    >>> bracket_columns({"macro": {"acc@1": [0.1, 0.2]}}, ["acc@1", "MRR"])
    {'acc@1 [lo, hi]': '[10.0, 20.0]', 'MRR [lo, hi]': '–'}
    """
    got = (summary_intervals or {}).get(average) or {}
    return {f"{n} [lo, hi]": bracket(*got[n]) if n in got else "–" for n in names}


def bracket(lo: float, hi: float, *, digits: int = 1) -> str:
    """An interval of fractions as the tables write it, in percent: ``[12.3, 45.6]``; ``–`` when undefined.

    >>> bracket(0.1234, 0.5), bracket(float("nan"), float("nan"))
    ('[12.3, 50.0]', '–')
    """
    if lo != lo or hi != hi:
        return "–"
    return f"[{100 * lo:.{digits}f}, {100 * hi:.{digits}f}]"


def hit_intervals(hit, relations, *, confidence: float = 0.95, n_boot: int = 1000,
                  seed: int = 0) -> dict[str, tuple[float, float]]:
    """``{"macro": (lo, hi), "micro": (lo, hi)}`` of the share of 0/1 per-query ``hit`` (any judgement of a query:
    an expert's, a gold's): Wilson for the micro share, a bootstrap within relations for the macro one.

    >>> [round(x, 4) for x in hit_intervals([1, 0, 1, 1], ["a", "a", "b", "b"])["micro"]]
    [0.3006, 0.9544]
    """
    h = np.asarray(list(hit), dtype=float)
    rel = np.asarray(list(relations), dtype=object)
    if len(h) != len(rel):
        raise ProbekitError(f"{len(h)} hits but {len(rel)} relations")
    if not len(h):
        return {"macro": (np.nan, np.nan), "micro": (np.nan, np.nan)}
    n_boot = positive_int("n_boot", n_boot)
    tail = (1 - confidence) / 2
    draws = _resampled(np.ones(len(h)), h, rel, average="macro", n_boot=n_boot, rng=np.random.default_rng(seed))
    draws = draws[~np.isnan(draws)]
    lo, hi = np.quantile(draws, [tail, 1 - tail]) if len(draws) else (np.nan, np.nan)
    return {"macro": (float(lo), float(hi)), "micro": wilson(float(h.sum()), float(len(h)), confidence=confidence)}


def frame_intervals(frame: pd.DataFrame, *, metric: str, counting: str = DEFAULT_COUNTING, depth: int | None = None,
                    confidence: float = 0.95, n_boot: int = 1000, seed: int = 0) -> dict[str, tuple[float, float]]:
    """``{"macro": (lo, hi), "micro": (lo, hi)}`` of ``metric`` over a results frame (columns ``relation``,
    ``best_gold_rank``; ``gold_ranks`` for ``triple`` counting), as :func:`intervals` makes them."""
    if not isinstance(frame, pd.DataFrame) or "relation" not in frame.columns:
        raise ProbekitError("a results frame needs a 'relation' column")
    if "gold_ranks" in frame.columns:
        ranks = [list(g) if isinstance(g, (list, tuple, np.ndarray)) else [] for g in frame["gold_ranks"]]
    elif counting == "query" and "best_gold_rank" in frame.columns:
        ranks = [[r] for r in pd.to_numeric(frame["best_gold_rank"], errors="coerce").astype(float).to_numpy()]
    else:
        raise ProbekitError(f"a results frame needs a 'gold_ranks' column for {counting} counting")
    got = intervals(ranks, frame["relation"].to_numpy(), metrics=[metric], counting=counting, depth=depth,
                    confidence=confidence, n_boot=n_boot, seed=seed)
    name = get_metric(metric).name
    return {a: (got[a][name][0], got[a][name][1]) for a in ("macro", "micro")}


def _query_ranks(row, metric) -> list[list[float]] | None:
    """The per-query best ranks of one (group, relation) row of a rank table: its ``ranks`` list, or, for a table
    stored before ranks were kept, its ``hits@k`` count when ``metric`` is that acc@k (hits rank 1, the rest no
    rank: the same acc@k, the same interval); None when neither says."""
    ranks = getattr(row, "ranks", None)
    if isinstance(ranks, (list, tuple, np.ndarray)):
        return [[np.nan if r is None else float(r)] for r in ranks]
    m = get_metric(metric)
    hit = getattr(row, f"hits_{m.depth}", None) if m.name == f"acc@{m.depth}" else None
    if hit is None or hit != hit:
        return None
    return [[1.0]] * int(hit) + [[np.nan]] * (int(row.n) - int(hit))


def rank_table_intervals(table: pd.DataFrame, *, by: str, metric: str, subset: str | None = None,
                         confidence: float = 0.95, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per value of ``by`` (a layer…): the macro and micro interval of ``metric`` from a table with one row per
    (``by``, ``relation``): ``n`` queries and ``ranks``, each query's best gold rank (query counting), or a
    ``hits@k`` count for acc@k; ``subset`` keeps the rows of that ``subset`` column. Columns: ``by``, ``macro lo``,
    ``macro hi``, ``micro lo``, ``micro hi``, ``macro [lo, hi]``, ``micro [lo, hi]`` (text, in %); NaN/"–" where the
    table cannot say."""
    if not isinstance(table, pd.DataFrame) or not {by, "relation", "n"} <= set(table.columns):
        raise ProbekitError(f"a rank table needs the columns {by}, relation, n and ranks")
    part = table if subset is None else table[table["subset"] == subset]
    rows = []
    for value, g in part.groupby(by, sort=True):
        got_ranks = [_query_ranks(r, metric) for r in g.rename(columns=lambda c: c.replace("@", "_")).itertuples()]
        per = [p for p in got_ranks if p is not None]
        row: dict = {by: value}
        got: dict[str, tuple[float, float]] = {a: (np.nan, np.nan) for a in ("macro", "micro")}
        if per and len(per) == len(got_ranks):
            ranks = [q for p in per for q in p]
            rels = [rel for p, rel in zip(per, g["relation"]) for _ in p]
            iv = intervals(ranks, rels, metrics=[metric], confidence=confidence, n_boot=n_boot, seed=seed)
            got = {a: (iv[a][get_metric(metric).name][0], iv[a][get_metric(metric).name][1]) for a in got}
        for a, (lo, hi) in got.items():
            row.update({f"{a} lo": lo, f"{a} hi": hi, f"{a} [lo, hi]": bracket(lo, hi)})
        rows.append(row)
    columns = [by, "macro lo", "macro hi", "micro lo", "micro hi", "macro [lo, hi]", "micro [lo, hi]"]
    return pd.DataFrame(rows, columns=columns)


def full_hard_intervals(runs, *, metrics: Sequence[str] | None = None, hard_set=False,
                        counting: str = DEFAULT_COUNTING, depths=None, confidence: float = 0.95, n_boot: int = 1000,
                        seed: int = 0) -> pd.DataFrame:
    """The intervals of :func:`probekit.metrics.compare.full_hard_table`'s values, in its shape: one row per (run,
    average), a ``{subset} {metric} [lo, hi]`` text column (in %, "–" where the table has no value) for every
    metric of every subset a run has. Merge on ``run`` and ``average`` to show each beside its value."""
    names = metric_names(metrics)
    runs = _check_runs(runs)
    present = [s for s in SUBSETS if any(s in run_subsets(_hard_set_of(hard_set, lab)) for lab in runs)]
    rows = {(label, a): {"run": label, "average": a} for label in runs for a in ("macro", "micro")}
    for label, frame in runs.items():
        mine = run_subsets(_hard_set_of(hard_set, label))
        for s in present:
            part = subset(frame, s, hard_set=_hard_set_of(hard_set, label))
            for name in names:
                got = (frame_intervals(part, metric=name, counting=counting, depth=_depth_of(depths, label),
                                       confidence=confidence, n_boot=n_boot, seed=seed)
                       if s in mine and len(part) else {a: (np.nan, np.nan) for a in ("macro", "micro")})
                for a, (lo, hi) in got.items():
                    rows[(label, a)][f"{s} {name} [lo, hi]"] = bracket(lo, hi)
    return pd.DataFrame(list(rows.values()))


def relation_intervals(runs, *, metric: str, which: str = "full", hard_set=False, counting: str = DEFAULT_COUNTING,
                       depths=None, confidence: float = 0.95, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The interval of each value of :func:`probekit.metrics.compare.relation_accuracy` (one relation of one run:
    Wilson for a 0/1 metric, else a bootstrap over the relation's queries), in its rows: ``run``, ``relation``,
    ``lo``, ``hi`` (fractions; NaN where the value is NaN) and ``[lo, hi]`` (text, in %): error bars per bar."""
    name = get_metric(metric).name
    rows = []
    for label, frame in _check_runs(runs).items():
        part = subset(frame, which, hard_set=_hard_set_of(hard_set, label))
        for rel, g in part.groupby("relation", sort=True):
            lo, hi = frame_intervals(g, metric=name, counting=counting, depth=_depth_of(depths, label),
                                     confidence=confidence, n_boot=n_boot, seed=seed)["micro"]
            rows.append({"run": label, "relation": rel, "lo": lo, "hi": hi, "[lo, hi]": bracket(lo, hi)})
    return pd.DataFrame(rows, columns=["run", "relation", "lo", "hi", "[lo, hi]"])
