"""Does a model ranking hold from one kind of prompt to another, or is its change within the noise of the prompts?

Shaier et al. find that prompt templates alone move acc@1 a lot and reorder models; with a few hundred prompts a
one-point gap can be noise. :func:`ranking_stability` resamples the prompts and asks again:

- the prompts of each kind (template-based, template-free) are resampled with replacement, within each relation
  (a macro average keeps its relations), the same resample for every model of a kind (the models answered the same
  prompts: their scores stay paired);
- each resample gives every model's score on each kind, and Kendall's tau-b between the two kinds' scores: its
  percentile interval says how sure the rank correlation is;
- for each pair of models, the share of resamples in which their order on the template-free kind is the order on
  the template-based kind: "holds" when it is at least ``1 - alpha``, "flips" when at most ``alpha`` (the other
  order holds), else "uncertain".
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..errors import ProbekitError, positive_int
from ..metrics.registry import get_metric

_CELLS = 4_000_000  # resampled scores held at once


def _matrix(frames: Mapping[str, pd.DataFrame], metric: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(models, scores (models, queries), relations (queries,)) over the queries every model of a kind holds."""
    m = get_metric(metric)
    models = list(frames)
    ids = set.intersection(*(set(f["query_id"]) for f in frames.values()))
    if not ids:
        raise ProbekitError("the runs of one kind share no query: they must be runs of one dataset")
    order = sorted(ids)
    rel = frames[models[0]].drop_duplicates("query_id").set_index("query_id").loc[order, "relation"].to_numpy()
    scores = np.vstack([
        m.score(pd.to_numeric(f.drop_duplicates("query_id").set_index("query_id").loc[order, "best_gold_rank"],
                              errors="coerce").astype(float).to_numpy()) for f in frames.values()])
    return models, scores, rel


def _resampled(scores: np.ndarray, relations: np.ndarray, *, average: str, n_boot: int,
               rng: np.random.Generator) -> np.ndarray:
    """(n_boot, models) each model's ``average`` score over prompts resampled within each relation."""
    groups = [np.flatnonzero(relations == r) for r in pd.unique(relations)]
    per_rel = []  # one (n_boot, models) mean per relation
    for idx in groups:
        out = []
        step = max(1, _CELLS // max(1, len(idx) * scores.shape[0]))
        for start in range(0, n_boot, step):
            size = min(step, n_boot - start)
            draw = idx[rng.integers(0, len(idx), size=(size, len(idx)))]  # (size, n_r) prompt indices
            out.append(scores[:, draw].mean(axis=2).T)  # (models, size, n_r) -> (size, models)
        per_rel.append(np.vstack(out))
    stacked = np.stack(per_rel)  # (relations, n_boot, models)
    if average == "macro":
        return stacked.mean(axis=0)
    sizes = np.array([len(g) for g in groups], dtype=float)[:, None, None]
    return (stacked * sizes).sum(axis=0) / sizes.sum()


def _kendall(x: np.ndarray, y: np.ndarray) -> float:
    from scipy import stats

    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(stats.kendalltau(x, y).statistic)


def ranking_stability(kind_a: Mapping[str, pd.DataFrame], kind_b: Mapping[str, pd.DataFrame], *,
                      metric: str = "acc@1", average: str = "macro", n_boot: int = 1000, seed: int = 0,
                      alpha: float = 0.05, names: tuple[str, str] = ("template-based", "template-free")) -> dict:
    """How stable the model ranking is from ``kind_a`` to ``kind_b`` (``{model: results frame}`` each, over the
    models both have), under prompt resampling (module docstring).

    Returns ``tau`` (Kendall's tau-b between the two kinds' full-data scores), ``lo``/``hi`` (its percentile
    interval at level ``1 - alpha`` over the resamples where tau is defined), ``n_boot``, ``seed``, and ``pairs``:
    one row per pair of models with their order on each kind and ``holds`` (share of resamples keeping the
    ``names[0]`` order on ``names[1]``) and a ``verdict``."""
    if average not in ("macro", "micro"):
        raise ProbekitError(f"unknown average {average!r}; available: macro, micro")
    n_boot = positive_int("n_boot", n_boot)
    if not 0 < alpha < 0.5:
        raise ProbekitError(f"alpha must be between 0 and 0.5, got {alpha}")
    common = [m for m in kind_a if m in kind_b]
    if len(common) < 2:
        raise ProbekitError(f"a ranking needs at least two models with runs on both the {names[0]} and the "
                            f"{names[1]} dataset")
    rng = np.random.default_rng(seed)
    full, boots = [], []
    for frames in (kind_a, kind_b):
        models, scores, rel = _matrix({m: frames[m] for m in common}, metric)
        means = pd.DataFrame(scores.T).groupby(rel, sort=False).mean()  # (relations, models)
        full.append(means.mean().to_numpy() if average == "macro" else scores.mean(axis=1))
        boots.append(_resampled(scores, rel, average=average, n_boot=n_boot, rng=rng))  # (n_boot, models)
    taus = np.array([_kendall(a, b) for a, b in zip(boots[0], boots[1])])
    defined = taus[~np.isnan(taus)]
    lo, hi = (np.quantile(defined, [alpha / 2, 1 - alpha / 2]) if len(defined) else (np.nan, np.nan))
    rows = []
    for i, j in itertools.combinations(range(len(common)), 2):
        sign_a = np.sign(boots[0][:, i] - boots[0][:, j])  # (n_boot,)
        sign_b = np.sign(boots[1][:, i] - boots[1][:, j])
        base = np.sign(full[0][i] - full[0][j])
        holds = float(np.mean(sign_b == base)) if base != 0 else float("nan")
        verdict = ("tied on " + names[0] if base == 0 else "holds" if holds >= 1 - alpha
                   else "flips" if holds <= alpha else "uncertain")
        rows.append({"model a": common[i], "model b": common[j],
                     f"{names[0]} order": _order(full[0][i], full[0][j]),
                     f"{names[1]} order": _order(full[1][i], full[1][j]),
                     f"{names[0]} order kept": float(np.mean(sign_a == base)) if base != 0 else float("nan"),
                     "holds": holds, "verdict": verdict})
    return {"metric": get_metric(metric).name, "average": average, "models": common,
            "tau": _kendall(np.asarray(full[0]), np.asarray(full[1])), "lo": float(lo), "hi": float(hi),
            "n_boot": n_boot, "defined": int(len(defined)), "seed": seed, "alpha": alpha,
            "pairs": pd.DataFrame(rows, columns=["model a", "model b", f"{names[0]} order", f"{names[1]} order",
                                                 f"{names[0]} order kept", "holds", "verdict"])}


def _order(x: float, y: float) -> str:
    return "a > b" if x > y else "a < b" if x < y else "a = b"
