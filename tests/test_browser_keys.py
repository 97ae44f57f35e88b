"""The Annotate page's keyboard end to end: real key presses in headless Chromium, the real listener
(pages/_rating_keys.py), Streamlit's own transport, the page's :func:`keyboard` and :class:`Desk`, and every
press stored by :func:`probekit.annotations.press` in the annotation store, on a page with the keyboard alone
(tests/keys_app.py: a short rerun, so a thousand presses fit a test).

The rule checked: every key press typed once the listener says it listens is stored exactly once, in the order
typed, however the presses are coalesced, interrupted or re-sent on the way.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("playwright", reason="playwright is not installed")
from test_annotations import rankings  # noqa: E402
from test_browser import Budget, expect_console_error, launch, no_console_errors, serve  # noqa: E402, F401  (skips when no Chromium is installed)

from pages._rating_keys import READY  # noqa: E402
from probekit import annotations as ann  # noqa: E402

pytestmark = pytest.mark.browser
APP = Path(__file__).resolve().parent / "keys_app.py"


def wait_text(page, text: str, budget: Budget) -> None:
    """Wait, within what is left of the test's ``budget``, until the page's visible text contains ``text``: a
    check of the app's state that holds however many copies of an element Streamlit keeps during a rerun (a
    strict locator fails on two) and however slowly the shared machine reruns."""
    try:
        page.wait_for_function("t => document.body && document.body.innerText.includes(t)", arg=text,
                               timeout=budget.ms())
    except Exception as err:  # a Playwright timeout: say what was awaited, and the budget
        raise AssertionError(f"the page never showed {text!r} within the test's budget of {budget.seconds:.0f} s "
                             f"(it shows: {page.inner_text('body')[-300:]!r})") from err


def wait_listening(page, budget: Budget, *, idle: bool = False) -> None:
    """Wait until the listener says it listens (``idle``: and that nothing it sent is unacknowledged). Its status is
    in the component's shadow root, which Playwright's locators reach and ``innerText`` does not."""
    status = page.get_by_text(READY, exact=idle)
    try:
        status.first.wait_for(timeout=budget.ms())
    except Exception as err:
        raise AssertionError(f"the listener never said {READY!r}{' with nothing left to send' if idle else ''} "
                             f"within the test's budget of {budget.seconds:.0f} s") from err


def open_keys(browser, url: str, sid: str, token: str, total: int, budget: Budget):
    page = browser.new_context().new_page()
    page.goto(f"{url}/?session={sid}&token={token}")
    wait_text(page, f"0/{total} answers", budget)
    wait_listening(page, budget)  # a key typed before the listener listens reaches nothing
    return page


def in_display_order(sid: str, who: str, n_queries: int) -> list[str]:
    return [a["item_id"] for q in range(n_queries) for a in ann.query_view(sid, who, q)["answers"]]


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_a_thousand_presses_in_bursts_of_ten_each_stored_exactly_once(tmp_path):
    """1,000 ratings typed in 100 bursts of 10 (each burst faster than a rerun, then Enter): 1,000 rate events,
    one per answer, in the order typed, with the scores typed; the listener caught all 1,100 keys."""
    from playwright.sync_api import sync_playwright

    from probekit import store

    budget = Budget(480)
    n_queries, k = 100, 10
    sid = ann.from_rankings(rankings(n_queries, k=k), name="thousand", k=k)
    token = ann.issue_token(sid, "Kai")
    who = ann.verify_token(token, session_id=sid).annotator
    order = in_display_order(sid, who, n_queries)
    total = n_queries * k
    scores = [1 + (7 * i + i // 5) % 5 for i in range(total)]
    store.close_all()  # the server process owns the database while it runs
    env = {**os.environ, "PROBEKIT_CACHE_DIR": str(tmp_path / "cache")}
    with serve(env, tmp_path / "server.log", APP) as url, sync_playwright() as pw:
        browser = launch(pw)
        page = open_keys(browser, url, sid, token, total, budget)
        for q in range(n_queries):
            for i in range(k):
                page.keyboard.press(str(scores[q * k + i]))
            page.keyboard.press("Enter")  # handled after the ten (in order), so it always finds the query done
            wait_text(page, f"{(q + 1) * k}/{total} answers", budget)
        wait_listening(page, budget, idle=True)
        typed = page.evaluate("window.__probekitKeys.seq")
        browser.close()
    assert typed == total + n_queries  # every key press reached the listener
    events = ann.events_frame(sid)
    assert len(events) == total and set(events.kind) == {"rate"}
    assert events.score.tolist() == scores  # none lost, none doubled, in the order typed
    assert events.item_id.tolist() == order  # each answer once, the marked one at that moment


@pytest.mark.timeout(300)
def test_a_state_update_lost_on_the_way_is_sent_again(tmp_path):
    """The browser's message carrying a press is dropped on its way to the server (as when it is sent while the
    connection is down), and the press endpoint fails: the listener, still unacknowledged, sends the press again,
    and it is stored once."""
    from playwright.sync_api import sync_playwright

    from probekit import store

    budget = Budget(200)
    sid = ann.from_rankings(rankings(1, k=3), name="lost", k=3)
    token = ann.issue_token(sid, "Lou")
    who = ann.verify_token(token, session_id=sid).annotator
    store.close_all()
    env = {**os.environ, "PROBEKIT_CACHE_DIR": str(tmp_path / "cache")}
    dropped = []

    def route(ws):
        server = ws.connect_to_server()

        def to_server(message):
            body = message if isinstance(message, bytes) else message.encode()
            if not dropped and b'"queue":[[1,' in body.replace(b" ", b""):
                dropped.append(body)  # the first message that carries press 1: lost
                return
            server.send(message)

        ws.on_message(to_server)
        server.on_message(ws.send)

    with serve(env, tmp_path / "server.log", APP) as url, sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_context().new_page()
        page.route_web_socket("**/_stcore/stream", route)
        page.route("**/probekit/presses", lambda r: r.abort())  # presses travel as component state alone
        expect_console_error(r"net::ERR_FAILED \(https?://[^/]+/probekit/presses\)$")  # the aborted requests
        page.goto(f"{url}/?session={sid}&token={token}")
        wait_text(page, "0/3 answers", budget)
        wait_listening(page, budget)
        page.keyboard.press("4")
        wait_text(page, "1/3 answers", budget)
        resent = page.evaluate("window.__probekitKeys.resent")
        browser.close()
    assert len(dropped) == 1 and resent >= 1
    events = ann.events_frame(sid)
    assert events.kind.tolist() == ["rate"] and events.score.tolist() == [4]
    assert events.item_id.tolist() == in_display_order(sid, who, 1)[:1]
