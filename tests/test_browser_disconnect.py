"""A browser tab closed while its page reruns leaves no traceback in the server log.

The rule: the log of a healthy session has no traceback. Closing a tab while a script run is still sending its
page is a normal thing for a browser to do, so the server must take it quietly. The share link of the Probe page
probes at once (loading the model first), a rerun long enough to close the tab in the middle of it. The app
drops one harmless upstream record (pages/_server_log.py); anything else with a traceback fails here.
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("playwright", reason="playwright is not installed")
from test_browser import APP, PAGES, Budget, launch, serve, wait_idle  # noqa: E402  (skips when no Chromium)

TEST_TIMEOUT_S = 400
BUDGET_S = 260  # inside the timeout, with room for the server start (up to 120 s) and its stop
RUNNING = f"{APP}[data-test-script-state='running']"


@pytest.mark.heavy
@pytest.mark.browser
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_closing_a_tab_mid_rerun_logs_no_traceback(tmp_path):
    from playwright.sync_api import sync_playwright

    env = {**os.environ, "PROBEKIT_CACHE_DIR": str(tmp_path / "cache"), "PROBEKIT_DB": str(tmp_path / "pk.duckdb"),
           "PROBEKIT_DATA_DIR": str(tmp_path / "data"), "PROBEKIT_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("PROBEKIT_ORGANISER_TOKEN", None)
    share, *_ = PAGES[0]  # the Probe page's share link: it probes as soon as it opens
    expected = PAGES[0][3]
    log = tmp_path / "server.log"
    with serve(env, log) as url, sync_playwright() as pw:
        budget = Budget(BUDGET_S)
        browser = launch(pw)
        try:
            for _ in range(3):  # three tabs, each closed while its rerun is still running
                ctx = browser.new_context()
                page = ctx.new_page()
                page.goto(f"{url}/{share}", timeout=budget.ms())
                page.wait_for_selector(RUNNING, timeout=budget.ms())
                ctx.close()
            # a closed tab's session is shut down (its run stopped) at the disconnect; a new tab probing to the end
            # afterwards shows the server still serves, and gives any late send of the closed ones time to be logged
            ctx = browser.new_context()
            page = ctx.new_page()
            page.goto(f"{url}/{share}", timeout=budget.ms())
            wait_idle(page, *expected(page), timeout=budget.ms())
            ctx.close()
        finally:
            browser.close()
    text = log.read_text()
    assert "Traceback" not in text, text[-4000:]
