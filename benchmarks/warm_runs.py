"""Cold vs warm full MedLAMA benchmark run of the default model, in one process (target: warm ≥ 20×).

Every timed run is ``runs.run_benchmark`` on the same settings (retrieval probe, heads+tails
vocabulary, k = 10), results saved to DuckDB each time:

* **cold**: empty cache folder and database (a temporary ``PROBEKIT_CACHE_DIR`` / ``PROBEKIT_DB``);
  encodes the 22,923 candidate names and 19,000 queries, scores, saves.
* **warm in-process**: the same run recomputed (``reuse=False``) with the embeddings in memory.
* **warm after restart**: the in-process memos cleared (``index.clear_memo()``, ``runs.clear_memo()``),
  so embeddings come from the disk cache, as in a new process.
* **opened from the store**: ``reuse=True``: the finished identical run is found and loaded.

Model and dataset loading are timed apart (a restarted app loads the model once either way). The
warm runs must give the same accuracies as the cold one.

``--path cli`` (or ``both``) times the shell instead: ``python -m probekit bench ... --save`` in a new
process each time, with fresh ``PROBEKIT_CACHE_DIR`` / ``PROBEKIT_DB`` for the cold call; whole-process
wall time (Python start, imports, model and dataset loading included):

* **cli cold**: nothing cached, nothing stored.
* **cli warm (stored run)**: the same command again: the one runner finds the stored run.
* **cli warm --fresh**: a new run forced in a new process: every embedding comes from the disk cache.

    .venv/bin/python benchmarks/warm_runs.py                       # MedLAMA full, default model, in-process
    .venv/bin/python benchmarks/warm_runs.py --path cli --set hard # the shell path on the MedLAMA hard set
    .venv/bin/python benchmarks/warm_runs.py --dataset demo        # seconds, for a smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from probekit import atomic  # noqa: E402


def cli_path(args) -> dict:
    """Cold and warm ``python -m probekit bench --save`` calls, each a new process."""
    tmp = Path(tempfile.mkdtemp(prefix="pk-warm-cli-"))
    env = {**os.environ, "PROBEKIT_CACHE_DIR": str(tmp / "cache"), "PROBEKIT_DB": str(tmp / "runs.duckdb"),
           "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "probekit", "bench", "--dataset", args.dataset, "--set", args.which, "--model",
           args.model, "--device", args.device, "--k", "10", "--save", "--quiet", "--format", "json"]
    for rel in args.relation or []:
        cmd += ["--relation", rel]
    out = []
    for name, extra in (("cli cold", []), ("cli warm (stored run)", []), ("cli warm --fresh (disk cache)", ["--fresh"]),
                        ("cli warm (stored run) again", [])):
        t = time.perf_counter()
        res = subprocess.run(cmd + extra, capture_output=True, text=True, env=env, cwd=ROOT)
        sec = time.perf_counter() - t
        if res.returncode != 0:
            raise SystemExit(f"{name} failed: {res.stderr.strip()[-500:]}")
        data = json.loads(res.stdout)
        accs = (data["macro"]["acc@1"], data["macro"]["acc@10"], data["micro"]["acc@1"], data["micro"]["acc@10"])
        out.append({"name": name, "seconds": sec, "run_id": data["run_id"], "accs": accs,
                    "run_seconds": data.get("seconds")})
        print(f"{name:<32} {sec:>9.2f} s   run {data['run_id']}", flush=True)
    cold = out[0]
    same = all(r["accs"] == cold["accs"] for r in out)
    print(f"\nmacro acc@1 / acc@10: {100 * cold['accs'][0]:.2f} / {100 * cold['accs'][1]:.2f}; identical in every "
          f"call: {same}")
    print(f"{'call':<32} {'seconds':>9} {'cold / this':>12}")
    for r in out:
        print(f"{r['name']:<32} {r['seconds']:>9.2f} {cold['seconds'] / r['seconds']:>11.1f}x")
    ratio = cold["seconds"] / out[1]["seconds"]
    print(f"target: a second identical `bench --save` >= 20x faster than the cold one: "
          f"{ratio:.1f}x, {'met' if ratio >= 20 else 'NOT met'}")
    return {"path": "cli", "calls": out, "identical": same, "ratio_second_save": ratio}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="medlama")
    ap.add_argument("--set", dest="which", default="full")
    ap.add_argument("--model", default="default")
    ap.add_argument("--relation", action="append", default=None, help="only these relations (quick checks)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    ap.add_argument("--path", default="app", choices=["app", "cli", "both"],
                    help="app: in-process runner (default); cli: new `python -m probekit bench --save` processes")
    args = ap.parse_args()
    if args.path in ("cli", "both"):
        cli = cli_path(args)
        if args.path == "cli":
            if args.json:
                atomic.write_text(args.json, json.dumps(cli, indent=2))
            return 0 if cli["identical"] else 1

    tmp = tempfile.mkdtemp(prefix="pk-warm-")
    os.environ["PROBEKIT_CACHE_DIR"] = str(Path(tmp) / "cache")  # cold: nothing cached
    os.environ["PROBEKIT_DB"] = str(Path(tmp) / "runs.duckdb")
    import torch

    from probekit import index, models
    from probekit.bench import runs
    from probekit.datasets import load_dataset

    t = time.perf_counter()
    kw = {"relations": args.relation} if args.relation else {}
    ds = load_dataset(args.dataset, which=args.which, **kw)
    t_data = time.perf_counter() - t
    t = time.perf_counter()
    model = models.load(args.model, device=args.device)
    t_model = time.perf_counter() - t
    print(f"{ds.name}: {len(ds):,} queries, {len(ds.candidates()):,} candidates; model {model.id} on {model.device} "
          f"({torch.get_num_threads()} torch threads); load: dataset {t_data:.1f} s, model {t_model:.1f} s",
          flush=True)

    def timed(name, **kw):
        t = time.perf_counter()
        run = runs.run_benchmark(model, ds, k=10, **kw)
        sec = time.perf_counter() - t
        s = run.summary(ks=(1, 10))
        accs = (s["macro"]["acc@1"], s["macro"]["acc@10"], (s["hard"] or s)["macro"]["acc@1"],
                (s["hard"] or s)["macro"]["acc@10"])
        stages = "found stored run" if kw.get("reuse", True) and name != "cold" else \
            f"stages {json.dumps(run.meta.get('timings') or {})}"
        print(f"{name:<26} {sec:>9.2f} s   {stages}", flush=True)
        return {"name": name, "seconds": sec, "run_id": run.run_id, "accs": accs, "timings": run.meta.get("timings")}

    cold = timed("cold")
    warm = timed("warm in-process", reuse=False)
    index.clear_memo()
    runs.clear_memo()
    restart = timed("warm after restart (disk)", reuse=False)
    store = timed("opened from the store", reuse=True)
    results = [cold, warm, restart, store]
    same = all(r["accs"] == cold["accs"] for r in results)
    print(f"\nmacro acc@1 / acc@10 full: {100 * cold['accs'][0]:.2f} / {100 * cold['accs'][1]:.2f}; "
          f"hard: {100 * cold['accs'][2]:.2f} / {100 * cold['accs'][3]:.2f}; identical in every run: {same}")
    print(f"{'run':<26} {'seconds':>9} {'cold / this':>12}")
    for r in results:
        print(f"{r['name']:<26} {r['seconds']:>9.2f} {cold['seconds'] / r['seconds']:>11.1f}x")
    ok = min(cold["seconds"] / warm["seconds"], cold["seconds"] / restart["seconds"]) >= 20
    print(f"target warm >= 20x faster than cold (recomputed runs): {'met' if ok else 'NOT met'}")
    if args.json:
        atomic.write_text(args.json, json.dumps({"dataset": ds.name, "n_queries": len(ds), "model": model.id,
                                                 "load_seconds": {"dataset": t_data, "model": t_model},
                                                 "runs": results, "identical": same}, indent=2))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
