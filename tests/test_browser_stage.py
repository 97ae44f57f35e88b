"""Playwright tests of what a demo on a projector (1024×768) needs, each against a real ``streamlit run``: an uploaded
dataset keeps every probe option valid, a shared link opened by its URL loads with no console error, the answer and
the progress show without scrolling, and a running grid shows its cells as they are stored.

The waits are test_browser's (app state, one budget per test); any console error fails a test
(test_browser.no_console_errors).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from test_browser import (  # noqa: F401  (skips when no Chromium is installed; fixtures used by name)
    ERROR,
    EXCEPTION,
    PROBE_RESULT,
    PROBE_RUN,
    TABLE,
    TIMEOUT_MS,
    Budget,
    app_url,
    browser,
    key,
    no_console_errors,
    title,
    wait_idle,
)

pytestmark = pytest.mark.browser
PROJECTOR = {"width": 1024, "height": 768}
FREE_TEXT = ("prompt,object,subject,relation\n"
             "Metformin is used to treat [MASK].,diabetes,metformin,may_treat\n"
             "Insulin is used to treat [MASK].,diabetes,insulin,may_treat\n"
             "Aspirin can prevent [MASK].,stroke,aspirin,may_prevent\n"
             "Statins can prevent [MASK].,myocardial infarction,statins,may_prevent\n")


@pytest.fixture
def page(browser):  # noqa: F811
    ctx = browser.new_context(viewport=PROJECTOR)
    pg = ctx.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    yield pg
    ctx.close()


def pick(page, widget_key: str, option: str, then, budget: Budget) -> None:
    """Choose ``option`` in the selectbox ``widget_key`` as a user does (click, type, Enter) and wait for ``then``."""
    box = page.locator(f"{key(widget_key)} input").first
    box.click()
    page.keyboard.type(option)
    page.keyboard.press("Enter")
    wait_idle(page, then, timeout=budget.ms())


def no_error(page) -> None:
    assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).first.inner_text()
    assert page.locator(ERROR).count() == 0, page.locator(ERROR).first.inner_text()


@pytest.mark.timeout(600)
def test_uploaded_free_text_file_keeps_every_option_valid(page, app_url, tmp_path):  # noqa: F811
    """The rule: an option widget holds a value its option accepts (its default when nothing else was chosen),
    whatever the dataset: after the page stopped for want of an uploaded file and then showed again, the number
    boxes read their defaults (not their minimum), the probe answers, and Benchmark runs on the uploaded set."""
    from pages._sidebar import UPLOAD_NOT_IN_LINK
    from probekit.probes import get_probe

    budget = Budget(540)
    upload = tmp_path / "free.csv"
    upload.write_text(FREE_TEXT)
    page.goto(app_url, timeout=budget.ms())
    wait_idle(page, title(page, "Probe"), PROBE_RUN(page), timeout=budget.ms())
    dropzone = page.locator('[data-testid="stFileUploaderDropzoneInput"]')
    pick(page, "pk_dataset", "Upload", page.locator(key("pk_upload")), budget)
    dropzone.set_input_files(str(upload))
    wait_idle(page, page.locator(key("pk_qid")), PROBE_RUN(page), timeout=budget.ms())
    # the sidebar's memory line counts the file just uploaded (it was drawn before the page parsed it)
    assert page.get_by_text(re.compile(r"Server memory: .* · 1 parsed upload")).count() == 1
    page.get_by_text("Candidates, k and probe options").click()
    wait_idle(page, page.locator(f"{key('pk_opt_retrieval_batch_size')} input"), timeout=budget.ms())
    spec = {o.name: o for o in get_probe("retrieval").options}
    for name in ("batch_size", "max_length"):
        shown = page.locator(f"{key(f'pk_opt_retrieval_{name}')} input").first.input_value()
        assert shown == str(spec[name].default), f"{name} shows {shown}, not its default {spec[name].default}"
    PROBE_RUN(page).first.click()
    wait_idle(page, *PROBE_RESULT(page), timeout=budget.ms())
    no_error(page)
    assert "batch_size" not in page.url and "max_length" not in page.url  # defaults stay out of the link
    # the share link says the file is not in it, and opening it asks for the file (not another dataset's query)
    assert page.get_by_text(UPLOAD_NOT_IN_LINK).count() == 1
    other = page.context.new_page()
    other.goto(page.url, timeout=budget.ms())
    wait_idle(other, other.get_by_text(re.compile("This link was made on an uploaded file")), timeout=budget.ms())
    assert other.get_by_text(re.compile("is not in")).count() == 0
    other.close()
    # Benchmark on the uploaded set (same session: the sidebar's link)
    page.get_by_role("link", name="Benchmark").first.click()
    start = page.locator(f"{key('bm_start')} button")
    wait_idle(page, title(page, "Benchmark"), start, timeout=budget.ms())
    for name in ("batch_size", "max_length"):
        shown = page.locator(f"{key(f'bm_retrieval_{name}')} input").first.input_value()
        assert shown == str(spec[name].default), f"Benchmark: {name} shows {shown}"
    start.click()
    wait_idle(page, page.locator(TABLE), page.locator(f"{key('bm_rel_chart')} .js-plotly-plot"),
              (page.locator(key("bm_cancel")), 0), timeout=budget.ms())
    no_error(page)
    assert page.get_by_text(re.compile(r"upload:free\.csv")).count() > 0


@pytest.mark.timeout(600)
def test_inputs_survive_a_visit_to_another_page(page, app_url):  # noqa: F811
    """Leaving a page keeps its inputs: a typed Probe query, its k and its result are there after Benchmark and
    back (Streamlit drops a widget's value once a run no longer draws it, unless the widget persists it)."""
    from playwright.sync_api import expect

    budget = Budget(500)
    page.goto(app_url, timeout=budget.ms())
    typed = page.locator(key("pk_source")).get_by_role("radio", name="Type a query")
    wait_idle(page, title(page, "Probe"), typed, timeout=budget.ms())
    typed.click()
    box = page.get_by_role("textbox", name="Cloze query")
    wait_idle(page, box, timeout=budget.ms())
    box.fill("Aspirin might prevent [MASK].")
    box.press("Enter")
    wait_idle(page, *PROBE_RESULT(page, "Aspirin might prevent"), timeout=budget.ms())
    page.get_by_role("link", name="Benchmark").first.click()
    wait_idle(page, title(page, "Benchmark"), timeout=budget.ms())
    page.get_by_role("link", name="Probe").first.click()
    wait_idle(page, title(page, "Probe"), box, timeout=budget.ms())
    expect(box).to_have_value("Aspirin might prevent [MASK].")
    wait_idle(page, *PROBE_RESULT(page, "Aspirin might prevent"), timeout=budget.ms())
    assert page.get_by_text("settings changed").count() == 0
    no_error(page)


@pytest.mark.timeout(600)
def test_the_answer_is_above_the_fold_at_1024x768(page, app_url, tmp_path):  # noqa: F811
    """On a projector (1024×768) a shared link's answer shows without scrolling: the result's caption and the
    top of its table lie inside the first screen (the About box stays closed for a link with a query, and the
    probe settings fold away), and so does the progress bar's place (drawn where the result then appears)."""
    budget = Budget(400)
    page.goto(f"{app_url}/?model=default&dataset=demo&relation=may_treat&query=may_treat:0003", timeout=budget.ms())
    wait_idle(page, title(page, "Probe"), *PROBE_RESULT(page), timeout=budget.ms())
    no_error(page)
    assert page.evaluate("window.scrollY") == 0
    caption = page.get_by_text(re.compile(r"[\d,]+ candidates")).first.bounding_box()
    table = page.locator(TABLE).first.bounding_box()
    assert caption and caption["y"] + caption["height"] <= PROJECTOR["height"], caption
    assert table and table["y"] + 120 <= PROJECTOR["height"], table  # the top rows of the answer, not just a border
    page.screenshot(path=str(Path(os.environ.get("PROBEKIT_SCREENSHOTS") or tmp_path) / "probe_1024.png"))


@pytest.mark.timeout(450)
def test_a_running_grid_shows_each_cell_as_it_is_stored(page, app_url):  # noqa: F811
    """The rule: while a grid runs, the page reruns when one more cell is stored (at most once per 2 s; the job
    panel's ``step_rerun_s``), so the stored cells' counts move during the run instead of staying at their first value
    until the grid ends: some count strictly between none and all is shown while the grid still runs."""
    budget = Budget(400)
    n = 12  # cells: the demo set at 6 layers x 2 poolings (about a second each here)
    page.goto(f"{app_url}/grid", timeout=budget.ms())
    run = page.locator(f"{key('gr_run')} button")
    wait_idle(page, title(page, "Probing grid"), run, timeout=budget.ms())
    page.locator(key("gr_how")).get_by_text("YAML").click()
    box = page.locator(f"{key('gr_yaml')} textarea")
    wait_idle(page, box, timeout=budget.ms())
    box.fill("name: live-cells\nmodels: [default]\ndatasets: [demo]\nprobes:\n  - name: retrieval\n"
             "    options: {pooling: [cls, mean]}\nlayers: [1, 2, 3, 4, 5, 6]\nk: 10\n")
    box.press("Control+Enter")
    wait_idle(page, page.get_by_text(f"{n} cells · grid id"), run, timeout=budget.ms())
    run.click()
    cancel = page.locator(key("gr_cancel"))
    cancel.first.wait_for(timeout=budget.ms())
    counted = re.compile(r"(\d+) done · (\d+) failed · (\d+) pending")
    seen_running = set()
    while cancel.count():  # the grid runs: read the counts the page shows now
        found = counted.search(page.inner_text("body"))
        if found and cancel.count():
            seen_running.add(int(found[1]))
        if budget.ms() <= 1000:
            raise AssertionError(f"the grid did not finish within {budget.seconds:.0f} s")
        page.wait_for_timeout(200)  # sampling what the page shows, not waiting for it
    wait_idle(page, page.get_by_text(f"{n} done · 0 failed · 0 pending"), (cancel, 0), timeout=budget.ms())
    assert any(0 < k < n for k in seen_running), f"counts shown while the grid ran: {sorted(seen_running)}"
    no_error(page)


@pytest.mark.timeout(300)
def test_benchmark_start_is_on_screen_at_1024x768(page, app_url):  # noqa: F811
    """A speaker opens Benchmark on a projector and presses Start without scrolling: the probe options are laid out
    in rows (three columns), so the settings card ends, Start included, inside the first screen. (Stacked in one
    column they pushed Start below the fold, to y = 856 px.) With runs stored the page opens on their results and
    the settings are folded into "New run" at the top: one click opens them, Start still on the first screen."""
    budget = Budget(240)
    page.goto(f"{app_url}/benchmark", timeout=budget.ms())
    start = page.locator(f"{key('bm_start')} button")
    wait_idle(page, title(page, "Benchmark"), timeout=budget.ms())
    if not start.is_visible():  # folded: runs are stored in this store
        page.get_by_text("New run: settings and Start").click()
    wait_idle(page, start, timeout=budget.ms())
    box = start.bounding_box()
    assert box and box["y"] + box["height"] <= PROJECTOR["height"], box
    no_error(page)
