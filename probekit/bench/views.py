"""What the Benchmark, Compare and Layers pages show, shaped here (pure pandas, no streamlit) so the pages stay
thin: run picker labels (sweep points grouped under their sweep), default selections, which query subsets a
set of runs has (``hard-in-full`` vs ``hard``), percent tables that say "–" instead of None, and
one vocabulary for options left at their defaults.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import pandas as pd

from ..datasets import SUBSETS as SUBSET_TEXT
from ..metrics.compare import SUBSETS, run_subsets

MISSING = "–"
"""Shown for a value that does not exist (a relation a run lacks, a subset a run does not have)."""
NO_HIT = "no hit"
"""Shown for a rank when no gold answer is among the candidates ranked."""
DEFAULT_TEXT = {"pooling": "model's default", "layer": "last layer", "preset": "none", "beam": "k",
                "max_length": "model's limit"}
"""How an option left at its default (None) reads on every page: one vocabulary."""


def option_text(name: str, value) -> str:
    """``value`` of option ``name`` as the pages write it.

    >>> option_text("pooling", None), option_text("layer", None), option_text("similarity", "l2")
    ("model's default", 'last layer', 'l2')
    """
    return DEFAULT_TEXT.get(name, "default") if value is None else str(value)


def options_text(options, *, names: Sequence[str] = ("preset", "pooling", "layer", "similarity")) -> str:
    """A run's options (a dict or its stored JSON) as one readable line, never a Python dict.

    >>> options_text({"pooling": None, "similarity": "cosine", "max_length": 50, "fast": False})
    "pooling model's default, similarity cosine"
    >>> options_text('{"pooling": "cls", "layer": 6}')
    'pooling cls, layer 6'
    """
    if isinstance(options, str):
        try:
            options = json.loads(options)
        except ValueError:
            return options
    options = dict(options or {})
    return ", ".join(f"{n} {option_text(n, options[n])}" for n in names
                     if n in options and not (n == "preset" and options[n] is None))


def layer_caption(meta: dict) -> str:
    """One line under the Layers page: model, dataset, options in words, candidates, time.

    >>> layer_caption({"model": "m", "dataset": "demo", "options": {"pooling": "cls", "similarity": "l2"},
    ...                "vocab": "heads+tails", "seconds": 1.25})
    'm · demo · pooling cls, similarity l2 · candidates heads+tails · 1.2 s'
    """
    return (f"{meta.get('model')} · {meta.get('dataset')} · {options_text(meta.get('options'))} · "
            f"candidates {meta.get('vocab')} · {meta.get('seconds') or 0:.1f} s")


# ---------------------------------------------------------------- run pickers
def sweep_points(sweeps: pd.DataFrame | None) -> dict[str, tuple[str, int]]:
    """``{run_id: (sweep label, step)}`` of the stored sweep points (:func:`probekit.rewire.stored_sweeps`)."""
    if sweeps is None or sweeps.empty:
        return {}
    return {r.run_id: (r.sweep, int(r.step)) for r in sweeps.itertuples()}


def run_names(listed: pd.DataFrame, sweeps: pd.DataFrame | None = None) -> dict[str, str]:
    """Picker labels by run id, in picker order: ordinary runs (as listed, newest first), then sweep points
    grouped under their sweep, by step, labelled ``sweep <sweep> › step N`` (a sweep's points are
    kept but never mixed with ordinary runs).

    A label is the run's identity only, never its state (status, progress): the browser sends a multiselect's
    value back as the text it showed, so a label that changed under a selected run would match no option.

    >>> listed = pd.DataFrame({"run_id": ["run-b", "run-a", "run-p"], "label": ["B", "A", "P"], "k": 10,
    ...                        "vocab": "tails", "status": "done"})
    >>> sweeps = pd.DataFrame({"sweep": ["rw1 · demo"], "step": [3], "run_id": ["run-p"]})
    >>> list(run_names(listed, sweeps).values())
    ['B · k=10 · tails [run-b]', 'A · k=10 · tails [run-a]', 'sweep rw1 · demo › step 3 [run-p]']
    """
    points = sweep_points(sweeps)
    info = listed.set_index("run_id")
    names, grouped = {}, []
    for r in listed["run_id"]:
        if r in points:
            grouped.append(r)
            continue
        names[r] = f"{info.label[r]} · k={info.k[r]} · {info.vocab[r]} [{r[-6:]}]"
    order = {s: i for i, s in enumerate(dict.fromkeys(points[r][0] for r in grouped))}
    for r in sorted(grouped, key=lambda r: (order[points[r][0]], points[r][1])):
        names[r] = f"sweep {points[r][0]} › step {points[r][1]} [{r[-6:]}]"
    return names


def default_runs(listed: pd.DataFrame, sweeps: pd.DataFrame | None = None, *, n: int = 1) -> list[str]:
    """The newest ``n`` finished runs that are not sweep points (a sweep's points never become the default
    selection); the newest sweep-free runs of any status when none is finished.

    >>> listed = pd.DataFrame({"run_id": ["p", "a", "b"], "status": ["done", "running", "done"]})
    >>> default_runs(listed, pd.DataFrame({"sweep": ["s"], "step": [1], "run_id": ["p"]}))
    ['b']
    """
    points = sweep_points(sweeps)
    own = listed[~listed["run_id"].isin(list(points))]
    done = own[own["status"] == "done"]["run_id"].tolist()
    return (done or own["run_id"].tolist())[:n]


def keep_known(selected: Iterable[str] | None, names: dict[str, str]) -> list[str]:
    """The ids of ``selected`` (e.g. from a share link) that are still stored, in order, without repeats."""
    return [r for r in dict.fromkeys(selected or []) if r in names]


# ---------------------------------------------------------------- subsets
def subsets_of(hard_sets: Iterable[bool]) -> list[str]:
    """The subsets a selection of runs has, in :data:`SUBSETS` order (``hard_sets``: per run, on the hard set?).

    >>> subsets_of([False]), subsets_of([True]), subsets_of([False, True])
    (['full', 'hard-in-full'], ['hard'], ['full', 'hard-in-full', 'hard'])
    """
    have = {s for h in hard_sets for s in run_subsets(bool(h))}
    return [s for s in SUBSETS if s in have]


def subset_note(which: str) -> str:
    """What a subset label means, for the caption under a Queries switch."""
    return f"**{which}**: {SUBSET_TEXT[which]}."


# ---------------------------------------------------------------- tables
def percent(frame: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    """A copy with ``columns`` (fractions) in percent."""
    out = frame.copy()
    for c in columns:
        out[c] = out[c].astype(float) * 100
    return out


def styled(frame: pd.DataFrame, *, numbers: Iterable[str] = (), ranks: Iterable[str] = (), digits: int = 2):
    """``frame`` for ``st.dataframe`` with ``numbers`` to ``digits`` decimals, "–" where a value is missing and
    "no hit" for a missing rank; the values stay numbers (sorting, exports), only their display changes.
    """
    numbers, ranks = [c for c in numbers if c in frame.columns], [c for c in ranks if c in frame.columns]
    style = frame.style.format(na_rep=MISSING)
    if numbers:
        style = style.format(f"{{:.{digits}f}}", subset=numbers, na_rep=MISSING)
    if ranks:
        style = style.format("{}", subset=ranks, na_rep=NO_HIT)
    return style
