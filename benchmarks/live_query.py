"""Warm single-query latency of the retrieval probe vs encoding that one query plus a faiss search.

What the Probe page does on a warm path (candidate embeddings and index already built) is
``probe.rank(model, [query], candidates, k=10)``: it must also give every gold answer's rank among
all candidates. The baseline is the bare minimum for the top-k alone, measured directly in this
process: tokenizer + transformer forward + mean pooling + L2 normalisation + ``IndexFlatIP.search``.
Target: probe / baseline <= 1.2.

    .venv/bin/python benchmarks/live_query.py                 # MedLAMA full, 22,923 names, default model
    .venv/bin/python benchmarks/live_query.py --dataset demo --queries 50

Timings interleave the two paths query by query (A/B then B/A) and report medians, so a busy
shared CPU disturbs both alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import faiss
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probekit import index, models  # noqa: E402
from probekit.datasets import load_dataset  # noqa: E402
from probekit.probes import get_probe  # noqa: E402
from probekit.probes.retrieval import QUERY_MAX_LENGTH  # noqa: E402


def baseline(model, flat: faiss.Index, text: str, k: int):
    """Encode one text (mean pooling, normalised) and search the flat index: the floor for a live query."""
    with torch.inference_mode():
        feats = model.tokenizer([text], truncation=True, max_length=QUERY_MAX_LENGTH, return_tensors="pt")
        hidden = model.encoder(**feats).last_hidden_state  # (1, seq, dim)
        mask = feats["attention_mask"].unsqueeze(-1).float()  # (1, seq, 1)
        vec = ((hidden * mask).sum(1) / mask.sum(1)).numpy()  # (1, dim)
    vec /= np.linalg.norm(vec, axis=1, keepdims=True)
    return flat.search(vec, k)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="medlama")
    ap.add_argument("--set", dest="which", default="full")
    ap.add_argument("--model", default="default")
    ap.add_argument("--queries", type=int, default=40, help="distinct queries timed")
    ap.add_argument("--repeats", type=int, default=5, help="timings per query and path")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    ds = load_dataset(args.dataset, which=args.which)
    cands = ds.candidates("heads+tails")
    model = models.load(args.model, device="cpu")
    probe = get_probe("retrieval")
    rng = np.random.default_rng(0)
    queries = [ds.queries[i] for i in rng.choice(len(ds.queries), min(args.queries, len(ds.queries)), replace=False)]

    t = time.perf_counter()
    idx = index.build_index(model, cands, pooling="mean", similarity="cosine")  # warm the cache
    build_s = time.perf_counter() - t
    flat = faiss.IndexFlatIP(idx.vectors.shape[1])
    flat.add(idx.vectors)  # the same normalised vectors
    for q in queries[:3]:  # warm-up both paths
        probe.rank(model, [q], cands, k=args.k, pooling="mean")
        baseline(model, flat, q.text(model.mask_token), args.k)

    # Two baselines: faiss with its default OpenMP threads, and with one thread (faiss's own OpenMP pool
    # competes with torch's on a 2-core machine; the faster of the two is the honest floor).
    default_threads = faiss.omp_get_max_threads()
    paths = ("probe", "faiss_default_threads", "faiss_1_thread")
    times: dict[str, list[float]] = {p: [] for p in paths}
    same_set = same_order = 0
    for qi, q in enumerate(queries):
        text = q.text(model.mask_token)
        per: dict[str, list[float]] = {p: [] for p in paths}
        for rep in range(args.repeats):
            shift = (qi + rep) % len(paths)
            for path in paths[shift:] + paths[:shift]:  # rotate the order: no path always goes first
                faiss.omp_set_num_threads(1 if path == "faiss_1_thread" else default_threads)
                t = time.perf_counter()
                if path == "probe":
                    ranking = probe.rank(model, [q], cands, k=args.k, pooling="mean")[0]
                else:
                    _, ids = baseline(model, flat, text, args.k)
                per[path].append(time.perf_counter() - t)
        faiss.omp_set_num_threads(default_threads)
        top = [int(i) for i in ids[0]]
        same_set += set(ranking.ids) == set(top)  # case variants of a name tie exactly: order may differ
        same_order += list(ranking.ids) == top
        for p in paths:
            times[p].append(statistics.median(per[p]))

    med = {p: statistics.median(v) for p, v in times.items()}
    best = min(med["faiss_default_threads"], med["faiss_1_thread"])
    out = {
        "dataset": f"{args.dataset}:{args.which}", "n_candidates": len(cands), "model": args.model,
        "queries": len(queries), "repeats": args.repeats, "k": args.k, "torch_threads": torch.get_num_threads(),
        "faiss_threads": default_threads, "index_build_or_load_s": round(build_s, 3),
        **{f"{p}_median_ms": round(1000 * v, 2) for p, v in med.items()},
        "ratio_vs_best_baseline": round(med["probe"] / best, 3),
        "ratio_vs_faiss_default_threads": round(med["probe"] / med["faiss_default_threads"], 3),
        "ratio_vs_faiss_1_thread": round(med["probe"] / med["faiss_1_thread"], 3),
        "same_top_k_set": f"{same_set}/{len(queries)}", "same_top_k_order": f"{same_order}/{len(queries)}",
        "target": "ratio_vs_best_baseline <= 1.2",
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
