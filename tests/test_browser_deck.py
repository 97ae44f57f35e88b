"""The offline deck in headless Chromium at 1024×768, opened from file:// with the network cut (an offline
context, and every request that is not the file itself aborted): → / PageDown / ← / PageUp / End / Home move the
step counter, each step's plotly chart is drawn as SVG by the plotly.js inside the file, a hostile title is shown
as the characters typed, N hides the notes, and no request leaves the file.
"""

from __future__ import annotations

import pytest

pytest.importorskip("playwright", reason="playwright is not installed")
from test_browser import Budget, launch, no_console_errors  # noqa: E402, F401  (skips when no Chromium is installed)

from probekit import tours  # noqa: E402

pytestmark = pytest.mark.browser
HOSTILE = "<img src=x onerror=alert(1)> ![x](http://127.0.0.1:9/p.png)"
SHOWN = "section.pk-slide:not([hidden])"
BARS = f"{SHOWN} .pk-plot svg.main-svg g.trace.bars path"
"""The bars plotly.js drew for the step on screen (one per answer of the probe's top 5)."""


def _deck(tmp_path, model):
    for i, (query, title) in enumerate((("may_treat:0003", "What the model answers"), ("may_treat:0001", HOSTILE),
                                        ("may_prevent:0001", "And prevents"))):
        link = f"/?model=tiny&dataset=demo&query={query}&k=5&probe=retrieval"
        tours.add_step("talk", tours.step_from_link(link, title=title, note=f"note {i + 1}"))
    path = tmp_path / "talk.html"
    deck = tours.export_deck(tours.get_tour("talk"), path, load_model=lambda m, d: model)
    assert deck.shows == 3
    return path


@pytest.mark.timeout(120)
def test_the_deck_is_walked_offline_with_the_keys(tmp_path, tiny_mlm):
    from playwright.sync_api import sync_playwright

    path = _deck(tmp_path, tiny_mlm)
    budget = Budget(60)  # Chromium's start and plotly.js's parse (megabytes) on a loaded 2-core machine
    asked: list[str] = []
    alerts: list[str] = []

    def only_the_file(route) -> None:
        asked.append(route.request.url)
        route.continue_() if route.request.url.startswith("file://") else route.abort()

    with sync_playwright() as pw:
        browser = launch(pw)
        context = browser.new_context(viewport={"width": 1024, "height": 768}, offline=True)
        context.route("**/*", only_the_file)
        page = context.new_page()
        page.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))

        def on_step(i: int) -> None:
            """Step ``i`` on screen: its counter, its title, and its chart drawn (a bar per answer)."""
            page.wait_for_function(
                "([i, bars]) => document.getElementById('pk-counter').innerText === 'Step ' + i + ' / 3'"
                " && document.querySelectorAll(bars).length >= 5", arg=[i, BARS], timeout=budget.ms())
            assert page.locator(SHOWN).get_attribute("data-step") == str(i)

        page.goto(path.as_uri())
        on_step(1)
        assert page.locator(f"{SHOWN} h1").inner_text() == "What the model answers"
        for press, step in (("ArrowRight", 2), ("PageDown", 3), ("ArrowLeft", 2), ("PageUp", 1), ("End", 3),
                            ("Home", 1), ("PageDown", 2)):
            page.keyboard.press(press)
            on_step(step)
        assert page.locator(f"{SHOWN} h1").inner_text() == HOSTILE  # the characters typed, no image made
        assert page.locator("img").count() == 0 and alerts == []
        assert page.url.endswith("#2")  # a reload stays on this step
        note = page.locator(f"{SHOWN} .pk-note")
        assert note.is_visible() and note.inner_text() == "note 2"
        page.keyboard.press("n")
        assert not note.is_visible()
        browser.close()
    assert asked == [path.as_uri()]  # the file, and nothing else
