"""DisKnE cost: fine-tunings per hour for one model on this machine, and the projected cost of the paper's grid.

Two measurements in one process, then a projection:

1. **Real fine-tunings** (:func:`probekit.diskne.finetune.run_cell`, the unit a grid runs) on the shipped
   demo-derived set with the paper's settings (lr 2e-5, batch 8, <= 8 epochs with early stopping,
   10 % validation, 10 negatives), for ``--cells`` (disease, seed) cells: wall seconds per fine-tuning,
   hence fine-tunings per hour, and the epochs early stopping actually ran.
2. **Step rate** on a paper-sized set (derived from MedLAMA when present: 3 categories × 40 diseases × 3
   positives, about the size of DisKnE's medical set): seconds per training step (batch 8) and per
   evaluated example on real Train_X / Test_X pairs.

Projection: one paper-sized fine-tuning = epochs × ceil(train/8) steps + (epochs × validation + test)
evaluations; the grid = models × diseases × seeds such cells, independent, so N machines divide the
wall time by N (while cells >= N). Printed for a range of disease counts and machine counts.

    flock /tmp/probekit-timing.lock .venv/bin/python benchmarks/diskne.py
    .venv/bin/python benchmarks/diskne.py --cells 1 --steps 5     # a quick smoke run
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probekit import atomic  # noqa: E402


def step_rate(model, ds, negatives, *, steps: int, warmup: int, eval_examples: int) -> dict:
    """Seconds per training step (batch 8, paper lr) and per evaluated example, on one real split."""
    import torch

    from probekit.diskne import finetune, splits

    s = finetune.FinetuneSettings()
    target = splits.targets(ds)[0]
    sp = splits.split_for(ds, target, negatives)
    clf = finetune.classifier(model, seed=0).to(model.device)
    opt = torch.optim.AdamW(clf.parameters(), lr=s.lr)
    feats = finetune._encode(model.tokenizer, sp.train, s)
    order = torch.randperm(len(feats), generator=torch.Generator().manual_seed(0)).tolist()
    batches = list(finetune._batches(model.tokenizer, feats, s.batch_size, model.device, order))[:warmup + steps]
    clf.train()
    t0 = c0 = None
    for i, batch in enumerate(batches):
        if i == warmup:
            if model.device.type == "cuda":
                torch.cuda.synchronize()
            t0, c0 = time.perf_counter(), time.process_time()
        with finetune._autocast(model.device):
            loss = clf(**batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    per_step = (time.perf_counter() - t0) / (len(batches) - warmup)
    # CPU seconds of this process per step: on a shared machine wall time includes waiting for the CPU;
    # CPU time / threads approximates the wall time of an idle machine with as many cores as threads
    cpu_per_step = (time.process_time() - c0) / (len(batches) - warmup)
    test = (sp.test * (1 + eval_examples // max(len(sp.test), 1)))[:eval_examples]
    t1 = time.perf_counter()
    finetune.predict(clf, model.tokenizer, test, s, model.device)
    per_eval = (time.perf_counter() - t1) / len(test)
    counts = sp.counts()
    n = lambda part: counts[part]["pos"] + counts[part]["neg"]  # noqa: E731
    return {"set": ds.name, "positives": len(ds.positives), "target": ds.diseases[target].name,
            "train_examples": n("train"), "validation_examples": n("validation"), "test_examples": n("test"),
            "seconds_per_step": per_step, "cpu_seconds_per_step": cpu_per_step,
            "seconds_per_eval_example": per_eval, "steps_timed": len(batches) - warmup}


def projection(rate: dict, *, epochs: float, models: int, diseases: list[int], seeds: int, machines: list[int],
               overhead: float) -> list[dict]:
    steps = math.ceil(rate["train_examples"] / 8)
    cell = (epochs * steps * rate["seconds_per_step"]
            + (epochs * rate["validation_examples"] + rate["test_examples"]) * rate["seconds_per_eval_example"]
            + overhead)
    rows = []
    for d in diseases:
        cells = models * d * seeds
        for n in machines:
            rows.append({"diseases": d, "cells": cells, "machines": n, "seconds_per_cell": cell,
                         "hours": math.ceil(cells / n) * cell / 3600})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--device", default=None)
    ap.add_argument("--cells", type=int, default=4, help="real fine-tunings on the demo-derived set (0: skip)")
    ap.add_argument("--steps", type=int, default=30, help="timed training steps on the paper-sized set")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--eval-examples", type=int, default=200)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "diskne.json"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pk-diskne-bench-")
    os.environ.setdefault("PROBEKIT_CACHE_DIR", str(Path(tmp) / "cache"))
    import torch

    from probekit import config
    from probekit.diskne import build, finetune, negatives, splits

    model = finetune._loaded(args.model, args.device)
    out = {"model": args.model, "device": str(model.device), "threads": torch.get_num_threads(),
           "cpu_count": os.cpu_count(), "load_before": os.getloadavg()}
    print(f"model {args.model} on {model.device}, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}")

    # 1. real fine-tunings, paper settings, on the shipped (demo-derived) set
    demo, demo_path = build.build("demo")
    neg = negatives.for_model(demo, model, n=10)
    cells = []
    for t in splits.targets(demo)[:args.cells]:
        cfg = finetune.cell_settings(model=args.model, set_path=str(demo_path), target=t, seed=0, negatives=neg,
                                     categories=demo.categories, device=args.device)
        r = finetune.run_cell(cfg)
        cells.append({k: r[k] for k in ("disease", "train_examples", "validation_examples", "test_examples",
                                        "epochs", "best_epoch", "seconds")})
        print(f"  cell {r['disease']}: {r['train_examples']} train, {r['epochs']} epochs, {r['seconds']:.1f} s")
    if cells:
        per_cell = sum(c["seconds"] for c in cells) / len(cells)
        mean_epochs = sum(c["epochs"] for c in cells) / len(cells)
        out["demo"] = {"set": demo.summary(), "cells": cells, "seconds_per_finetuning": per_cell,
                       "finetunings_per_hour": 3600 / per_cell, "mean_epochs": mean_epochs}
        print(f"demo-derived set, paper settings: {per_cell:.1f} s per fine-tuning = {3600 / per_cell:.0f} per "
              f"hour (mean {mean_epochs:.1f} epochs)")
    else:
        mean_epochs = 8.0

    # 2. the step rate on a paper-sized set (MedLAMA-derived when present)
    if (config.medlama_dir() / "2021AA").is_dir():
        big, _ = build.build("medlama", max_diseases=40)
    else:
        big = demo
    big_neg = negatives.for_model(big, model, n=10)
    rate = step_rate(model, big, big_neg, steps=args.steps, warmup=args.warmup, eval_examples=args.eval_examples)
    out["rate"] = rate
    print(f"{rate['set']}: Train_X {rate['train_examples']} examples, {rate['seconds_per_step'] * 1000:.0f} ms per "
          f"training step (batch 8; {rate['cpu_seconds_per_step'] * 1000:.0f} CPU-ms), "
          f"{rate['seconds_per_eval_example'] * 1000:.1f} ms per evaluated example")

    # 3. projections: the paper's grid (4 models x diseases x 3 seeds)
    overhead = 0.0 if not cells else max(0.0, per_cell - (
        mean_epochs * math.ceil(cells[0]["train_examples"] / 8) * rate["seconds_per_step"]
        + (mean_epochs * cells[0]["validation_examples"] + cells[0]["test_examples"])
        * rate["seconds_per_eval_example"]))
    out["overhead_seconds_per_cell"] = overhead
    rows = []
    for epochs in sorted({round(mean_epochs, 1), 3.0, 8.0}):
        rows += [{"epochs": epochs, **r} for r in projection(rate, epochs=epochs, models=4, diseases=[85, 300],
                                                              seeds=3, machines=[1, 4, 16, 64], overhead=overhead)]
    out["projection"] = rows
    out["load_after"] = os.getloadavg()
    for epochs in sorted({r["epochs"] for r in rows}):
        cell = next(r["seconds_per_cell"] for r in rows if r["epochs"] == epochs)
        print(f"paper-sized fine-tuning at {epochs:.1f} epochs: {cell / 60:.1f} min")
    print(f"{'epochs':>6} {'diseases':>8} {'cells':>6} {'machines':>8} {'hours':>9}")
    for r in rows:
        print(f"{r['epochs']:>6.1f} {r['diseases']:>8} {r['cells']:>6} {r['machines']:>8} {r['hours']:>9.1f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(args.out, json.dumps(out, indent=2, default=str))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
