"""A background job watched in the browser vs the same job from the CLI (target: watched / CLI <= 1.1).

The job: a benchmark of the default model (retrieval, heads+tails, k = 10) on one dataset. Its time is the run's
own ``seconds`` (stored with every run: the runner's time, model and dataset loading excluded), so both paths are
measured by the same clock:

* **cli**: ``python -m probekit bench … --save --fresh --format json`` in a new process.
* **watched**: ``streamlit run app.py``; headless Chromium opens the Benchmark page at 1024×768, presses Start and
  keeps the tab open on the job panel until the job is done; the run's seconds are read from the store after.

One process at a time (the server is stopped before the CLI runs); each path runs once warm-up (so embedding caches
are equally warm: the candidate names come from the same cache folder), then ``--repeats`` timed runs alternating
CLI / watched. The load average is printed with each figure: on a shared machine absolute times are loaded.

    .venv/bin/python benchmarks/watched_job.py                      # demo set
    .venv/bin/python benchmarks/watched_job.py --dataset medlama:hard --repeats 1
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
sys.path.insert(0, str(ROOT / "tests"))


def cli_seconds(env: dict, dataset: str) -> float:
    name, _, which = dataset.partition(":")  # the app's spec "medlama:hard" is the CLI's --dataset medlama --set hard
    subset = ["--set", which] if which else []
    out = subprocess.run([sys.executable, "-m", "probekit", "bench", "--dataset", name, *subset, "--model", "default",
                          "--probe", "retrieval", "--save", "--fresh", "--format", "json", "--quiet"],
                         cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    data = json.loads(out)
    data = data[0] if isinstance(data, list) else data
    return float(data["seconds"])


def newest_run_seconds(env: dict) -> float:
    code = ("from probekit.bench import runs; r = runs.list_runs(); "
            "print(float(r.sort_values('created_at').iloc[-1]['seconds']))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True).stdout
    return float(out.strip().splitlines()[-1])


def watched_seconds(env: dict, dataset: str, log: Path) -> float:
    """The same job started and watched in the app, with a store of its own (the app opens an identical stored run
    instead of computing it) and the CLI's cache folder."""
    from playwright.sync_api import sync_playwright
    from test_browser import key, launch, serve, title, wait_idle

    env = {**env, "PROBEKIT_DB": str(log.with_suffix(".duckdb"))}
    with serve(env, log) as url, sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_context(viewport={"width": 1024, "height": 768}).new_page()
        page.goto(f"{url}/benchmark?model=default&dataset={dataset}", timeout=600_000)
        start = page.locator(f"{key('bm_start')} button")
        wait_idle(page, title(page, "Benchmark"), start, timeout=600_000)
        start.click()
        wait_idle(page, (page.locator(key("bm_cancel")), 0), page.locator(f"{key('bm_rel_chart')} .js-plotly-plot"),
                  timeout=3_600_000)
        browser.close()
    return newest_run_seconds(env)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="demo")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="pk_watched_"))
    env = {**os.environ, "PROBEKIT_CACHE_DIR": str(base / "cache"), "PROBEKIT_DB": str(base / "pk.duckdb"),
           "PROBEKIT_DATA_DIR": str(base / "data"), "PROBEKIT_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("PROBEKIT_ORGANISER_TOKEN", None)
    cli_seconds(env, args.dataset)  # warm-up: the candidate embeddings cached on disk for both paths
    watched_seconds(env, args.dataset, base / "server.log")
    cli, watched = [], []
    for i in range(args.repeats):
        cli.append(cli_seconds(env, args.dataset))
        print(f"cli      {cli[-1]:7.2f} s  (load {os.getloadavg()[0]:.1f})", flush=True)
        watched.append(watched_seconds(env, args.dataset, base / f"server{i}.log"))
        print(f"watched  {watched[-1]:7.2f} s  (load {os.getloadavg()[0]:.1f})", flush=True)
    ratio = statistics.median(watched) / statistics.median(cli)
    print(json.dumps({"dataset": args.dataset, "cli_s": cli, "watched_s": watched, "ratio_median": round(ratio, 3),
                      "load": round(os.getloadavg()[0], 1), "timed": time.strftime("%Y-%m-%d %H:%M")}))


if __name__ == "__main__":
    main()
