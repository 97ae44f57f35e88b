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

The resampling and the verdicts are :func:`probekit.metrics.stability.ranking_stability`'s (any table of models ×
conditions: a grid's cells use it too); here each kind is a condition and the template-based kind the reference.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..errors import ProbekitError
from ..metrics import stability
from ..metrics.registry import get_metric


def _long(frames: Mapping[str, pd.DataFrame], condition: str, metric: str) -> pd.DataFrame:
    """One row per (model, prompt) of one kind: the prompt's item score from its best gold rank (query counting)."""
    m = get_metric(metric)
    parts = []
    for model, f in frames.items():
        f = f.drop_duplicates("query_id")
        ranks = pd.to_numeric(f["best_gold_rank"], errors="coerce").astype(float).to_numpy()
        parts.append(pd.DataFrame({"model": model, "condition": condition, "query_id": f["query_id"].to_numpy(),
                                   "relation": f["relation"].to_numpy(), "score": m.score(ranks)}))
    return pd.concat(parts, ignore_index=True)


def ranking_stability(kind_a: Mapping[str, pd.DataFrame], kind_b: Mapping[str, pd.DataFrame], *,
                      metric: str = "acc@1", average: str = "macro", n_boot: int = 1000, seed: int = 0,
                      alpha: float = 0.05, names: tuple[str, str] = ("template-based", "template-free")) -> dict:
    """How stable the model ranking is from ``kind_a`` to ``kind_b`` (``{model: results frame}`` each, over the
    models both have), under prompt resampling (module docstring).

    Returns ``tau`` (Kendall's tau-b between the two kinds' full-data scores), ``lo``/``hi`` (its percentile
    interval at level ``1 - alpha`` over the resamples where tau is defined), ``n_boot``, ``seed``, and ``pairs``:
    one row per pair of models with their order on each kind and ``holds`` (share of resamples keeping the
    ``names[0]`` order on ``names[1]``), ``in resamples`` (that count, in words) and a ``verdict``."""
    common = [m for m in kind_a if m in kind_b]
    if len(common) < 2:
        raise ProbekitError(f"a ranking needs at least two models with runs on both the {names[0]} and the "
                            f"{names[1]} dataset")
    table = pd.concat([_long({m: kind_a[m] for m in common}, names[0], metric),
                       _long({m: kind_b[m] for m in common}, names[1], metric)], ignore_index=True)
    held = stability.ranking_stability(table, reference=names[0], conditions=list(names), average=average,
                                       n_boot=n_boot, seed=seed, alpha=alpha)
    pairs = held["pairs"].rename(columns={f"order in {names[0]}": f"{names[0]} order",
                                          f"order in {names[1]}": f"{names[1]} order",
                                          f"kept in {names[0]}": f"{names[0]} order kept"})
    pairs["verdict"] = pairs["verdict"].replace({"tied": f"tied on {names[0]}"})
    columns = ["model a", "model b", f"{names[0]} order", f"{names[1]} order", f"{names[0]} order kept", "holds",
               "in resamples", "verdict"]
    return {"metric": get_metric(metric).name, "average": average, "models": held["models"], "tau": held["tau"],
            "lo": held["lo"], "hi": held["hi"], "n_boot": held["n_boot"], "defined": held["defined"],
            "seed": seed, "alpha": alpha, "pairs": pairs.reindex(columns=columns)}
