"""How sure is a score? An interval for every reported metric of one run.

- **Wilson score interval** for a share of items (acc@k under micro averaging): with ``p = hits / n`` and ``z`` the
  normal quantile of the confidence, centre ``(p + z²/2n) / (1 + z²/n)`` and half-width
  ``z / (1 + z²/n) · sqrt(p(1 - p)/n + z²/4n²)`` (Wilson 1927). Unlike the normal ("Wald") interval it stays inside
  [0, 1] and is not degenerate at 0 or n hits, which probing meets often (acc@1 of a weak model is 0).
- **Bootstrap percentile interval** for everything else (macro averages over relations; MRR): queries resampled
  with replacement within each relation (the relations and their sizes stay the dataset's), the metric recomputed
  per resample, the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles. Seeded: the same run gives the
  same interval.

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
from .registry import get_metric, metric_names

_CELLS = 4_000_000  # resampled values held at once


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ProbekitError(f"confidence must be between 0 and 1, got {confidence}")
    from scipy import stats

    return float(stats.norm.ppf(0.5 + confidence / 2))


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
    relation."""
    rel_items, rel_sums = [], []
    for r in pd.unique(relations):
        idx = np.flatnonzero(relations == r)
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
