"""The Annotate page's keyboard: a small ``st.components.v2`` listener that numbers every key press of its browser
window and sends the presses not yet acknowledged as component *state* (st.button's ``shortcut`` triggers lost
presses typed faster than a rerun: measured in a browser, of 5, 3, S typed at once only two arrived; a queue of
state keeps all, in order), and the :class:`Desk` that remembers which presses were handled. The presenter
(pages/_presenter.py) uses the same listener with its own keys (arrows, PageUp/PageDown, Escape).

Every press is handled exactly once, in the order typed:

- the browser keeps each press until the server acknowledges it and sends all unacknowledged presses with every
  new one, and again after a quiet spell (2 s, then doubling up to 30 s) while any is unacknowledged: a state
  update lost on the way (one sent while the connection is down is dropped) is sent again;
- the server handles a press only if its number is greater than the last one handled from that window
  (:func:`probekit.annotations.take_presses`), so a press sent twice is stored once; it handles them *before* it
  draws the listener, so the acknowledgement the listener gets in its ``data`` is never one run late;
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
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import streamlit as st

from probekit import annotations as ann

READY = "Keyboard on"  # the listener's status once it listens (the browser tests wait for it before typing)

KEYS_HTML = '<div class="pk-keys">Keyboard starting…</div>'
KEYS_CSS = """
.pk-keys { font-family: var(--st-font); font-size: 0.8rem; color: var(--st-text-color); opacity: 0.6; }
"""
KEYS_JS = f"const READY = {json.dumps(READY)};\n" + """
// browser key -> the name sent; a page may pass its own map in the component's data.names
const NAMES = { 1: "1", 2: "2", 3: "3", 4: "4", 5: "5", s: "s", S: "s", u: "u", U: "u", Enter: "enter" };
const FIRST_WAIT_MS = 2000, MAX_WAIT_MS = 30000;  // re-send after a quiet spell, doubling while unacknowledged

function live(box) {
  return !!(box.host && box.host.isConnected);
}

function show(box) {
  const status = box.host && box.host.querySelector && box.host.querySelector(".pk-keys");
  if (!status) return;
  const n = box.queue.length;
  status.textContent = READY + (n ? ` · sending ${n} key${n > 1 ? "s" : ""}…` : "");
}

function send(box) {
  box.send("presses", { client: box.client, queue: box.queue.slice() });
  arm(box);
  show(box);
}

// (Re)start the quiet-spell timer: every send and every acknowledgement that arrives restart it, so it fires
// only when the server has said nothing for the whole wait while presses are unacknowledged.
function arm(box) {
  clearTimeout(box.timer);
  box.timer = null;
  if (!box.queue.length) {
    box.wait = FIRST_WAIT_MS;
    return;
  }
  box.timer = setTimeout(() => {
    box.timer = null;
    if (!box.queue.length || !live(box)) return;
    box.wait = Math.min(2 * box.wait, MAX_WAIT_MS);
    box.resent += 1;
    send(box);
  }, box.wait);
}

function onKey(box, e) {
  if (!live(box)) return;  // the listener is not on the page now
  const key = (box.names || NAMES)[e.key];
  const t = e.target, tag = t && t.tagName;
  if (!key || e.repeat || e.ctrlKey || e.metaKey || e.altKey) return;
  if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (t && t.isContentEditable)) return;
  e.preventDefault();
  box.seq += 1;
  box.queue.push([box.seq, key]);
  send(box);
}

export default function (component) {
  const { setStateValue, data, parentElement } = component;
  let box = window.__probekitKeys;
  if (!box) {
    box = window.__probekitKeys = {
      client: Math.random().toString(36).slice(2, 10) + Date.now().toString(36),
      seq: 0, queue: [], wait: FIRST_WAIT_MS, timer: null, resent: 0, send: null, host: null,
    };
    document.addEventListener("keydown", (e) => onKey(box, e), true);
  }
  box.send = setStateValue;
  box.host = parentElement;
  box.names = (data && data.names) || NAMES;
  const acked = (data && data.acked && data.acked[box.client]) || 0;
  box.queue = box.queue.filter((e) => e[0] > acked);
  arm(box);
  show(box);
  return () => {};  // nothing to undo: the listener stays, and checks that its element is on the page
}
"""


@st.cache_resource
def key_listener():
    """Registered once per server (a page script reruns on every interaction)."""
    return st.components.v2.component("probekit.rating_keys", html=KEYS_HTML, css=KEYS_CSS, js=KEYS_JS)


@dataclass
class Desk:
    """This browser session's place in the work: the last key press handled per browser window (also the
    acknowledgement sent back), current query per (session, expert), a message to show, the timer. One object
    kept in session state and only ever mutated in place, under its lock. Why: Streamlit starts a new run
    before an interrupted one has finished, and a value the old run *assigns* to ``st.session_state`` can be
    dropped when the new run compacts the state (seen in two browsers at once: an Enter handled, its new query
    lost, the next ten ratings refused); nor may two runs handle the same key press (one answer rated twice)."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    handled: dict[str, int] = field(default_factory=dict)
    query: dict = field(default_factory=dict)
    flash: str | None = None
    t0: float = field(default_factory=time.time)


def _presses(value) -> dict | None:
    """The listener's ``presses`` state out of its widget value (None when it has sent nothing)."""
    try:
        return value.get("presses") if value is not None else None
    except AttributeError:
        return None


def keyboard(desk: Desk, act: Callable[[str], None], *, key: str = "an_keys_js",
             names: dict[str, str] | None = None) -> None:
    """Draw the key listener and ``act`` on every press not handled yet, once each, in the order typed.

    ``names``: the keys listened to, as the browser's ``KeyboardEvent.key`` -> the name ``act`` gets (default:
    the Annotate page's 1–5, S, U and Enter); the presenter listens to arrows, PageUp/PageDown and Escape.

    The presses are read from the session state and handled *before* the listener is drawn, so its ``data``
    acknowledges them in this very run; on a browser session's first run the listener's state is known only once
    it is drawn, so whatever it returns is handled too (nothing twice: :func:`probekit.annotations.take_presses`).
    """
    with desk.lock:
        for k in ann.take_presses(desk.handled, _presses(st.session_state.get(key))):
            act(k)
        acked = dict(desk.handled)
    data: dict = {"acked": acked} if names is None else {"acked": acked, "names": names}
    value = key_listener()(key=key, data=data, default={"presses": None},
                           on_presses_change=lambda: None, height="content")
    with desk.lock:
        for k in ann.take_presses(desk.handled, _presses(value)):
            act(k)
