"""generative (BART/T5) in padded batches vs one query per ``generate`` call: queries/s and identical answers.

    flock /tmp/probekit-timing.lock .venv/bin/python benchmarks/generative.py --arch t5 --queries 32
    .venv/bin/python benchmarks/generative.py --model t5-small --device cuda      # a cached real model

Without ``--model``, a random model with the *shape* of t5-small (``--arch t5``: 6+6 layers, 512 dims,
32,128-token output layer) or bart-base (``--arch bart``: 6+6 layers, 768 dims, 50,265 tokens) is built
offline over the test suite's toy tokenizer: the compute of the paper's smallest models, answers
without meaning (a random model rarely stops early, so every beam runs ``max_new_tokens`` steps).
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

from _tiny_seq2seq import _bart_tokenizer, t5_tokenizer  # noqa: E402

from probekit import atomic, models  # noqa: E402
from probekit.datasets import load_dataset  # noqa: E402
from probekit.probes import get_probe  # noqa: E402


def shaped_model(arch: str, folder: Path) -> str:
    """A random encoder-decoder with the layer sizes of t5-small or bart-base, saved with a toy tokenizer."""
    from transformers import BartConfig, BartForConditionalGeneration, T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    if arch == "t5":
        tok = t5_tokenizer()
        cfg = T5Config(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8,
                       pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, decoder_start_token_id=0)
        model = T5ForConditionalGeneration(cfg)
    else:
        tok = _bart_tokenizer()
        cfg = BartConfig(vocab_size=50265, d_model=768, encoder_layers=6, decoder_layers=6, encoder_ffn_dim=3072,
                         decoder_ffn_dim=3072, encoder_attention_heads=12, decoder_attention_heads=12,
                         pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         decoder_start_token_id=tok.eos_token_id, forced_bos_token_id=tok.bos_token_id)
        model = BartForConditionalGeneration(cfg)
    model.eval().save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", choices=["t5", "bart"], default="t5")
    ap.add_argument("--model", default=None, help="a cached/local seq2seq model instead of the random one")
    ap.add_argument("--dataset", default="demo")
    ap.add_argument("--queries", type=int, default=32)
    ap.add_argument("--k", type=int, default=5, help="beam size = returned answers")
    ap.add_argument("--max-new-tokens", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        source = args.model or shaped_model(args.arch, Path(tmp))
        model = models.load(source, device=args.device)
    ds = load_dataset(args.dataset)
    step = max(1, len(ds.queries) // args.queries)
    queries = [q for q in ds.queries[::step]][:args.queries]
    if model.tokenizer.mask_token is None:  # the toy T5 vocabulary is lower case
        queries = [type(q)(q.id, q.subject.lower(), q.relation, q.template.lower().replace("[x]", "[X]")
                           .replace("[y]", "[Y]"), q.golds) for q in queries]
    cands = ds.candidates("heads+tails")
    probe = get_probe("generative")
    opts = dict(k=args.k, max_new_tokens=args.max_new_tokens)

    probe.rank(model, queries[:2], cands, batch_size=2, **opts)  # warm-up
    t = time.perf_counter()
    batched = probe.rank(model, queries, cands, batch_size=args.batch_size, **opts)
    batched_s = time.perf_counter() - t
    t = time.perf_counter()
    loop = [probe.rank(model, [q], cands, batch_size=1, **opts)[0] for q in queries]
    loop_s = time.perf_counter() - t

    same = sum(a.names == b.names for a, b in zip(batched, loop))
    diff = max((abs(x - y) for a, b in zip(batched, loop) if a.names == b.names for x, y in zip(a.scores, b.scores)),
               default=0.0)
    out = {
        "model": args.model or f"random {args.arch} ({'t5-small' if args.arch == 't5' else 'bart-base'} shape)",
        "device": str(model.device), "torch_threads": torch.get_num_threads(), "queries": len(queries),
        "beam": args.k, "max_new_tokens": args.max_new_tokens, "batch_size": args.batch_size,
        "batched_s": round(batched_s, 3), "loop_s": round(loop_s, 3),
        "batched_queries_per_s": round(len(queries) / batched_s, 2),
        "loop_queries_per_s": round(len(queries) / loop_s, 2), "speedup": round(loop_s / batched_s, 2),
        "identical_answers": f"{same}/{len(queries)}", "max_score_diff": float(f"{diff:.2e}"),
    }
    print(json.dumps(out, indent=2))
    if args.out:
        atomic.write_text(args.out, json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
