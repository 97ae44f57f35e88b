"""A run's per-query results as one export table (CSV or Parquet): the table the Benchmark page downloads and
``probekit runs export --format csv|parquet`` writes. Other export formats are :mod:`probekit.exports`'."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .. import metrics
from ..datasets.base import HARD_IN_FULL
from ..metrics.accuracy import DEFAULT_COUNTING
from ..store.export import safe_target, table_bytes, write_table
from .frames import Run, json_frame
from .results import load_run

EXPORT_FORMATS = ("csv", "parquet")


def export_frame(run: str | Run) -> pd.DataFrame:
    """A run's results with its model, dataset, probe, options (JSON) and the probekit version that computed it: the
    export table (JSON text columns).

    ``subset`` labels each row by the experiment it belongs to: ``full`` or ``hard-in-full`` (a hard
    query of a full-set run, ranked among the full set's names) for a full-set run, ``hard`` for a hard-set run;
    ``hard`` stays the query's MedLAMA hardness flag. Then one column per registered metric (``acc@1``…, ``MRR``):
    the query's own score from its best gold rank (the ``query`` counting; a metric needing more answers than the
    method gives is empty), so the mean of a column over a relation's rows is that relation's value.
    """
    run = load_run(run) if isinstance(run, str) else run
    data = json_frame(run.frame, run.run_id)
    for i, c in enumerate(("label", "model", "model_revision", "dataset", "dataset_version", "dataset_set", "probe",
                           "options", "vocab", "counting", "answers_per_query", "search", "probekit_version")):
        value = run.meta.get(c, DEFAULT_COUNTING if c == "counting" else None)
        data.insert(1 + i, c, json.dumps(value or {}, sort_keys=True, default=str) if c == "options" else value)
    flag = run.frame["hard"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    data.insert(data.columns.get_loc("relation"), "subset",
                "hard" if run.hard_set else [HARD_IN_FULL if h else "full" for h in flag])
    best = pd.to_numeric(run.frame["best_gold_rank"], errors="coerce").astype(float).to_numpy()
    depth = run.meta.get("answers_per_query")
    depth = None if depth is None or pd.isna(depth) else int(depth)
    for name in metrics.metric_names():
        m = metrics.get_metric(name)
        data[name] = m.score(best) if m.defined_at(depth) else float("nan")
    return data


def frame_bytes(frame: pd.DataFrame, fmt: str) -> bytes:
    """Any table as CSV or Parquet bytes (download buttons)."""
    return table_bytes(frame, fmt, formats=EXPORT_FORMATS)


def export_run(run_id: str, path: str | Path, *, fmt: str | None = None) -> Path:
    """Write :func:`export_frame` to ``path`` as CSV or Parquet (format from ``fmt`` or the suffix),
    atomically and safely (:func:`probekit.store.export.write_table`); arguments are checked first."""
    path = Path(path)
    safe_target(path)
    return write_table(export_frame(run_id), path, fmt=fmt, formats=EXPORT_FORMATS)


