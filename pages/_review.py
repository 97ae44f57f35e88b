"""The Annotation results page's review panel: disputed answers with their blind ratings, and a reviewer's final
verdict (:mod:`probekit.annotations.review`)."""

import streamlit as st

from pages import _ui as ui
from probekit import annotations as ann


def review_panel(sid: str) -> None:
    """List the disputed answers, show one's ratings (as "rater 1"… unless names are allowed) and record a
    verdict; the ratings stay, the verdict is one more row and the statistics above use it."""
    st.subheader("Disputed answers: review")
    c1, c2 = st.columns(2)
    spread = int(c1.number_input("Disputed: scores at least this far apart", 1, 4, 2, key="rv_spread"))
    names = c2.toggle("Show rater names to the reviewer", False, key="rv_names",
                      help="Off: ratings are shown as rater 1, rater 2… renumbered for every answer.")
    table = None
    with ui.guard("Finding disputed answers"):
        table = ann.disputed(sid, min_spread=spread)
    if table is None:
        return
    if table.empty:
        st.caption("No disputed answers.")
        return
    st.dataframe(table.drop(columns=["query_index"]), hide_index=True, key="rv_table")
    labels = dict(zip(table.item_id, table["query"] + " → " + table["answer"]))
    item = st.selectbox("Answer to review", list(labels), format_func=labels.get, key="rv_item")
    view = None
    with ui.guard("Opening the answer"):
        view = ann.review_view(sid, item, show_names=names)
    if view is None:
        return
    st.markdown(" · ".join(f"{ui.md(r['rater'])}: **{r['score']}**" for r in view["ratings"])
                + ("" if "golds" not in view else f" · gold: {'; '.join(map(ui.md, view['golds'])) or '–'}"))
    if view["verdict"]:
        st.caption(f"Verdict in effect: {view['verdict']['score']} by {ui.md(view['verdict']['reviewer'])}")
    c1, c2, c3 = st.columns(3, vertical_alignment="bottom")
    score = c1.segmented_control("Verdict", [1, 2, 3, 4, 5], key="rv_score", help="\n".join(
        f"{s}: {text}" for s, text in ann.RUBRIC.items()))
    reviewer = c2.text_input("Reviewer", key="rv_reviewer", max_chars=ann.MAX_NAME)
    note = c3.text_input("Note (optional)", key="rv_note", max_chars=1000)
    if st.button("Record verdict", key="rv_record", type="primary", disabled=score is None):
        with ui.guard("Recording the verdict"):
            ann.record_verdict(sid, item, reviewer, score, note=note)
            st.rerun()
