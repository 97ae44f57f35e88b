"""Grid backends on this machine: the same grid on the local backend and on a 2-worker local Ray.

Prints the wall time of each, their ratio (target: ray >= 1.6x local on 2 cores for cells of >= 10 s), the
Ray overhead per cell (wall time beyond the cells' own compute spread over the workers; target <= 1 s), and
whether every cell's results are identical between the backends. Each backend starts from an empty
database and embedding cache, so neither reuses the other's work.

    python benchmarks/grid.py                                   # demo + 3 MedLAMA relations x 3 layers x 2 poolings
    python benchmarks/grid.py --datasets demo --layers 2 4 6    # a quick check
    python benchmarks/grid.py --local-threads 1                 # local on one thread (the per-cell baseline)

Run it alone: two torch processes timed at once on 2 cores slow each other down.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def _fresh_paths(tag: str) -> None:
    base = Path(tempfile.mkdtemp(prefix=f"pk-grid-{tag}-"))
    os.environ["PROBEKIT_DB"] = str(base / "probekit.duckdb")
    os.environ["PROBEKIT_CACHE_DIR"] = str(base / "cache")
    from probekit import index, store

    store.close_all()
    index.clear_memo()


def _results(cells) -> dict:
    from probekit.bench import runs

    return {key: runs.load_run(run_id).frame[["query_id", "gold_ranks", "top_ids", "top_scores"]]
            for key, run_id in zip(cells.cell_key, cells.run_id)}


def _differences(a: dict, b: dict) -> tuple[int, int, float]:
    """(cells that differ, queries whose gold ranks or top ids differ, max |top score difference|)."""
    import numpy as np

    cells = queries = 0
    worst = 0.0
    for key, fa in a.items():
        fb = b[key].set_index("query_id").loc[fa.query_id].reset_index()
        ranks = [str(x) != str(y) or list(i) != list(j)
                 for x, y, i, j in zip(fa.gold_ranks, fb.gold_ranks, fa.top_ids, fb.top_ids)]
        queries += sum(ranks)
        cells += any(ranks)
        for x, y in zip(fa.top_scores, fb.top_scores):
            if len(x) == len(y) and len(x):
                worst = max(worst, float(np.max(np.abs(np.asarray(x, float) - np.asarray(y, float)))))
    return cells, queries, worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--datasets", nargs="+", default=["demo", "medlama"])
    ap.add_argument("--relations", nargs="*", default=None,
                    help="MedLAMA relations as separate cells (default: 3 relations)")
    ap.add_argument("--layers", nargs="+", type=int, default=[2, 4, 6])
    ap.add_argument("--poolings", nargs="+", default=["cls", "mean"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-share", action="store_true",
                    help="every cell encodes on its own (no pass shared between the layers of a grid): cells of "
                         ">= 10 s, the issue's setting for the ratio")
    ap.add_argument("--local-threads", type=int, default=None,
                    help="torch threads of the local backend (default: torch's own, all cores); each Ray worker "
                         "uses cores/workers threads")
    args = ap.parse_args()

    from probekit.grid import GridSpec, run_grid

    relations = args.relations if args.relations is not None else [
        "disease_may_have_finding", "may_treat", "gene_product_encoded_by_gene"]
    specs = []
    for ds in args.datasets:
        data = {"name": "bench", "models": [args.model], "datasets": [ds],
                "probes": [{"name": "retrieval", "options": {"pooling": args.poolings}}], "layers": args.layers}
        if ds.startswith("medlama") and relations:
            specs.append(GridSpec.from_dict({**data, "relation_groups": [[r] for r in relations]}))
        else:
            specs.append(GridSpec.from_dict(data))
    n_cells = sum(len(s.cells()) for s in specs)
    print(f"grid: {n_cells} cells ({', '.join(args.datasets)}; layers {args.layers}; poolings {args.poolings}; "
          f"{'no ' if args.no_share else ''}shared encoding passes)")

    walls, results, cell_seconds = {}, {}, {}
    for backend in ("local", "ray"):
        _fresh_paths(backend)
        from probekit.grid.backends import make_backend

        options = {"workers": args.workers} if backend == "ray" else {}
        import torch

        if backend == "local":
            default_threads = torch.get_num_threads()
            torch.set_num_threads(args.local_threads or default_threads)
            threads = torch.get_num_threads()
            print(f"local: {torch.get_num_threads()} torch threads")
        if backend == "ray":
            import ray

            t = time.perf_counter()
            ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
            print(f"ray: started a local cluster in {time.perf_counter() - t:.1f} s (not counted below)")
        t0 = time.perf_counter()
        frames = []
        be = make_backend(backend, share_layers=not args.no_share, **options)  # one set of workers for all specs
        try:
            for spec in specs:
                res = run_grid(spec, backend=be)
                assert (res.cells.status == "done").all(), res.cells[["label", "error"]]
                frames.append(res.cells)
        finally:
            if hasattr(be, "shutdown"):
                be.shutdown()
        walls[backend] = time.perf_counter() - t0
        import pandas as pd

        cells = pd.concat(frames, ignore_index=True)
        cell_seconds[backend] = float(cells.seconds.sum())
        results[backend] = _results(cells)
        print(f"{backend:>5}: {walls[backend]:7.1f} s wall, cells' own compute {cell_seconds[backend]:7.1f} s, "
              f"{cells.seconds.median():.1f} s median per cell")
        if backend == "ray":
            ray.shutdown()
        else:
            torch.set_num_threads(default_threads)
        sys.stdout.flush()
    ratio = walls["local"] / walls["ray"]
    ideal = cell_seconds["ray"] / args.workers
    overhead = max(0.0, walls["ray"] - ideal) / n_cells
    n_diff, q_diff, worst = _differences(results["local"], results["ray"])
    same = n_diff == 0 and worst == 0.0
    print(f"ratio local/ray: {ratio:.2f}x (target >= 1.6x with 2 workers for cells of >= 10 s)")
    print(f"ray overhead per cell: {overhead:.2f} s (target <= 1 s)")
    print(f"results identical cell by cell: {same} ({len(results['ray'])} cells)")
    if not same:
        # the same arithmetic gives the same bits; another torch thread count sums in another order
        print(f"  {n_diff} cells differ: {q_diff} queries' gold ranks or top ids, max |score difference| {worst:.2e}"
              f"{' (local ran with another thread count than the Ray workers)' if threads != 1 else ''}")
    return 0 if same or threads != 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
