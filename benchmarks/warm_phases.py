"""Where one warm ``probekit bench`` call spends its wall time, phase by phase (no profiler overhead).

Runs the warm bench command in this process with a timer around each named step (imports, dataset read, the
score products, top-k, gold counting, listed scores, the tie rule, the results frame, metrics and intervals) and
prints the seconds of each. Run it after ``benchmarks/warm_bench.py`` filled a cache (every vector cached), on an
otherwise idle machine:

    PROBEKIT_CACHE_DIR=/tmp/pkwarm/cache PROBEKIT_DB=/tmp/pkwarm/runs.duckdb \\
        .venv/bin/python benchmarks/warm_phases.py

One call per process (a second call here would find the vectors and the index memoised, which a new process does
not). Steps nest (the products, top-k and counting are parts of ranking), so the column does not add up to the total.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="medlama")
    p.add_argument("--set", dest="which", default="hard")
    p.add_argument("--model", default="default")
    args = p.parse_args()

    t = time.perf_counter()
    from probekit import index, index_rank, metrics, probes  # noqa: F401  # every probe: what the command line imports
    from probekit.bench import runner
    from probekit.cli import bench as cli_bench
    from probekit.cli.main import main as cli_main
    imports = time.perf_counter() - t
    seconds: dict[str, list[float]] = {}

    def timed(owner, name: str, label: str) -> None:
        fn = getattr(owner, name)

        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                seconds[label][-1] += time.perf_counter() - t0
        seconds[label] = [0.0]
        setattr(owner, name, wrapper)

    for owner, name, label in [
        (cli_bench, "load_dataset_from_args", "dataset read"),
        (runner, "run_benchmark", "run (ranking and results frame)"),
        (index.EntityIndex, "rank", "  ranking (EntityIndex.rank)"),
        (index, "partial_scores", "    score products (float32 matmul)"),
        (index_rank.RunningTop, "add", "    running top-k"),
        (index_rank.GoldCounter, "count", "    gold counting"),
        (index, "pair_scores", "    listed scores (faiss pair kernel)"),
        (index, "top_k_by_rule", "    tie rule"),
        (runner, "rankings_frame", "  results frame (MedLAMA hardness per query)"),
        (metrics, "summary", "metrics summary"),
        (cli_bench, "run_intervals", "metric intervals"),
    ]:
        timed(owner, name, label)
    cmd = ["bench", "--dataset", args.dataset, "--set", args.which, "--probe", "retrieval", "--model", args.model,
           "--k", "10", "--format", "json", "--quiet"]
    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        if cli_main(cmd) != 0:
            raise SystemExit("the bench command failed")
    total = time.perf_counter() - t
    print(f"probekit {' '.join(cmd)}  (warm: every vector cached; one call, wall seconds)")
    print(f"  {'probekit imports (every probe, as the command line)':52s} {imports:6.2f} s")
    print(f"  {'the call':52s} {total:6.2f} s")
    for label, v in seconds.items():
        print(f"    {label:50s} {v[-1]:6.2f} s")
    print(f"  torch imported: {'torch' in sys.modules}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
