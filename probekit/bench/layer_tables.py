"""The pure tables of a layer sweep (MedLAMA Fig. 6–7): per (layer, relation, subset) the query count, hits at
1/5/10 and best gold ranks, and from them any registered metric as a relation × layer matrix, per-layer averages
and the best layer per relation. No store, no model: :mod:`probekit.bench.layers` runs and stores sweeps."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..datasets import HARD_IN_FULL
from ..errors import ProbekitError
from ..metrics.accuracy import AVERAGES, counts_accuracy, hits
from ..metrics.compare import SUBSETS, run_subsets
from ..metrics.registry import get_metric, metric_names

COUNTING = "query"
"""A sweep scores each query by its best gold rank (:data:`probekit.metrics.accuracy.COUNTINGS`)."""
KS = (1, 5, 10)
"""The hit counts a sweep stores beside its ranks (what sweeps stored before ranks were kept have alone)."""
TABLE_COLUMNS = ["layer", "relation", "subset", "n", *[f"hits@{k}" for k in KS], "ranks"]

# ---------------------------------------------------------------- pure tables
def _check_table(table: pd.DataFrame, subset: str) -> None:
    if not isinstance(table, pd.DataFrame) or not set(TABLE_COLUMNS) - {"ranks"} <= set(table.columns):
        raise ProbekitError(f"a layer table needs the columns {', '.join(TABLE_COLUMNS)}")
    if subset not in SUBSETS:
        raise ProbekitError(f"unknown subset {subset!r}; available: {', '.join(SUBSETS)}")


def _score_sums(part: pd.DataFrame, metric: str) -> np.ndarray:
    """(rows,) the sum of each row's item scores under ``metric``: from its best gold ranks, else (a sweep stored
    before ranks were kept) from its hit counts for acc@1/5/10, else NaN."""
    m = get_metric(metric)
    ranks = part["ranks"] if "ranks" in part.columns else pd.Series([None] * len(part), index=part.index)
    stored = f"hits@{m.depth}" if m.name == f"acc@{m.depth}" and m.depth in KS else None
    out = []
    for r, row in zip(ranks, part.itertuples(index=False)):
        if isinstance(r, (list, tuple, np.ndarray)):
            out.append(float(m.score(r).sum()))
        else:
            out.append(float(getattr(row, stored.replace("@", "_"))) if stored else np.nan)
    return np.asarray(out, dtype=float)


def _value(g: pd.DataFrame, metric: str, average: str) -> float:
    sums = _score_sums(g.rename(columns=lambda c: c.replace("@", "_")), metric)
    if np.isnan(sums).any():
        return float("nan")
    return counts_accuracy(g["n"], sums, g["relation"], average=average)


def layer_accuracy(table: pd.DataFrame, *, metric: str = "acc@1", subset: str = "full") -> pd.DataFrame:
    """A registered ``metric`` as a relation × layer matrix (fractions): the heatmap of MedLAMA Fig. 6.

    >>> t = pd.DataFrame({"layer": [1, 2, 1], "relation": ["a", "a", "b"], "subset": "full", "n": [4, 4, 2],
    ...                   "hits@1": [1, 3, 2], "hits@5": [4, 4, 2], "hits@10": [4, 4, 2],
    ...                   "ranks": [[1, 2, 2, 4], [1, 1, 1, 2], [1, 1]]})
    >>> layer_accuracy(t, metric="acc@1").to_dict(), layer_accuracy(t, metric="MRR")[1].to_dict()
    ({1: {'a': 0.25, 'b': 1.0}, 2: {'a': 0.75, 'b': nan}}, {'a': 0.5625, 'b': 1.0})
    """
    _check_table(table, subset)
    part = table[table["subset"] == subset]
    acc = pd.DataFrame([{"relation": rel, "layer": layer, "acc": _value(g, metric, "micro")}
                        for (rel, layer), g in part.groupby(["relation", "layer"])],
                       columns=["relation", "layer", "acc"])
    out = acc.pivot(index="relation", columns="layer", values="acc").sort_index()
    out.columns.name = "layer"
    return out.reindex(columns=sorted(out.columns))


def layer_averages(table: pd.DataFrame, *, subset: str = "full", metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Per layer: macro (mean over relations) and micro (over queries) value of every metric (default: every
    registered one), columns ``{average} {metric}``; index = layer."""
    _check_table(table, subset)
    names = metric_names(metrics)
    part = table[table["subset"] == subset]
    rows = {}
    for layer, g in part.groupby("layer", sort=True):
        row: dict[str, float | int] = {f"{avg} {n}": _value(g, n, avg) for avg in AVERAGES for n in names}
        row["n"] = int(g["n"].sum())
        rows[int(layer)] = row
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "layer"
    return out


def best_layers(accuracy: pd.DataFrame) -> pd.DataFrame:
    """Per relation (row of a :func:`layer_accuracy` matrix): the best layer (the lowest on ties; missing
    when no layer gets a single hit), its accuracy, the last layer's accuracy and the gain of the best
    over the last.

    >>> acc = pd.DataFrame({1: [0.2, 0.5, 0.0], 2: [0.4, 0.5, 0.0], 3: [0.3, 0.1, 0.0]}, index=["a", "b", "c"])
    >>> best_layers(acc)[["best layer", "best acc"]].to_dict("list")
    {'best layer': [2, 1, None], 'best acc': [0.4, 0.5, 0.0]}
    """
    if accuracy.empty:
        return pd.DataFrame(columns=["relation", "best layer", "best acc", "last layer acc", "gain"])
    values = accuracy.to_numpy(dtype=float)  # (relations, layers)
    filled = np.where(np.isnan(values), -np.inf, values)
    best = filled.argmax(axis=1)  # first maximum = lowest layer on ties
    layers = list(accuracy.columns)
    best_acc = values[np.arange(len(values)), best]
    last = values[:, -1]
    best_layer = pd.array([int(layers[i]) if v > 0 else pd.NA for i, v in zip(best, best_acc)], dtype="Int64")
    return pd.DataFrame({"relation": list(accuracy.index), "best layer": best_layer,
                         "best acc": best_acc, "last layer acc": last, "gain": best_acc - last})


def _hit_counts(frame: pd.DataFrame, *, hard_set: bool = False) -> dict[str, tuple]:
    """(n, hits@k..., best gold ranks) of a relation's results frame per subset: all queries (``full``) and the
    hard ones (``hard-in-full``) of a full-set sweep; all queries (``hard``) of a hard-set sweep."""
    hard = frame["hard"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    every = np.ones(len(frame), dtype=bool)
    masks = {"full": every, "hard": every, HARD_IN_FULL: hard}
    out = {}
    for subset, mask in ((s, masks[s]) for s in run_subsets(hard_set)):
        if mask.any():
            ranks = frame["best_gold_rank"].to_numpy()[mask]
            best = [None if r is None or pd.isna(r) else int(r) for r in ranks]
            out[subset] = (int(mask.sum()), *[int(hits(ranks, k).sum()) for k in KS], best)
    return out
