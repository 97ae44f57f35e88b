"""Model rankings on two datasets, and perplexity against accuracy (Shaier et al. RQ1, §5.5 Figure 2).

RQ1: "Do model rankings differ between template-based and template-free probing?" Given each model's
accuracy on a template-based and on a template-free dataset, :func:`model_rankings` puts the two
rankings side by side and :func:`rank_correlation` measures how alike they are with Kendall's tau-b and
Spearman's rho (scipy, with p-values). Figure 2 plots "average Acc@1 vs average Perplexity per model"
with Pearson's correlation coefficient and p-value: :func:`perplexity_accuracy`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..errors import ProbekitError


def _scores(scores: Mapping[str, float], what: str) -> dict[str, float]:
    if not isinstance(scores, Mapping):
        raise ProbekitError(f"{what}: expected a mapping model -> score")
    out = {}
    for model, v in scores.items():
        try:
            v = float(v)
        except (TypeError, ValueError):
            raise ProbekitError(f"{what}: score of {model!r} is not a number: {v!r}") from None
        if math.isnan(v):
            raise ProbekitError(f"{what}: score of {model!r} is missing (NaN)")
        out[str(model)] = v
    return out


def ranks(scores: Mapping[str, float]) -> dict[str, int]:
    """Competition ranks, best (highest score) = 1; tied models share the better rank.

    >>> ranks({"a": 0.2, "b": 0.5, "c": 0.2})
    {'a': 2, 'b': 1, 'c': 2}
    """
    s = _scores(scores, "ranks")
    return {m: 1 + sum(v > s[m] for v in s.values()) for m in s}


def model_rankings(a: Mapping[str, float], b: Mapping[str, float], *,
                   names: tuple[str, str] = ("template-based", "template-free")) -> pd.DataFrame:
    """The models both datasets have, ranked on each: score, rank and the rank change (b − a), best of a first.

    >>> t = model_rankings({"x": 0.3, "y": 0.1, "z": 0.2}, {"x": 0.1, "y": 0.5, "z": 0.4})
    >>> t[["model", "template-based rank", "template-free rank", "rank change"]].values.tolist()
    [['x', 1, 3, 2], ['z', 2, 2, 0], ['y', 3, 1, -2]]
    """
    sa, sb = _scores(a, names[0]), _scores(b, names[1])
    common = [m for m in sa if m in sb]
    if not common:
        raise ProbekitError(f"no model has results on both the {names[0]} and the {names[1]} dataset")
    ra, rb = ranks({m: sa[m] for m in common}), ranks({m: sb[m] for m in common})
    frame = pd.DataFrame({"model": common, f"{names[0]} score": [sa[m] for m in common],
                          f"{names[0]} rank": [ra[m] for m in common], f"{names[1]} score": [sb[m] for m in common],
                          f"{names[1]} rank": [rb[m] for m in common]})
    frame["rank change"] = frame[f"{names[1]} rank"] - frame[f"{names[0]} rank"]
    return frame.sort_values([f"{names[0]} rank", "model"], ignore_index=True)


def rank_correlation(a: Mapping[str, float], b: Mapping[str, float]) -> dict:
    """Kendall's tau-b and Spearman's rho (with two-sided p-values) between two models -> score maps,
    over the models both have. Fewer than 3 common models, or a constant side, give NaN (undefined).
    """
    from scipy import stats

    sa, sb = _scores(a, "first"), _scores(b, "second")
    common = [m for m in sa if m in sb]
    x, y = np.array([sa[m] for m in common]), np.array([sb[m] for m in common])
    out = {"n": len(common), "kendall_tau": math.nan, "kendall_p": math.nan, "spearman_rho": math.nan,
           "spearman_p": math.nan}
    if len(common) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return out
    tau = stats.kendalltau(x, y)
    rho = stats.spearmanr(x, y)
    out.update(kendall_tau=float(tau.statistic), kendall_p=float(tau.pvalue), spearman_rho=float(rho.statistic),
               spearman_p=float(rho.pvalue))
    return out


def perplexity_accuracy(points: pd.DataFrame, *, by: str = "kind") -> pd.DataFrame:
    """Pearson's r (and p-value) of mean perplexity with accuracy across models, per group (``by``).

    ``points`` has one row per model and group: ``model``, ``by`` (e.g. template-based / template-free),
    ``perplexity`` (the model's mean perplexity over the group's prompts) and ``accuracy``. Groups with
    fewer than 3 models, or a constant column, get NaN.
    """
    from scipy import stats

    missing = [c for c in ("model", by, "perplexity", "accuracy") if c not in points.columns]
    if missing:
        raise ProbekitError(f"perplexity/accuracy points need a {missing[0]!r} column")
    rows = []
    for group, g in points.groupby(by, sort=True):
        g = g.dropna(subset=["perplexity", "accuracy"])
        r = p = math.nan
        if len(g) >= 3 and np.ptp(g.perplexity.to_numpy()) > 0 and np.ptp(g.accuracy.to_numpy()) > 0:
            res = stats.pearsonr(g.perplexity.to_numpy(float), g.accuracy.to_numpy(float))
            r, p = float(res.statistic), float(res.pvalue)
        rows.append({by: group, "models": len(g), "pearson_r": r, "p_value": p})
    return pd.DataFrame(rows, columns=[by, "models", "pearson_r", "p_value"])
