"""The unit of work of a grid: one cell, computed anywhere (this process, a Ray worker), stored by the driver.

:func:`run_cell` is a pure function of the cell (and an optional already-loaded model): it returns the
rankings and a snapshot of the model, never touches the database, so any backend can run it and only
the driver writes DuckDB (one writer, whatever the number of workers).

A served model (``openai:URL#NAME``) has no weights to load: the worker builds its client, reaches the endpoint
itself and runs the canary there (:func:`load_cell_model`) each time it takes the model up, before scoring a
cell of it; a refused or unreachable server fails that cell in one line, and the grid goes on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from .. import backends, models
from ..datasets import load_dataset, load_spec
from ..errors import ProbekitError
from .spec import Cell


@dataclass(frozen=True)
class ModelInfo:
    """What storing a run needs to know of the model that produced it (picklable, no weights)."""

    id: str
    source: str
    revision: str
    device: object
    """A ``torch.device``; a served model's own (``remote``)."""
    label: str
    num_layers: int
    hidden_size: int
    has_mlm: bool
    spec: object
    meta: dict = field(default_factory=dict)

    @classmethod
    def of(cls, model) -> ModelInfo:
        device = model.device if getattr(model.device, "type", None) == "remote" else torch.device(model.device)
        return cls(id=model.id, source=model.source, revision=model.revision, device=device,
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


def api_keys(cells) -> dict[str, str]:
    """{variable: key} for the key variables (``api_key_env``) the cells name that are set here: the driver hands
    them to the workers with their cells (a worker's own environment is the fallback), and stores none."""
    names = {c.served["api_key_env"] for c in cells if c.served.get("api_key_env")}
    return {n: os.environ[n] for n in sorted(names) if os.environ.get(n)}


def load_cell_model(cell: Cell, *, device: str | None = None, keys: Mapping[str, str] | None = None):
    """The cell's model: loaded, or for a served model its client with the cell's own tokenizer and key, checked
    by the canary against its endpoint from here."""
    if not cell.served:
        return models.load(cell.model, device=device)
    var = cell.served.get("api_key_env")
    key = ((keys or {}).get(var) or os.environ.get(var)) if var else None
    if var and not key:
        raise ProbekitError(f"{cell.model}: its key variable {var} is not set where the grid runs (nor on the worker)")
    return backends.load(cell.model, companion_loader=lambda other: models.load(other, device=device),
                         tokenizer=cell.served.get("tokenizer"), api_key=key)


def run_cell(cell: Cell, *, model=None, device: str | None = None, worker: str = "local",
             share_layers: tuple[int, ...] = ()) -> CellResult:
    """Compute one cell: the benchmark runner over the cell's dataset, nothing stored.

    ``model`` is a loaded model to reuse (a worker keeps one per model id); otherwise the cell's model
    is loaded here and released after. ``share_layers`` are the layers of the cell's siblings in the grid
    (:func:`probekit.grid.spec.sibling_layers`): the encoding pass computes and caches them too.
    """
    from ..bench import runs

    own = model is None
    if own:
        model = load_cell_model(cell, device=device)
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
