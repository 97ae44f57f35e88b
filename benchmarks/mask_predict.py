"""mask_predict (X-FACTR) batched across queries, mask counts and beams vs a one-prompt-at-a-time loop.

The loop is the plain reference of the test suite (tests/_naive_mask_predict.py: one forward pass
per prompt and hypothesis, as X-FACTR's own code decodes one prompt at a time); both must give
identical answers. Target: batched >= 10x the loop on CPU.

    flock /tmp/probekit-timing.lock .venv/bin/python benchmarks/mask_predict.py --queries 20
    .venv/bin/python benchmarks/mask_predict.py --model bert-base-uncased --device cuda   # a cached MLM

The default model ``minilm-mlm`` needs no download: the embedded MiniLM-L6 encoder (6 layers, 384
dims, bert-base-uncased vocabulary of 30,522) under a BertForMaskedLM head whose transform is
randomly initialised (the decoder is tied to the word embeddings): the compute of a real small
BERT MLM, answers without meaning. Queries are the demo set's (MedLAMA relations and templates).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from _naive_mask_predict import naive_ranking  # noqa: E402

from probekit import atomic, models  # noqa: E402
from probekit.datasets import load_dataset  # noqa: E402
from probekit.probes import get_probe  # noqa: E402


def minilm_mlm(folder: Path) -> str:
    """The embedded MiniLM encoder saved as a BertForMaskedLM (random head transform, tied decoder)."""
    from transformers import AutoTokenizer, BertForMaskedLM

    src = models.default_model_path()
    torch.manual_seed(0)
    BertForMaskedLM.from_pretrained(src).save_pretrained(folder)
    AutoTokenizer.from_pretrained(src).save_pretrained(folder)
    return str(folder)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm-mlm", help="'minilm-mlm' (no download) or a model with an MLM head")
    ap.add_argument("--dataset", default="demo")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--decoding", default="order+order")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--n-masks", type=int, default=5)
    ap.add_argument("--max-iter", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads for both paths")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        source = minilm_mlm(Path(tmp)) if args.model == "minilm-mlm" else args.model
        model = models.load(source, device=args.device)
    if not model.has_mlm:
        sys.exit(f"error: {args.model!r} has no MLM head")
    ds = load_dataset(args.dataset)
    step = max(1, len(ds.queries) // args.queries)
    queries = ds.queries[::step][:args.queries]  # spread over the relations
    cands = ds.candidates("heads+tails")
    opts = dict(decoding=args.decoding, beam=args.beam, n_masks=args.n_masks, max_iter=args.max_iter)
    probe = get_probe("mask_predict")

    probe.rank(model, queries[:1], cands, k=10, **opts)  # warm-up
    t = time.perf_counter()
    rankings = probe.rank(model, queries, cands, k=1000, batch_size=args.batch_size, **opts)
    batched_s = time.perf_counter() - t

    t = time.perf_counter()
    naive = [naive_ranking(model, q, **opts) for q in queries]
    loop_s = time.perf_counter() - t

    same_names = sum(list(r.names) == names for r, (names, _) in zip(rankings, naive))
    max_diff = max(max((abs(a - b) for a, b in zip(r.scores, s)), default=0.0)
                   for r, (names, s) in zip(rankings, naive) if list(r.names) == names)
    out = {
        "model": args.model, "device": str(model.device), "torch_threads": torch.get_num_threads(),
        "dataset": args.dataset, "queries": len(queries), **opts, "batch_size": args.batch_size,
        "batched_s": round(batched_s, 3), "loop_s": round(loop_s, 3),
        "batched_queries_per_s": round(len(queries) / batched_s, 2),
        "loop_queries_per_s": round(len(queries) / loop_s, 2),
        "speedup": round(loop_s / batched_s, 2), "target": "speedup >= 10 on CPU",
        "identical_answers": f"{same_names}/{len(queries)}", "max_score_diff": float(f"{max_diff:.2e}"),
        "answers_per_query": round(sum(r.n_candidates for r in rankings) / len(rankings), 1),
    }
    print(json.dumps(out, indent=2))
    if args.out:
        atomic.write_text(args.out, json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
