"""Annotate (expert): rate each answer of a session 1–5 with the MedLAMA rubric, blind, by keyboard or clicks.

An expert comes in through their personal link (``?session=…&token=…``), which app.py checks and which opens
this page alone; a reload or a later visit resumes exactly where the expert stopped. Keys (the rules are
:func:`probekit.annotations.key_action`): 1–5 rate the marked answer, S skips it, U undoes the last rating,
Enter goes to the next query. Only the expert's own ratings are ever shown. Without a link (the organiser's
side) the page lets the organiser start annotating under a new name.

Keys are read by the listener in ``pages/_rating_keys.py`` (every press once, in order)."""

import logging
import time
import traceback

import streamlit as st

from pages import _ui as ui
from pages._annotate_start import organiser_start
from pages._rating_keys import Desk, keyboard, not_saved
from probekit import annotations as ann
from probekit.errors import DiskFullError, ProbekitError

log = logging.getLogger("probekit.app")
SHORT = {5: "perfect", 4: "similar", 3: "related", 2: "same domain", 1: "unrelated"}
ui.title("Annotate")
qp = st.query_params

KEEP: dict = st.session_state.setdefault("an_keep", {})  # mutated in place (see Desk): session and name typed


# ---- who: an expert link's token only (app.py checked it); the organiser's side starts one
expert = ui.expert()
if expert is None:
    organiser_start(qp, KEEP)
sid, who, name = expert.session_id, expert.annotator, expert.name
meta = None
with ui.guard("Opening the session"):
    meta = ann.get_session(sid)
if meta is None:
    st.stop()
st.caption(f"Session **{ui.md(meta['name'])}** · {meta['n_queries']} queries × top-{meta['k']} answers"
           + (" · blind" if meta["blind"] else " · gold answers and model scores shown"))
QKEY = (sid, who)


DESK: Desk = st.session_state.setdefault("an_desk", Desk())


def act(key: str | None = None, action: ann.Action | None = None, ms: int | None = None) -> None:
    """One key press (``key``, with the milliseconds the browser measured on it) or click (``action``, timed from
    the end of the run that drew the page); serialised per browser session. Which key does what is
    :func:`probekit.annotations.key_action`'s to decide."""
    with DESK.lock:
        elapsed = ms if ms is not None else DESK.clicked_ms()
        qi = DESK.query.get(QKEY)
        try:
            if key is not None:
                DESK.query[QKEY], DESK.flash = ann.press(sid, who, key, query_index=qi, elapsed_ms=elapsed)
            else:
                DESK.query[QKEY], DESK.flash = ann.perform(sid, who, action, query_index=qi, elapsed_ms=elapsed)
        except DiskFullError as e:
            if key is not None:
                raise  # the desk keeps the press (not handled), shows why, and the browser sends it again
            DESK.flash = not_saved(e, kept=False)
        except ProbekitError as e:
            DESK.flash = str(e)
        except Exception as e:  # noqa: BLE001 - never a traceback in the page
            log.error("annotation action failed\n%s", traceback.format_exc())
            DESK.flash = f"That did not work ({type(e).__name__}); the server log has details."


def marked_row() -> str | None:
    """The element key of the answer to rate now (the keys' row once every answer is done; None when all are)."""
    qi = DESK.query.get(QKEY)
    if qi is None:
        return None
    marked = next((a["position"] for a in ann.query_view(sid, who, qi)["answers"] if a["status"] is None), None)
    return "an_keys" if marked is None else f"an_row_{marked}"


main, side = st.columns([3, 1], gap="large")
with side:
    with st.container(border=True):
        st.markdown("**Rubric**")
        st.markdown("\n".join(f"- **{s}** {text}" for s, text in ann.RUBRIC.items()))
        st.caption(ann.GUIDELINES)
        st.caption(ann.KEY_HELP)
    st.caption(f"Annotating as **{ui.md(name)}** · bookmark this page to come back later")

with main:
    with DESK.lock:
        if QKEY not in DESK.query:
            with ui.guard("Finding your next query"):
                DESK.query[QKEY] = ann.next_query(sid, who)
    keyboard(DESK, lambda k, ms: act(k, ms=ms), focus=marked_row)  # every press once, in order, even when
    # two runs overlap; the browser keeps the marked answer's row on screen
    with DESK.lock:
        flash, DESK.flash = DESK.flash, None
    progress = ann.progress(sid, who)
    per = progress["seconds_per_answer"]
    st.progress(progress["done"] / max(progress["total"], 1),
                text=f"{progress['done']}/{progress['total']} answers · {progress['queries_done']}/"
                     f"{progress['queries_total']} queries" + (f" · {per:.1f} s per answer" if per is not None else ""))
    if flash:
        st.warning(ui.message(flash))
    if DESK.problem:  # presses the server could not store (a full disk): kept by the browser, sent again
        st.error(ui.message(DESK.problem[:1].upper() + DESK.problem[1:]), icon="💾")
    qi = DESK.query.get(QKEY)
    if qi is None:
        st.success("All done, thank you! Your ratings are saved; U undoes the last one.")
        st.button("Undo · U", key="an_undo", on_click=act, args=("u",))
        DESK.shown = time.time()
        st.stop()
    view = ann.query_view(sid, who, qi)
    focus = next((a for a in view["answers"] if a["status"] is None), None)
    st.subheader(ui.md(view["query"]).replace(ui.md("[MASK]"), r"\_\_\_\_\_"), anchor=False)
    st.caption(f"Query {qi + 1} of {meta['n_queries']} · relation {ui.md(view['relation'])} · subject "
               f"{ui.md(view['subject'])}"
               + ("" if meta["blind"] else f" · gold: {'; '.join(map(ui.md, view['golds'])) or '–'}"))
    for a in view["answers"]:
        # the answer on its line, its buttons in a row of their own: beside a long answer they wrapped ("5" and
        # "skip" on the next line at 1024 px), and a rater's hand follows one column of buttons
        row = st.container(gap=None, key=f"an_row_{a['position']}")
        mark = "▶" if focus is a else ("✓" if a["status"] == "rate" else ("–" if a["status"] == "skip" else "·"))
        info = "" if meta["blind"] else (f"  ·  rank {a['rank']}  ·  {a['model_score']:.3f}"
                                         + ("  ·  **gold**" if a["gold"] else ""))
        row.markdown(f"{mark} &nbsp; **{ui.md(a['answer'])}**{info}", width="stretch")
        buttons = row.container(horizontal=True, wrap=False, gap="small", key=f"an_buttons_{a['position']}")
        for s in range(1, 6):
            buttons.button(str(s), key=f"an_b_{a['position']}_{s}", help=ann.RUBRIC[s], on_click=act,
                       kwargs={"action": ann.Action("rate", a["item_id"], s)},
                       type="primary" if a["score"] == s else "secondary")
        buttons.button("skip", key=f"an_s_{a['position']}", on_click=act,
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
    DESK.shown = time.time()  # the page is drawn: a click is timed from here
