"""Pseudo-perplexity speed: probekit's batched scorer vs a one-masked-copy-per-forward loop, same values
(issue: >= 5x on CPU with identical values), in one process.

Both score the same prompts (the demo set's template prompts with their first gold answer filled in,
as ``python -m probekit perplexity`` does) with the same masked LM. The baseline
(:func:`probekit.templates.perplexity.pseudo_perplexity_naive`) runs one forward per masked copy, no
padding, full logits; probekit's (:func:`~probekit.templates.perplexity.pseudo_perplexity`) stacks
``--batch-size`` copies of several prompts per forward (length-sorted, padded to each batch's longest copy)
and runs the last encoder layer and the MLM head only at each copy's masked row. The two alternate
(baseline, probekit, …) in one process, so both see the same machine load, and the best of ``--repeats``
counts; the load average before and after is recorded with the figures.

The default scorer is the embedded MiniLM-L6 encoder (6 layers, 384 dims, bert-base-uncased vocabulary)
under a BERT MLM head that is randomly initialised (seed 0): no MLM checkpoint ships offline, and the
speed of pseudo-perplexity depends on the architecture, not on whether the head is trained. Pass
``--model FOLDER`` to time a real masked LM.

    flock /tmp/probekit-timing.lock .venv/bin/python benchmarks/perplexity.py
    .venv/bin/python benchmarks/perplexity.py --prompts 10 --repeats 1      # a quick smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probekit import atomic  # noqa: E402


def load_scorer(model: str | None):
    import torch
    from transformers import AutoTokenizer, BertForMaskedLM
    from transformers.utils import logging as hf_logging

    from probekit import models

    hf_logging.set_verbosity_error()
    if model:
        m = models.load(model, device="cpu", mlm=True)
        return m.mlm, m.tokenizer, m.id
    path = models.default_model_path()
    torch.manual_seed(0)
    mlm = BertForMaskedLM.from_pretrained(str(path)).eval()  # encoder weights loaded, head random
    return mlm, AutoTokenizer.from_pretrained(str(path)), "MiniLM-L6 + random BERT MLM head"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a masked LM (default: MiniLM-L6 under a random MLM head)")
    ap.add_argument("--prompts", type=int, default=113, help="how many demo prompts (113 = all)")
    ap.add_argument("--batch-size", type=int, default=64, help="masked copies per forward (probekit)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (the issue's target: 1)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    args = ap.parse_args()
    import numpy as np
    import torch

    from probekit.datasets import load_dataset
    from probekit.templates.perplexity import prompt_text, pseudo_perplexity, pseudo_perplexity_naive

    torch.set_num_threads(args.threads)
    mlm, tok, name = load_scorer(args.model)
    texts = [prompt_text(q) for q in load_dataset("demo").queries[:args.prompts]]
    n_copies = sum(len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts)
    print(f"{name}, CPU ({torch.get_num_threads()} threads); {len(texts)} prompts, {n_copies} masked copies; "
          f"batch {args.batch_size} copies; {args.repeats} repeats", flush=True)
    pseudo_perplexity(mlm, tok, texts[:4], batch_size=args.batch_size)  # warm-up
    pseudo_perplexity_naive(mlm, tok, texts[:2])
    load_before = os.getloadavg()
    naive_s, ours_s = [], []
    for r in range(args.repeats):
        t = time.perf_counter()
        naive = pseudo_perplexity_naive(mlm, tok, texts)
        naive_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        ours = pseudo_perplexity(mlm, tok, texts, batch_size=args.batch_size)
        ours_s.append(time.perf_counter() - t)
        print(f"  repeat {r + 1}: one copy per forward {naive_s[-1]:.2f} s, batched {ours_s[-1]:.2f} s", flush=True)
    load_after = os.getloadavg()
    diff_nll = float(np.max(np.abs(ours.nll - naive.nll)))
    rel_ppl = float(np.max(np.abs(ours.perplexity / naive.perplexity - 1)))
    same_tokens = bool(np.array_equal(ours.n_tokens, naive.n_tokens))
    ratio = min(naive_s) / min(ours_s)
    paired = [n / o for n, o in zip(naive_s, ours_s)]  # each repeat's loop / batched, back to back
    ok = ratio >= 5 and same_tokens and rel_ppl < 1e-5
    print(f"best: one copy per forward {min(naive_s):.2f} s, batched {min(ours_s):.2f} s; speed-up {ratio:.1f}x "
          f"(target >= 5; per repeat {min(paired):.1f}x to {max(paired):.1f}x); max |Δ NLL| {diff_nll:.2e}, "
          f"max relative Δ perplexity {rel_ppl:.2e}, scored tokens "
          f"{'identical' if same_tokens else 'DIFFERENT'}; {'PASS' if ok else 'BELOW TARGET'}; load average "
          f"{load_before[0]:.1f} before, {load_after[0]:.1f} after ({os.cpu_count()} cores)")
    if args.out:
        atomic.write_text(args.out, json.dumps({
            "model": name, "threads": torch.get_num_threads(), "prompts": len(texts), "masked_copies": n_copies,
            "batch_size": args.batch_size, "naive_seconds": naive_s, "batched_seconds": ours_s, "speedup": ratio,
            "speedup_per_repeat": paired,
            "max_abs_nll_diff": diff_nll, "max_rel_perplexity_diff": rel_ppl, "same_tokens": same_tokens,
            "mean_perplexity": float(np.mean(ours.perplexity)), "cpu_count": os.cpu_count(),
            "load_average_1min_before": load_before[0], "load_average_1min_after": load_after[0]}, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
