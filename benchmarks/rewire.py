"""Rewiring speed: probekit's training loop vs a minimal plain-PyTorch loop on the same batches (target:
steps/s ratio ≥ 0.9), in one process.

Both loops train a fresh copy of the same model on the same (query, span) pairs with the same batch size,
max length, [CLS] pooling, InfoNCE (τ 0.04) and AdamW. The baseline gets everything handed to it: the
batches are tokenised before its clock starts and its loss is three lines. probekit's loop
(:func:`probekit.rewire.train`) tokenises each batch itself and writes the loss log; its rate is read
from that log (step seconds), so model loading and checkpoint writes are not counted. The first
``--warmup`` steps of each are left out (allocator and thread-pool warm-up). The two loops alternate
(baseline, probekit, baseline, probekit) and the best of the repeats counts.

    .venv/bin/python benchmarks/rewire.py                  # default model, pubmed_0, CPU batch 32
    .venv/bin/python benchmarks/rewire.py --steps 6 --batch-size 8 --repeats 1   # a quick smoke run
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def plain_loop(model_id, pairs, *, batch, steps, warmup, max_length, tau, lr, device, seed):
    """The baseline: pre-tokenised batches, forward twice, NT-Xent, backward, AdamW. Returns steps/s."""
    import torch
    import torch.nn.functional as F

    from probekit import models

    m = models.load(model_id, device=device)
    enc, tok = m.encoder, m.tokenizer
    enc.train()
    opt = torch.optim.AdamW(enc.parameters(), lr=lr, weight_decay=0.01)
    torch.manual_seed(seed)
    batches = []
    for s in range(steps):
        chunk = pairs[(s * batch) % (len(pairs) - batch):][:batch]
        q = tok([p[0] for p in chunk], padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        p = tok([p[1] for p in chunk], padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        batches.append(({k: v.to(m.device) for k, v in q.items()}, {k: v.to(m.device) for k, v in p.items()}))
    labels = torch.cat([torch.arange(batch, 2 * batch), torch.arange(batch)]).to(m.device)
    t0 = None
    for s, (q, p) in enumerate(batches):
        if s == warmup:
            if m.device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        z = F.normalize(torch.cat([enc(**q).last_hidden_state[:, 0], enc(**p).last_hidden_state[:, 0]]), dim=-1)
        sim = (z @ z.T / tau).fill_diagonal_(float("-inf"))
        loss = F.cross_entropy(sim, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if m.device.type == "cuda":
        torch.cuda.synchronize()
    rate = (steps - warmup) / (time.perf_counter() - t0)
    models.release(m)
    return rate


def probekit_loop(settings, *, warmup, device):
    from probekit import rewire

    info = rewire.train(settings, device=device)
    log = rewire.load_log(info["run_id"])
    secs = log["seconds"].tolist()
    return (len(secs) - warmup) / (secs[-1] - secs[warmup - 1]), info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--corpus", default="pubmed_0")
    ap.add_argument("--device", default=None)
    ap.add_argument("--batch-size", type=int, default=None, help="default: 192 on CUDA, 32 on CPU")
    ap.add_argument("--steps", type=int, default=14)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    os.environ["PROBEKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="pk-rewire-bench-")  # checkpoints go nowhere useful
    import torch

    from probekit import models, rewire

    device = models.pick_device(args.device)
    batch = args.batch_size or (192 if device.type == "cuda" else rewire.CPU_BATCH_SIZE)
    settings = rewire.RewireSettings(model=args.model, corpus=args.corpus, batch_size=batch, steps=args.steps,
                                     checkpoint_every=10**6, dropout=0.1)
    mask = models.load(args.model, device="cpu").mask_token
    pairs = rewire.make_pairs(rewire.read_sentences(rewire.resolve_corpus(args.corpus)), seed=0, mask_token=mask)
    print(f"{args.model} on {device} ({torch.get_num_threads()} threads), batch {batch} pairs, max length 48, "
          f"{args.steps} steps ({args.warmup} warm-up) × {args.repeats}", flush=True)
    plain, ours = [], []
    for r in range(args.repeats):
        plain.append(plain_loop(args.model, pairs, batch=batch, steps=args.steps, warmup=args.warmup, max_length=48,
                                tau=settings.tau, lr=settings.lr, device=str(device), seed=r))
        rate, info = probekit_loop(settings, warmup=args.warmup, device=str(device))
        ours.append(rate)
        print(f"  repeat {r + 1}: plain {plain[-1]:.3f} steps/s, probekit {rate:.3f} steps/s "
              f"(loss {info['last_loss']:.3f})", flush=True)
    ratio = max(ours) / max(plain)
    print(f"steps/s: probekit {max(ours):.3f}, plain PyTorch {max(plain):.3f}; ratio {ratio:.2f} (target >= 0.9) "
          f"{'PASS' if ratio >= 0.9 else 'BELOW TARGET'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
