"""DisKnE runs in DuckDB, and the driver that runs a grid of (model, disease, seed) cells.

The driver alone writes: one ``diskne_runs`` row per model, one ``diskne_cells`` row per
(disease, seed, category) as each cell finishes (one short transaction each), so a page can show the
diseases done so far and a restarted run with the same settings resumes where it stopped. Cells run
through ``map_cells(run_cell, settings_list)``: sequential in this process by default; a cluster layer
passes its own map (any order) and nothing else changes.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from ..errors import ProbekitError, command
from ..jobs import Cancelled, Job
from ..store import owner
from . import results
from .data import read_set
from .finetune import FinetuneSettings, cell_settings, run_cell
from .recipes import default_recipe
from .splits import targets

COMPONENT = "diskne"
"""Its tables (``diskne_runs``, ``diskne_cells``) are migrated from :mod:`probekit.store.schema`."""
MapCells = Callable[[Callable[[dict], dict], list[dict]], Iterable[dict]]


def _store():
    from ..store import component_store

    return component_store(COMPONENT)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def run_label(model: str, ft: FinetuneSettings) -> str:
    """The run's display name: model, recipe, hypothesis form, baseline.

    >>> run_label("default", FinetuneSettings(hypothesis_only=True))
    'default · probekit · canonical · hypothesis only'
    """
    short = Path(model).name if Path(model).is_absolute() else model
    return " · ".join([short, ft.recipe, ft.hypothesis] + (["hypothesis only"] if ft.hypothesis_only else []))


def _key(model: str, revision: str, set_version: str, categories, seeds, ft: FinetuneSettings, n_neg: int,
         device: str) -> str:
    body = [model, revision, set_version, sorted(categories), sorted(seeds), ft.to_dict(), n_neg, device]
    return hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def mark_stale() -> list[str]:
    """Runs whose process is gone (or silent past ``PROBEKIT_STALE_RUN_S``) marked ``interrupted``; their ids."""
    return owner.mark_stale(_store(), "diskne_runs")


def _resumable(key: str) -> str | None:
    """The newest unfinished run with these settings (cancelled, failed, interrupted), taken over by this
    process; a run still ``running`` in a live process is left to it (two processes never fine-tune the same
    cells into one run)."""
    mark_stale()
    marks = ", ".join("?" * len(owner.UNFINISHED))
    for (run_id,) in _store().fetch(f"SELECT run_id FROM diskne_runs WHERE settings_key = ? AND status IN ({marks}) "
                                    "ORDER BY created_at DESC", [key, *owner.UNFINISHED]):
        if owner.claim(_store(), "diskne_runs", run_id):
            return run_id
    return None


def _done_cells(run_id: str) -> set[tuple[str, int]]:
    return {(t, int(s)) for t, s in _store().fetch("SELECT DISTINCT target, seed FROM diskne_cells WHERE run_id = ?",
                                                     [run_id])}


def _insert_cell(run_id: str, r: dict) -> None:
    rows = [[run_id, r["target"], r["disease"], r["seed"], c["category"], c["f1"], c["precision"], c["recall"],
             c["tp"], c["fp"], c["fn"], c["tn"], c["support"], r["epochs"], r["best_epoch"], r["train_examples"],
             r["validation_examples"], r["seconds"], json.dumps(r["history"])] for c in r["categories"]]
    if not rows:
        return
    with _store().transaction() as cur:
        cur.executemany("INSERT INTO diskne_cells VALUES (" + ", ".join(["?"] * 19) + ")", rows)


def _finish(run_id: str, status: str, seconds: float, message: str | None = None) -> None:
    with _store().transaction() as cur:
        cur.execute("UPDATE diskne_runs SET status = ?, finished_at = ?, seconds = coalesce(seconds, 0) + ?, "
                    "message = ? WHERE run_id = ?", [status, _now(), seconds, message, run_id])


def _sequential(progress, should_cancel, label: Callable[[dict], str], offset: int, total: int) -> MapCells:
    """The default map: one cell after another in this process, epochs reported in the stage text."""
    def map_cells(fn, cells):
        for i, cell in enumerate(cells):
            def report(done, steps, stage, _i=i, _c=cell):
                progress(offset + _i, total, f"{label(_c)} · {stage}")
            yield fn(cell, progress=report, should_cancel=should_cancel)
    return map_cells


def run_grid(models: Sequence[str], set_path: str | Path, *, categories: Sequence[str] | None = None,
             seeds: Sequence[int] = (0, 1, 2), finetune: dict | None = None, n_negatives: int = 10,
             device: str | None = None, diseases: Sequence[str] | None = None, progress=None, should_cancel=None,
             map_cells: MapCells | None = None) -> list[str]:
    """Fine-tune every model on every (eligible disease, seed) of the set; returns one run id per model.

    ``diseases`` restricts the targets (ids); by default every disease with >= 2 positives in a chosen
    category. Negatives are computed once per model (its own name embeddings, unless the set has given
    negatives) and stored with the run.
    """
    from . import negatives as negatives_mod
    from .finetune import _loaded, release_memo

    if not models:
        raise ProbekitError("pick at least one model")
    if not seeds:
        raise ProbekitError("pick at least one seed")
    if n_negatives < 1:
        raise ProbekitError(f"the number of negatives must be at least 1, got {n_negatives}")
    ds = read_set(set_path)
    ft = FinetuneSettings.from_dict(finetune, recipe=default_recipe(ds))
    cats = list(categories) if categories else ds.categories
    todo = targets(ds, cats)
    if diseases:
        unknown = [d for d in diseases if d not in todo]
        if unknown:
            listed = (f"available: {', '.join(todo[:10])}{' …' if len(todo) > 10 else ''}" if todo else
                      "these categories have none")
            raise ProbekitError(f"disease {unknown[0]!r} is not an evaluated disease of the chosen categories "
                                f"(>= 2 positives); {listed}")
        todo = [d for d in todo if d in set(diseases)]
    if not todo:
        raise ProbekitError("no disease has 2 or more positives in the chosen categories")
    progress = progress or (lambda done, total, stage: None)
    run_ids = []
    try:  # the fine-tuning model is released however the grid ends (one model in memory)
        for n, model_id in enumerate(models):
            prefix = f"model {n + 1}/{len(models)} · " if len(models) > 1 else ""
            progress(0, 1, f"{prefix}loading {model_id}")
            model = _loaded(model_id, device)
            progress(0, 1, f"{prefix}negatives by {model_id}'s name embeddings")
            neg = negatives_mod.for_model(ds, model, n=n_negatives)
            key = _key(model_id, model.revision, ds.version, cats, seeds, ft, n_negatives, str(model.device))
            run_id = _resumable(key)  # an unfinished run with these settings: carry on where it stopped
            if run_id is None:
                run_id = f"dk-{datetime.now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
                me = owner.owner()
                with _store().transaction() as cur:
                    cur.execute("INSERT INTO diskne_runs (run_id, created_at, status, settings_key, label, model, "
                                "model_revision, set_name, set_version, set_path, categories, seeds, finetune, "
                                "n_negatives, negatives, device, n_cells, owner_host, owner_pid, owner_start, "
                                "heartbeat_at) VALUES "
                                "(?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                [run_id, _now(), key, run_label(model_id, ft), model_id, model.revision, ds.name,
                                 ds.version, str(set_path), json.dumps(cats), json.dumps(list(seeds)),
                                 json.dumps(ft.to_dict()), n_negatives, json.dumps(neg), str(model.device),
                                 len(todo) * len(seeds), me["owner_host"], me["owner_pid"], me["owner_start"],
                                 owner.now()])
            beat = owner.Heartbeat(_store(), "diskne_runs", run_id, every=0)  # after every fine-tuned cell
            done = _done_cells(run_id)
            cells = []
            for t in todo:
                for s in seeds:
                    if (t, int(s)) not in done:
                        cells.append(cell_settings(model=model_id, set_path=str(set_path), target=t, seed=s,
                                                   negatives=neg, categories=cats, finetune=ft.to_dict(),
                                                   device=device))
            started, status, message = time.perf_counter(), "done", None
            total = len(todo) * len(seeds)
            try:
                def label(c, _p=prefix):
                    return f"{_p}fine-tuning · {ds.diseases[c['target']].name} (seed {c['seed']})"
                mapper = map_cells or _sequential(progress, should_cancel, label, total - len(cells), total)
                for k, r in enumerate(mapper(run_cell, cells), start=1):
                    _insert_cell(run_id, r)
                    beat()
                    progress(total - len(cells) + k, total,
                             f"{prefix}fine-tuning · {r['disease']} (seed {r['seed']}) done")
            except BaseException as e:
                stopped = isinstance(e, Cancelled | KeyboardInterrupt)
                status, message = ("cancelled" if stopped else "failed"), str(e)[:300] or type(e).__name__
                raise
            finally:
                _finish(run_id, status, time.perf_counter() - started, message)
            run_ids.append(run_id)
    finally:
        release_memo()
    return run_ids


def start_grid(models: Sequence[str], set_path: str | Path, **options):
    """A started background job running :func:`run_grid`; ``result`` is the list of run ids."""

    read_set(set_path)  # a missing or malformed set fails here, on the page, not in the job
    FinetuneSettings.from_dict(options.get("finetune"))

    def work(progress, should_cancel):
        return run_grid(models, set_path, progress=progress, should_cancel=should_cancel, **options)

    return Job(work, label="diskne").start()


# ---------------------------------------------------------------- reading runs back
def list_runs() -> pd.DataFrame:
    mark_stale()  # a run whose process is gone shows as interrupted, not running for ever
    return _store().fetch_df(
        "SELECT r.run_id, r.created_at, r.status, r.label, r.model, r.set_name, r.categories, r.seeds, r.n_cells, "
        "(SELECT count(DISTINCT (c.target, c.seed)) FROM diskne_cells c WHERE c.run_id = r.run_id) AS cells_done, "
        "r.seconds FROM diskne_runs r ORDER BY r.created_at DESC")


def get_run(run_id: str) -> dict:
    frame = _store().fetch_df("SELECT * FROM diskne_runs WHERE run_id = ?", [run_id])
    if frame.empty:
        raise ProbekitError(f"no DisKnE run {run_id!r}; `{command()} diskne show` lists them")
    row = frame.iloc[0].to_dict()
    for k in ("categories", "seeds", "finetune", "negatives"):
        row[k] = json.loads(row[k]) if row.get(k) else None
    return row


def running_cells() -> pd.DataFrame:
    """Cells stored so far by runs still running (the page's live progress per disease)."""
    return _store().fetch_df(
        "SELECT r.label AS model, c.disease, c.seed, c.category, round(100 * c.f1, 1) AS f1, c.support, c.epochs, "
        "round(c.seconds, 1) AS seconds FROM diskne_cells c JOIN diskne_runs r USING (run_id) "
        "WHERE r.status = 'running' ORDER BY r.created_at, c.disease, c.seed, c.category")


def load_cells(run_ids: Sequence[str]) -> pd.DataFrame:
    """The cells of ``run_ids`` in :data:`~probekit.diskne.results.CELL_COLUMNS` order; ``model`` is the
    run's label, so two variants of one model (e.g. hypothesis-only) compare side by side."""
    labels = {r: get_run(r)["label"] for r in run_ids}
    dup = {lab for lab in labels.values() if list(labels.values()).count(lab) > 1}
    labels = {r: f"{lab} ({r[-6:]})" if lab in dup else lab for r, lab in labels.items()}
    if not run_ids:
        return pd.DataFrame(columns=results.CELL_COLUMNS)
    marks = ", ".join(["?"] * len(run_ids))
    frame = _store().fetch_df(
        f'SELECT c.run_id, c.category, c.target, c.disease, c.seed, c.f1, c."precision", c.recall, c.tp, c.fp, '
        f"c.fn, c.tn, c.support FROM diskne_cells c WHERE c.run_id IN ({marks}) "
        f"ORDER BY c.run_id, c.category, c.disease, c.seed", list(run_ids))
    frame["model"] = frame["run_id"].map(labels)
    return frame[results.CELL_COLUMNS].reset_index(drop=True)


def delete_run(run_id: str) -> None:
    get_run(run_id)
    _store().delete_with_children("diskne_runs", run_id)
