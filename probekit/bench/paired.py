"""Two stored runs compared on their shared queries (:mod:`probekit.metrics.paired`): the one call behind
``probekit runs compare`` and the Compare page's "Is the difference real?" section.

A finished run never changes, so a comparison is kept per (runs, their sizes, settings): moving a widget on the
page that does not change these costs no resampling.
"""

from __future__ import annotations

import pandas as pd

from ..memo import Memo
from ..metrics.compare import query_keys
from ..metrics.paired import PairedComparison, compare_paired
from .results import load_run
from .views import sweep_points

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


def shared_queries(run_a: str, run_b: str) -> int:
    """How many queries two stored runs both hold (same relation, subject, template and golds, the key every
    comparison pairs on): 0 means there is nothing to compare them on."""
    a, b = load_run(run_a), load_run(run_b)
    return len(set(query_keys(a.frame)) & set(query_keys(b.frame)))


def default_pair(listed: pd.DataFrame, sweeps: pd.DataFrame | None = None, *, look: int = 12) -> list[str]:
    """The newest two finished, sweep-free runs (of ``listed``, newest first, as ``list_runs`` gives) that share
    queries, newest first; else the newest such pair among all finished runs, sweep points too (a store whose runs
    are all of one rewiring run's checkpoints and its base model is all sweep points, and those runs are just as
    comparable); ``[]`` when no two of the newest ``look`` share queries. Newest pair: the one whose older run is
    the newest (then the newer of the two), so a free-text run stored after two demo runs opens on the demo pair
    instead of a pair with nothing in common. Runs of different datasets are not loaded to find out."""
    done = listed[listed["status"] == "done"]
    points = list(sweep_points(sweeps))
    for own in (done[~done["run_id"].isin(points)].head(look), done.head(look)):
        ids, data = own["run_id"].tolist(), own["dataset"].tolist()
        for j in range(1, len(ids)):
            for i in range(j):
                if data[i] == data[j] and shared_queries(ids[i], ids[j]):
                    return [ids[i], ids[j]]
    return []
