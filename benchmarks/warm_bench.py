"""Cold vs warm ``probekit bench`` on the shell, each call a new process (target: warm at least 40x faster than cold).

The command is the review's: ``python -m probekit bench --dataset medlama --set hard --probe retrieval --model
default --format json --quiet`` (nothing saved: every warm call recomputes the run from the embedding cache).

* **cold**: an empty ``PROBEKIT_CACHE_DIR`` (and ``PROBEKIT_DB``): encodes every candidate name and query, ranks.
  Run once; its time and output are kept in ``<cache-dir>/cold.json``, so ``--cache-dir`` of an earlier run skips
  it (a cold MedLAMA hard run takes minutes on 2 cores).
* **warm**: the same command ``--warm`` times, one after another, with the cache the cold call filled: every vector
  is read from disk, nothing encoded.

Whole-process wall time (Python start, imports, dataset loading included). Every warm output (all metrics,
per relation, macro, micro and their intervals) must equal the cold one before any ratio is printed.

    .venv/bin/python benchmarks/warm_bench.py --warm 5 | tee benchmarks/results/warm_bench.txt
    .venv/bin/python benchmarks/warm_bench.py --cache-dir /tmp/pkwarm --warm 5   # reuse an earlier cold call
    .venv/bin/python benchmarks/warm_bench.py --cache-dir /tmp/pkwarm --before /tmp/pk-before  # against old code
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def command(args) -> list[str]:
    cmd = [sys.executable, "-m", "probekit", "bench", "--dataset", args.dataset, "--set", args.which, "--probe",
           "retrieval", "--model", args.model, "--k", str(args.k), "--format", "json", "--quiet"]
    for rel in args.relation or []:
        cmd += ["--relation", rel]
    return cmd


def timed(cmd: list[str], env: dict, code: Path = ROOT) -> tuple[float, dict]:
    t = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env={**env, "PYTHONPATH": str(code)}, cwd=code)
    sec = time.perf_counter() - t
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[2:])} failed (rc {res.returncode}): {res.stderr.strip()[-800:]}")
    return sec, json.loads(res.stdout)


def comparable(out: dict) -> dict:
    """The output without what may differ between equal runs (the run's own time)."""
    return {k: v for k, v in out.items() if k != "seconds"}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="medlama")
    p.add_argument("--set", dest="which", default="hard")
    p.add_argument("--model", default="default")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--relation", action="append")
    p.add_argument("--warm", type=int, default=3, help="warm calls, one after another")
    p.add_argument("--before", type=Path, default=None,
                   help="a folder holding an older probekit/ (`git archive OLD probekit | tar -x -C DIR`): its warm "
                        "calls are timed too, alternating with this checkout's, and must print the same results")
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="a folder of an earlier run of this script (its cache and cold.json): the cold call is skipped")
    args = p.parse_args()
    base = args.cache_dir or Path(tempfile.mkdtemp(prefix="pk-warm-bench-"))
    env = {**os.environ, "PROBEKIT_CACHE_DIR": str(base / "cache"), "PROBEKIT_DB": str(base / "runs.duckdb")}
    cmd = command(args)
    print(f"command: {' '.join(cmd[1:])}")
    print(f"cache: {base}   cores: {os.cpu_count()}")
    cold_file = base / "cold.json"
    if cold_file.is_file():
        cold = json.loads(cold_file.read_text())
        if cold["command"] != cmd[1:]:
            raise SystemExit(f"{cold_file} was measured with another command: {' '.join(cold['command'])}")
        print(f"cold (kept from {cold_file}): {cold['seconds']:.1f} s")
    else:
        sec, out = timed(cmd, env)
        cold = {"command": cmd[1:], "seconds": sec, "output": out}
        base.mkdir(parents=True, exist_ok=True)
        cold_file.write_text(json.dumps(cold))
        print(f"cold: {sec:.1f} s")
    warm, before = [], []
    for i in range(args.warm):
        for code, times, name in ((args.before, before, "warm before"), (ROOT, warm, "warm")):
            if code is None:
                continue
            sec, out = timed(cmd, env, code)
            if comparable(out) != comparable(cold["output"]):
                diff = [k for k in comparable(out) if out.get(k) != cold["output"].get(k)]
                raise SystemExit(f"{name} call {i + 1} printed other results than the cold one (differs in: {diff})")
            times.append(sec)
            print(f"{name} {i + 1}: {sec:.2f} s (results equal to cold's)")
    micro = cold["output"]["micro"]
    print("micro: " + ", ".join(f"{k} {v:.4f}" for k, v in micro.items() if isinstance(v, float)))
    med = statistics.median(warm)
    print(f"warm median {med:.2f} s (min {min(warm):.2f}); cold/warm = {cold['seconds'] / med:.1f}x "
          f"(best warm: {cold['seconds'] / min(warm):.1f}x)")
    if before:
        bmed = statistics.median(before)
        print(f"warm before median {bmed:.2f} s (min {min(before):.2f}); cold/warm before = "
              f"{cold['seconds'] / bmed:.1f}x; warm before/after = {bmed / med:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
