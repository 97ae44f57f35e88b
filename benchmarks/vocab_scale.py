"""Searching vocabularies of 23k to millions of names: build time, peak memory, query latency, recall, gold ranks.

Synthetic 384-d name vectors (the MiniLM width) are written as float16 ``.npy`` shards of 50,000 rows into a
temporary folder (``--dir``), as the vocabulary store keeps them, then memory-mapped. They are *clustered*
(real name embeddings are: synonyms and variants sit together; uniform noise is every approximate index's worst
case), and overlapping: ``n / 50`` centres ~ N(0, 1), each name = its centre + N(0, 1) noise (two names of one
centre: cosine ~0.5), 1% of the names repeated as case variants (twins). A query is a stored name + N(0, 0.5^2)
noise (a masked query lies near its answer, not on it); its gold is that name.

Each measurement runs in a fresh child process (one thread unless ``--threads``: BLAS, faiss, torch), peak RSS
read from ``/proc/self/status`` (VmHWM, reset after imports and opening the shards) and reported as a ratio to
the vectors' bytes (the float16 shards):

- ``entity-old`` / ``entity-new`` (up to ``--entity-max`` names): today's in-memory ``EntityIndex`` built from
  float32 vectors already in memory, with twins found by ``np.unique`` over rows (the previous code, kept here as
  the baseline) or by row hashes (:func:`probekit.index.twin_groups`); ratio to the float32 vectors;
- ``exact``: :class:`probekit.vocab.search.ShardedIndex` streaming the shards: build, a warm live query (median of
  5 after one warm-up), exact gold ranks (and top-10) for ``--queries`` queries;
- ``ivf-flat`` / ``ivf-pq`` / ``hnsw`` (hnsw up to ``--hnsw-max``): build, then per query-time setting (nprobe,
  ef_search) recall@10 against exact on 200 queries (the first 200 of the ``--queries`` sample, so another
  ``--queries`` measures other queries) and the warm live query latency (median of 20).

Absolute times depend on the machine's load (say it when quoting); the growth from one size to the next and the
ratios are what count.

    .venv/bin/python benchmarks/vocab_scale.py                         # 23k, 100k, 1M (~15 min on a loaded core)
    .venv/bin/python benchmarks/vocab_scale.py --sizes 23000 --queries 200   # quick look
    .venv/bin/python benchmarks/vocab_scale.py --sizes 10000000 --kinds exact --queries 100   # 7.7 GB of disk
    .venv/bin/python benchmarks/vocab_scale.py --sizes 1000000 --kinds ivf-flat --tune   # what `vocab build` picks
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DIM, SHARD_ROWS, SEED = 384, 50_000, 0
NAME_NOISE, QUERY_NOISE, TWIN_FRACTION = 1.0, 0.5, 0.01
SETTINGS = {"ivf-flat": ("nprobe", [8, 16, 32, 64, 128, 256, 384, 512, 640, 768, 1024]),
            "ivf-pq": ("nprobe", [16, 32, 64, 128]),
            "hnsw": ("ef_search", [32, 64, 128, 256])}


THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _threads(n: int) -> None:
    for var in THREAD_VARS:
        os.environ[var] = str(n)


# ---------------------------------------------------------------- data
def _write_shards(folder: Path, n: int) -> list[Path]:
    """Clustered float16 shards for n names (kept in ``folder`` between runs)."""
    import numpy as np

    done = folder / "done.json"
    if done.is_file() and json.loads(done.read_text()) == {"n": n, "seed": SEED}:
        return sorted(folder.glob("shard_*.npy"))
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    rng = np.random.default_rng(SEED)
    centres = rng.normal(size=(max(1, n // 50), DIM)).astype(np.float32)
    n_twins = int(n * TWIN_FRACTION)
    unique = n - n_twins
    paths = []
    for i, r0 in enumerate(range(0, n, SHARD_ROWS)):
        rows = min(SHARD_ROWS, n - r0)
        x = np.empty((rows, DIM), dtype=np.float16)
        ids = np.arange(r0, r0 + rows)
        fresh = ids < unique
        m = int(fresh.sum())
        x[:m] = (centres[rng.integers(0, len(centres), m)]
                 + NAME_NOISE * rng.standard_normal((m, DIM), dtype=np.float32)).astype(np.float16)
        if m < rows:  # the twins: copies of the first names (shard 0 holds them)
            first = np.load(paths[0], mmap_mode="r") if paths else x
            x[m:] = first[(ids[m:] - unique) % min(len(first), SHARD_ROWS)]
        paths.append(folder / f"shard_{i:05d}.npy")
        np.save(paths[-1], x)
    done.write_text(json.dumps({"n": n, "seed": SEED}))
    return paths


def _queries(shards, n_queries: int, seed: int):
    """(n_queries, DIM) float32 queries near stored names, and their gold ids."""
    import numpy as np

    n = sum(len(s) for s in shards)
    rng = np.random.default_rng(seed)
    golds = np.sort(rng.choice(n, size=n_queries, replace=False))
    offsets = np.cumsum([0] + [len(s) for s in shards])
    rows = np.stack([shards[int(np.searchsorted(offsets, g, "right") - 1)][g - offsets[
        int(np.searchsorted(offsets, g, "right") - 1)]] for g in golds]).astype(np.float32)
    q = rows + QUERY_NOISE * rng.standard_normal(rows.shape, dtype=np.float32)
    perm = rng.permutation(n_queries)
    return q[perm], golds[perm]


# ---------------------------------------------------------------- child measurements
def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _reset_peak() -> int:
    Path("/proc/self/clear_refs").write_text("5")
    return _status("VmRSS")


class _Clock:
    """Wall and CPU seconds of a block (CPU: this process only, the fairer figure on a loaded machine)."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def _median_time(fn, repeats: int) -> tuple[float, float]:
    """Median (wall, CPU) seconds of ``fn`` over ``repeats`` runs after one warm-up."""
    fn()  # warm-up
    walls, cpus = [], []
    for _ in range(repeats):
        with _Clock() as c:
            fn()
        walls.append(c.wall)
        cpus.append(c.cpu)
    return statistics.median(walls), statistics.median(cpus)


def _child(task: dict) -> dict:
    import faiss
    import numpy as np
    import torch

    threads = int(task.get("threads", 1))
    faiss.omp_set_num_threads(threads)
    torch.set_num_threads(threads)
    from probekit import index as pindex
    from probekit.vocab.search import ShardedIndex

    shards = [np.load(p, mmap_mode="r") for p in task["paths"]]
    n = sum(len(s) for s in shards)
    vector_bytes = n * DIM * 2
    kind = task["kind"]
    out: dict = {"kind": kind, "n": n}
    if kind.startswith("entity-"):
        if kind == "entity-old":  # the previous twin detection: np.unique over whole rows
            def old_groups(hashes, rows_of):
                xb = hashes
                view = np.ascontiguousarray(xb).view(np.dtype((np.void, xb.shape[1] * 4))).ravel()
                _, group, sizes = np.unique(view, return_inverse=True, return_counts=True)
                multi = np.flatnonzero(sizes > 1)
                groups: dict[int, list[int]] = {}
                for i in np.flatnonzero(np.isin(group.ravel(), multi)).tolist():
                    groups.setdefault(int(group.ravel()[i]), []).append(i)
                return list(groups.values())
            pindex.row_hashes = lambda xb: xb  # type: ignore[assignment]
            pindex.twin_groups = old_groups  # type: ignore[assignment]
        vec = np.concatenate([np.asarray(s, dtype=np.float32) for s in shards])  # the cache's float32 vectors
        base = _reset_peak()
        with _Clock() as c:
            idx = pindex.EntityIndex(vec, similarity="cosine")
        out["build_s"], out["build_cpu_s"] = c.wall, c.cpu
        out["peak_over_vectors"] = (_status("VmHWM") - base) / vec.nbytes
        out["twin_groups"] = len({id(g) for g in idx._twins.values()})
        return out
    base = _reset_peak()
    # the nprobe sweep below shows the trade-off; the build keeps the default nprobe (no tuning to a recall)
    # unless --tune: then the build tunes nprobe to its default target recall, as `vocab build` does
    params = task.get("params") or ({"target_recall": None} if kind.startswith("ivf-") and not task.get("tune")
                                    else None)
    with _Clock() as c:
        idx = ShardedIndex.build(shards, similarity="cosine", kind=kind, params=params)
    out["build_s"], out["build_cpu_s"] = c.wall, c.cpu
    out["build_peak_over_vectors"] = (_status("VmHWM") - base) / vector_bytes
    out["twin_groups"] = len(idx._groups)
    q, golds = _queries(shards, task["queries"], seed=1)
    if kind == "exact":
        wall, cpu = _median_time(lambda: idx.search(q[:1], 10), task.get("repeats", 5))
        out["query_ms"], out["query_cpu_ms"] = 1000 * wall, 1000 * cpu
        with _Clock() as c:
            res = idx.rank(q, [[int(g)] for g in golds], 10)
        out["rank_s"], out["rank_cpu_s"] = c.wall, c.cpu
        ranks = [r[2][0] for r in res]
        out["acc@10"] = float(np.mean([r <= 10 for r in ranks]))
        out["peak_over_vectors"] = (_status("VmHWM") - base) / vector_bytes
        return out
    name, values = SETTINGS[kind]
    if task.get("tune") and name in idx.params:  # the build's own choice first, then the sweep
        out["tuned"] = {name: idx.params[name], "build_recall": idx.recall}
        values = [idx.params[name]]
    rq = q[:200]
    # the exact top-10 of the recall queries, once (recall_at_k would stream every shard again per setting)
    want = ShardedIndex.build(shards, similarity="cosine", kind="exact").search(rq, 10)[1]
    out["settings"] = []
    for v in values:
        if name == "nprobe" and v > idx.params["nlist"]:
            continue  # every cell is scanned already
        idx.params[name] = v
        idx.kind.tune(idx.approx, idx.params)
        got = idx.search(rq, 10)[1]
        recall = float(np.mean([len(set(w) & set(g)) / 10 for w, g in zip(want.tolist(), got.tolist())]))
        wall, cpu = _median_time(lambda: idx.search(q[:1], 10), 20)
        out["settings"].append({name: v, "recall@10": recall, "query_ms": 1000 * wall, "query_cpu_ms": 1000 * cpu})
    out["peak_over_vectors"] = (_status("VmHWM") - base) / vector_bytes
    return out


def _run_child(task: dict) -> dict:
    env = {**os.environ, **{var: str(task.get("threads", 1)) for var in THREAD_VARS}}
    res = subprocess.run([sys.executable, __file__, "--child", json.dumps(task)], capture_output=True, text=True,
                         env=env, cwd=ROOT)
    if res.returncode != 0:
        return {"kind": task["kind"], "error": res.stderr.strip().splitlines()[-1] if res.stderr else "failed"}
    return json.loads(res.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- report
def _table(results: list[dict]) -> str:
    lines = ["| names | index | build CPU s | build peak / vectors | live query CPU ms | recall@10 | "
             "gold ranks CPU s |",
             "|---:|---|---:|---:|---:|---:|---:|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r.get('n', '?'):,} | {r['kind']} | failed: {r['error']} | | | | |")
            continue
        if r["kind"].startswith("entity-"):
            lines.append(f"| {r['n']:,} | {r['kind']} (float32 in memory) | {r['build_cpu_s']:.2f} | "
                         f"{r['peak_over_vectors']:.2f} (of float32) | | | |")
        elif r["kind"] == "exact":
            lines.append(f"| {r['n']:,} | exact (streamed) | {r['build_cpu_s']:.2f} | "
                         f"{r['build_peak_over_vectors']:.2f} | {r['query_cpu_ms']:.0f} | 1 | {r['rank_cpu_s']:.1f} "
                         f"(peak {r['peak_over_vectors']:.2f}) |")
        else:
            for s in r["settings"]:
                name = next(k for k in s if k not in ("recall@10", "query_ms", "query_cpu_ms"))
                tuned = " (tuned at build)" if r.get("tuned") else ""
                lines.append(f"| {r['n']:,} | {r['kind']} {name}={s[name]}{tuned} | {r['build_cpu_s']:.2f} | "
                             f"{r['build_peak_over_vectors']:.2f} | {s['query_cpu_ms']:.1f} | {s['recall@10']:.3f} | |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="23000,100000,1000000")
    ap.add_argument("--kinds", default="entity-old,entity-new,exact,ivf-flat,ivf-pq,hnsw")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--entity-max", type=int, default=400_000)
    ap.add_argument("--hnsw-max", type=int, default=100_000)
    ap.add_argument("--threads", type=int, default=1, help="threads of each child (BLAS, faiss, torch); 1 "
                    "makes CPU seconds the fair figure on a loaded machine, 2 gives this machine's wall times")
    ap.add_argument("--tune", action="store_true", help="IVF builds tune nprobe to the default target recall "
                    "(as `probekit vocab build` does); only that setting is then measured")
    ap.add_argument("--dir", default=None, help="where the shards go (default: a temporary folder, removed)")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(_child(json.loads(args.child))))
        return 0
    _threads(args.threads)
    tmp = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="vocab_scale_"))
    results = []
    try:
        for n in [int(s) for s in args.sizes.split(",")]:
            t = time.perf_counter()
            paths = [str(p) for p in _write_shards(tmp / f"n{n}", n)]
            print(f"# {n:,} names: shards ready in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
            for kind in args.kinds.split(","):
                if kind.startswith("entity-") and n > args.entity_max or kind == "hnsw" and n > args.hnsw_max:
                    continue
                r = _run_child({"kind": kind, "paths": paths, "queries": args.queries, "tune": args.tune,
                                "threads": args.threads})
                r.setdefault("n", n)
                results.append(r)
                print(json.dumps(r), file=sys.stderr, flush=True)
    finally:
        if not args.dir:
            shutil.rmtree(tmp, ignore_errors=True)
    load = os.getloadavg()
    print(f"{args.threads} thread(s); load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min) on "
          f"{os.cpu_count()} cores")
    print(_table(results))
    if args.json:
        Path(args.json).write_text(json.dumps({"load": load, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
