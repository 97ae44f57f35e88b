"""A run's results as a frame (one row per query) and back, and :class:`Run`: what a stored or fresh run is.

Pure data shaping; the DuckDB side of runs is :mod:`probekit.bench.results`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from ..datasets.base import HARD_IN_FULL
from ..metrics.accuracy import DEFAULT_COUNTING
from ..metrics.accuracy import summary as summarize
from ..metrics.compare import run_subsets
from ..metrics.registry import metric_names
from ..types import Query, Ranking
from .settings import is_hard

RESULT_COLUMNS = ("query_id", "relation", "subject", "template", "query", "golds", "gold_ranks", "best_gold_rank",
                  "top_ids", "top_names", "top_scores", "gold_length", "hard", "n_candidates")
JSON_COLUMNS = ("golds", "gold_ranks", "top_ids", "top_names", "top_scores")


def rankings_frame(rankings: Sequence[Ranking]) -> pd.DataFrame:
    """One row per ranking with :data:`RESULT_COLUMNS` (list columns as Python lists)."""
    qs = [r.query for r in rankings]
    frame = pd.DataFrame({
        "query_id": [q.id for q in qs], "relation": [q.relation for q in qs], "subject": [q.subject for q in qs],
        "template": [q.template for q in qs], "query": [q.text() for q in qs], "golds": [list(q.golds) for q in qs],
        "gold_ranks": [list(r.gold_ranks) for r in rankings], "best_gold_rank": [r.best_gold_rank for r in rankings],
        "top_ids": [[int(i) for i in r.ids] for r in rankings], "top_names": [list(r.names) for r in rankings],
        "top_scores": [[float(s) for s in r.scores] for r in rankings],
        "gold_length": [sum(map(len, q.golds)) / len(q.golds) if q.golds else None for q in qs],
        "hard": [is_hard(q) for q in qs], "n_candidates": [r.n_candidates for r in rankings],
    }, columns=list(RESULT_COLUMNS))
    return typed(frame)


def typed(frame: pd.DataFrame) -> pd.DataFrame:
    frame["best_gold_rank"] = frame["best_gold_rank"].astype("Int64")
    frame["n_candidates"] = frame["n_candidates"].astype("Int64")
    frame["gold_length"] = frame["gold_length"].astype("Float64")
    frame["hard"] = frame["hard"].astype("boolean")
    return frame


def json_frame(frame: pd.DataFrame, run_id: str | None) -> pd.DataFrame:
    """A results frame as stored and exported: list columns as JSON text, led by ``run_id`` (None: never stored)."""
    out = frame.copy()
    for c in JSON_COLUMNS:
        out[c] = [json.dumps(list(v)) for v in out[c]]
    out.insert(0, "run_id", run_id)
    return out


def frame_rankings(frame: pd.DataFrame, *, depth: int | None = None) -> list[Ranking]:
    """Rebuild :class:`Ranking` objects from a results frame (for :mod:`probekit.metrics`); ``depth``: the
    answers per query of the run's method (:attr:`Ranking.depth`)."""
    out = []
    for row in frame.itertuples(index=False):
        q = Query(id=row.query_id, subject=row.subject or "", relation=row.relation, template=row.template or "",
                  golds=tuple(row.golds))
        out.append(Ranking(query=q, ids=tuple(row.top_ids), names=tuple(row.top_names),
                           scores=tuple(row.top_scores), gold_ranks=tuple(row.gold_ranks),
                           n_candidates=0 if pd.isna(row.n_candidates) else int(row.n_candidates), depth=depth))
    return out


@dataclass
class Run:
    """A benchmark run: its metadata (settings, timings…) and results frame (one row per query)."""

    run_id: str | None
    meta: dict
    frame: pd.DataFrame
    _rankings: list | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return self.meta.get("label") or self.run_id or "run"

    def rankings(self) -> list[Ranking]:
        if self._rankings is None:
            depth = self.meta.get("answers_per_query")
            self._rankings = frame_rankings(self.frame, depth=None if depth is None or pd.isna(depth) else int(depth))
        return self._rankings

    @property
    def counting(self) -> str:
        """The counting convention of the run's reported acc@k (``query`` for runs stored before it was recorded)."""
        return self.meta.get("counting") or DEFAULT_COUNTING

    @property
    def hard_set(self) -> bool:
        """True for a run on MedLAMA's hard set (its queries ranked among the hard files' own names)."""
        return self.meta.get("dataset_set") == "hard"

    def summary(self, *, metrics: Sequence[str] | None = None, counting: str | None = None) -> dict:
        """:func:`probekit.metrics.summary` of the run (every registered metric unless ``metrics`` names some),
        plus its hard block labelled by what it is.

        A full-set run (any set but MedLAMA's hard one) adds ``"hard-in-full"``: its hard queries, ranked among
        the full set's vocabulary (None when it has none). A hard-set run adds ``"hard"``: the whole run, the
        paper's hard-set experiment. ``subsets`` names the blocks (:func:`probekit.metrics.compare.run_subsets`).
        Read a hard block with :func:`hard_block`, which also reads summaries made before the label existed.
        ``counting`` (default: the run's own, :attr:`counting`) is named in the summary and in every block.
        """
        counting = counting or self.counting
        names = metric_names(metrics)
        out: dict = dict(summarize(self.rankings(), metrics=names, counting=counting))
        if self.hard_set:
            out["hard"] = summarize(self.rankings(), metrics=names, counting=counting)
        else:
            hard = [r for r, h in zip(self.rankings(), self.frame["hard"].fillna(False)) if h]
            out[HARD_IN_FULL] = summarize(hard, metrics=names, counting=counting) if hard else None
        out["subsets"] = list(run_subsets(self.hard_set))
        return out


def hard_block(summary: dict, *, hard_set: bool | None = None) -> tuple[str, dict | None]:
    """``(label, block)`` of a summary's hard queries: ``hard-in-full`` for a full-set run, ``hard`` for a
    hard-set run. Summaries stored by probekit 0.1 (e.g. ``runs show --format json`` output) say ``"hard"``
    for both: ``hard_set`` (or the summary's ``run.dataset_set``) tells which it was.

    >>> hard_block({"hard": {"macro": {}}}, hard_set=False)
    ('hard-in-full', {'macro': {}})
    >>> hard_block({"hard": {"macro": {}}, "run": {"dataset_set": "hard"}})
    ('hard', {'macro': {}})
    """
    if HARD_IN_FULL in summary:
        return HARD_IN_FULL, summary[HARD_IN_FULL]
    if hard_set is None:
        hard_set = (summary.get("run") or {}).get("dataset_set") == "hard" or summary.get("subsets") == ["hard"]
    return ("hard" if hard_set else HARD_IN_FULL), summary.get("hard")
