"""The Annotate page's keyboard: a small ``st.components.v2`` listener that numbers every key press of its browser
window and sends the presses not yet acknowledged as component *state* (st.button's ``shortcut`` triggers lost
presses typed faster than a rerun: measured in a browser, of 5, 3, S typed at once only two arrived; a queue of
state keeps all, in order), and the :class:`Desk` that remembers which presses were handled.

Every press is handled exactly once, in the order typed:

- the browser keeps each press until the server acknowledges it and sends all unacknowledged presses with every
  new one, and again after a quiet spell (2 s, then doubling up to 30 s) while any is unacknowledged: a state
  update lost on the way (one sent while the connection is down is dropped) is sent again;
- where the server has the press endpoint (``pages/_press_route.py``) the presses go there first, and are stored
  at once, outside the rerun cycle (a tab closed while the page lags loses nothing; leaving with presses
  unacknowledged asks first and flushes them with a beacon); its acknowledgement then asks for one rerun to show
  them, and no second one until a run has drawn the listener (presses typed faster than the page reruns do
  not interrupt run after run); an endpoint that fails sends them as state instead;
- the server handles a press only if its number is greater than the last one handled from that window
  (:func:`probekit.annotations.take_presses`), so a press sent twice is stored once; it handles them *before* it
  draws the listener, so the acknowledgement the listener gets in its ``data`` is never one run late;
- across a server restart (killed, started again on the same address) the browser page is not reloaded:
  Streamlit reconnects it to the new server, whose first run draws the listener again, so ``window.__probekitKeys``
  keeps the window's id, numbering and unacknowledged presses, and sends them again to the new desk (the old
  desk's id gets a 404 and they go as state, then to the new id). The new desk's memory is empty, so the last
  number handled comes from the database: each press is stored with the event it produced, in its transaction
  (:mod:`probekit.annotations.presses`), and the first press a desk sees from a window reads that window's
  stored last number once. A reload is a new window (new id, numbering from 1, an empty queue), so a press is
  never re-sent under another id;
- a press the server could not store (a full disk: :data:`probekit.annotations.keyboard.NOT_STORED`) is not
  handled, and neither is any press typed after it (they apply in order): the acknowledgement stays below it, the
  reply names the problem, and the listener shows "not saved — disk full …" in place of "sending N keys…" and
  sends the presses again every 2 s (not backing off) until the server stores them, each once; the page shows the
  problem too (:attr:`Desk.problem`);
- one keydown listener per window, attached once and never removed: each rerun only points it at the newest
  ``setStateValue`` and element (Streamlit calls the component's function again whenever its ``data`` changes,
  and a listener removed by one call and added by the next would let a press fall between them); it ignores
  keys while its element is not on the page (the organiser went to another page);
- a key typed before the listener exists cannot be caught by anything, and the page's text shows before it
  exists (Streamlit loads a component's code after drawing the page around it: seconds on a loaded machine).
  So the listener says "Keyboard on" once it listens, "Keyboard starting…" before.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import streamlit as st

from pages._press_route import press_endpoint
from probekit.annotations.keyboard import NOT_STORED, settle_press
from probekit.annotations.presses import Press, new_presses, pressing
from probekit.errors import DiskFullError

READY = "Keyboard on"  # the listener's status once it listens (the browser tests wait for it before typing)

KEYS_HTML = '<div class="pk-keys">Keyboard starting…</div>'
KEYS_CSS = """
.pk-keys { font-family: var(--st-font); font-size: 0.8rem; color: var(--st-text-color); opacity: 0.6; }
.pk-keys.pk-problem { color: #d62728; opacity: 1; font-weight: 600; }
"""
KEYS_JS = f"const READY = {json.dumps(READY)};\n" + """
// browser key -> the name sent; a page may pass its own map in the component's data.names
const NAMES = { 1: "1", 2: "2", 3: "3", 4: "4", 5: "5", s: "s", S: "s", u: "u", U: "u", Enter: "enter" };
const FIRST_WAIT_MS = 2000, MAX_WAIT_MS = 30000;  // re-send after a quiet spell, doubling while unacknowledged
const REVEAL_MS = 30000;  // how long a newly marked answer is looked for on the page (a loaded machine draws late)

function live(box) {
  return !!(box.host && box.host.isConnected);
}

function show(box) {
  const status = box.host && box.host.querySelector && box.host.querySelector(".pk-keys");
  if (!status) return;
  const n = box.queue.length;
  const keys = `${n} key${n > 1 ? "s" : ""}`;
  const problem = n && box.problem;  // the server could not store them (a full disk): they are kept and re-sent
  status.textContent = READY + (!n ? "" : problem ? ` · ${keys} ${problem}` : ` · sending ${keys}…`);
  status.classList.toggle("pk-problem", !!problem);
}

// Drop what the server acknowledged (its last handled number from this window), from either path.
function acknowledge(box, acked) {
  if (typeof acked !== "number" || acked <= box.acked) return;
  box.acked = acked;
  box.queue = box.queue.filter((e) => e[0] > acked);
  if (!box.queue.length) box.problem = null;
  arm(box);
  show(box);
}

// Ask the page to rerun, carrying the unacknowledged presses as component state (the second path, and the only
// one where the server has no press endpoint). One at a time: the next waits until a run has drawn the listener
// again, so presses typed faster than the page reruns never interrupt run after run.
function nudge(box) {
  box.sent += 1;
  box.pending = true;
  box.send("presses", { client: box.client, queue: box.queue.slice(), sent: box.sent });
  arm(box);
  show(box);
}

// The page should show what the server acknowledged: one rerun, unless one is on its way.
function refresh(box) {
  if (box.shownUpTo < box.acked && !box.pending) nudge(box);
}

// The presses, straight to the server's press endpoint: stored there at once, whether or not the page ever
// reruns (a tab closed while the page lags loses nothing). A keepalive request outlives the page that sent it;
// on the way out a beacon carries whatever is still unacknowledged.
function post(box, beacon) {
  if (!box.url || !box.desk || !box.queue.length) return;
  const body = JSON.stringify({ desk: box.desk, client: box.client, queue: box.queue.slice() });
  if (beacon) {
    navigator.sendBeacon(box.url, new Blob([body], { type: "text/plain" }));
    return;
  }
  fetch(box.url, { method: "POST", body, keepalive: true, credentials: "same-origin",
                   headers: { "Content-Type": "text/plain" } })
    .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
    .then((j) => {
      box.problem = (j && j.problem) || null;  // e.g. "not saved — disk full …": the presses stay queued
      acknowledge(box, j && j.acked);
      refresh(box);
      show(box);
    })
    .catch(() => nudge(box));  // the endpoint failed: the presses go as component state
}

// A new press: to the endpoint where there is one (its acknowledgement then asks for one rerun), else as state.
function send(box) {
  if (box.url && box.desk) {
    post(box, false);
    arm(box);
    show(box);
  } else {
    nudge(box);
  }
}

// Whether the server or the page owes this window something: presses not acknowledged, or acknowledged (by the
// press endpoint) but not yet shown by a rerun of the page.
function owed(box) {
  return box.queue.length > 0 || box.shownUpTo < box.acked;
}

// (Re)start the quiet-spell timer: every send and every acknowledgement that arrives restart it, so it fires
// only when the server has said nothing for the whole wait while something is owed; it then sends again, to the
// endpoint and as state (a fresh ``sent`` count, so it is a change that asks for a rerun).
function arm(box) {
  clearTimeout(box.timer);
  box.timer = null;
  if (!owed(box)) {
    box.wait = FIRST_WAIT_MS;
    return;
  }
  box.timer = setTimeout(() => {
    box.timer = null;
    if (!owed(box) || !live(box)) return;
    // a server that said why it could not store them is asked again soon: the space may come back any moment
    box.wait = box.problem ? FIRST_WAIT_MS : Math.min(2 * box.wait, MAX_WAIT_MS);
    box.resent += 1;
    post(box, false);
    nudge(box);  // also as state, and a rerun: whichever path works
  }, box.wait);
}

// Time on an answer: from when it became the one to rate in this window (the page showing the state after the
// previous press, or that press itself when typed before the page caught up) to this press; never 0.
function onKey(box, e) {
  if (!live(box)) return;  // the listener is not on the page now
  const key = (box.names || NAMES)[e.key];
  const t = e.target, tag = t && t.tagName;
  if (!key || e.repeat || e.ctrlKey || e.metaKey || e.altKey) return;
  if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (t && t.isContentEditable)) return;
  e.preventDefault();
  const now = performance.now();
  const start = box.shownUpTo >= box.seq ? Math.max(box.pressedAt, box.shownAt) : box.pressedAt;
  box.seq += 1;
  box.pressedAt = now;
  box.queue.push([box.seq, key, Math.max(1, Math.round(10 * (now - start)) / 10)]);
  send(box);
}

// Keep the marked answer on screen (a projector's 720 px show six rows): once the page has drawn it, scroll
// it to the middle when any of it is out of view or under the page's header.
function reveal(box) {
  clearTimeout(box.revealTimer);
  if (!box.focus || !live(box) || performance.now() > box.revealUntil) return;
  const el = document.querySelector(".st-key-" + CSS.escape(box.focus));
  if (!el) {
    box.revealTimer = setTimeout(() => reveal(box), 100);
    return;
  }
  const header = document.querySelector('[data-testid="stHeader"]');
  const top = header ? Math.max(0, header.getBoundingClientRect().bottom) : 0;
  const r = el.getBoundingClientRect();
  if (r.top < top || r.bottom > window.innerHeight) el.scrollIntoView({ block: "center" });
}

export default function (component) {
  const { setStateValue, data, parentElement } = component;
  let box = window.__probekitKeys;
  if (!box) {
    box = window.__probekitKeys = {
      client: Math.random().toString(36).slice(2, 10) + Date.now().toString(36),
      seq: 0, sent: 0, pending: false, queue: [], acked: 0, wait: FIRST_WAIT_MS, timer: null, resent: 0,
      send: null, host: null, url: null, desk: null, pressedAt: performance.now(), shownAt: performance.now(),
      shownUpTo: 0, focus: null, revealTimer: null, revealUntil: 0, problem: null,
    };
    document.addEventListener("keydown", (e) => onKey(box, e), true);
    // Closing or leaving the page with presses unacknowledged: flush them, and ask the expert to wait.
    window.addEventListener("pagehide", () => post(box, true));
    window.addEventListener("beforeunload", (e) => {
      if (!box.queue.length) return;
      post(box, true);
      e.preventDefault();
      e.returnValue = "";
    });
  }
  box.send = setStateValue;
  box.host = parentElement;
  box.url = (data && data.url) || null;
  box.desk = (data && data.desk) || null;
  box.names = (data && data.names) || NAMES;
  const acked = (data && data.acked && data.acked[box.client]) || 0;
  if (acked > box.shownUpTo) {  // the page now shows what those presses did
    box.shownUpTo = acked;
    box.shownAt = performance.now();
  }
  box.pending = false;  // a run has drawn the listener: the next rerun may be asked for
  box.problem = (data && data.problem) || null;
  acknowledge(box, acked);
  refresh(box);
  box.focus = (data && data.focus) || null;
  box.revealUntil = performance.now() + REVEAL_MS;
  reveal(box);
  arm(box);
  show(box);
  return () => {};  // nothing to undo: the listener stays, and checks that its element is on the page
}
"""


@st.cache_resource
def key_listener():
    """Registered once per server (a page script reruns on every interaction)."""
    return st.components.v2.component("probekit.rating_keys", html=KEYS_HTML, css=KEYS_CSS, js=KEYS_JS)


@dataclass(eq=False)
class Desk:
    """This browser session's place in the work: the last key press handled per browser window (also the
    acknowledgement sent back), current query per (session, expert), a message to show, when the page last
    finished drawing (a click's time is counted from there), and what to do with a press (``act``). One object
    kept in session state and only ever mutated in place, under its lock. Why: Streamlit starts a new run
    before an interrupted one has finished, and a value the old run *assigns* to ``st.session_state`` can be
    dropped when the new run compacts the state (seen in two browsers at once: an Enter handled, its new query
    lost, the next ten ratings refused); nor may two runs handle the same key press (one answer rated twice).
    Presses also come in through the press endpoint (``pages/_press_route.py``), outside any run: ``id`` is the
    secret by which the browser names this desk there. ``problem``: why the last press tried could not be stored
    (:func:`not_saved`), None once one is; the page and the listener show it."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    handled: dict[str, int] = field(default_factory=dict)
    known: set = field(default_factory=set)  # (session, expert, window) whose stored last number was read
    query: dict = field(default_factory=dict)
    flash: str | None = None
    shown: float = field(default_factory=time.time)
    act: Callable[[str, int | None], None] | None = None
    id: str = field(default_factory=lambda: secrets.token_urlsafe(18))
    problem: str | None = None

    def take(self, state) -> int:
        """Act on the presses of ``state`` (the listener's message) not handled yet, once each, in the order
        typed; returns the acknowledgement for its window (the last number handled from it, 0 if none). A press
        that could not be stored (a full disk) stops there: it and the presses after it stay unhandled, so the
        browser keeps them and sends them again, and :attr:`problem` says why."""
        with self.lock:
            client = state.get("client") if isinstance(state, dict) else None
            for seq, key, ms in new_presses(self.handled, state):
                if seq <= self.handled.get(client, 0):  # the window's stored last number, read on its first press
                    continue
                press = Press(client, seq, key, known=self.known)
                if self.act is not None:
                    try:
                        with pressing(press):
                            self.act(key, ms)
                        settle_press(press)
                    except NOT_STORED as e:  # an act that lets the error through (others catch it: press.failed)
                        press.failed = press.failed or e
                    if press.failed is not None:
                        self.problem = not_saved(press.failed)
                        break
                self.problem = None
                self.handled[client] = max(seq, press.stored or 0, self.handled.get(client, 0))
            return self.handled.get(client, 0) if isinstance(client, str) else 0

    def clicked_ms(self) -> int:
        """A click's time on its answer: from the end of the run that drew the page to now (at least 1 ms)."""
        return max(1, int(1000 * (time.time() - self.shown)))


def not_saved(error: BaseException, *, kept: bool = True) -> str:
    """What the page says when a press (``kept``: the browser keeps it and sends it again) or a click could not
    be stored: "not saved — disk full (0.0 MB free for …)" and what happens next."""
    full = isinstance(error, DiskFullError)
    if isinstance(error, DiskFullError):
        why = f"disk full ({error.free} for {error.path})"
    else:
        why = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
    fix = "disk space is freed" if full else "the problem is fixed"
    then = (f"your keys are kept in this window and sent again until they are stored: keep this page open until "
            f"{fix}" if kept else f"click again once {fix}")
    return f"not saved — {why}; {then}"


def _presses(value) -> dict | None:
    """The listener's ``presses`` state out of its widget value (None when it has sent nothing)."""
    try:
        return value.get("presses") if value is not None else None
    except AttributeError:
        return None


def keyboard(desk: Desk, act: Callable[[str, int | None], None], *, key: str = "an_keys_js",
             focus: Callable[[], str | None] = lambda: None, names: dict[str, str] | None = None,
             endpoint: bool = True) -> None:
    """Draw the key listener and ``act(key, milliseconds)`` on every press not handled yet, once each, in the
    order typed (the milliseconds the expert spent on it, as the browser measured them, or None).

    The presses are read from the session state and handled *before* the listener is drawn, so its ``data``
    acknowledges them in this very run; on a browser session's first run the listener's state is known only once
    it is drawn, so whatever it returns is handled too (nothing twice: :func:`probekit.annotations.take_presses`).
    The listener also posts every press to the press endpoint (``pages/_press_route.py``), which hands it to
    this desk at once, between runs: both paths go through :meth:`Desk.take`, so each press is handled once.
    ``focus()``, asked once the presses are handled: the element key of the answer to rate now, which the browser
    keeps on screen. ``names``: the keys listened to, as the browser's ``KeyboardEvent.key`` -> the name ``act``
    gets (default: the Annotate page's 1–5, S, U and Enter; the presenter's arrows, PageUp/PageDown and Escape).
    ``endpoint``: also post presses to the press endpoint (off for a page whose ``act`` must run inside its own
    script run, as the presenter's does: its presses travel as component state alone).
    """
    with desk.lock:  # the press endpoint's thread may be inside desk.take now
        desk.act = act
    url = press_endpoint(desk) if endpoint else None
    desk.take(_presses(st.session_state.get(key)))
    with desk.lock:  # a copy, and the marked answer, taken while no press changes them
        acked = dict(desk.handled)
        marked = focus()
    data = {"acked": acked, "url": url, "desk": desk.id, "focus": marked, "problem": desk.problem,
            **({"names": names} if names else {})}
    value = key_listener()(key=key, data=data, default={"presses": None}, on_presses_change=lambda: None,
                           height="content")
    desk.take(_presses(value))
