"""Stored dataset-mode context runs (UCM), so several models can be charted together and exported.

Two tables owned by the ``context`` component: ``context_runs`` (one row per run: model, probe,
dataset, settings, timing) and ``context_steps`` (one row per step of every triple: ranks, RC, the best
gold rank for acc@k). Summaries (UCM_k, UCM_m, acc@k) are always recomputed from the stored steps with
the same functions that produced them live, so a stored run and a fresh one cannot disagree.
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from pathlib import Path

from .. import metrics
from ..errors import ProbekitError
from ..jobs import Job
from ..store import component_store
from ..store.export import safe_target, write_table
from . import dataset as context

COMPONENT = "context"
STEP_COLUMNS = ("mode", "query_id", "relation", "subject", "target", "context", "permutation", "step", "added",
                "added_role", "rank_target", "rank_added", "mean_rank_cor", "mean_rank_incor", "rc_target", "rc_added",
                "rc_cor", "rc_incor", "best_gold_rank", "notice")
EXPORT_FORMATS = ("csv", "parquet")


def _store():
    return component_store(COMPONENT)


def save_run(result: context.DatasetContextResult, *, model=None, label: str | None = None) -> str:
    """Store a dataset-mode result (one short transaction); returns its run id."""
    import pandas as pd

    if not result.rows:
        raise ProbekitError("nothing to store: the run has no steps")
    s = result.settings
    run_id = f"ctx-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
    steps = pd.DataFrame([{c: r.get(c) for c in STEP_COLUMNS} for r in result.rows], columns=list(STEP_COLUMNS))
    for c in ("context", "permutation", "step", "rank_target", "rank_added", "rc_target", "rc_added", "best_gold_rank"):
        steps[c] = steps[c].astype("Int64")
    for c in ("mean_rank_cor", "mean_rank_incor", "rc_cor", "rc_incor"):
        steps[c] = steps[c].astype("Float64")
    steps.insert(0, "run_id", run_id)
    store = _store()
    with store.transaction() as cur:
        cur.execute("INSERT INTO context_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
            run_id, datetime.now(UTC).replace(tzinfo=None), label or (model.label if model else s["model"]),
            s["model"], getattr(model, "source", None), getattr(model, "revision", None), s["probe"], s["dataset"],
            s.get("dataset_version"), s.get("variant"), s.get("seed"), s.get("n_queries"), result.seconds,
            json.dumps(s, default=str)])
        cur.register("pk_context_steps_df", steps)
        cur.execute(f"INSERT INTO context_steps ({', '.join(steps.columns)}) "
                    f"SELECT {', '.join(steps.columns)} FROM pk_context_steps_df")
        cur.unregister("pk_context_steps_df")
    return run_id


def list_runs():
    """Stored runs, newest first, with UCM_m (micro) of target and negative-target."""
    store = _store()
    runs = store.fetch_df("SELECT run_id, created_at, label, model, probe, dataset, variant, seed, n_queries, seconds "
                          "FROM context_runs ORDER BY created_at DESC, run_id")
    if runs.empty:
        return runs
    table = ucm_table(list(runs.run_id))
    m = table[table.relation == "UCM_m"].pivot_table(index="run_id", columns="mode", values=["U", "C", "M"])
    if m.empty:
        return runs
    m.columns = [f"{mode}_{k}" for k, mode in m.columns]
    return runs.merge(m.reset_index(), on="run_id", how="left")


def get_run(run_id: str) -> dict:
    """The run's metadata (settings decoded)."""
    rows = _store().fetch("SELECT run_id, created_at, label, model, probe, dataset, variant, seed, n_queries, "
                          "seconds, settings FROM context_runs WHERE run_id = ?", [run_id])
    if not rows:
        raise ProbekitError(f"no stored context run {run_id!r}")
    keys = ("run_id", "created_at", "label", "model", "probe", "dataset", "variant", "seed", "n_queries", "seconds",
            "settings")
    out = dict(zip(keys, rows[0]))
    out["settings"] = json.loads(out["settings"] or "{}")
    return out


def load_rows(run_id: str) -> list[dict]:
    """The stored step rows of a run, in their original order."""
    get_run(run_id)
    cur = _store().cursor()
    try:
        res = cur.execute(f"SELECT {', '.join(STEP_COLUMNS)} FROM context_steps WHERE run_id = ? "
                          "ORDER BY mode DESC, relation, query_id, target, context, permutation, step",
                          [run_id]).fetchall()
    finally:
        cur.close()
    return [dict(zip(STEP_COLUMNS, row)) for row in res]


def load_summary(run_id: str) -> dict:
    """UCM_k, UCM_m and acc@k of a stored run, recomputed from its steps."""
    return context.summarize(load_rows(run_id))


def ucm_table(run_ids: list[str]):
    """Long table for charts: run_id, label, mode, relation (``UCM_m`` = model level), U, C, M, n."""
    import pandas as pd

    records = []
    for run_id in run_ids:
        meta = get_run(run_id)
        rows = load_rows(run_id)
        for mode in ("target", "negative"):
            rs = [r for r in rows if r["mode"] == mode]
            if not rs:
                continue
            for rel, u in [*metrics.ucm_k(rs).items(), ("UCM_m", metrics.ucm_m(rs))]:
                records.append({"run_id": run_id, "label": meta["label"], "model": meta["model"], "mode": mode,
                                "relation": rel, **u})
    return pd.DataFrame(records, columns=["run_id", "label", "model", "mode", "relation", "U", "C", "M", "n"])


def steps_frame(run_id: str):
    """A run's steps with its label, model, probe, dataset and variant: the export table."""
    get_run(run_id)
    return _store().fetch_df(
        "SELECT r.label, r.model, r.probe, r.dataset, r.variant, s.* FROM context_steps s "
        "JOIN context_runs r USING (run_id) WHERE s.run_id = ? "
        "ORDER BY s.mode DESC, s.relation, s.query_id, s.target, s.context, s.permutation, s.step", [run_id])


def export_run(run_id: str, path: str | Path, *, fmt: str | None = None) -> Path:
    """Write a run's steps (:func:`steps_frame`) to CSV or Parquet (format from the suffix), atomically and
    safely (:func:`probekit.store.export.write_table`)."""
    path = Path(path)
    safe_target(path)
    return write_table(steps_frame(run_id), path, fmt=fmt, formats=EXPORT_FORMATS)


def delete_run(run_id: str) -> None:
    """Remove a stored run and its steps."""
    get_run(run_id)
    _store().delete_with_children("context_runs", run_id)


def start_dataset(model, dataset, *, save: bool = False, label: str | None = None, **options) -> Job:
    """A started background :class:`~probekit.jobs.Job` running :func:`run_dataset`; ``result`` is the
    :class:`DatasetContextResult`, with ``run_id`` in its settings when ``save`` stored it."""
    def work(progress, should_cancel):
        res = context.run_dataset(model, dataset, progress=progress, should_cancel=should_cancel, **options)
        if save and res.rows:
            res.settings["run_id"] = save_run(res, model=model, label=label)
        return res

    return Job(work, label="context dataset").start()
