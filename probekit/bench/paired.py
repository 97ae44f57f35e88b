"""Two stored runs compared on their shared queries (:mod:`probekit.metrics.paired`): the one call behind
``probekit runs compare`` and the Compare page's "Is the difference real?" section.

A finished run never changes, so a comparison is kept per (runs, their sizes, settings): moving a widget on the
page that does not change these costs no resampling.
"""

from __future__ import annotations

import pandas as pd

from ..memo import Memo
from ..metrics.paired import PairedComparison, compare_paired
from .results import load_run

_DONE: Memo[tuple, PairedComparison] = Memo(max_entries=16)


def _depth(meta: dict) -> int | None:
    value = meta.get("answers_per_query")
    return None if value is None or pd.isna(value) else int(value)


def compare_runs(run_a: str, run_b: str, *, metric: str = "acc@10", which: str | None = None,
                 confidence: float = 0.95, resamples: int = 2000, seed: int = 0,
                 correction: str = "holm") -> PairedComparison:
    """Run ``run_a`` against ``run_b`` (the baseline) on the queries both hold: a paired test and a bootstrap
    interval of the difference per relation, macro and micro. ``which``: the subset (default the runs' full set,
    or ``hard`` for hard-set runs); ``resamples``: bootstrap draws and sign flips alike."""
    a, b = load_run(run_a), load_run(run_b)
    which = which or ("hard" if a.hard_set else "full")
    key = (a.run_id, len(a.frame), b.run_id, len(b.frame), metric, which, confidence, resamples, seed, correction)
    found = _DONE.get(key)
    if found is None:
        found = compare_paired(a.frame, b.frame, metric=metric, which=which, hard_set=(a.hard_set, b.hard_set),
                               confidence=confidence, n_boot=resamples, n_perm=resamples, seed=seed,
                               correction=correction, depths=(_depth(a.meta), _depth(b.meta)))
        _DONE.put(key, found)
    return found
