"""F1 of the positive class per disease, and the paper's macro / weighted averages ± std over seeds.

Tables 2–6 of the paper: per disease, F1 (%) "averaged over three runs"; per category, the macro
average (mean over diseases) and the weighted average, each with the "standard deviations (over the
three runs) of the macro and weighted average". So an average is computed per seed first, then its
mean and standard deviation are taken over seeds. The weight of a disease is its number of positive
test examples in the category (its support). The std is the sample std (ddof = 1) over seeds; with
one seed it is undefined (NaN).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

CELL_COLUMNS = ["model", "category", "target", "disease", "seed", "f1", "precision", "recall", "tp", "fp", "fn",
                "tn", "support"]


def confusion(labels: Sequence[int], preds: Sequence[int]) -> dict:
    """Counts and precision / recall / F1 of the positive class (0 where undefined, as zero_division=0).

    >>> confusion([1, 1, 0, 0], [1, 0, 1, 0])["f1"]
    0.5
    """
    if len(labels) != len(preds):
        raise ValueError(f"{len(labels)} labels but {len(preds)} predictions")
    tp = sum(1 for y, p in zip(labels, preds, strict=True) if y == 1 and p == 1)
    fp = sum(1 for y, p in zip(labels, preds, strict=True) if y == 0 and p == 1)
    fn = sum(1 for y, p in zip(labels, preds, strict=True) if y == 1 and p == 0)
    tn = len(labels) - tp - fp - fn
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "support": tp + fn, "precision": precision, "recall": recall,
            "f1": f1}


def cells_frame(results: Sequence[dict]) -> pd.DataFrame:
    """One row per (model, category, disease, seed) from :func:`~probekit.diskne.finetune.run_cell` results."""
    rows = [{"model": r["model"], "target": r["target"], "disease": r["disease"], "seed": r["seed"], **c}
            for r in results for c in r["categories"]]
    return pd.DataFrame(rows, columns=CELL_COLUMNS)


def _std(values: np.ndarray) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else float("nan")


def per_disease(cells: pd.DataFrame) -> pd.DataFrame:
    """F1 per (model, category, disease): mean (and std) over seeds, with the support and seed count."""
    if cells.empty:
        return pd.DataFrame(columns=["model", "category", "target", "disease", "f1", "f1_std", "support", "seeds"])
    g = cells.groupby(["model", "category", "target", "disease"], sort=True)
    out = g.agg(f1=("f1", "mean"), support=("support", "first"), seeds=("seed", "nunique")).reset_index()
    out["f1_std"] = g["f1"].agg(lambda v: _std(v.to_numpy())).to_numpy()
    return out[["model", "category", "target", "disease", "f1", "f1_std", "support", "seeds"]]


def per_seed(cells: pd.DataFrame) -> pd.DataFrame:
    """Macro and weighted F1 per (model, category, seed)."""
    rows = []
    for (model, cat, seed), g in cells.groupby(["model", "category", "seed"], sort=True):
        f1 = g["f1"].to_numpy(dtype=float)
        w = g["support"].to_numpy(dtype=float)
        rows.append({"model": model, "category": cat, "seed": seed, "diseases": len(g), "macro": float(f1.mean()),
                     "weighted": float((f1 * w).sum() / w.sum()) if w.sum() else float("nan")})
    return pd.DataFrame(rows, columns=["model", "category", "seed", "diseases", "macro", "weighted"])


def summary(cells: pd.DataFrame) -> pd.DataFrame:
    """Per (model, category): macro and weighted F1, each a mean ± std over seeds (Tables 2–6, bottom rows).

    Only seeds that ran every disease of the category count, so a cancelled run does not mix a full
    seed with a partial one.
    """
    cols = ["model", "category", "diseases", "seeds", "macro", "macro_std", "weighted", "weighted_std"]
    if cells.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    seeds = per_seed(cells)
    for (model, cat), g in seeds.groupby(["model", "category"], sort=True):
        full = g[g["diseases"] == g["diseases"].max()]
        rows.append({"model": model, "category": cat, "diseases": int(full["diseases"].max()), "seeds": len(full),
                     "macro": float(full["macro"].mean()), "macro_std": _std(full["macro"].to_numpy()),
                     "weighted": float(full["weighted"].mean()), "weighted_std": _std(full["weighted"].to_numpy())})
    return pd.DataFrame(rows, columns=cols)


def by_model(diseases: pd.DataFrame, category: str) -> pd.DataFrame:
    """One category's per-disease F1 (%) with one column per model, for comparing models side by side.

    >>> f = pd.DataFrame({"model": ["a", "b"], "category": ["c", "c"], "disease": ["flu", "flu"], "f1": [0.5, 1.0]})
    >>> by_model(f, "c").to_dict(orient="records")
    [{'disease': 'flu', 'a': 50.0, 'b': 100.0}]
    """
    sub = diseases[diseases["category"] == category]
    if sub.empty:
        return pd.DataFrame(columns=["disease"])
    table = sub.pivot_table(index="disease", columns="model", values="f1", aggfunc="mean", sort=True) * 100
    table.columns.name = None
    return table.round(1).reset_index()
