"""The review of disputed answers: the organiser's panel on Annotation results and the reviewer app
(pages/_reviewer.py) draw one answer and the verdict controls with the same pieces here
(:mod:`probekit.annotations.review`)."""

import streamlit as st

from pages import _ui as ui
from probekit import annotations as ann


def disputed_pick(table):
    """The disputed answers as a table and a choice of one; returns its item id (None when there is none)."""
    if table.empty:
        st.caption("No disputed answers.")
        return None
    st.dataframe(table.drop(columns=["query_index"]), hide_index=True, key="rv_table")
    labels = dict(zip(table.item_id, table["query"] + " → " + table["answer"]))
    return st.selectbox("Answer to review", list(labels), format_func=labels.get, key="rv_item")


def answer(view: dict) -> None:
    """One answer's ratings as the view names them (rater 1, rater 2… unless names are allowed), the session's
    gold answers when it shows them, and the verdict in effect."""
    st.markdown(f"**{ui.md(view['query'])}** → **{ui.md(view['answer'])}**")
    gold = "" if "golds" not in view else (f" · gold: {'; '.join(map(ui.md, view['golds'])) or '–'}"
                                           + (" (this answer is one)" if view["gold"] else ""))
    st.markdown(" · ".join(f"{ui.md(r['rater'])}: **{r['score']}**" for r in view["ratings"]) + gold)
    if view["verdict"]:
        st.caption(f"Verdict in effect: {view['verdict']['score']} by {ui.md(view['verdict']['reviewer'])}")


def verdict_controls(*, ask_name: bool):
    """The verdict (1–5, the rubric in its help), the reviewer's name when ``ask_name`` (a reviewer link brings
    its own), a note, and the Record button; returns ``(score, name, note, pressed)``."""
    cols = st.columns(3 if ask_name else 2, vertical_alignment="bottom")
    score = cols[0].segmented_control("Verdict", [1, 2, 3, 4, 5], key="rv_score", help="\n".join(
        f"{s}: {text}" for s, text in ann.RUBRIC.items()))
    name = cols[1].text_input("Reviewer", key="rv_reviewer", max_chars=ann.MAX_NAME) if ask_name else None
    note = cols[-1].text_input("Note (optional)", key="rv_note", max_chars=1000)
    pressed = st.button("Record verdict", key="rv_record", type="primary", disabled=score is None)
    return score, name, note, pressed


def recorded() -> None:
    """After a verdict: the next answer starts with no score chosen (a second click must not record the last
    score on another answer) and no note."""
    for key in ("rv_score", "rv_note"):
        st.session_state.pop(key, None)


def review_panel(sid: str) -> None:
    """List the disputed answers, show one's ratings (as "rater 1"… unless names are allowed) and record a
    verdict; the ratings stay, the verdict is one more row and the statistics above use it."""
    st.subheader("Disputed answers: review")
    c1, c2 = st.columns(2)
    spread = int(c1.number_input("Disputed: scores at least this far apart", 1, 4, 2, key="rv_spread"))
    names = c2.toggle("Show rater names to the reviewer", False, key="rv_names",
                      help="Off: ratings are shown as rater 1, rater 2… renumbered for every answer. A reviewer "
                           "link never shows names.")
    table = None
    with ui.guard("Finding disputed answers"):
        table = ann.disputed(sid, min_spread=spread)
    item = None if table is None else disputed_pick(table)
    if item is None:
        return
    view = None
    with ui.guard("Opening the answer"):
        view = ann.review_view(sid, item, show_names=names)
    if view is None:
        return
    answer(view)
    score, reviewer, note, pressed = verdict_controls(ask_name=True)
    if pressed:
        with ui.guard("Recording the verdict"):
            ann.record_verdict(sid, item, reviewer, score, note=note)
            recorded()
            st.rerun()
