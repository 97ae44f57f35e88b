"""The Annotate page's keyboard: a small ``st.components.v2`` listener that numbers every key press and sends the
queue of unprocessed presses as component *state* (st.button's ``shortcut`` triggers lost presses typed faster
than a rerun: measured in a browser, of 5, 3, S typed at once only two arrived; a queue of state keeps all, in
order), and the :class:`Desk` that remembers which presses were handled."""

import threading
import time
from dataclasses import dataclass, field

import streamlit as st

KEYS_JS = """
export default function (component) {
  const { setStateValue, data } = component;
  const box = (window.__probekitKeys = window.__probekitKeys || { seq: 0, queue: [] });
  const ack = (data && data.ack) || 0;
  box.queue = box.queue.filter((e) => e[0] > ack);
  const names = { 1: "1", 2: "2", 3: "3", 4: "4", 5: "5", s: "s", S: "s", u: "u", U: "u", Enter: "enter" };
  const onKey = (e) => {
    const key = names[e.key];
    const t = e.target, tag = t && t.tagName;
    if (!key || e.repeat || e.ctrlKey || e.metaKey || e.altKey) return;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (t && t.isContentEditable)) return;
    e.preventDefault();
    box.seq += 1;
    box.queue.push([box.seq, key]);
    setStateValue("presses", { queue: box.queue.slice() });
  };
  if (box.listener) document.removeEventListener("keydown", box.listener, true);
  box.listener = onKey;
  document.addEventListener("keydown", onKey, true);
  return () => document.removeEventListener("keydown", onKey, true);
}
"""


@st.cache_resource
def key_listener():
    """Registered once per server (a page script reruns on every interaction)."""
    return st.components.v2.component("probekit.rating_keys", js=KEYS_JS)


@dataclass
class Desk:
    """This browser session's place in the work: last key press handled, current query per (session, expert),
    a message to show, the timer. One object kept in session state and only ever mutated in place, under its
    lock. Why: Streamlit starts a new run before an interrupted one has finished, and a value the old run
    *assigns* to ``st.session_state`` can be dropped when the new run compacts the state (seen in two browsers
    at once: an Enter handled, its new query lost, the next ten ratings refused); nor may two runs handle the
    same key press (one answer rated twice)."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    seq: int = 0
    query: dict = field(default_factory=dict)
    flash: str | None = None
    t0: float = field(default_factory=time.time)
