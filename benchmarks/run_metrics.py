"""Scoring a stored run's gold ranks, as every page that lists or shows runs does on each rerun: the registry's
metrics (macro and micro, each counting) over a MedLAMA-sized run, against the per-query loop it replaced.

Why: the Benchmark page lists the stored runs and draws the full/hard table on every click; with one MedLAMA run
(19,000 queries) a per-query ``nanmin`` over Python lists made that 26 s, and the page showed a finished job ~25 s
after its run was stored. The target: equal values, and the scoring at least 20x the loop.

    .venv/bin/python benchmarks/run_metrics.py --queries 19000 --relations 19

Prints the seconds of both, the ratio, and asserts the values are equal first.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probekit import metrics  # noqa: E402
from probekit.metrics.accuracy import AVERAGES, COUNTINGS  # noqa: E402


def gold_ranks(n: int, *, seed: int = 0) -> list[list[int | None]]:
    """MedLAMA-like gold lists: 1-4 golds a query, a third of them unranked (None), ranks 1-10."""
    rng = np.random.default_rng(seed)
    return [[None if rng.random() < 0.33 else int(rng.integers(1, 11)) for _ in range(int(rng.integers(1, 5)))]
            for _ in range(n)]


def naive_value(ranks, relations, *, metric: str, average: str, counting: str) -> float:
    """The loop the vectorised scoring replaced: a list per query, its best (or each) rank, scored one by one."""
    m = metrics.get_metric(metric)
    items: dict[str, list[float]] = {}
    for golds, rel in zip(ranks, relations):
        rows = [np.nan if r is None else float(r) for r in golds]
        if counting == "query":
            best = np.nanmin(rows) if rows and not np.all(np.isnan(rows)) else np.nan
            scored = [float(m.score(np.array([best]))[0])]
        else:
            scored = [float(s) for s in m.score(np.array(rows, dtype=float))] if rows else []
        items.setdefault(rel, []).extend(scored)
    if average == "micro":
        flat = [s for v in items.values() for s in v]
        return sum(flat) / len(flat)
    return float(np.mean([sum(v) / len(v) for v in items.values() if v]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=19_000)
    ap.add_argument("--relations", type=int, default=19)
    args = ap.parse_args()
    ranks = gold_ranks(args.queries)
    relations = [f"r{i % args.relations}" for i in range(args.queries)]
    cases = [(name, avg, c) for name in metrics.metric_names() for avg in AVERAGES for c in COUNTINGS]

    t = time.perf_counter()
    fast = [metrics.metric_value(ranks, relations, metric=n, average=a, counting=c) for n, a, c in cases]
    t_fast = time.perf_counter() - t
    t = time.perf_counter()
    slow = [naive_value(ranks, relations, metric=n, average=a, counting=c) for n, a, c in cases]
    t_slow = time.perf_counter() - t
    np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=0)  # equal outputs first
    print(f"{args.queries:,} queries, {len(cases)} (metric, average, counting) values: "
          f"scoring {t_fast:.3f} s, per-query loop {t_slow:.3f} s, ratio {t_slow / t_fast:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
