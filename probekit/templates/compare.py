"""Compare stored runs of several models on a template-based and a template-free dataset: the one core call
behind the "Templates vs free text" page and ``python -m probekit templates compare``.

A run is *template-free* when none of its prompts has a subject slot ``[X]`` (sentences from
:mod:`probekit.datasets.freetext`), else *template-based*. Models are matched across the two kinds by
model id; each kind must hold one dataset and at most one run per model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from ..errors import ProbekitError, command
from ..metrics import compare as run_metrics
from ..metrics.registry import get_metric, metric_names
from ..types import SUBJECT
from . import frequency, rankings, stored
from .stability import ranking_stability

COUNTING = "query"
"""The runs are compared query by query, each scored by its best gold (:data:`probekit.metrics.accuracy.COUNTINGS`),
whatever counting they were stored with."""

TEMPLATE_BASED, TEMPLATE_FREE = "template-based", "template-free"
PPL_COLUMNS = {"mean_perplexity": "mean perplexity", "corpus_perplexity": "corpus perplexity"}
"""The runs table's column for each :func:`~probekit.templates.stored.mean_perplexity` aggregate."""
KINDS = (TEMPLATE_BASED, TEMPLATE_FREE)


def run_kind(frame: pd.DataFrame) -> str:
    """``template-free`` when no prompt of the run has ``[X]``, else ``template-based``.

    >>> run_kind(pd.DataFrame({"template": ["[X] treats [Y] .", "[X] causes [Y] ."]}))
    'template-based'
    >>> run_kind(pd.DataFrame({"template": ["aspirin lowers the risk of [Y]"]}))
    'template-free'
    """
    if "template" not in frame.columns:
        raise ProbekitError("the results frame has no 'template' column")
    return TEMPLATE_BASED if frame["template"].fillna("").str.contains(SUBJECT, regex=False).any() else TEMPLATE_FREE


@dataclass
class Comparison:
    """Everything the page and the CLI show: a per-run table, the two rankings, their correlation, Pearson's
    r of perplexity with accuracy per kind, prediction frequencies per run and the flags."""

    runs: pd.DataFrame
    rankings: pd.DataFrame | None
    correlation: dict | None
    perplexity_fit: pd.DataFrame
    frequency: dict[str, pd.DataFrame] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    metric: str = "acc@1"
    average: str = "macro"
    perplexity_aggregate: str = "prompt-mean"
    """Which aggregate (:data:`~probekit.templates.stored.PERPLEXITY_AGGREGATES`) ``perplexity_fit`` used."""
    stability: dict | None = None
    """Whether the ranking holds under prompt resampling (:func:`probekit.templates.stability.ranking_stability`;
    None without models on both kinds)."""

    def to_dict(self) -> dict:
        def clean(obj):
            if isinstance(obj, float) and math.isnan(obj):
                return None
            return obj

        records = lambda f: [{k: clean(v) for k, v in r.items()} for r in f.to_dict(orient="records")]  # noqa: E731
        return {"metric": self.metric, "average": self.average, "counting": COUNTING,
                "perplexity_aggregate": self.perplexity_aggregate,
                "runs": records(self.runs),
                "rankings": None if self.rankings is None else records(self.rankings),
                "correlation": None if self.correlation is None else {k: clean(v) for k, v in self.correlation.items()},
                "perplexity_fit": records(self.perplexity_fit), "flags": self.flags,
                "stability": None if self.stability is None else {
                    **{k: clean(v) for k, v in self.stability.items() if k != "pairs"},
                    "pairs": records(self.stability["pairs"])}}


def _perplexity_of(run_id: str, model: str, means: pd.DataFrame, scorer: str | None, fill: str) -> tuple:
    """(mean of per-prompt perplexities, corpus-level perplexity, scorer) of one run."""
    rows = means[(means.run_id == run_id) & (means.fill == fill)]
    if scorer is not None:
        rows = rows[rows.scorer == scorer]
    elif (rows.scorer == model).any():
        rows = rows[rows.scorer == model]  # the run's own model, as in the paper
    if len(rows) != 1:  # none, or several scorers and none chosen
        return math.nan, math.nan, None
    return float(rows.mean_perplexity.iloc[0]), float(rows.corpus_perplexity.iloc[0]), rows.scorer.iloc[0]


def compare_runs(run_ids: Sequence[str], *, metric: str = "acc@1", average: str = "macro", top_n: int = 5,
                 flag_threshold: float = 0.1, scorer: str | None = None, fill: str = "gold",
                 frequency_k: int | None = None, perplexity_aggregate: str = "prompt-mean",
                 resamples: int = 1000, seed: int = 0) -> Comparison:
    """Load stored runs and compare them (see the module docstring). The runs table holds every registered metric
    (:mod:`probekit.metrics.registry`); ``metric``/``average``: the one that ranks models (the paper: acc@1);
    ``scorer``/``fill``: which stored perplexities to use (default: the run's own model);
    ``perplexity_aggregate``: which of the two per-run perplexities (both are in the table) the Pearson fit
    uses; ``resamples``/``seed``: the prompt resampling behind :attr:`Comparison.stability`; ``frequency_k``: how deep
    prediction frequency counts (default the paper's 10; a run that stored
    fewer predictions counts all it has, and the table's ``frequency k`` column says how many)."""
    from ..bench.runs import load_run

    run_ids = list(dict.fromkeys(str(r).strip() for r in run_ids if str(r).strip()))
    if not run_ids:
        raise ProbekitError(f"give at least one stored run id (see `{command()} runs list`)")
    if average not in run_metrics.AVERAGES:
        raise ProbekitError(f"unknown average {average!r}; available: {', '.join(run_metrics.AVERAGES)}")
    metric = get_metric(metric).name
    ppl_column = stored.PERPLEXITY_AGGREGATES.get_or_raise(perplexity_aggregate)[0]
    runs = [load_run(r) for r in run_ids]  # each with its run_id (the ids are already stripped, as stored)
    means = stored.mean_perplexity(run_ids)
    rows: list[dict] = []
    freqs: dict[str, pd.DataFrame] = {}
    flags: list[str] = []
    seen: dict[tuple[str, str], str] = {}
    by_kind: dict[str, dict[str, pd.DataFrame]] = {kind: {} for kind in KINDS}
    for run_id, run in zip(run_ids, runs):
        meta, frame = run.meta, run.frame
        if not len(frame):
            raise ProbekitError(f"run {run_id} has no results")
        kind, model = run_kind(frame), meta["model"]
        if (kind, model) in seen:
            raise ProbekitError(f"model {model!r} has two {kind} runs ({seen[kind, model]} and {run_id}): "
                                "keep one per model and kind")
        seen[kind, model] = run_id
        by_kind[kind][model] = frame
        label = f"{model} · {meta['dataset']}"
        mean_ppl, corpus_ppl, used = _perplexity_of(run_id, model, means, scorer, fill)
        fk = max(1, min(frequency_k or 10, min(len(names) for names in frame["top_names"])))
        freq = frequency.prediction_frequency(frame, k=fk)
        freqs[label] = freq
        flags += frequency.flags(frame, label=f"{model} ({kind}, {meta['dataset']})", threshold=flag_threshold,
                                 k=fk)
        dist = frequency.distinct_predictions(frame, ks=(fk,)).get(fk, {})
        rows.append({"run_id": run_id, "label": label, "model": model, "dataset": meta["dataset"], "kind": kind,
                     "probe": meta.get("probe"), "prompts": len(frame),
                     **{n: run_metrics.value(frame, metric=n, average=average) for n in metric_names()},
                     "mean perplexity": mean_ppl, "corpus perplexity": corpus_ppl, "scorer": used,
                     "frequency k": fk, "top object": freq.object.iloc[0], "top object share": freq.share.iloc[0],
                     f"top-{top_n} share": frequency.top_share(frame, k=fk, n=top_n),
                     "distinct share": dist.get("share")})
    table = pd.DataFrame(rows)
    for kind in KINDS:
        datasets = sorted(set(table.dataset[table.kind == kind]))
        if len(datasets) > 1:
            raise ProbekitError(f"the {kind} runs use {len(datasets)} datasets ({', '.join(datasets)}): compare runs "
                                "of one dataset per kind")
    acc = metric
    scored = {kind: dict(zip(table.model[table.kind == kind], table[acc][table.kind == kind])) for kind in KINDS}
    ranked = corr = held = None
    if all(scored.values()) and set(scored[TEMPLATE_BASED]) & set(scored[TEMPLATE_FREE]):
        ranked = rankings.model_rankings(scored[TEMPLATE_BASED], scored[TEMPLATE_FREE], names=KINDS)
        corr = rankings.rank_correlation(scored[TEMPLATE_BASED], scored[TEMPLATE_FREE])
        if len(set(scored[TEMPLATE_BASED]) & set(scored[TEMPLATE_FREE])) >= 2:
            held = ranking_stability(by_kind[TEMPLATE_BASED], by_kind[TEMPLATE_FREE], metric=metric, average=average,
                                     n_boot=resamples, seed=seed, names=KINDS)
    chosen = PPL_COLUMNS[ppl_column]
    points = table.rename(columns={acc: "accuracy", chosen: "perplexity"})
    fit = rankings.perplexity_accuracy(points[["model", "kind", "perplexity", "accuracy"]])
    fit.insert(1, "perplexity aggregate", perplexity_aggregate)
    return Comparison(runs=table, rankings=ranked, correlation=corr, perplexity_fit=fit, frequency=freqs,
                      flags=flags, metric=metric, average=average, perplexity_aggregate=perplexity_aggregate,
                      stability=held)
