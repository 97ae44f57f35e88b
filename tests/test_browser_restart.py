"""Experts typing while the app server is SIGKILLed and started again on the same address: every press applied
exactly once. Headless Chromium, the Annotate page's keyboard (tests/keys_app.py: the same listener, Desk and
:func:`probekit.annotations.press` as pages/annotate.py) opened by each expert's personal link, a real Streamlit
server process killed with SIGKILL, and the events counted in the annotation store afterwards.

The case that went wrong: presses the server had stored but not yet acknowledged when it died. The page is not
reloaded (Streamlit reconnects it to the new server), so its listener still holds them and sends them again;
the new server's memory of handled presses was empty and it applied them a second time (an undo twice, a rating
twice). Here that case is made certain, not left to timing: before the kill the presses reach the server's
press endpoint but its answers, and the page's own state messages, are held back, so the server stores presses
that the browser never sees acknowledged.

The rule checked: each expert's events are exactly the ones typed, in order (rates and undos), every stored
rating is the one typed last for its answer, nothing is lost and nothing is doubled, and each browser ends
with everything acknowledged.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("playwright", reason="playwright is not installed")
from test_annotations import rankings  # noqa: E402
from test_browser import ROOT, Budget, _free_port, expect_console_error, launch, no_console_errors  # noqa: E402, F401
from test_browser_keys import wait_listening, wait_text  # noqa: E402

from probekit import annotations as ann  # noqa: E402
from probekit import store  # noqa: E402

pytestmark = pytest.mark.browser
KEYS_APP = Path(__file__).resolve().parent / "keys_app.py"
N_QUERIES, K = 22, 5
EXPERTS = ("Ada", "Bo", "Cai", "Dee", "Eli")
"""Five experts, 22 queries of 5 answers each, every third answer first mistyped and undone: 1,025 presses."""


def start(port: int, env: dict, log_path: Path, budget: Budget) -> subprocess.Popen:
    """``streamlit run tests/keys_app.py`` on ``port``, once its health endpoint answers."""
    log = open(log_path, "a")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(KEYS_APP), "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true", "--server.fileWatcherType", "none",
         "--browser.gatherUsageStats", "false"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    while True:
        if proc.poll() is not None:
            pytest.fail(f"streamlit exited: {log_path.read_text()[-2000:]}")
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                return proc
        except OSError:
            if budget.ms() <= 1000:
                proc.kill()
                pytest.fail(f"streamlit did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.3)  # polling the health endpoint, not timing the app


def plan(j: int) -> tuple[list[str], list[tuple[str, int | None]], list[int]]:
    """Expert ``j``'s keys, the events they must produce (kind, score) and each answer's final score: every answer
    rated, every third one first mistyped and undone (U), Enter after each query."""
    keys: list[str] = []
    events: list[tuple[str, int | None]] = []
    final: list[int] = []
    for q in range(N_QUERIES):
        for i in range(K):
            score = 1 + (2 * i + q + j) % 5
            if (i + j) % 3 == 0:
                wrong = 1 + score % 5
                keys += [str(wrong), "u"]
                events += [("rate", wrong), ("undo", None)]
            keys.append(str(score))
            events.append(("rate", score))
            final.append(score)
        keys.append("Enter")
    return keys, events, final


def holding(flag: dict):
    """A websocket route that, while ``flag["on"]``, drops the page's state messages carrying presses and every
    message from the server: a rerun the server ran after storing a press (its drawing carries the acknowledged
    number) must not reach the page either, or under load a window could see its presses acknowledged before the
    kill and the case under test would not happen for it."""
    def route(ws):
        server = ws.connect_to_server()

        def to_server(message):
            body = message if isinstance(message, bytes) else message.encode()
            if flag["on"] and b'"queue":' in body.replace(b" ", b""):
                return
            server.send(message)

        def to_page(message):
            if not flag["on"]:
                ws.send(message)

        ws.on_message(to_server)
        server.on_message(to_page)
    return route


@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_presses_are_applied_once_across_a_server_kill_and_restart(tmp_path):
    from playwright.sync_api import sync_playwright

    budget = Budget(840)
    sid = ann.from_rankings(rankings(N_QUERIES, k=K), name="restart", k=K)
    experts = list(EXPERTS)
    tokens = {who: ann.issue_token(sid, who) for who in experts}
    keys_of = {who: ann.verify_token(tokens[who], session_id=sid).annotator for who in experts}
    order = {who: [a["item_id"] for q in range(N_QUERIES) for a in ann.query_view(sid, keys_of[who], q)["answers"]]
             for who in experts}
    plans = {who: plan(j) for j, who in enumerate(experts)}
    total = N_QUERIES * K
    store.close_all()  # the server process owns the database file while it runs
    env = {**os.environ, "PROBEKIT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PROBEKIT_ORGANISER_TOKEN", None)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "server.log"
    # while the server is down and coming back: failed requests, the websocket, the old desk's 404
    expect_console_error(r"probekit/presses|_stcore|WebSocket|ERR_CONNECTION_REFUSED|ERR_FAILED|404|503|"
                         r"Cannot send rerun backMessage when disconnected|Streamlit server is not responding")
    flag = {"on": False}
    proc = start(port, env, log_path, budget)
    try:
        with sync_playwright() as pw:
            browser = launch(pw)
            pages = {}
            for who in experts:
                page = browser.new_context().new_page()
                page.set_default_timeout(budget.ms())
                page.route_web_socket("**/_stcore/stream", holding(flag))
                page.goto(f"{url}/?session={sid}&token={tokens[who]}")
                wait_text(page, f"0/{total} answers", budget)
                wait_listening(page, budget)
                pages[who] = page
            split = {who: len(p[0]) // 2 for who, p in plans.items()}
            for step in range(max(split.values())):  # the first half, all five typing at once
                for who, page in pages.items():
                    if step < split[who] - 2:
                        page.keyboard.press(plans[who][0][step])
                pages[experts[0]].wait_for_timeout(60)  # pacing the typing
            for page in pages.values():  # nothing unacknowledged so far
                wait_listening(page, budget, idle=True)

            # the last two presses of each expert before the kill: stored by the server, never acknowledged
            answered: dict[str, int] = dict.fromkeys(experts, 0)

            def swallow(who):
                def handle(route):
                    route.fetch()  # the server stores the presses ...
                    answered[who] += 1
                    route.abort()  # ... and its acknowledgement never reaches the page
                return handle

            flag["on"] = True
            for who, page in pages.items():
                page.route("**/probekit/presses", swallow(who))
                for key in plans[who][0][split[who] - 2:split[who]]:
                    page.keyboard.press(key)
            while min(answered.values()) < 2:  # both posts of every window answered by the server
                if budget.ms() <= 1000:
                    raise AssertionError(f"the press endpoint answered {answered} posts")
                pages[experts[0]].wait_for_timeout(100)  # lets Playwright run the route handlers meanwhile
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            stored = _stored_last(sid, {who: pages[who].evaluate("window.__probekitKeys.client") for who in experts},
                                  keys_of)
            acked = {who: pages[who].evaluate("window.__probekitKeys.acked") for who in experts}
            stored_unacked = [who for who in experts if stored[who] > acked[who]]
            assert stored_unacked == experts, (stored, acked)  # the case that went wrong, for every expert
            store.close_all()

            flag["on"] = False
            for page in pages.values():
                page.unroute("**/probekit/presses")
            old = {who: pages[who].evaluate("window.__probekitKeys.desk") for who in experts}
            clients = {who: pages[who].evaluate("window.__probekitKeys.client") for who in experts}
            proc = start(port, env, log_path, budget)  # the same address: the pages reconnect
            for who, page in pages.items():  # reconnected: the listener was drawn by the new server (same window)
                page.wait_for_function("d => window.__probekitKeys.desk && window.__probekitKeys.desk !== d",
                                       arg=old[who], timeout=budget.ms())
                wait_listening(page, budget, idle=True)
                assert page.evaluate("window.__probekitKeys.client") == clients[who]
                assert page.evaluate("window.__probekitKeys.acked") == stored[who]  # the stored last number
            for step in range(max(len(p[0]) for p in plans.values())):  # the second half
                for who, page in pages.items():
                    if split[who] <= step < len(plans[who][0]):
                        page.keyboard.press(plans[who][0][step])
                pages[experts[0]].wait_for_timeout(60)
            for who, page in pages.items():
                wait_text(page, f"{total}/{total} answers", budget)
                wait_listening(page, budget, idle=True)
                assert page.evaluate("window.__probekitKeys.seq") == len(plans[who][0])  # every key was caught
            browser.close()
    finally:
        proc.kill()
        proc.wait(timeout=30)
    events = ann.events_frame(sid)
    for who in experts:
        theirs = events[events.annotator == who]
        got = [(k, None if pd.isna(s) else int(s)) for k, s in zip(theirs.kind, theirs.score)]
        assert got == plans[who][1], who  # 0 lost, 0 doubled, in the order typed
        current = [a for q in range(N_QUERIES) for a in ann.query_view(sid, keys_of[who], q)["answers"]]
        by_item = {a["item_id"]: a["score"] for a in current}
        assert [by_item[i] for i in order[who]] == plans[who][2], who  # every stored rating is the one typed


def _stored_last(sid: str, clients: dict[str, str], keys_of: dict[str, str]) -> dict[str, int]:
    """Per expert, the last press number the killed server stored from that expert's window."""
    rows = store.get_store().fetch("SELECT annotator, client, max(seq) FROM annotation_presses WHERE session_id = ? "
                                   "GROUP BY annotator, client", [sid])
    last = {(a, c): int(n) for a, c, n in rows}
    return {who: last.get((keys_of[who], clients[who]), 0) for who in clients}
