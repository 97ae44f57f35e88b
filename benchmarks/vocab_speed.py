"""Vocabulary search against faiss in the same process, equal outputs asserted first: exact search per query, a live
query with its gold on an approximate index, and IVF recall at equal nprobe.

Data: ``--n`` random unit vectors of width 384 (the MiniLM width), stored as float16 shards of 50,000 rows and
memory-mapped, as the vocabulary store keeps them (``--clustered``: the clustered names of
``benchmarks/vocab_scale.py`` instead, where an IVF index is meaningful). Queries: held-out names perturbed by noise of
0.75 times their norm (cosine to their name ~0.8), no encoder needed.

- ``exact``: :class:`probekit.vocab.search.ShardedIndex` (exact kind) against ``faiss.IndexFlatIP`` over the
  normalised float32 vectors in memory (what :class:`probekit.index.EntityIndex` holds). Asserted first: the same
  top-10 ids and the same scores, bit for bit, on every timed query. Then the per-query time (one query per call,
  the two interleaved, median CPU and wall ms) and a batch of ``--batch`` queries; peak resident memory over the
  vectors' bytes (VmHWM, reset before each): our build (norms, hashes), our queries, faiss's index.
- ``gold``: a live query with one gold on an ivf-flat index (``rank(q, [[gold]], 10)``) against the faiss IVF
  search alone (the top-k without a rank), and against the exact rank of the same query; gold ranks asserted
  equal to the exact kind's first.
- ``recall``: ivf-flat built by :class:`ShardedIndex` (its training sample) against ``faiss.IndexIVFFlat`` trained
  with faiss's defaults (up to 256 points per centroid, 25 iterations, the same nlist), recall@10 against exact
  search on the same perturbed queries at each nprobe.

One thread everywhere (faiss.omp_set_num_threads(1), torch.set_num_threads(1), BLAS) unless ``--threads``.

    .venv/bin/python benchmarks/vocab_speed.py --n 100000
    .venv/bin/python benchmarks/vocab_speed.py --n 1000000 --parts exact,gold
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DIM, SHARD_ROWS = 384, 50_000


def _threads(n: int) -> None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _reset_peak() -> int:
    Path("/proc/self/clear_refs").write_text("5")
    return _status("VmRSS")


def _shards(folder: Path, n: int, clustered: bool):
    import numpy as np

    tag = f"n{n}-{'clustered' if clustered else 'unit'}"
    done = folder / tag / "done.json"
    paths = sorted((folder / tag).glob("shard_*.npy"))
    if not done.is_file():
        (folder / tag).mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        centres = rng.normal(size=(max(1, n // 50), DIM)).astype(np.float32) if clustered else None
        paths = []
        for i, r0 in enumerate(range(0, n, SHARD_ROWS)):
            rows = min(SHARD_ROWS, n - r0)
            x = rng.standard_normal((rows, DIM), dtype=np.float32)
            if centres is not None:
                x += centres[rng.integers(0, len(centres), rows)]
            else:
                x /= np.linalg.norm(x, axis=1, keepdims=True)
            paths.append(folder / tag / f"shard_{i:05d}.npy")
            np.save(paths[-1], x.astype(np.float16))
        done.write_text("{}")
    return [np.load(p, mmap_mode="r") for p in paths]


def _queries(shards, n_q: int, seed: int):
    """Perturbed names: (n_q, DIM) float32 and the ids of the names they were made from."""
    import numpy as np

    from probekit.vocab.index_kinds import perturbed

    n = sum(len(s) for s in shards)
    ids = np.sort(np.random.default_rng(seed).choice(n, size=n_q, replace=False))
    offsets = np.cumsum([0] + [len(s) for s in shards])
    which = np.searchsorted(offsets, ids, "right") - 1
    rows = np.stack([np.asarray(shards[w][i - offsets[w]], dtype=np.float32) for w, i in zip(which, ids)])
    return perturbed(rows, seed=seed), ids


def _clock(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def _interleaved(fns: dict, repeats: int) -> dict:
    """Median wall and CPU ms of each function, called in rotating order ``repeats`` times after a warm-up."""
    names = list(fns)
    for f in fns.values():
        f(0)
    wall: dict = {k: [] for k in names}
    cpu: dict = {k: [] for k in names}
    for r in range(repeats):
        for k in names[r % len(names):] + names[:r % len(names)]:
            _, w, c = _clock(lambda k=k, r=r: fns[k](r))
            wall[k].append(1000 * w)
            cpu[k].append(1000 * c)
    return {k: {"wall_ms": statistics.median(wall[k]), "cpu_ms": statistics.median(cpu[k])} for k in names}


def exact(shards, args) -> dict:
    import faiss

    from probekit.index_rank import prepare
    from probekit.vocab.search import ShardedIndex

    n = sum(len(s) for s in shards)
    vector_bytes = n * DIM * 2
    q, _ = _queries(shards, args.queries + args.batch, seed=1)
    base = _reset_peak()
    idx = ShardedIndex.build(shards, similarity="cosine", kind="exact")
    build_peak = (_status("VmHWM") - base) / vector_bytes
    base = _reset_peak()
    for i in range(3):
        idx.search(q[i:i + 1], 10)
    ours_peak = (_status("VmHWM") - base) / vector_bytes
    base = _reset_peak()
    flat = faiss.IndexFlatIP(DIM)
    for s in shards:
        flat.add(prepare(s, "cosine"))
    faiss_peak = (_status("VmHWM") - base) / vector_bytes
    qp = prepare(q, "cosine")
    for i in range(args.queries):  # equal outputs first
        s_o, i_o = idx.search(q[i:i + 1], 10)
        s_f, i_f = flat.search(qp[i:i + 1], 10)
        assert (i_o == i_f).all() and (s_o == s_f).all(), f"query {i}: {i_o} {i_f} {s_o} {s_f}"
    t = _interleaved({"ours": lambda r: idx.search(q[r % args.queries:r % args.queries + 1], 10),
                      "faiss": lambda r: flat.search(qp[r % args.queries:r % args.queries + 1], 10)}, args.repeats)
    out = {"n": n, "per_query": t, "ratio_cpu": t["ours"]["cpu_ms"] / t["faiss"]["cpu_ms"],
           "ratio_wall": t["ours"]["wall_ms"] / t["faiss"]["wall_ms"],
           "peak_over_vectors": {"ours_queries": ours_peak, "ours_build": build_peak, "faiss_build": faiss_peak}}
    if args.batch:
        qb = q[args.queries:]
        (s_o, i_o), w_o, c_o = _clock(lambda: idx.search(qb, 10))
        (s_f, i_f), w_f, c_f = _clock(lambda: flat.search(prepare(qb, "cosine"), 10))
        assert (i_o == i_f).all() and (s_o == s_f).all()
        out["batch"] = {"queries": len(qb), "ours_cpu_s": c_o, "faiss_cpu_s": c_f, "ratio_cpu": c_o / c_f,
                        "ours_wall_s": w_o, "faiss_wall_s": w_f}
    return out


def gold(shards, args) -> dict:
    import numpy as np

    from probekit.vocab.search import ShardedIndex

    n = sum(len(s) for s in shards)
    q, names = _queries(shards, args.queries, seed=2)
    approx = ShardedIndex.build(shards, similarity="cosine", kind="ivf-flat", params={"target_recall": None})
    exact_idx = ShardedIndex.build(shards, similarity="cosine", kind="exact")
    golds = [[int(g)] for g in names]
    want = [r for _, _, r in exact_idx.rank(q, golds, 10)]
    got = [approx.rank(q[i:i + 1], golds[i:i + 1], 10)[0][2] for i in range(len(q))]
    assert got == want, "gold ranks differ from the exact kind's"
    qp = approx._queries(q)
    t = _interleaved({"rank_with_gold": lambda r: approx.rank(q[r % len(q):r % len(q) + 1],
                                                              golds[r % len(q):r % len(q) + 1], 10),
                      "faiss_ivf_search": lambda r: approx.approx.search(qp[r % len(q):r % len(q) + 1], 10),
                      "exact_rank_with_gold": lambda r: exact_idx.rank(q[r % len(q):r % len(q) + 1],
                                                                       golds[r % len(q):r % len(q) + 1], 10)},
                     args.repeats)
    return {"n": n, "params": approx.params, "per_query": t, "gold_ranks_median": float(np.median(want))}


def recall(shards, args) -> dict:
    import faiss
    import numpy as np

    from probekit.index_rank import prepare
    from probekit.vocab.search import ShardedIndex

    n = sum(len(s) for s in shards)
    nlist = args.nlist
    q, _ = _queries(shards, 500, seed=3)
    exact_idx = ShardedIndex.build(shards, similarity="cosine", kind="exact")
    want = exact_idx.search(q, 10)[1]
    t0 = time.perf_counter()
    ours = ShardedIndex.build(shards, similarity="cosine", kind="ivf-flat",
                              params={"nlist": nlist, "target_recall": None, "fp16": False, "refine": 1})
    ours_s = time.perf_counter() - t0
    x = np.concatenate([prepare(s, "cosine") for s in shards])
    t0 = time.perf_counter()
    ref = faiss.IndexIVFFlat(faiss.IndexFlatIP(DIM), DIM, nlist, faiss.METRIC_INNER_PRODUCT)
    ref.train(x)  # faiss's defaults: a sample of up to 256 points per centroid, 25 iterations
    ref.add(x)
    faiss_s = time.perf_counter() - t0
    del x
    qp = prepare(q, "cosine")
    rows = []
    for nprobe in (4, 8, 16, 32, 64, 128):
        if nprobe > nlist:
            break
        ours.params["nprobe"] = nprobe
        ours.kind.tune(ours.approx, ours.params)
        ref.nprobe = nprobe
        got_o = ours.search(q, 10)[1]
        got_f = ref.search(qp, 10)[1]
        r_o = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(want.tolist(), got_o.tolist())]))
        r_f = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(want.tolist(), got_f.tolist())]))
        rows.append({"nprobe": nprobe, "ours": r_o, "faiss": r_f})
    return {"n": n, "nlist": nlist, "queries": len(q), "build_s": {"ours": ours_s, "faiss_train_add": faiss_s},
            "recall@10": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--parts", default="exact,gold,recall")
    ap.add_argument("--queries", type=int, default=20, help="timed single queries (outputs checked on each)")
    ap.add_argument("--batch", type=int, default=200, help="a batch searched at once (0: none)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--nlist", type=int, default=256)
    ap.add_argument("--clustered", action="store_true", help="clustered names instead of random unit vectors")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dir", default="/tmp/probekit_vocab_speed", help="where the shards are kept between runs")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    _threads(args.threads)
    import faiss
    import torch

    faiss.omp_set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    shards = _shards(Path(args.dir), args.n, args.clustered)
    results = {"n": args.n, "clustered": args.clustered, "threads": args.threads}
    for part in args.parts.split(","):
        results[part] = {"exact": exact, "gold": gold, "recall": recall}[part](shards, args)
        print(json.dumps({part: results[part]}), flush=True)
    results["load"] = os.getloadavg()
    print(f"# {args.threads} thread(s); load average {results['load'][0]:.1f} / {results['load'][1]:.1f} / "
          f"{results['load'][2]:.1f} on {os.cpu_count()} cores")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
