"""Experts rating in real browsers, as a clinic does: five at once against one app server, a tab closed while the
page lags, a projector's small screen. Headless Chromium, the real Annotate page (app.py; the page with the keyboard
alone, tests/keys_app.py, where a test holds back the page's messages), and the events counted in the annotation
store afterwards.

The rules checked:
- every key press typed once the listener listens is stored exactly once, under the expert who typed it, on the
  answer marked in that expert's own query at that moment, and the progress each browser shows is the stored count;
- a press is stored even when its tab is closed before the page has caught up with it (the listener posts each
  press to the server's press endpoint, outside Streamlit's rerun cycle), and closing a tab while presses are
  unacknowledged asks first;
- the answer being rated is on screen after any number of keys, at 1280×720 and 1024×768;
- every rating's time on its answer is more than 0 ms (measured in the browser from when the answer was shown).

Robust on a loaded machine: every wait is on the app's state (a text the page shows, the listener's status, the
store's count), out of one budget per test inside its timeout; pauses between key presses only pace the typing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

pytest.importorskip("playwright", reason="playwright is not installed")
from test_annotations import rankings  # noqa: E402
from test_browser import Budget, launch, serve  # noqa: E402  (skips when no Chromium is installed)
from test_browser_keys import wait_listening, wait_text  # noqa: E402

from probekit import annotations as ann  # noqa: E402

pytestmark = pytest.mark.browser
KEYS_APP = Path(__file__).resolve().parent / "keys_app.py"
HUMAN_MS = 150  # the least pause between two presses of one expert typing at a human pace


def _server_env(tmp_path) -> dict:
    from probekit import store

    store.close_all()  # the server process owns the database file while it runs
    env = {**os.environ, "PROBEKIT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PROBEKIT_ORGANISER_TOKEN", None)
    return env


def _open(browser, url: str, budget: Budget, *, expect: str, viewport=None):
    """A new browser context (its own cookies, so its own server session) on ``url``, once the page shows
    ``expect`` and its key listener listens (a key typed before that reaches nothing)."""
    page = browser.new_context(viewport=viewport or {"width": 1280, "height": 900}).new_page()
    page.set_default_timeout(budget.ms())
    page.goto(url)
    wait_text(page, expect, budget)
    wait_listening(page, budget)
    return page


def _display_order(sid: str, who: str) -> list[str]:
    n = ann.get_session(sid)["n_queries"]
    return [a["item_id"] for q in range(n) for a in ann.query_view(sid, who, q)["answers"]]


def _wait_stored(sid: str, n: int, budget: Budget) -> None:
    """Wait until the store holds ``n`` events of the session (read from this process, which shares the file
    with the server), within the test's budget."""
    while True:
        got = len(ann.events_frame(sid))
        if got >= n:
            return
        if budget.ms() <= 1000:
            raise AssertionError(f"the store holds {got} of the {n} presses typed, within the test's budget of "
                                 f"{budget.seconds:.0f} s")
        time.sleep(0.2)  # polling the store's count: the state waited on


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_five_experts_at_once_every_press_stored_once_under_its_own_expert(tmp_path):
    """Five experts in five browser contexts against one server, each on the app's Annotate page by a personal link,
    three in one annotation session and two in another, 60 rating presses each (six queries of ten answers), the
    first three queries at a human pace (every expert's presses at least 150 ms apart, the five interleaved), the
    last three in bursts (ten ratings and Enter at once, all five bursting together). Then: 300 rate events, each
    expert's 60 in the order typed with the scores typed, each on the answer marked in their own query (their
    display order), none under another expert or session; every browser shows the stored count; every rating took
    more than 0 ms."""
    from playwright.sync_api import sync_playwright

    budget = Budget(540)
    n_queries, k = 6, 10
    total = n_queries * k
    sessions = {"ward A": ann.from_rankings(rankings(n_queries, k=k), name="ward A", k=k, seed=1),
                "ward B": ann.from_rankings(rankings(n_queries, k=k), name="ward B", k=k, seed=2)}
    experts = {"Ana": "ward A", "Ben": "ward A", "Chloe": "ward A", "Dev": "ward B", "Eli": "ward B"}
    scores = {who: [1 + (3 * i + 2 * j + i // 7) % 5 for i in range(total)] for j, who in enumerate(experts)}
    tokens = {who: ann.issue_token(sessions[s], who) for who, s in experts.items()}
    order = {who: _display_order(sessions[s], who) for who, s in experts.items()}
    env = _server_env(tmp_path)
    with serve(env, tmp_path / "server.log") as url, sync_playwright() as pw:
        browser = launch(pw)
        pages = {who: _open(browser, f"{url}/annotate?session={sessions[s]}&token={tokens[who]}", budget,
                            expect=f"0/{total} answers") for who, s in experts.items()}
        half = n_queries // 2
        for q in range(half):  # human pace, all five at once
            for i in range(k):
                for who, page in pages.items():
                    page.keyboard.press(str(scores[who][q * k + i]))
                pages["Eli"].wait_for_timeout(HUMAN_MS)  # pacing the typing, not waiting on the app
            for page in pages.values():
                page.keyboard.press("Enter")  # handled after this query's ten, in order
        for q in range(half, n_queries):  # bursts: ten ratings and Enter, the five experts at the same time
            for i in range(k):
                for who, page in pages.items():
                    page.keyboard.press(str(scores[who][q * k + i]))
            for page in pages.values():
                page.keyboard.press("Enter")
        shown = {}
        for who, page in pages.items():
            wait_text(page, f"{total}/{total} answers", budget)
            wait_listening(page, budget, idle=True)  # nothing left unacknowledged
            shown[who] = page.evaluate("window.__probekitKeys.seq")
            assert page.get_by_test_id("stException").count() == 0
        browser.close()
    assert shown == {who: total + n_queries for who in experts}  # every key reached its listener
    for name, sid in sessions.items():
        events = ann.events_frame(sid)
        mine = [who for who, s in experts.items() if s == name]
        assert sorted(events.annotator.unique()) == sorted(mine)  # nobody else's rating in this session
        assert set(events.kind) == {"rate"} and len(events) == total * len(mine)
        assert set(events.item_id) <= set(order[mine[0]])  # only this session's answers
        for who in mine:
            theirs = events[events.annotator == who]
            assert theirs.score.tolist() == scores[who]  # each press once, in the order typed
            assert theirs.item_id.tolist() == order[who]  # the answer marked in their own query at that moment
            assert (theirs.elapsed_ms > 0).all(), theirs.elapsed_ms.tolist()
            progress = ann.progress(sid, who)
            assert progress["done"] == total == progress["rated"]  # what the browser showed is what is stored


@pytest.mark.timeout(300)
def test_presses_are_stored_when_the_tab_closes_before_the_page_catches_up(tmp_path):
    """The page lags: the messages that would make it rerun with the presses are held back (as when the runs
    queue up on a loaded server), so it never shows them; the expert closes the tab at once after the last key.
    Every press is stored anyway, once, in order (they went to the press endpoint when typed). Before the press
    endpoint they were lost: a press reached the server only as component state, handled by a rerun that the
    closed tab's session never ran."""
    from playwright.sync_api import sync_playwright

    budget = Budget(240)
    k, typed = 8, "5432154"
    sid = ann.from_rankings(rankings(1, k=k), name="closing", k=k)
    token = ann.issue_token(sid, "Cy")
    who = ann.verify_token(token, session_id=sid).annotator
    held = []

    def lagging(ws):
        server = ws.connect_to_server()

        def to_server(message):
            body = message if isinstance(message, bytes) else message.encode()
            if b'"queue":' in body.replace(b" ", b""):
                held.append(body)  # the listener's state update, which asks for a rerun: never forwarded
                return
            server.send(message)

        ws.on_message(to_server)
        server.on_message(ws.send)

    with serve(_server_env(tmp_path), tmp_path / "server.log", KEYS_APP) as url, sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_context().new_page()
        page.route_web_socket("**/_stcore/stream", lagging)
        page.goto(f"{url}/?session={sid}&token={token}")
        wait_text(page, f"0/{k} answers", budget)
        wait_listening(page, budget)
        for key in typed:
            page.keyboard.press(key)
        assert "0/" in page.inner_text("body")  # the page has not caught up
        page.close()  # at once: presses unacknowledged
        _wait_stored(sid, len(typed), budget)
        browser.close()
    events = ann.events_frame(sid)
    assert events.score.tolist() == [int(c) for c in typed] and set(events.kind) == {"rate"}
    assert events.item_id.tolist() == _display_order(sid, who)[:len(typed)]
    assert (events.elapsed_ms > 0).all()


@pytest.mark.timeout(300)
def test_closing_a_tab_with_unacknowledged_presses_asks_first(tmp_path):
    """Neither the page nor the press endpoint has acknowledged the expert's presses (both held back): closing
    the tab brings up the browser's leave-page question; with everything acknowledged it closes without one."""
    from playwright.sync_api import sync_playwright

    budget = Budget(240)
    sid = ann.from_rankings(rankings(1, k=3), name="ask", k=3)
    token = ann.issue_token(sid, "Di")

    def lagging(ws):
        server = ws.connect_to_server()
        ws.on_message(lambda m: None if b'"queue":' in (m if isinstance(m, bytes) else m.encode()).replace(
            b" ", b"") else server.send(m))
        server.on_message(ws.send)

    with serve(_server_env(tmp_path), tmp_path / "server.log", KEYS_APP) as url, sync_playwright() as pw:
        browser = launch(pw)
        dialogs: dict[str, list] = {"calm": [], "lagging": []}
        for i, name in enumerate(dialogs):
            page = browser.new_context().new_page()
            page.on("dialog", lambda d, name=name: (dialogs[name].append(d.type), d.accept()))
            page.goto(f"{url}/?session={sid}&token={token}")
            wait_text(page, f"{i}/3 answers", budget)  # the calm tab's press is stored
            wait_listening(page, budget)
            if name == "lagging":
                page.route_web_socket("**/_stcore/stream", lagging)
                page.route("**/probekit/presses", lambda route: None)  # never answered
            page.keyboard.press("4")
            if name == "calm":
                wait_text(page, "1/3 answers", budget)
                wait_listening(page, budget, idle=True)
            else:
                page.get_by_text("sending 1 key").first.wait_for(timeout=budget.ms())
            with page.expect_event("close", timeout=budget.ms()):
                page.close(run_before_unload=True)
        browser.close()
    assert dialogs == {"calm": [], "lagging": ["beforeunload"]}


@pytest.mark.heavy
@pytest.mark.timeout(400)
@pytest.mark.parametrize("width, height", [(1280, 720), (1024, 768)])
def test_the_answer_being_rated_stays_on_screen(tmp_path, width, height):
    """At a projector's 1280×720 and 1024×768, a query of 12 answers rated one key at a time: after every key the
    marked answer's row (▶) lies wholly inside the window, below the page's header; then U (undo) brings the
    marked row back up, still on screen."""
    from playwright.sync_api import sync_playwright

    budget = Budget(340)
    k = 12  # six rows fit at 720 px
    sid = ann.from_rankings(rankings(2, k=k), name="projector", k=k)
    token = ann.issue_token(sid, "Flo")
    with serve(_server_env(tmp_path), tmp_path / "server.log") as url, sync_playwright() as pw:
        browser = launch(pw)
        page = _open(browser, f"{url}/annotate?session={sid}&token={token}", budget, expect=f"0/{2 * k} answers",
                     viewport={"width": width, "height": height})
        keys = [str(1 + i % 5) for i in range(k - 1)] + ["u", "u"]
        done = 0
        for key in keys:
            page.keyboard.press(key)
            done += -1 if key == "u" else 1
            wait_text(page, f"{done}/{2 * k} answers", budget)
            marked = page.locator("[class*='st-key-an_row_']").filter(has_text="▶")
            marked.first.wait_for(timeout=budget.ms())
            try:  # the page scrolls it there once it is drawn
                page.wait_for_function(_ON_SCREEN_JS, timeout=budget.ms())
            except Exception as err:
                raise AssertionError(f"after {key!r} ({done} done) the marked answer is off screen: "
                                     f"{page.evaluate(_BOX_JS)}") from err
        browser.close()


# null while no row is marked (between two draws of a rerun): the wait goes on, a predicate that throws would end it
_BOX_JS = """() => {
  const rows = [...document.querySelectorAll("[class*='st-key-an_row_']")].filter(e => e.innerText.includes("▶"));
  if (!rows.length) return null;
  const r = rows[rows.length - 1].getBoundingClientRect();
  const h = document.querySelector('[data-testid="stHeader"]');
  return { top: r.top, bottom: r.bottom, header: h ? Math.max(0, h.getBoundingClientRect().bottom) : 0 };
}"""
_ON_SCREEN_JS = "() => { const b = (" + _BOX_JS + ")(); return !!b && b.top >= b.header && b.bottom <= innerHeight; }"
