"""The grid driver: hands cells to a backend, stores each finished cell as a benchmark run (single writer).

A grid's id is a hash of its spec, so running the same grid again continues it: cells whose run is
stored are skipped, failed and missing ones run. Each cell's outcome is an append-only event
(``grid_events``); a result whose settings match a stored run (a worker retried after the driver had
stored it, or the same cell in another grid) links that run instead of storing it twice.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pandas as pd

from ..errors import ProbekitError
from ..jobs import Cancelled, Job, Progress, no_progress
from ..metrics.registry import metric_names
from ..store import component_store
from .backends import make_backend
from .spec import Cell, GridSpec
from .work import CellResult, load_cell_dataset

COMPONENT = "grid"


def _store():
    return component_store(COMPONENT)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def grid_id_of(spec: GridSpec) -> str:
    text = json.dumps(spec.to_dict(), sort_keys=True, default=str)
    return "grid-" + hashlib.sha1(text.encode()).hexdigest()[:12]


def register(spec: GridSpec) -> str:
    """Record the grid and its cells (idempotent); returns its id."""
    gid = grid_id_of(spec)
    cells = spec.cells()
    with _store().transaction() as cur:
        if not cur.execute("SELECT 1 FROM grid_runs WHERE grid_id = ?", [gid]).fetchall():
            cur.execute("INSERT INTO grid_runs VALUES (?, ?, ?, ?, ?)",
                        [gid, spec.name, _now(), json.dumps(spec.to_dict(), sort_keys=True), len(cells)])
            cur.executemany("INSERT INTO grid_cells VALUES (?, ?, ?, ?, ?)",
                            [[gid, c.key, i, c.label, json.dumps(c.settings(), sort_keys=True)]
                             for i, c in enumerate(cells)])
    return gid


def cells_frame(grid_id: str) -> pd.DataFrame:
    """Every cell of a grid with its latest outcome: status (pending/done/failed), run, seconds, worker, error,
    and, when stored, the run's ``counting`` and the macro value of every registered metric (``macro acc@1``…
    ``macro MRR``) counted so."""
    frame = _store().fetch_df("""
        WITH last AS (
            SELECT * FROM (SELECT e.*, row_number() OVER (PARTITION BY cell_key ORDER BY event_id DESC) AS rn
                           FROM grid_events e WHERE grid_id = ?) WHERE rn = 1)
        SELECT c.position, c.cell_key, c.label, c.settings, coalesce(l.status, 'pending') AS status, l.run_id,
               l.seconds, l.worker, l.backend, l.error
        FROM grid_cells c LEFT JOIN last l USING (cell_key)
        WHERE c.grid_id = ? ORDER BY c.position""", [grid_id, grid_id])
    if frame.empty:
        get_grid(grid_id)  # unknown id: a clear error
    # labels as the code names cells now (a grid stored before a label rule changed reads like a new one)
    frame["label"] = [Cell.from_settings(json.loads(s)).label for s in frame["settings"]]
    from ..bench import runs

    stored = runs.list_runs()
    stored = stored[stored.run_id.isin(frame.run_id.dropna())]
    done_ids = set(stored.run_id)
    lost = (frame.status == "done") & ~frame.run_id.isin(done_ids)
    frame.loc[lost, "status"] = "pending"  # its run was deleted since: it runs again
    acc = stored.set_index("run_id")[["counting", *[f"macro {name}" for name in metric_names()]]]
    return frame.join(acc, on="run_id")


def get_grid(grid_id: str) -> dict:
    rows = _store().fetch("SELECT grid_id, name, created_at, spec, n_cells FROM grid_runs WHERE grid_id = ?",
                          [str(grid_id).strip()])
    if not rows:
        known = [r[0] for r in _store().fetch("SELECT grid_id FROM grid_runs ORDER BY created_at DESC LIMIT 5")]
        raise ProbekitError(f"unknown grid {grid_id!r}" + (f"; recent: {', '.join(known)}" if known else ""))
    gid, name, created, spec, n = rows[0]
    return {"grid_id": gid, "name": name, "created_at": created, "spec": json.loads(spec), "n_cells": n}


def list_grids() -> pd.DataFrame:
    return _store().fetch_df("""
        SELECT g.grid_id, g.name, g.created_at, g.n_cells,
               count(DISTINCT e.cell_key) FILTER (WHERE e.status = 'done') AS n_done
        FROM grid_runs g LEFT JOIN grid_events e USING (grid_id)
        GROUP BY ALL ORDER BY g.created_at DESC""")


def _record(grid_id: str, cell: Cell, status: str, *, run_id=None, error=None, seconds=None, worker=None,
            backend=None) -> None:
    with _store().transaction() as cur:
        cur.execute("INSERT INTO grid_events (grid_id, cell_key, status, run_id, error, seconds, worker, backend, "
                    "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [grid_id, cell.key, status, run_id, error, seconds, worker, backend, _now()])


def store_result(result: CellResult, *, label: str) -> str:
    """Store one computed cell as a benchmark run, or link the stored run with the same settings."""
    from ..bench import runs

    cell = result.cell
    dataset = load_cell_dataset(cell)
    settings = runs.settings_of(result.model, dataset, probe=cell.probe, options=cell.options, vocab=cell.vocab,
                                k=cell.k)
    existing = runs.find_run(settings)
    if existing:
        return existing
    return runs.save_run(result.rankings, model=result.model, dataset=dataset, probe=cell.probe,
                         options=cell.options, vocab=cell.vocab, k=cell.k, seconds=result.seconds,
                         timings=result.timings, label=label)


@dataclass
class GridResult:
    grid_id: str
    cells: pd.DataFrame
    seconds: float
    ran: int
    skipped: int

    @property
    def failed(self) -> int:
        return int((self.cells.status == "failed").sum())


def run_grid(spec: GridSpec, *, backend="local", progress: Progress | None = None,
             should_cancel: Callable[[], bool] | None = None, retry_failed: bool = True,
             **backend_options) -> GridResult:
    """Run every cell not yet stored; returns the grid's cells with their outcome.

    ``backend`` is ``local`` or ``ray`` (``address``, ``workers``, ``gpus_per_worker``, ``max_retries``;
    both take ``share_layers=False`` to encode every cell on its own), or a backend object made by
    :func:`~probekit.grid.backends.make_backend`, kept open after the grid (several grids on the same workers).
    """
    should_cancel = should_cancel or (lambda: False)
    report = progress or no_progress
    own = isinstance(backend, str)
    be = make_backend(backend, **backend_options) if own else backend
    gid = register(spec)
    before = cells_frame(gid)
    todo_keys = set(before.cell_key[before.status == "pending"])
    if retry_failed:
        todo_keys |= set(before.cell_key[before.status == "failed"])
    cells = [c for c in spec.cells() if c.key in todo_keys]
    total, done = len(spec.cells()), len(spec.cells()) - len(cells)
    report(done, total, f"{done} of {total} cells already stored" if done else "starting")
    t0 = time.perf_counter()
    try:
        for cell, result, error in be.run(cells, should_cancel=should_cancel,
                                          on_start=lambda c: report(done, total, f"running {c.label}")):  # noqa: B023
            if result is not None:
                try:
                    run_id = store_result(result, label=f"{spec.name} · {cell.label}")
                    _record(gid, cell, "done", run_id=run_id, seconds=result.seconds, worker=result.worker,
                            backend=be.name)
                except ProbekitError as e:
                    _record(gid, cell, "failed", error=str(e), backend=be.name)
            else:
                _record(gid, cell, "failed", error=error, backend=be.name)
            done += 1
            report(done, total, f"{'stored' if result is not None else 'failed'}: {cell.label}")
        if should_cancel():
            raise Cancelled("the grid was cancelled; stored cells are kept and the rest run next time")
    finally:
        if own and hasattr(be, "shutdown"):
            be.shutdown()
    return GridResult(gid, cells_frame(gid), time.perf_counter() - t0, ran=len(cells), skipped=total - len(cells))


def start_grid(spec: GridSpec, *, backend: str = "local", **options) -> Job:
    """A started background :class:`~probekit.jobs.Job` running :func:`run_grid`; ``result`` is the GridResult."""
    return Job(lambda progress, cancel: run_grid(spec, backend=backend, progress=progress, should_cancel=cancel,
                                                 **options), label="grid").start()
