"""Playwright tests in headless Chromium against a real ``streamlit run``: the main flow (open the app,
probe, see the top-k table), a benchmark run started in the browser and reopened from the store, one
rank-change curve on the Context page, and a short rewiring run whose checkpoints are swept.

Uses Debian's chromium (``playwright install`` cannot download browsers here). Skips, saying so,
only when no browser is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("PROBEKIT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install chromium (the browser test needs it)",
                allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(env: dict, log_path: Path):
    """``streamlit run app.py`` on a free port with ``env``; yields its URL once healthy, stops it after."""
    port = _free_port()
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true", "--server.fileWatcherType", "none",
         "--browser.gatherUsageStats", "false"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(f"streamlit did not start: {log_path.read_text()[-2000:]}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def launch(pw):
    return pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    base = tmp_path_factory.mktemp("browser")
    corpora = base / "corpora"  # a small stand-in for the elicit corpora, under pubmed_0's file name
    corpora.mkdir()
    from probekit.datasets import load_dataset
    from probekit.rewire import CORPUS_FILES

    demo = load_dataset("demo")
    (corpora / CORPUS_FILES["pubmed_0"]).write_text(
        "\n".join(f"In this cohort {q.subject.lower()} was associated with {g.lower()} in most patients"
                  for q in demo.queries for g in q.golds) + "\n")
    env = {**os.environ, "PROBEKIT_CACHE_DIR": str(base / "cache"), "PROBEKIT_DB": str(base / "pk.duckdb"),
           "PROBEKIT_CORPORA_DIR": str(corpora), "PROBEKIT_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    with serve(env, base / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def page(app_url, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = launch(pw)
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        pg = ctx.new_page()
        pg.set_default_timeout(120_000)
        yield pg
        browser.close()


def _shot(page, name: str) -> None:
    folder = os.environ.get("PROBEKIT_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def test_probe_main_flow(page, app_url):
    page.goto(app_url)
    page.get_by_test_id("stBaseButton-primary").click()
    page.get_by_test_id("stDataFrame").first.wait_for()
    # The table draws on a canvas: check its caption line and the chart instead of cell text.
    page.get_by_text("candidates", exact=False).first.wait_for()
    page.locator(".js-plotly-plot").first.wait_for()
    assert "query=" in page.url and "model=" in page.url
    assert page.get_by_test_id("stException").count() == 0
    _shot(page, "probe")


def _no_exception(page) -> None:
    assert page.get_by_test_id("stException").count() == 0
    assert page.get_by_test_id("stAlertContentError").count() == 0


def test_benchmark_run_then_reopen_from_the_store(page, app_url):
    """Start a demo benchmark in the browser (background job, live progress), see its charts, then open the
    page afresh: the stored run is shown without running anything."""
    page.goto(f"{app_url}/benchmark")
    page.get_by_text("No stored runs yet").wait_for()
    page.get_by_role("button", name="Start").click()
    page.get_by_text("Accuracy (%): full set vs its hard subset").wait_for()
    page.locator(".js-plotly-plot").nth(1).wait_for()  # per-relation and by-length charts
    _no_exception(page)
    page.goto(f"{app_url}/benchmark")  # a new browser session: the run comes from DuckDB
    page.get_by_text("Accuracy (%): full set vs its hard subset").wait_for()
    page.locator(".js-plotly-plot").nth(1).wait_for()
    assert page.get_by_text("No stored runs yet").count() == 0
    _no_exception(page)
    _shot(page, "benchmark")


def test_context_draws_a_rank_change_curve(page, app_url):
    """Paste a note about the default query's subject and golds, see it segmented, run, see the curve."""
    from probekit.datasets import load_dataset

    ds = load_dataset("demo")
    q = max(ds.queries_for(ds.relations[0]), key=lambda q: len(q.golds))  # the page's default query
    pool = [n for n in ds.candidates("relation", ds.relations[0]).names if n not in q.golds]
    note = (f"{q.subject} was suspected. MRI of the {q.golds[1].lower()} was normal, the {pool[0].lower()} too. "
            f"Lesions were seen in the {q.golds[0].lower()}. Biopsy of the {pool[1].lower()} was negative; "
            f"the {q.golds[-1].lower()} is involved.")
    page.goto(f"{app_url}/context")
    box = page.get_by_label("Document (e.g. a clinical note mentioning S and O_t)")
    box.fill(note)
    box.press("Control+Enter")
    page.get_by_text("segments; blue = O_t").wait_for()
    page.get_by_role("button", name="Run", exact=True).click()
    # the UCM sentence of the run (whichever way it reads), once the run is drawn
    page.get_by_text(re.compile(r"Over \d+ steps? that added a correct object|No correct object \(O_cor\) was added"))\
        .first.wait_for()
    page.locator(".js-plotly-plot").first.wait_for()
    assert page.locator(".js-plotly-plot .scatterlayer .trace").count() >= 4  # O_t, O_cor, O_incor, O_a
    _no_exception(page)
    _shot(page, "context")


def _set_number(page, label: str, value: int) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Enter")


def test_rewire_then_sweep_the_checkpoints(page, app_url):
    """Rewire the default model on pubmed_0 for a few steps from the UI (live loss, checkpoints), then sweep
    its checkpoints on the demo dataset and see the acc@k-vs-step plot."""
    page.goto(f"{app_url}/rewire")
    page.get_by_text("No rewiring runs yet").wait_for()
    _set_number(page, "Steps", 6)
    _set_number(page, "Checkpoint every", 3)
    _set_number(page, "Batch size (pairs)", 8)
    page.get_by_role("button", name="Start training").click()
    stop = page.locator(".st-key-rw_stop")  # the job panel's Stop button: there while training runs
    stop.wait_for()
    page.locator(".st-key-rw_live .js-plotly-plot").first.wait_for()  # the live loss curve (reruns may draw it twice)
    stop.wait_for(state="detached")
    page.locator(".st-key-rw_curve .js-plotly-plot").first.wait_for()  # the finished run's curve and checkpoints
    sweep = page.get_by_role("button", name="Sweep these checkpoints")
    assert sweep.is_enabled()  # checkpoints at steps 3 and 6
    _no_exception(page)
    _shot(page, "rewire")
    sweep.click()
    page.get_by_role("button", name="Run sweep").click()
    page.get_by_text("best checkpoint (step").wait_for()
    page.locator(".js-plotly-plot").nth(1).wait_for()  # macro/micro vs step, and per relation
    _no_exception(page)
    _shot(page, "sweep")
