"""A grid's scores with their intervals, and whether its model ranking holds across the grid's other axes.

Each stored cell is a benchmark run, so its score gets the interval every run's score gets
(:func:`probekit.metrics.intervals.frame_intervals`: Wilson for a micro acc@k, a bootstrap over queries within
relations otherwise). A grid with several models is also a ranking of those models in every *condition* (a cell's
settings but its model: dataset, probe, options, layer, relations, seed); :func:`grid_stability` asks whether that
ranking holds from one condition to another or moves within the noise of the queries
(:func:`probekit.metrics.stability.ranking_stability`: Kendall's tau-b between conditions with a bootstrap
interval, and per pair of models the share of query resamples in which every condition keeps their order).

Stored runs never change, so both are kept in a small memo keyed by the runs they read.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd

from ..errors import ProbekitError
from ..memo import Memo
from ..metrics import stability
from ..metrics.accuracy import DEFAULT_COUNTING, check_counting, counting_label, item_scores
from ..metrics.intervals import bracket, frame_intervals, interval_note
from ..metrics.registry import get_metric
from .driver import cells_frame
from .spec import Cell, distinguishing_labels

_MEMO: Memo[tuple, dict] = Memo(max_entries=32)


def _depth(meta: dict) -> int | None:
    depth = meta.get("answers_per_query")
    return None if depth is None or pd.isna(depth) else int(depth)


def _done(grid_id: str) -> pd.DataFrame:
    cells = cells_frame(grid_id)
    return cells[(cells.status == "done") & cells.run_id.notna()]


def cell_intervals(grid_id: str, *, metric: str = "acc@10", confidence: float = 0.95, n_boot: int = 1000,
                   seed: int = 0) -> pd.DataFrame:
    """Every cell of the grid (as :func:`~probekit.grid.driver.cells_frame`) with the interval of ``metric``
    beside its macro and micro value, each counted as its run was stored: ``macro {metric} [lo, hi]`` and
    ``micro {metric} [lo, hi]`` (text, in %; "–" for a cell not stored yet) and the numbers behind them
    (``… lo``/``… hi``, fractions). ``note`` in ``frame.attrs`` says how they were made."""
    from ..bench import runs

    name = get_metric(metric).name
    cells = cells_frame(grid_id)
    done = cells[(cells.status == "done") & cells.run_id.notna()]
    key = ("cells", tuple(done.run_id), name, confidence, n_boot, seed)
    got = _MEMO.get(key)
    if got is None:
        got = {}
        for rid in done.run_id:  # each run's interval, counted as the run was stored
            run = runs.load_run(rid)
            got[rid] = frame_intervals(run.frame, metric=name, counting=run.counting, depth=_depth(run.meta),
                                       confidence=confidence, n_boot=n_boot, seed=seed)
        _MEMO.put(key, got)
    out = cells.copy()
    for a in ("macro", "micro"):
        lo = [got[r][a][0] if r in got else np.nan for r in out.run_id]
        hi = [got[r][a][1] if r in got else np.nan for r in out.run_id]
        out[f"{a} {name} lo"], out[f"{a} {name} hi"] = lo, hi
        out[f"{a} {name} [lo, hi]"] = [bracket(x, y) for x, y in zip(lo, hi)]
    out.attrs["note"] = interval_note(name, confidence=confidence, n_boot=n_boot, seed=seed)
    return out


def grid_table(grid_id: str, *, metric: str = "acc@10", counting: str = DEFAULT_COUNTING) -> pd.DataFrame:
    """One row per (model, condition, query) of the grid's stored cells: the query's ``score`` (sum of its item
    scores under ``metric``) and ``items`` under ``counting`` (:func:`probekit.metrics.accuracy.item_scores`); a
    cell whose method gives fewer answers than ``metric`` needs is left out. Conditions are named by what sets them
    apart (:func:`~probekit.grid.spec.distinguishing_labels` of the cells without their model)."""
    from ..bench import runs

    m, counting = get_metric(metric), check_counting(counting)
    done = _done(grid_id)
    cells = [Cell.from_settings(json.loads(s) if isinstance(s, str) else s) for s in done.settings]
    conditions = distinguishing_labels([dataclasses.replace(c, model="") for c in cells])
    parts = []
    for cell, condition, rid in zip(cells, conditions, done.run_id):
        run = runs.load_run(rid)
        if not m.defined_at(_depth(run.meta)):
            continue
        frame = run.frame.drop_duplicates("query_id")
        ranks = [list(g) if isinstance(g, (list, tuple, np.ndarray)) else [] for g in frame["gold_ranks"]]
        items, sums = item_scores(ranks, metric=m, counting=counting)
        parts.append(pd.DataFrame({"model": cell.model, "condition": condition,
                                   "query_id": frame["query_id"].to_numpy(), "relation": frame["relation"].to_numpy(),
                                   "score": sums, "items": items}))
    if not parts:
        return pd.DataFrame(columns=[*stability.TABLE_COLUMNS, "items"])
    return pd.concat(parts, ignore_index=True)


def grid_stability(grid_id: str, *, metric: str = "acc@10", average: str = "macro",
                   counting: str = DEFAULT_COUNTING, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05) -> dict:
    """Whether the grid's model ranking holds across its conditions (module docstring), from its stored cells:
    :func:`probekit.metrics.stability.ranking_stability` of :func:`grid_table` (the reference order: each model's
    mean score over the conditions), plus ``metric``, ``counting`` (its label) and ``rule`` (how to read a
    verdict). A grid with one model, or one condition, has no ranking to compare: a :class:`ProbekitError` saying
    so."""
    name = get_metric(metric).name
    done = _done(grid_id)
    key = ("stability", grid_id, tuple(done.run_id), name, average, counting, n_boot, seed, alpha)
    got = _MEMO.get(key)
    if got is None:
        table = grid_table(grid_id, metric=name, counting=counting)
        if table.empty or table["model"].nunique() < 2:
            raise ProbekitError("the grid's stored cells have fewer than two models: no ranking to compare")
        if table["condition"].nunique() < 2:
            raise ProbekitError("the grid's models share one condition: no other axis to hold the ranking across")
        got = {**stability.ranking_stability(table, average=average, n_boot=n_boot, seed=seed, alpha=alpha),
               "metric": name, "counting": counting_label(counting), "rule": stability.verdict_rule(alpha, n_boot)}
        _MEMO.put(key, got)
    return got
