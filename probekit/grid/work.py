"""The unit of work of a grid: one cell, computed anywhere (this process, a Ray worker), stored by the driver.

:func:`run_cell` is a pure function of the cell (and an optional already-loaded model): it returns the
rankings and a snapshot of the model, never touches the database, so any backend can run it and only
the driver writes DuckDB (one writer, whatever the number of workers).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from ..datasets import load_dataset, load_spec
from ..errors import ProbekitError
from .spec import Cell


@dataclass(frozen=True)
class ModelInfo:
    """What storing a run needs to know of the model that produced it (picklable, no weights)."""

    id: str
    source: str
    revision: str
    device: torch.device
    label: str
    num_layers: int
    hidden_size: int
    has_mlm: bool
    spec: object
    meta: dict = field(default_factory=dict)

    @classmethod
    def of(cls, model) -> ModelInfo:
        return cls(id=model.id, source=model.source, revision=model.revision, device=torch.device(model.device),
                   label=model.label, num_layers=model.num_layers, hidden_size=model.hidden_size,
                   has_mlm=model.has_mlm, spec=model.spec,
                   meta={k: v for k, v in model.meta.items() if not k.startswith("_")})

    def describe(self) -> dict:
        return {"model": self.id, "source": self.source, "revision": self.revision, "device": str(self.device),
                "layers": self.num_layers, "hidden": self.hidden_size, "mlm": self.has_mlm}


@dataclass
class CellResult:
    cell: Cell
    model: ModelInfo
    rankings: list
    seconds: float
    timings: dict
    worker: str = "local"


def load_cell_dataset(cell: Cell):
    """The cell's dataset; a relation filter keeps the set's own candidate vocabulary."""
    from pathlib import Path

    spec = cell.dataset
    if spec.lower().endswith((".csv", ".jsonl", ".json")) or Path(spec).expanduser().is_file():
        dataset = load_dataset("triples", path=spec)  # a user's own facts file
    else:
        dataset = load_spec(spec)
    if cell.relations:
        unknown = [r for r in cell.relations if r not in dataset.relations]
        if unknown:
            raise ProbekitError(f"unknown relation {unknown[0]!r} in dataset {cell.dataset!r}; "
                                f"available: {', '.join(dataset.relations)}")
        select = getattr(dataset, "filter", None)
        if select is None:
            raise ProbekitError("relation filters need Dataset.filter (keeps the vocabulary); update probekit")
        dataset = select(relations=list(cell.relations))
    return dataset


def run_cell(cell: Cell, *, model=None, device: str | None = None, worker: str = "local",
             share_layers: tuple[int, ...] = ()) -> CellResult:
    """Compute one cell: the benchmark runner over the cell's dataset, nothing stored.

    ``model`` is a loaded model to reuse (a worker keeps one per model id); otherwise the cell's model
    is loaded here and released after. ``share_layers`` are the layers of the cell's siblings in the grid
    (:func:`probekit.grid.spec.sibling_layers`): the encoding pass computes and caches them too.
    """
    from .. import models
    from ..bench import runs

    own = model is None
    if own:
        model = models.load(cell.model, device=device)
    try:
        dataset = load_cell_dataset(cell)
        t0 = time.perf_counter()
        run = runs.run_benchmark(model, dataset, probe=cell.probe, options=cell.options, vocab=cell.vocab,
                                 k=cell.k, save=False, reuse=False, share_layers=share_layers)
        seconds = time.perf_counter() - t0
        return CellResult(cell=cell, model=ModelInfo.of(model), rankings=run.rankings(), seconds=seconds,
                          timings=dict(run.meta.get("timings") or {}), worker=worker)
    finally:
        if own:
            models.release(model)
