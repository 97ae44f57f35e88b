"""Before a talk: prepare every step (the warm-up the presenter runs when a tour opens) and the tour check, which
prepares each step twice and says what each costs and what is missing.

*Cold* is a step's first preparation in this process: the model is loaded unless the step before used the same
one, datasets and stored runs are read. *Warm* is the same step prepared again at once (model in memory, files
read). The presenter prepares every step once when the tour opens, so moving between steps costs neither.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ProbekitError
from ..jobs import Progress
from .steps import STEP_KINDS, Loader, Prepared, prepare
from .tour import Step, Tour


@dataclass
class Outcome:
    """One step prepared: its result, or the one-line reason it cannot be shown."""

    step: Step
    result: Prepared | None
    error: str | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class CheckRow:
    position: int
    step: Step
    ok: bool
    message: str
    cold_s: float
    warm_s: float | None


def _one(step: Step, load_model: Loader) -> Outcome:
    t0 = time.perf_counter()
    try:
        result = prepare(step, load_model)
        error = None
    except ProbekitError as e:
        result, error = None, str(e)
    except (MemoryError, RuntimeError) as e:  # out of memory on the device, a model that cannot run this step
        result, error = None, f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    return Outcome(step, result, error, time.perf_counter() - t0)


def warm_up(tour: Tour, load_model: Loader, *, progress: Progress | None = None) -> list[Outcome]:
    """Every step of ``tour`` prepared once, in order (``progress(done, total, stage)`` after each)."""
    out: list[Outcome] = []
    total = len(tour.steps)
    for i, step in enumerate(tour.steps):
        if progress is not None:
            progress(i, total, f"Preparing step {i + 1}/{total}: {step.title}")
        out.append(_one(step, load_model))
    if progress is not None:
        progress(total, total, "Ready")
    return out


def check_tour(tour: Tour, load_model: Loader, *, progress: Progress | None = None) -> list[CheckRow]:
    """Each step prepared cold then warm: whether it can be shown (else what is missing), and both times."""
    rows = []
    total = len(tour.steps)
    for i, step in enumerate(tour.steps):
        if progress is not None:
            progress(i, total, f"Checking step {i + 1}/{total}: {step.title}")
        cold = _one(step, load_model)
        warm = _one(step, load_model) if cold.ok else None
        label = STEP_KINDS[step.page].label if step.page in STEP_KINDS else step.page
        message = f"{label}: {cold.result.summary}" if cold.ok and cold.result else f"{label}: {cold.error}"
        rows.append(CheckRow(i + 1, step, cold.ok, message, cold.seconds, warm.seconds if warm else None))
    if progress is not None:
        progress(total, total, "Checked")
    return rows


def check_frame(rows: Sequence[CheckRow]):
    """The check as a table (the page and ``probekit tour check --format json``)."""
    import pandas as pd

    return pd.DataFrame({"step": [r.position for r in rows], "title": [r.step.title for r in rows],
                         "status": ["ok" if r.ok else "MISSING" for r in rows],
                         "cold s": [round(r.cold_s, 2) for r in rows],
                         "warm s": [None if r.warm_s is None else round(r.warm_s, 2) for r in rows],
                         "what it shows": [r.message for r in rows]})
