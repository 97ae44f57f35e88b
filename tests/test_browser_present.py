"""Presenting a tour end to end in headless Chromium at 1024×768: a 3-step tour (Probe, Benchmark drill-down,
Annotation results) opened with ``?tour=NAME&present=1``, walked with the keyboard (→, PageDown, ←, PageUp) and
left with Esc. The rule checked: every step shows its prepared result, with no sidebar, no error on the page and
no error in the browser's console.
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("playwright", reason="playwright is not installed")
from test_annotations import rankings  # noqa: E402
from test_browser import PLOT, Budget, key, launch, no_exception, serve, wait_idle  # noqa: E402
from test_browser_keys import wait_listening, wait_text  # noqa: E402

from pages._presenter import COUNTER  # noqa: E402
from probekit import annotations as ann  # noqa: E402
from probekit import models, tours  # noqa: E402
from probekit.bench import runs  # noqa: E402
from probekit.datasets import load_dataset  # noqa: E402

pytestmark = pytest.mark.browser
TABLE = '[data-testid="stTable"]'  # the presenter draws tables as HTML tables (large type)
METRIC = '[data-testid="stMetric"]'
SIDEBAR = '[data-testid="stSidebar"]'


def _tour(model_dir) -> None:
    """Three steps on data stored here (the server shares the store): a probe, a benchmark run, a rated session."""
    model = models.load(str(model_dir), device="cpu")
    run = runs.run_benchmark(model, load_dataset("demo"), k=10)
    rel = sorted(run.frame.relation.unique())[0]
    sid = ann.from_rankings(rankings(4, k=5), name="pilot", k=5)
    for who in ("Ana", "Ben"):
        annotator = ann.join(sid, who)
        for i, item in enumerate(ann.items_frame(sid).itertuples()):
            ann.rate(sid, item.item_id, annotator, 1 + i % 5)
    for link, title in (
            (f"/?model={model_dir}&dataset=demo&relation=may_treat&query=may_treat:0003&k=5&probe=retrieval",
             "What the model answers"),
            (f"/benchmark?runs={run.run_id}&k=10&set=full&relation={rel}", "One relation drilled"),
            (f"/results?session={sid}", "What experts say")):
        tours.add_step("talk", tours.step_from_link(link, title=title))


@pytest.mark.timeout(900)  # a loaded 2-core machine: the Benchmark run of the setup and the app's pages are slow
def test_a_three_step_tour_walked_with_the_keyboard(tmp_path, tiny_encoder_dir):
    """→ and PageDown move forward, ← and PageUp back, Esc leaves; each step shows its result, no console error."""
    from playwright.sync_api import sync_playwright

    from probekit import store

    _tour(tiny_encoder_dir)
    budget = Budget(700)  # the server's start, the warm-up, five key presses and Esc
    store.close_all()  # the server process owns the database while it runs
    env = {**os.environ, "PROBEKIT_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    env.pop("PROBEKIT_ORGANISER_TOKEN", None)
    expected = {
        1: lambda p: [p.locator(f"{key('tp_result_probe')} {TABLE}"), p.locator(f"{key('tp_result_probe')} {PLOT}")],
        2: lambda p: [(p.locator(f"{key('tp_result_benchmark')} {TABLE}"), 2)],  # accuracy, then the drill-down
        3: lambda p: [(p.locator(f"{key('tp_result_results')} {METRIC}"), 3),
                      p.locator(f"{key('tp_result_results')} {TABLE}")],
    }
    console: list[str] = []
    with serve(env, tmp_path / "server.log") as url, sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_context(viewport={"width": 1024, "height": 768}).new_page()
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))

        def on_step(i: int) -> None:
            wait_text(page, COUNTER.format(i=i, n=3), budget)
            wait_idle(page, *expected[i](page), timeout=budget.ms())
            no_exception(page)
            assert page.locator(SIDEBAR).filter(visible=True).count() == 0  # no sidebar, no pickers

        page.goto(f"{url}/?tour=talk&present=1")
        on_step(1)  # every step was prepared before the first one showed
        wait_listening(page, budget)
        for press, step in (("ArrowRight", 2), ("PageDown", 3), ("ArrowLeft", 2), ("PageUp", 1), ("PageDown", 2)):
            page.keyboard.press(press)
            on_step(step)
        assert "step=2" in page.url  # a reload would stay on this step
        page.keyboard.press("Escape")  # leaves for the Tours page, on this tour
        wait_text(page, "A tour is an ordered list of saved views", budget)
        wait_idle(page, page.locator("h1").filter(has_text="Tours"), timeout=budget.ms())
        assert "present" not in page.url and "tour=talk" in page.url
        browser.close()
    assert console == []
