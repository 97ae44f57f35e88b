"""GPU-path check: the same core code on CUDA (autocast) and on CPU gives the same answers; speed ratio.

Run on a machine with a GPU:
    python benchmarks/gpu_check.py --model MODEL_DIR --names names.txt --queries queries.tsv
``names.txt``: one candidate name a line; ``queries.tsv``: cloze text with [MASK] <TAB> golds joined by ' || '.
Prints one JSON object: vector agreement, top-10 agreement and acc@10 on both devices, and CUDA/CPU speed ratios
for encoding, retrieval and mask_average (on a random MLM of the same size built here).

``--causal FOLDER_OR_ID``: the likelihood probe with that causal LM in half precision on CUDA (bf16 where supported;
a model larger than one GPU is sharded across all of them) against float32 on CPU, on the demo set's queries and
their relation's answers: max |Δ score|, top-1 and gold-rank agreement, statements/s on each.
``--served openai:URL#NAME``: the same queries through that server (probekit.backends) against the CUDA model:
the same statements scored by an engine (vLLM, llama.cpp) and by probekit, rankings compared first.

    python benchmarks/gpu_check.py --model MODEL_DIR --names names.txt --queries queries.tsv \
        --causal BioMistral/BioMistral-7B --served 'openai:http://127.0.0.1:8000/v1#BioMistral/BioMistral-7B'
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probekit import index, metrics, models  # noqa: E402
from probekit.encode import encode  # noqa: E402
from probekit.probes import get_probe  # noqa: E402
from probekit.types import CandidateSet, Query  # noqa: E402


def _timed(fn):
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t = time.perf_counter()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return out, time.perf_counter() - t


def _top_overlap(a, b, k=10) -> float:
    return float(np.mean([len(set(x.ids[:k]) & set(y.ids[:k])) / k for x, y in zip(a, b)]))


def _likelihood_check(causal: str, served: str | None, n_queries: int) -> dict:
    """The likelihood probe in half precision on CUDA vs float32 on CPU (and vs a served copy of the model)."""
    from probekit.datasets import load_dataset

    ds = load_dataset("demo")
    step = max(1, len(ds) // n_queries)
    cases = [(q, ds.candidates("relation", q.relation)) for q in ds.queries[::step][:n_queries]]
    statements = sum(len(c) for _, c in cases)
    probe = get_probe("likelihood")

    def scores(model):
        out = []
        for q, c in cases:
            r = probe.rank(model, [q], c, k=len(c))[0]
            out.append((np.array(r.scores)[np.argsort(r.ids)], r.gold_ranks))
        return out

    def compare(a, b) -> dict:
        return {"max_abs_score_diff": max(float(np.abs(x[0] - y[0]).max()) for x, y in zip(a, b)),
                "top1_agreement": float(np.mean([np.argmax(x[0]) == np.argmax(y[0]) for x, y in zip(a, b)])),
                "gold_rank_agreement": float(np.mean([x[1] == y[1] for x, y in zip(a, b)]))}

    gpu = models.load(causal, device="cuda")
    out: dict = {"model": causal, "dtype_cuda": str(next(gpu.causal.parameters()).dtype),
                 "sharded": bool(getattr(gpu.causal, "hf_device_map", None) and
                                 len(set(gpu.causal.hf_device_map.values())) > 1),
                 "queries": len(cases), "statements": statements}
    scores(gpu)  # warm-up
    sg, tg = _timed(lambda: scores(gpu))
    out["cuda_statements_per_s"] = statements / tg
    if served:
        remote = models.load(served)
        ss, ts = _timed(lambda: scores(remote))
        out["served"] = {"id": served, **compare(ss, sg), "statements_per_s": statements / ts,
                         "meta": remote.describe()}
    models.release(gpu)
    try:
        cpu = models.load(causal, device="cpu", dtype="float32")
    except Exception as e:  # noqa: BLE001  # a 7B model may not fit this machine's memory in fp32
        out["cpu"] = f"not loaded: {e}"
        return out
    sc, tc = _timed(lambda: scores(cpu))
    out["cpu"] = {**compare(sg, sc), "statements_per_s": statements / tc, "cuda_speedup": tc / tg}
    models.release(cpu)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--names", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--cpu-names", type=int, default=4000, help="names encoded on CPU for the comparison")
    ap.add_argument("--causal", default=None, help="a causal LM for the likelihood probe in half precision")
    ap.add_argument("--served", default=None, help="openai:URL#NAME serving the --causal model: backend comparison")
    ap.add_argument("--likelihood-queries", type=int, default=40, help="demo queries for --causal")
    args = ap.parse_args()
    assert torch.cuda.is_available(), "this check needs CUDA"
    names = Path(args.names).read_text().splitlines()
    queries = []
    for i, line in enumerate(Path(args.queries).read_text().splitlines()):
        text, golds = line.split("\t")
        queries.append(Query(id=f"q{i}", subject="", relation="sample", template=text.replace("[MASK]", "[Y]", 1),
                             golds=tuple(golds.split(" || "))))
    cands = CandidateSet.from_names(names)
    out: dict = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "n_names": len(cands),
                 "n_queries": len(queries)}
    gpu = models.load(args.model, device="cuda")
    cpu = models.load(args.model, device="cpu")
    sub = list(cands.names[: args.cpu_names])
    encode(gpu, sub[:256])  # warm-up (CUDA context, kernels)
    vg, tg = _timed(lambda: encode(gpu, sub, max_length=25, batch_size=256))
    vc, tc = _timed(lambda: encode(cpu, sub, max_length=25, batch_size=128))
    ng, nc = (v / np.linalg.norm(v, axis=1, keepdims=True) for v in (vg, vc))
    out["encode"] = {"max_abs_diff_normalised": float(np.abs(ng - nc).max()),
                     "min_cosine": float((ng * nc).sum(1).min()), "cuda_speedup": tc / tg,
                     "cuda_names_per_s": len(sub) / tg, "cpu_names_per_s": len(sub) / tc}
    _, t_full = _timed(lambda: encode(gpu, list(cands.names), max_length=25, batch_size=256))
    out["encode"]["cuda_all_names_s"] = t_full

    probe = get_probe("retrieval")
    rg, t_rg = _timed(lambda: probe.rank(gpu, queries, cands, k=10, pooling="mean"))
    index.clear_memo()
    rc, t_rc = _timed(lambda: probe.rank(cpu, queries, cands, k=10, pooling="mean"))
    out["retrieval"] = {"top10_overlap": _top_overlap(rg, rc), "cuda_s_cold": t_rg, "cpu_s_cold": t_rc,
                        "acc@10_cuda": metrics.acc_at_k(rg, k=10, average="micro"),
                        "acc@10_cpu": metrics.acc_at_k(rc, k=10, average="micro")}
    _, t_warm = _timed(lambda: probe.rank(gpu, queries[:1], cands, k=10, pooling="mean"))
    out["retrieval"]["cuda_warm_single_query_s"] = t_warm

    # mask_average on a random MLM of the same shape (no MLM head ships with the default model)
    from transformers import BertForMaskedLM

    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        mlm = BertForMaskedLM(gpu.encoder.config)
        mlm.save_pretrained(tmp)
        gpu.tokenizer.save_pretrained(tmp)
        mg, mc = models.load(tmp, device="cuda", mlm=True), models.load(tmp, device="cpu", mlm=True)
        ma = get_probe("mask_average")
        few, small = queries[:64], CandidateSet.from_names(names[:3000])
        ma.rank(mg, few[:2], small, k=10)
        ag, t_ag = _timed(lambda: ma.rank(mg, few, small, k=10))
        ac, t_ac = _timed(lambda: ma.rank(mc, few, small, k=10))
        out["mask_average"] = {"top10_overlap": _top_overlap(ag, ac), "cuda_speedup": t_ac / t_ag,
                               "cuda_s": t_ag, "cpu_s": t_ac}
    try:
        from probekit import rewire  # noqa: F401
        out["rewire"] = _rewire_check(args.model)
    except ImportError:
        out["rewire"] = "probekit.rewire not present"
    if args.causal:
        out["likelihood"] = _likelihood_check(args.causal, args.served, args.likelihood_queries)
    models.release(gpu)
    out["cuda_memory_after_release_mb"] = torch.cuda.memory_allocated() / 2**20
    print(json.dumps(out, indent=2))


def _rewire_check(model_dir: str) -> dict:
    """A few AMP training steps on CUDA at the paper's batch size: steps/s and that the loss is finite."""
    import inspect

    from probekit import rewire

    if not hasattr(rewire, "benchmark_steps"):
        return {"skipped": "rewire.benchmark_steps not available"}
    sig = inspect.signature(rewire.benchmark_steps)
    return rewire.benchmark_steps(model_dir, device="cuda", **({"batch_size": 192} if "batch_size" in sig.parameters
                                                               else {}))


if __name__ == "__main__":
    main()
