"""Does a model ranking hold across conditions, or is its change within the noise of the queries?

A ranking of models read off one table of scores can change from one condition to another (a prompt kind, a
dataset, a probe, its options, a layer) for two reasons: the condition really reorders the models, or the queries
are too few to tell the models apart. :func:`ranking_stability` resamples the queries and asks again. Input: a long
table of per-query scores, one row per (model, condition, query): ``score`` is the query's summed item score under
a registered metric (a hit 0/1 for acc@k) and ``items`` how many items it counts (1 under query counting).

- each condition's queries are resampled with replacement within each relation (a macro average keeps its
  relations), the same draw for every model of a condition (the models answered the same queries: their scores stay
  paired); conditions are resampled independently (they may be different datasets);
- each resample gives every model's score per condition (``macro``: mean over relations of items hit / items;
  ``micro``: over all items), and Kendall's tau between conditions: the mean over the pairs of conditions compared
  (every pair, or the ``reference`` against each other one). Its percentile interval says how sure it is;
- for each pair of models, the reference order (on the ``reference`` condition, else on the mean score over the
  conditions, both from the full data) and the share of resamples in which every compared condition keeps it:
  "holds" when that share is at least ``1 - alpha``; "flips" when some condition keeps it in at most ``alpha`` of
  the resamples (it reliably orders the pair the other way); else "uncertain".

Kendall's tau here is tau-b (Kendall 1945, "The treatment of ties in ranking problems", correcting Kendall 1938's
tau-a for ties): ``sum_{i<j} sx_ij sy_ij / sqrt(sum sx_ij^2 * sum sy_ij^2)`` with ``sx_ij = sign(x_i - x_j)``, what
``scipy.stats.kendalltau`` computes by default (``variant="b"``). Fewer than 3 models, or a constant side, leave it
undefined (NaN): with two models the pair's verdict says all there is.

>>> t = pd.DataFrame({"model": list("xxyy"), "condition": "c", "query_id": ["a", "b"] * 2, "relation": "r",
...                   "score": [1.0, 1.0, 0.0, 1.0]})
>>> condition_scores(t).round(2).to_dict()
{'x': {'c': 1.0}, 'y': {'c': 0.5}}
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..errors import ProbekitError, UnknownNameError, positive_int

TABLE_COLUMNS = ("model", "condition", "query_id", "relation", "score")
"""The columns :func:`ranking_stability` reads (``items`` too when present; else each query is one item)."""
AVERAGES = ("macro", "micro")
_CELLS = 4_000_000  # resampled values held at once


def kendall_tau_b(x, y) -> np.ndarray:
    """Kendall's tau-b of each row of ``x`` with the same row of ``y`` (shapes ``(..., n)``); NaN where a row is
    constant or ``n < 3`` (module docstring).

    >>> float(kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]))
    0.6666666666666666
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = x.shape[-1]
    if n < 3:
        return np.full(x.shape[:-1], np.nan)
    i, j = np.triu_indices(n, k=1)
    sx, sy = np.sign(x[..., i] - x[..., j]), np.sign(y[..., i] - y[..., j])
    denom = np.sqrt((sx * sx).sum(axis=-1) * (sy * sy).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (sx * sy).sum(axis=-1) / np.where(denom > 0, denom, 1.0), np.nan)


def _check_table(table: pd.DataFrame) -> pd.DataFrame:
    if not isinstance(table, pd.DataFrame):
        raise ProbekitError("a ranking table must be a DataFrame with columns " + ", ".join(TABLE_COLUMNS))
    missing = [c for c in TABLE_COLUMNS if c not in table.columns]
    if missing:
        raise ProbekitError(f"a ranking table needs a {missing[0]!r} column (columns: {', '.join(TABLE_COLUMNS)})")
    out = table.assign(items=table["items"] if "items" in table.columns else 1)
    out["score"] = pd.to_numeric(out["score"], errors="coerce").astype(float).fillna(0.0)
    out["items"] = pd.to_numeric(out["items"], errors="coerce").astype(float).fillna(0.0)
    return out.drop_duplicates(["model", "condition", "query_id"])


def _condition(part: pd.DataFrame, models: list, condition) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(score sums (models, queries), items (models, queries), relations (queries,)) over the queries every model
    of ``condition`` answered."""
    ids = set.intersection(*(set(part.loc[part["model"] == m, "query_id"]) for m in models))
    if not ids:
        raise ProbekitError(f"the runs of {condition} share no query: they must be runs of one dataset")
    order = sorted(ids, key=str)
    wide = part.set_index(["model", "query_id"])
    rel = wide.loc[models[0]].loc[order, "relation"].to_numpy()
    sums = np.vstack([wide.loc[m].loc[order, "score"].to_numpy(dtype=float) for m in models])
    items = np.vstack([wide.loc[m].loc[order, "items"].to_numpy(dtype=float) for m in models])
    return sums, items, rel


def _average(sums: np.ndarray, items: np.ndarray, average: str) -> np.ndarray:
    """Scores from per-relation totals ``(relations, ..., models)``: macro = mean of the relations' ratios (a
    relation without items left out), micro = total over total."""
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no relation with items: NaN, not a warning
        if average == "micro":
            total = items.sum(axis=0)
            return sums.sum(axis=0) / np.where(total > 0, total, np.nan)
        return np.nanmean(sums / np.where(items > 0, items, np.nan), axis=0)


def _scores(sums, items, rel, *, average: str, n_boot: int, rng: np.random.Generator | None):
    """(models,) full-data scores, or with ``rng`` (n_boot, models) scores over queries resampled within each
    relation (one draw per resample shared by every model)."""
    tot_s, tot_i = [], []
    for r in pd.unique(rel):
        idx = np.flatnonzero(rel == r)
        if rng is None:
            tot_s.append(sums[:, idx].sum(axis=1))
            tot_i.append(items[:, idx].sum(axis=1))
            continue
        got_s, got_i = [], []
        step = max(1, _CELLS // max(1, len(idx) * sums.shape[0]))
        for start in range(0, n_boot, step):
            draw = idx[rng.integers(0, len(idx), size=(min(step, n_boot - start), len(idx)))]  # (size, n_r)
            got_s.append(sums[:, draw].sum(axis=2).T)  # (models, size, n_r) -> (size, models)
            got_i.append(items[:, draw].sum(axis=2).T)
        tot_s.append(np.vstack(got_s))
        tot_i.append(np.vstack(got_i))
    return _average(np.stack(tot_s), np.stack(tot_i), average)


def _prepared(table: pd.DataFrame, conditions: Sequence | None) -> tuple[pd.DataFrame, list, list]:
    table = _check_table(table)
    present = list(pd.unique(table["condition"]))
    conditions = present if conditions is None else list(conditions)
    for c in conditions:
        if c not in present:
            raise UnknownNameError("condition", str(c), [str(p) for p in present])
    if len(conditions) < 2:
        raise ProbekitError("a ranking holds or not across at least two conditions; this table has "
                            f"{len(conditions)}")
    table = table[table["condition"].isin(conditions)]
    models = [m for m in pd.unique(table["model"])
              if all(((table["model"] == m) & (table["condition"] == c)).any() for c in conditions)]
    if len(models) < 2:
        raise ProbekitError("a ranking needs at least two models with results in every condition")
    return table, conditions, models


def condition_scores(table: pd.DataFrame, *, average: str = "macro") -> pd.DataFrame:
    """Each model's full-data score per condition (index: condition, columns: model), over the queries every
    model of the condition answered."""
    table = _check_table(table)
    out = {}
    for c, part in table.groupby("condition", sort=False):
        models = list(pd.unique(part["model"]))
        sums, items, rel = _condition(part, models, c)
        out[c] = dict(zip(models, _scores(sums, items, rel, average=average, n_boot=0, rng=None)))
    return pd.DataFrame.from_dict(out, orient="index")


def _order(x: float, y: float) -> str:
    return "a > b" if x > y else "a < b" if x < y else "a = b"


def ranking_stability(table: pd.DataFrame, *, reference=None, conditions: Sequence | None = None,
                      average: str = "macro", n_boot: int = 1000, seed: int = 0, alpha: float = 0.05) -> dict:
    """How stable the ranking of the table's models is across its conditions, under query resampling (module
    docstring). Only models with results in every condition are ranked; ``conditions`` picks and orders them
    (default: every condition, in table order); ``reference``: the condition whose order the others must keep
    (None: the mean score over the conditions).

    Returns ``models``, ``conditions``, ``reference``, ``scores`` (full-data, condition × model), ``tau`` (mean
    Kendall tau-b over the compared condition pairs, full data), ``lo``/``hi`` (its percentile interval at level
    ``1 - alpha`` over the ``defined`` resamples where it exists), ``taus`` (one row per compared condition pair),
    ``n_boot``, ``seed``, ``alpha``, ``average``, and ``pairs``: one row per pair of models with ``reference
    order``, ``kept`` (per condition, the share of resamples keeping that order), ``holds`` (the share keeping it
    in every compared condition), ``held`` (that many resamples), ``flips in`` (conditions keeping it in at most
    ``alpha`` of them) and a ``verdict``."""
    if average not in AVERAGES:
        raise ProbekitError(f"unknown average {average!r}; available: {', '.join(AVERAGES)}")
    n_boot = positive_int("n_boot", n_boot)
    if not 0 < alpha < 0.5:
        raise ProbekitError(f"alpha must be between 0 and 0.5, got {alpha}")
    table, conditions, models = _prepared(table, conditions)
    if reference is not None and reference not in conditions:
        raise UnknownNameError("reference condition", str(reference), [str(c) for c in conditions])
    rng = np.random.default_rng(seed)
    full, boots = [], []
    for c in conditions:
        sums, items, rel = _condition(table[table["condition"] == c], models, c)
        full.append(_scores(sums, items, rel, average=average, n_boot=n_boot, rng=None))
        boots.append(_scores(sums, items, rel, average=average, n_boot=n_boot, rng=rng))
    full_a, boot_a = np.vstack(full), np.stack(boots)  # (conditions, models), (conditions, n_boot, models)
    ref = None if reference is None else conditions.index(reference)
    compared = ([(ref, c) for c in range(len(conditions)) if c != ref] if ref is not None
                else list(itertools.combinations(range(len(conditions)), 2)))
    pair_full = np.array([kendall_tau_b(full_a[a], full_a[b]) for a, b in compared])  # (pairs,)
    pair_boot = np.vstack([kendall_tau_b(boot_a[a], boot_a[b]) for a, b in compared])  # (pairs, n_boot)
    with warnings.catch_warnings():  # an all-NaN column is an undefined tau, said as NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        tau = float(np.nanmean(pair_full)) if not np.isnan(pair_full).all() else float("nan")
        taus = np.nanmean(pair_boot, axis=0)
    defined = taus[~np.isnan(taus)]
    lo, hi = (np.quantile(defined, [alpha / 2, 1 - alpha / 2]) if len(defined) else (np.nan, np.nan))
    base_scores = full_a[ref] if ref is not None else np.nanmean(full_a, axis=0)
    checked = [c for c in range(len(conditions)) if c != ref]  # the conditions that must keep the order
    rows = []
    for i, j in itertools.combinations(range(len(models)), 2):
        base = np.sign(base_scores[i] - base_scores[j])
        signs = np.sign(boot_a[:, :, i] - boot_a[:, :, j])  # (conditions, n_boot)
        kept = (signs == base).mean(axis=1) if base != 0 else np.full(len(conditions), np.nan)
        held = int((signs[checked] == base).all(axis=0).sum()) if base != 0 else 0
        flips = [str(conditions[c]) for c in checked if base != 0 and kept[c] <= alpha]
        verdict = ("tied" if base == 0 else "holds" if held >= (1 - alpha) * n_boot else "flips" if flips
                   else "uncertain")
        rows.append({"model a": models[i], "model b": models[j],
                     "reference order": _order(base_scores[i], base_scores[j]),
                     **{f"order in {name}": _order(full_a[c, i], full_a[c, j]) for c, name in enumerate(conditions)},
                     **{f"kept in {name}": float(kept[c]) for c, name in enumerate(conditions)},
                     "holds": held / n_boot if base != 0 else float("nan"), "held": held,
                     "flips in": ", ".join(flips), "verdict": verdict,
                     "in resamples": "-" if base == 0 else f"order kept in {held:,}/{n_boot:,} resamples"})
    return {"average": average, "models": models, "conditions": conditions, "reference": reference,
            "scores": pd.DataFrame(full_a, index=conditions, columns=models),
            "tau": tau, "lo": float(lo), "hi": float(hi), "defined": int(len(defined)),
            "taus": pd.DataFrame({"condition a": [conditions[a] for a, _ in compared],
                                  "condition b": [conditions[b] for _, b in compared], "tau": pair_full}),
            "n_boot": n_boot, "seed": seed, "alpha": alpha, "pairs": pd.DataFrame(rows)}


def verdict_rule(alpha: float, n_boot: int) -> str:
    """One line saying how a pair's verdict is read, for captions and CLI output."""
    return (f"a pair 'holds' when every compared condition keeps its reference order in at least "
            f"{1 - alpha:.0%} of {n_boot:,} query resamples; 'flips' when some condition keeps it in at most "
            f"{alpha:.0%} (it orders the pair the other way); else 'uncertain' (within the noise of the queries). "
            "Kendall's tau-b (Kendall 1945; scipy.stats.kendalltau).")
