"""One Playwright test of the main flow in headless Chromium: open the app, probe, see the top-k table.

Uses Debian's chromium (``playwright install`` cannot download browsers here). Skips, saying so,
only when no browser is installed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
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


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    base = tmp_path_factory.mktemp("browser")
    port = _free_port()
    env = {**os.environ, "PROBEKIT_CACHE_DIR": str(base / "cache"), "PROBEKIT_DB": str(base / "pk.duckdb"),
           "PROBEKIT_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    log = open(base / "server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true", "--server.fileWatcherType", "none",
         "--browser.gatherUsageStats", "false"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail(f"streamlit did not start: {(base / 'server.log').read_text()[-2000:]}")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def page(app_url, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
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
