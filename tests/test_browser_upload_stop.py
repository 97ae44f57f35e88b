"""Stopping the reading of a large upload in Chromium, against a real ``streamlit run``: a million-row triples file
takes seconds to read (about 19 s on a loaded 2-core machine), in the sidebar's own script run. The bar beside it
has a Stop: pressed, the reading ends at its next report (every 20,000 records), nothing of the file is kept, and
no rerun reads it again until *Read it* is pressed, which reads it whole."""

from __future__ import annotations

import re

import pytest
from test_browser import (  # noqa: F401  (skips when no Chromium is installed; fixtures used by name)
    BUDGET_S,
    EXCEPTION,
    PROBE_RUN,
    Budget,
    app_url,
    browser,
    key,
    title,
    wait_idle,
)

pytestmark = [pytest.mark.browser, pytest.mark.heavy]  # a 42 MB upload, read twice


def _million_rows(path) -> None:
    with path.open("w") as fh:
        fh.write("subject,relation,object\n")
        for i in range(1_000_000):
            fh.write(f"subject {i},relation{i % 19},object {(i * 7) % 60_000}\n")


@pytest.mark.timeout(600)
def test_the_reading_of_a_large_upload_stops_and_reads_again_on_request(browser, app_url, tmp_path):  # noqa: F811
    from pages._sidebar import UPLOAD_READ_KEY, UPLOAD_STOP_KEY

    budget = Budget(BUDGET_S)
    upload = tmp_path / "big.csv"
    _million_rows(upload)
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(app_url, timeout=budget.ms())
    wait_idle(page, title(page, "Probe"), PROBE_RUN(page), timeout=budget.ms())
    box = page.locator(f"{key('pk_dataset')} input").first
    box.click()
    page.keyboard.type("Upload")
    page.keyboard.press("Enter")
    wait_idle(page, page.locator(key("pk_upload")), timeout=budget.ms())
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(upload))
    stop = page.locator(f"{key(UPLOAD_STOP_KEY)} button")
    stop.wait_for(timeout=budget.ms())  # the bar of the reading, with its Stop
    page.get_by_text(re.compile(r"reading big\.csv: [\d,]+/1,000,001")).first.wait_for(timeout=budget.ms())
    stop.click()
    stopped = page.get_by_text("stopped: nothing of it is kept", exact=False)
    wait_idle(page, stopped, page.get_by_text("Reading big.csv was stopped", exact=False), (stop, 0),
              timeout=budget.ms())
    assert page.get_by_text(re.compile(r"Server memory: .* · 0 parsed upload")).count() == 1
    assert page.locator(EXCEPTION).count() == 0
    page.locator(f"{key(UPLOAD_READ_KEY)} button").click()
    wait_idle(page, page.get_by_text(re.compile(r"Server memory: .* · 1 parsed upload")), (stopped, 0), (stop, 0),
              timeout=budget.ms())
    assert page.locator(EXCEPTION).count() == 0
