"""The organiser's sign-in in a real browser, against ``serve.py`` (app.py behind the organiser gate), with
PROBEKIT_ORGANISER_TOKEN set and an annotation session with ratings in the store.

The rules checked: without a credential every path of the server, the pages and the page pieces in ``pages/``
alike, shows the sign-in and nothing else (no navigation listing ``pages/``); a sign-in keeps the page and the
parameters of the link it was asked for, and lasts for the browser session (a reload or a new tab opens signed
in); a browser that has not signed in gets no exported file, even with the file's URL.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("playwright")
from test_annotations import rankings  # noqa: E402
from test_browser import (  # noqa: E402 (skips without Chromium)
    TIMEOUT_MS,
    Budget,
    launch,
    serve,
    title,
    wait_for_cookie,
    wait_idle,
)

from probekit import annotations as ann  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "organiser-s3cret-for-the-browser-test"
LOCK_TEXT = "This server asks organisers to sign in"
NAV = '[data-testid="stSidebarNav"], [data-testid="stSidebarNavItems"]'
TEST_TIMEOUT_S = 600
BUDGET_S = 480


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("access")
    env = {**os.environ, "PROBEKIT_CACHE_DIR": str(base / "cache"), "PROBEKIT_DB": str(base / "pk.duckdb"),
           "PROBEKIT_DATA_DIR": str(base / "data"), "PROBEKIT_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "PROBEKIT_ORGANISER_TOKEN": TOKEN}
    with pytest.MonkeyPatch.context() as mp:  # this process writes the session the server reads
        mp.setenv("PROBEKIT_DB", env["PROBEKIT_DB"])
        sid = ann.from_rankings(rankings(2, k=2), name="guarded session", k=2)
        ann.join(sid, "Carol")
        for item in ann.query_view(sid, "Carol", 0)["answers"]:
            ann.rate(sid, item["item_id"], "Carol", 4)
        from probekit import store

        store.close_all()  # the server process opens the file next
    with serve(env, base / "server.log") as url:
        yield url, sid, base / "server.log"


def lock_shown(page, budget: Budget) -> None:
    wait_idle(page, page.get_by_text(LOCK_TEXT), timeout=budget.ms())
    assert page.locator(NAV).count() == 0, "the sign-in screen lists pages"
    assert "guarded session" not in page.content() and "Carol" not in page.content()


def sign_in(page, budget: Budget) -> None:
    page.get_by_label("Organiser token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()


def page_paths() -> list[str]:
    """Every file of pages/ as a URL path: the pages and the pieces the pages import (never pages themselves)."""
    return sorted(p.stem for p in (ROOT / "pages").glob("*.py"))


@pytest.mark.heavy
@pytest.mark.browser
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_every_path_shows_the_sign_in_and_nothing_else(server):
    from playwright.sync_api import sync_playwright

    url, _, log = server
    budget = Budget(BUDGET_S)
    with sync_playwright() as pw:
        browser = launch(pw)
        ctx = browser.new_context(viewport={"width": 1024, "height": 768})
        page = ctx.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        for path in ["", *page_paths()]:
            page.goto(f"{url}/{path}", timeout=budget.ms())
            lock_shown(page, budget)
        browser.close()
    assert "Traceback" not in log.read_text()


@pytest.mark.browser
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_sign_in_keeps_the_link_and_lasts_for_the_browser_session(server):
    from playwright.sync_api import sync_playwright

    url, sid, _ = server
    budget = Budget(BUDGET_S)
    with sync_playwright() as pw:
        browser = launch(pw)
        ctx = browser.new_context(viewport={"width": 1024, "height": 768})
        page = ctx.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        static: list[tuple[str, int]] = []  # Streamlit's own files (fonts, scripts): never behind the gate
        page.on("response", lambda r: static.append((r.url, r.status)) if "/static/" in r.url else None)
        page.goto(f"{url}/results?session={sid}", timeout=budget.ms())
        lock_shown(page, budget)
        page.wait_for_load_state("networkidle", timeout=budget.ms())
        fonts = [u for u, _ in static if u.endswith(".woff2")]
        assert fonts and [s for s in static if s[1] >= 400] == [], static  # icons drawn, not their names
        assert browser.new_context().request.get(fonts[0]).status == 200
        page.get_by_label("Organiser token").fill("not the token")
        page.get_by_label("Organiser token").press("Enter")  # Enter in the box tries the token, as the button does
        wait_idle(page, page.get_by_text("That is not the organiser token."), timeout=budget.ms())
        sign_in(page, budget)
        # the session's own caption (2 queries × top-2): the page opened on the session the link named
        wait_idle(page, title(page, "Annotation results"), page.get_by_text("2 queries × top-2"), timeout=budget.ms())
        assert page.url.split("?")[0].endswith("/results") and f"session={sid}" in page.url
        wait_for_cookie(ctx, ann.organiser.COOKIE, budget)
        # the export, fetched with the organiser's cookie; then by a browser that never signed in
        with page.expect_download(timeout=budget.ms()) as dl:
            page.locator(".st-key-rs_dl_csv button").first.click()
        media = dl.value.url
        assert "/media/" in media
        assert ctx.request.get(media).status == 200
        stranger = browser.new_context()
        assert stranger.request.get(media).status == 403
        stranger.close()
        # a reload and a new tab of the same browser session open signed in, on the page asked for
        page.reload(timeout=budget.ms())
        wait_idle(page, title(page, "Annotation results"), timeout=budget.ms())
        other = ctx.new_page()
        other.goto(f"{url}/benchmark", timeout=budget.ms())
        wait_idle(other, title(other, "Benchmark"), timeout=budget.ms())
        assert other.get_by_text(LOCK_TEXT).count() == 0
        # a new browser session (no cookie) signs in again
        fresh = browser.new_context().new_page()
        fresh.goto(f"{url}/benchmark", timeout=budget.ms())
        lock_shown(fresh, budget)
        browser.close()
