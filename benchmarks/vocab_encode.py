"""Vocabulary encoding throughput: names/s in shards on CPU, 2 Ray workers against 1 on the same thread budget,
and a GPU figure (measured with ``--device cuda`` when a GPU is present, else PROJECTED from measured FLOPs).

Names: MedLAMA full's heads+tails (real UMLS name lengths), the first ``--n``, written as a name list and encoded
with the embedded default model (MiniLM-L6, mean pooling, names cut at 25 tokens) into shards of
``--shard-size`` by :mod:`probekit.vocab.shards`. Each mode starts from an empty cache (nothing reused):

- ``local``: this process, ``--threads`` torch threads (the baseline);
- ``ray-1``: one Ray worker with ``--threads`` threads; ``ray-2``: two workers with ``--threads // 2`` each, the
  same thread budget. The ratio ray-2 / ray-1 is on encoding time (first shard handed out to the last one back;
  the actors' start and model load are reported apart), the target being >= 1.6;
- ``ray-1-half``: one worker with ``--threads // 2`` threads, so ray-2 / ray-1-half is the scaling-out reading
  (twice the workers, each as strong). The seconds spent inside the actors' encoding are reported beside each
  (``worker_s``): encode_s x workers minus that is Ray's own share. The Ray modes run ``--repeats`` rounds,
  interleaved, and their medians make the ratios (two busy processes on a shared VM vary by up to a third from
  run to run; one does not).

FLOPs per name are counted by ``torch.utils.flop_counter`` on one batch of the names; the projection divides an
assumed GPU peak (``--gpu-tflops``, default 989: H100 SXM dense bf16) times an assumed utilisation
(``--gpu-util``, default 0.3) by them. It is a projection, labelled so, never a measurement.

    PROBEKIT_MEDLAMA_DIR=../shared/data/medlama .venv/bin/python benchmarks/vocab_encode.py   # minutes
    .venv/bin/python benchmarks/vocab_encode.py --n 2000 --no-ray    # quick look
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probekit import models  # noqa: E402
from probekit.datasets import load_dataset  # noqa: E402
from probekit.vocab import shards  # noqa: E402
from probekit.vocab.ray_shards import encode_on_ray  # noqa: E402
from probekit.vocab.sources import open_source  # noqa: E402


def _names(n: int) -> list[str]:
    names = list(load_dataset("medlama").candidates("heads+tails").names)  # PROBEKIT_MEDLAMA_DIR
    return names[:n]


def _fresh_cache(base: Path, label: str) -> None:
    os.environ["PROBEKIT_CACHE_DIR"] = str(base / label)


def _flops_per_name(model, names: list[str]) -> float:
    from torch.utils.flop_counter import FlopCounterMode

    from probekit.encode import encode_layers

    sample = names[:128]
    with FlopCounterMode(display=False) as counter:
        encode_layers(model, sample, pooling="mean", batch_size=len(sample), max_length=shards.NAME_MAX_LENGTH)
    return counter.get_total_flops() / len(sample)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=6000)
    ap.add_argument("--shard-size", type=int, default=500)
    ap.add_argument("--threads", type=int, default=2, help="thread budget of every mode")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--repeats", type=int, default=3, help="rounds of the Ray modes (medians reported)")
    ap.add_argument("--device", default="cpu", help="cuda: also measure GPU throughput")
    ap.add_argument("--gpu-tflops", type=float, default=989.0)
    ap.add_argument("--gpu-util", type=float, default=0.3)
    ap.add_argument("--out", default=None, help="also write the results as JSON here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    base = Path(tempfile.mkdtemp(prefix="pk-vocab-encode-"))
    names = _names(args.n)
    path = base / "names.txt"
    path.write_text("\n".join(names) + "\n", encoding="utf-8")
    def save() -> None:  # after each mode: a run cut off by a time limit keeps what it measured
        if args.out:
            Path(args.out).write_text(json.dumps(out, indent=1))

    out: dict = {"names": len(names), "shard_size": args.shard_size, "threads": args.threads,
                 "load_before": os.getloadavg(), "cpus": os.cpu_count()}

    _fresh_cache(base, "local")
    model = models.load("default", device="cpu")
    rows = shards.read_rows(open_source("names", path), shard_size=args.shard_size)
    t = time.perf_counter()
    shards.encode(model, rows, batch_size=args.batch_size)
    local_s = time.perf_counter() - t
    out["local"] = {"seconds": round(local_s, 2), "names_per_s": round(len(names) / local_s, 1)}
    print(f"local ({args.threads} threads): {len(names):,} names in {local_s:.1f} s = {len(names) / local_s:,.0f} "
          "names/s", flush=True)

    flops = _flops_per_name(model, names)
    out["flops_per_name"] = flops
    out["cpu_gflops_achieved"] = round(flops * len(names) / local_s / 1e9, 2)
    projected = args.gpu_tflops * 1e12 * args.gpu_util / flops
    out["gpu_projection"] = {"names_per_s": round(projected), "assumed_peak_tflops": args.gpu_tflops,
                             "assumed_utilisation": args.gpu_util, "label": "PROJECTION, not measured"}
    save()
    print(f"FLOPs per name {flops / 1e6:.1f} M; CPU achieved {out['cpu_gflops_achieved']} GFLOP/s; GPU PROJECTION "
          f"{projected:,.0f} names/s ({args.gpu_tflops:g} TFLOP/s peak x {args.gpu_util:g} utilisation, assumed)")
    if args.device.startswith("cuda") and torch.cuda.is_available():
        _fresh_cache(base, "gpu")
        gpu = models.load("default", device=args.device)
        rows = shards.read_rows(open_source("names", path), shard_size=args.shard_size)
        shards.encode(gpu, shards.read_rows(open_source("names", path), shard_size=len(names)), batch_size=512)
        t = time.perf_counter()
        shards.encode(gpu, rows, batch_size=512)
        g = time.perf_counter() - t
        out["gpu_measured"] = {"names_per_s": round(len(names) / g, 1), "device": torch.cuda.get_device_name()}
        print(f"GPU MEASURED ({torch.cuda.get_device_name()}): {len(names) / g:,.0f} names/s")
    models.release(model)

    if not args.no_ray:
        per = max(1, args.threads // 2)
        # (label, workers, threads each): one worker on the whole budget, one on a half, two on a half each
        modes = (("ray-1", 1, args.threads), ("ray-1-half", 1, per), ("ray-2", 2, per))
        for label, workers, threads in modes:
            out[label] = {"workers": workers, "threads_per_worker": threads, "runs": []}
        for round_ in range(args.repeats):  # interleaved: a slow spell of the machine hits every mode alike
            for label, workers, threads in modes:
                _fresh_cache(base, f"{label}-{round_}")
                rows = shards.read_rows(open_source("names", path), shard_size=args.shard_size)
                t = time.perf_counter()
                _, how = encode_on_ray("default", rows, workers=workers, threads_per_worker=threads,
                                       batch_size=args.batch_size, device="cpu")
                run = {"encode_s": round(how["encode_s"], 2), "worker_s": round(how["worker_s"], 2),
                       "start_s": round(how["start_s"], 2), "wall_s": round(time.perf_counter() - t, 2)}
                out[label]["runs"].append(run)
                print(f"{label} ({workers} x {threads} threads): encode {how['encode_s']:.1f} s "
                      f"= {len(names) / how['encode_s']:,.0f} names/s (inside the actors {how['worker_s']:.1f} s; "
                      f"start {how['start_s']:.1f} s)", flush=True)
                save()
        for label, _, _ in modes:
            med = statistics.median(r["encode_s"] for r in out[label]["runs"])
            out[label].update(encode_s=med, names_per_s=round(len(names) / med, 1))
        out["ray_2_vs_1"] = round(out["ray-1"]["encode_s"] / out["ray-2"]["encode_s"], 2)
        out["ray_2_vs_1_half"] = round(out["ray-1-half"]["encode_s"] / out["ray-2"]["encode_s"], 2)
        print(f"medians of {args.repeats}: 2 Ray workers vs 1 on the same {args.threads}-thread budget: "
              f"{out['ray_2_vs_1']:.2f}x (target >= 1.6); vs 1 worker of {per} thread(s) (scaling out): "
              f"{out['ray_2_vs_1_half']:.2f}x")
    out["load_after"] = os.getloadavg()
    print(f"load average before {out['load_before'][0]:.1f}, after {out['load_after'][0]:.1f} on {os.cpu_count()} "
          "CPUs (absolute times are loaded; ratios are what count)")
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
