"""Annotate (expert): rate each answer of a session 1–5 with the MedLAMA rubric, blind, by keyboard or clicks.

An expert comes in through their personal link (``?session=…&token=…``), which app.py checks and which opens
this page alone; a reload or a later visit resumes exactly where the expert stopped. Keys (the rules are
:func:`probekit.annotations.key_action`): 1–5 rate the marked answer, S skips it, U undoes the last rating,
Enter goes to the next query. Only the expert's own ratings are ever shown. Without a link (the organiser's
side) the page lets the organiser start annotating under a new name.

Keys are read by a small ``st.components.v2`` listener that numbers every key press and sends the queue of
unprocessed presses as component *state*: st.button's ``shortcut`` triggers lost presses typed faster than a
rerun (measured in a browser: of 5, 3, S typed at once only two arrived), a queue of state keeps all, in order."""

import logging
import threading
import time
import traceback
from dataclasses import dataclass, field

import streamlit as st

from pages import _ui as ui
from probekit import annotations as ann
from probekit.errors import ProbekitError

log = logging.getLogger("probekit.app")
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
SHORT = {5: "perfect", 4: "similar", 3: "related", 2: "same domain", 1: "unrelated"}
ui.title("Annotate")
qp = st.query_params

KEEP: dict = st.session_state.setdefault("an_keep", {})  # mutated in place (see Desk): session and name typed


def organiser_start() -> None:
    """The organiser's side of this page (no expert link): choose a session and start annotating under a NEW
    name, which issues a personal link and opens it (this tab becomes the annotation-only app). The session
    and the name typed are kept when the organiser leaves the page and comes back."""
    if qp.get("annotator"):
        st.warning("Links with a name no longer open a session: each expert has a personal link, created on the "
                   "Annotation results page.", icon=":material/link_off:")
    sid = qp.get("session") or KEEP.get("session")
    if not sid:
        sessions = None
        with ui.guard("Listing sessions"):
            sessions = ann.list_sessions()
        if sessions is None or sessions.empty:
            st.info("No annotation session yet: create one on the Annotation results page, then send each expert "
                    "their personal link.")
            st.stop()
        names = dict(zip(sessions.session_id, sessions.name))
        pick = st.selectbox("Session", list(names), index=None, key="an_pick", placeholder="Choose a session…",
                            format_func=lambda s: f"{names[s]} [{s}]")
        if pick:
            KEEP["session"] = qp["session"] = pick
            st.rerun()
        st.stop()
    meta = None
    with ui.guard("Opening the session"):
        meta = ann.get_session(sid)
    if meta is None:
        if st.button("Choose another session", key="an_other"):
            KEEP.pop("session", None)
            qp.pop("session", None)
            st.rerun()
        st.stop()
    KEEP["session"] = qp["session"] = sid
    st.caption(f"Session **{ui.md(meta['name'])}** · {meta['n_queries']} queries × top-{meta['k']} answers"
               + (" · blind" if meta["blind"] else " · gold answers and model scores shown"))
    st.caption("Experts annotate through the personal link the organiser sends them (Annotation results → "
               "Experts). To annotate yourself, start under a new name: this tab then opens your own link.")
    typed = st.text_input("Your name", KEEP.get("name", ""), key="an_name", max_chars=ann.MAX_NAME,
                          help="Shown as typed in the results; it must not be an expert's name already.")
    KEEP["name"] = typed
    if st.button("Start annotating", type="primary", key="an_start"):
        with ui.guard("Starting"):
            token = ann.issue_token(sid, typed, new_only=True)
            qp.from_dict({"session": sid, "token": token})
            st.rerun()
    if st.button("Choose another session", key="an_other", type="tertiary"):
        KEEP.pop("session", None)
        qp.pop("session", None)
        st.rerun()
    st.stop()


# ---- who: an expert link's token only (app.py checked it); the organiser's side starts one
expert = ui.expert()
if expert is None:
    organiser_start()
sid, who, name = expert.session_id, expert.annotator, expert.name
meta = None
with ui.guard("Opening the session"):
    meta = ann.get_session(sid)
if meta is None:
    st.stop()
st.caption(f"Session **{ui.md(meta['name'])}** · {meta['n_queries']} queries × top-{meta['k']} answers"
           + (" · blind" if meta["blind"] else " · gold answers and model scores shown"))
QKEY = (sid, who)


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


DESK: Desk = st.session_state.setdefault("an_desk", Desk())


def act(key: str | None = None, action: ann.Action | None = None) -> None:
    """One key press (``key``) or click (``action``), then a fresh timer for the next answer; serialised per
    browser session. Which key does what is :func:`probekit.annotations.key_action`'s to decide."""
    with DESK.lock:
        elapsed = int(1000 * (time.time() - DESK.t0))
        qi = DESK.query.get(QKEY)
        try:
            if key is not None:
                DESK.query[QKEY], DESK.flash = ann.press(sid, who, key, query_index=qi, elapsed_ms=elapsed)
            else:
                DESK.query[QKEY], DESK.flash = ann.perform(sid, who, action, query_index=qi, elapsed_ms=elapsed)
        except ProbekitError as e:
            DESK.flash = str(e)
        except Exception as e:  # noqa: BLE001 - never a traceback in the page
            log.error("annotation action failed\n%s", traceback.format_exc())
            DESK.flash = f"That did not work ({type(e).__name__}); the server log has details."
        DESK.t0 = time.time()


main, side = st.columns([3, 1], gap="large")
with side:
    with st.container(border=True):
        st.markdown("**Rubric**")
        st.markdown("\n".join(f"- **{s}** {text}" for s, text in ann.RUBRIC.items()))
        st.caption(ann.GUIDELINES)
        st.caption(ann.KEY_HELP)
    st.caption(f"Annotating as **{ui.md(name)}** · bookmark this page to come back later")

with main:
    pressed = key_listener()(key="an_keys_js", data={"ack": DESK.seq},
                             default={"presses": None}, on_presses_change=lambda: None, height=0)
    with DESK.lock:  # every press once, in the order typed, even when two runs overlap
        for seq, key in ((pressed.get("presses") or {}).get("queue") or []):
            if seq > DESK.seq:
                DESK.seq = seq
                act(key)
        if QKEY not in DESK.query:
            with ui.guard("Finding your next query"):
                DESK.query[QKEY] = ann.next_query(sid, who)
        flash, DESK.flash = DESK.flash, None
    progress = ann.progress(sid, who)
    per = progress["seconds_per_answer"]
    st.progress(progress["done"] / max(progress["total"], 1),
                text=f"{progress['done']}/{progress['total']} answers · {progress['queries_done']}/"
                     f"{progress['queries_total']} queries" + (f" · {per:.1f} s per answer" if per is not None else ""))
    if flash:
        st.warning(flash)
    qi = DESK.query.get(QKEY)
    if qi is None:
        st.success("All done, thank you! Your ratings are saved; U undoes the last one.")
        st.button("Undo · U", key="an_undo", on_click=act, args=("u",))
        st.stop()
    view = ann.query_view(sid, who, qi)
    st.subheader(ui.md(view["query"]).replace(ui.md("[MASK]"), r"\_\_\_\_\_"), anchor=False)
    st.caption(f"Query {qi + 1} of {meta['n_queries']} · relation {ui.md(view['relation'])} · subject "
               f"{ui.md(view['subject'])}"
               + ("" if meta["blind"] else f" · gold: {'; '.join(map(ui.md, view['golds'])) or '–'}"))
    focus = next((a for a in view["answers"] if a["status"] is None), None)
    for a in view["answers"]:
        row = st.container(horizontal=True, vertical_alignment="center", key=f"an_row_{a['position']}")
        mark = "▶" if focus is a else ("✓" if a["status"] == "rate" else ("–" if a["status"] == "skip" else "·"))
        info = "" if meta["blind"] else (f"  ·  rank {a['rank']}  ·  {a['model_score']:.3f}"
                                         + ("  ·  **gold**" if a["gold"] else ""))
        row.markdown(f"{mark} &nbsp; **{ui.md(a['answer'])}**{info}", width="stretch")
        for s in range(1, 6):
            row.button(str(s), key=f"an_b_{a['position']}_{s}", help=ann.RUBRIC[s], on_click=act,
                       kwargs={"action": ann.Action("rate", a["item_id"], s)},
                       type="primary" if a["score"] == s else "secondary")
        row.button("skip", key=f"an_s_{a['position']}", on_click=act,
                   kwargs={"action": ann.Action("skip", a["item_id"])},
                   type="primary" if a["status"] == "skip" else "tertiary")
    if view["complete"]:
        st.success("Every answer of this query is done: Enter (or Next query) moves on.")
    keys = st.container(horizontal=True, key="an_keys")
    for s in range(5, 0, -1):
        keys.button(f"{s} · {SHORT[s]}", key=f"an_k{s}", on_click=act, args=(str(s),))
    keys.button("Skip · S", key="an_skip", on_click=act, args=("s",))
    keys.button("Undo · U", key="an_undo", on_click=act, args=("u",))
    keys.button("Next query · Enter", key="an_next", type="primary", on_click=act, args=("enter",))
