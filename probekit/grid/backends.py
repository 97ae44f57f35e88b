"""Where grid cells run: ``local`` (this process, one cell at a time) or ``ray`` (a Ray cluster).

Both yield ``(cell, result, error)`` as cells finish; neither writes the database (the driver does).
Models are loaded once per worker: a worker keeps its current model while consecutive cells use it
(cells come models-outermost) and releases it when a cell needs another.

Ray is an optional dependency (``pip install -r requirements-ray.txt`` or ``probekit[ray]``), imported
only here, only by :class:`RayBackend`. Without an address, ``ray.init`` starts a local Ray on this
machine with ``workers`` CPUs; ``address="ray://host:10001"`` (or ``RAY_ADDRESS``) joins a cluster, whose
nodes need probekit, its dependencies and the data at the same paths (``PROBEKIT_*`` variables are passed on).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from .. import models
from ..backends import is_backend_id
from ..errors import ProbekitError
from ..ray_session import one_line, ray_address, start_ray, stop_ray
from .spec import Cell, sibling_layers
from .work import CellResult, api_keys, load_cell_model, run_cell

if TYPE_CHECKING:
    from ..models import LoadedModel

BACKENDS = ("local", "ray")
Outcome = tuple[Cell, CellResult | None, str | None]


class _ModelSlot:
    """One loaded model at a time: kept while cells use it, released when a cell needs another. A served model is
    held the same way: its client, checked once by the canary, serves every cell of it on this worker."""

    def __init__(self, device: str | None = None):
        self.device = device
        self.model_id: tuple | None = None
        self.model: LoadedModel | None = None
        self.failed: dict[tuple, str] = {}  # model -> why it did not load, for the rest of this run
        self.run_token: str | None = None

    def start_run(self, token: str | None) -> None:
        """A Ray worker outlives a run of cells (a backend kept open for several grids): a new run's token forgets
        the earlier run's load failures, so each run tries every model again."""
        if token != self.run_token:
            self.failed.clear()
            self.run_token = token

    def get(self, cell: Cell, keys: Mapping[str, str] | None = None) -> LoadedModel:
        """The cell's model, loaded once per run of cells: a model that failed to load fails its later cells at
        once with the same line (a server that is down cost each cell the client's retries, ~7.5 s; the next run
        of the grid tries the failed cells again)."""
        which = (cell.model, tuple(sorted(cell.served.items())))
        if which in self.failed:
            raise ProbekitError(self.failed[which])
        if self.model is None or self.model_id != which:
            self.release()
            try:
                self.model = load_cell_model(cell, device=self.device, keys=keys)
            except Exception as e:
                self.failed[which] = (f"{one_line(e)} (not tried again in this run: the model failed to load for "
                                      "an earlier cell)")
                raise
            self.model_id = which
        return self.model

    def release(self) -> None:
        if self.model is not None:
            models.release(self.model)
        self.model_id, self.model = None, None


class LocalBackend:
    """Cells one after another in this process (the default: nothing to install or start)."""

    name = "local"

    def __init__(self, *, device: str | None = None, share_layers: bool = True):
        self.device, self.share_layers = device, share_layers

    def run(self, cells: Sequence[Cell], *, should_cancel: Callable[[], bool] = lambda: False,
            on_start: Callable[[Cell], None] | None = None) -> Iterator[Outcome]:
        slot = _ModelSlot(self.device)
        siblings = sibling_layers(cells) if self.share_layers else {}
        try:
            for cell in cells:
                if should_cancel():
                    return
                if on_start:
                    on_start(cell)
                try:
                    yield cell, run_cell(cell, model=slot.get(cell), worker="local",
                                         share_layers=siblings.get(cell.share_key, ())), None
                except Exception as e:  # noqa: BLE001 - one cell's failure is reported, the grid goes on
                    yield cell, None, one_line(e)
        finally:
            slot.release()


def next_cell(pending: Sequence[Cell], *, busy: set, last: Cell | None, waiting_ok: bool,
              key: Callable[[Cell], object] = lambda c: c.share_key) -> int | None:
    """Which pending cell an idle worker takes (its index), or None to wait for a running one.

    First a cell sharing the worker's last cell's encodings (in its memory already), then one of the same
    model (no reload) whose encodings no other worker is computing now, then any such cell. When every
    pending cell shares encodings with a running one, the worker waits (``waiting_ok``): that cell will
    find them in the cache instead of computing them a second time.

    >>> a2, a4 = Cell("m", "d", "retrieval", {"layer": 2}), Cell("m", "d", "retrieval", {"layer": 4})
    >>> b2 = Cell("m", "d", "retrieval", {"layer": 2, "pooling": "cls"})
    >>> next_cell([a4, b2], busy={a2.share_key}, last=None, waiting_ok=True)
    1
    >>> next_cell([a4], busy={a2.share_key}, last=None, waiting_ok=True) is None
    True
    >>> next_cell([a4, b2], busy={b2.share_key}, last=a2, waiting_ok=True)
    0
    """
    if not pending:
        return None
    if last is not None:
        same = [n for n, c in enumerate(pending) if key(c) == key(last)]
        if same:
            return same[0]
    free = [n for n, c in enumerate(pending) if key(c) not in busy]
    if last is not None:
        for n in free:
            if pending[n].model == last.model:
                return n
    if free:
        return free[0]
    return None if waiting_ok else 0


def _worker_class(ray):
    @ray.remote
    class GridWorker:
        """A Ray actor that keeps one model loaded and computes cells with it."""

        def __init__(self, threads: int, device: str | None):
            import torch

            torch.set_num_threads(max(1, threads))
            self.slot = _ModelSlot(device)
            self.name = f"ray:{os.getpid()}"

        def run(self, settings: dict, share_layers: tuple[int, ...] = (), keys: dict | None = None,
                run_token: str | None = None):
            cell = Cell.from_settings(settings)
            self.slot.start_run(run_token)
            try:
                return run_cell(cell, model=self.slot.get(cell, keys), worker=self.name,
                                share_layers=tuple(share_layers)), None
            except Exception as e:  # noqa: BLE001 - reported to the driver as the cell's error
                return None, one_line(e)

        def pid(self) -> int:
            return os.getpid()

    return GridWorker


def worker_gpus(cells: Sequence[Cell], *, device: str | None, gpus_per_worker: float | None, cluster_gpus: float,
                workers: int) -> float:
    """GPUs each Ray worker asks for: none on ``device='cpu'`` or for cells that are all served models (requests
    only), else ``gpus_per_worker`` when given, else the cluster's GPUs shared out (at most one each).

    >>> worker_gpus([], device=None, gpus_per_worker=None, cluster_gpus=4, workers=2)
    1.0
    >>> worker_gpus([], device=None, gpus_per_worker=None, cluster_gpus=1, workers=4)
    0.25
    """
    if device == "cpu" or (cells and all(is_backend_id(c.model) for c in cells)):
        return 0.0
    if gpus_per_worker is not None:
        return float(gpus_per_worker)
    return min(1.0, cluster_gpus / workers) if cluster_gpus else 0.0


class RayBackend:
    """Cells spread over Ray actors; failed workers are restarted and their cell retried (``max_retries``)."""

    name = "ray"

    def __init__(self, *, address: str | None = None, workers: int = 2, gpus_per_worker: float | None = None,
                 max_retries: int = 2, device: str | None = None, share_layers: bool = True):
        if workers < 1:
            raise ProbekitError(f"workers must be at least 1, got {workers}")
        self.address = ray_address(address)
        self.workers, self.max_retries, self.device = int(workers), int(max_retries), device
        self.gpus_per_worker, self.share_layers = gpus_per_worker, share_layers
        self.actors: list = []
        self.actor_gpus = 0.0

    def _ray(self):
        return start_ray(address=self.address, workers=self.workers)

    def start(self, cells: Sequence[Cell] = ()) -> list:
        """The workers, started once. Workers for ``cells`` that are all served models ask Ray for no GPU (they send
        requests; the engine serving the model may need the cluster's GPUs); workers started so are replaced by
        ones with GPUs when a later run on this backend has a model to load."""
        ray = self._ray()
        gpus = worker_gpus(cells, device=self.device, gpus_per_worker=self.gpus_per_worker,
                           cluster_gpus=ray.cluster_resources().get("GPU", 0), workers=self.workers)
        if self.actors and gpus > self.actor_gpus:
            for actor in self.actors:
                ray.kill(actor)
            self.actors = []
        if not self.actors:
            cpus = ray.cluster_resources().get("CPU", self.workers)
            threads = max(1, int(cpus // self.workers))
            worker = _worker_class(ray)
            self.actors = [worker.options(num_cpus=1, num_gpus=gpus, max_restarts=self.max_retries,
                                          max_task_retries=self.max_retries).remote(threads, self.device)
                           for _ in range(self.workers)]
            self.actor_gpus = gpus
        return self.actors

    def run(self, cells: Sequence[Cell], *, should_cancel: Callable[[], bool] = lambda: False,
            on_start: Callable[[Cell], None] | None = None) -> Iterator[Outcome]:
        ray = self._ray()
        actors = self.start(cells)
        pending = list(cells)
        siblings = sibling_layers(cells) if self.share_layers else {}
        keys = api_keys(cells)
        token = uuid.uuid4().hex  # this run's: a worker forgets an earlier run's load failures
        # what a cell encodes: with shared layers one pass serves every layer of its share key
        encodes = (lambda c: c.share_key) if self.share_layers else (lambda c: (c.share_key, c.layer))
        last: dict[int, Cell | None] = {i: None for i in range(len(actors))}
        running: dict = {}  # object ref -> (cell, actor index)
        idle = list(range(len(actors)))

        def fill() -> None:
            # give idle workers a cell; a worker waits rather than encode what another is encoding now
            for i in list(idle):
                busy = {encodes(c) for c, _ in running.values()}
                j = next_cell(pending, busy=busy, last=last[i], waiting_ok=bool(running), key=encodes)
                if j is None:
                    continue
                cell = pending.pop(j)
                last[i] = cell
                idle.remove(i)
                if on_start:
                    on_start(cell)
                var = cell.served.get("api_key_env")
                ref = actors[i].run.remote(cell.settings(), siblings.get(cell.share_key, ()),
                                           {var: keys[var]} if var in keys else None, token)
                running[ref] = (cell, i)

        fill()
        while running:
            if should_cancel():
                for ref in running:
                    ray.cancel(ref, force=False)
                return
            ready, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
            for ref in ready:
                cell, i = running.pop(ref)
                try:
                    result, error = ray.get(ref)
                except Exception as e:  # noqa: BLE001 - the actor died more often than max_retries
                    result, error = None, f"worker lost: {one_line(e)}"
                idle.append(i)
                yield cell, result, error
            fill()

    def shutdown(self) -> None:
        stop_ray(self.actors, address=self.address)
        self.actors = []


def make_backend(name: str, **options):
    if name == "local":
        return LocalBackend(device=options.get("device"), share_layers=options.get("share_layers", True))
    if name == "ray":
        return RayBackend(**options)
    raise ProbekitError(f"unknown backend {name!r}; available: {', '.join(BACKENDS)}")


def wait_for(predicate: Callable[[], bool], timeout: float) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds (tests and benchmarks)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()
