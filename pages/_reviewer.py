"""Review (a reviewer's link): the disputed answers of the link's session, their ratings blind (rater 1, rater 2…,
whatever the organiser allows on their own panel), the gold answers when the session shows them, and a verdict
recorded under the link's name.

app.py serves :func:`review_app` alone to a browser session holding a reviewer link
(``/reviewer?session=…&token=…``; pages/_access.py checked it); each core call takes the link's token and checks it
again (:mod:`probekit.annotations.review`), so a link revoked while the page is open stops at the next click."""

import streamlit as st

from pages import _ui as ui
from pages._access import reviewer
from pages._review import answer, disputed_pick, recorded, verdict_controls
from probekit import annotations as ann


def review_app() -> None:
    """The reviewer app's one page: widgets, one core call each (with the link's token), drawn."""
    ui.title("Review")
    held = reviewer()
    if held is None:  # only the reviewer app runs this page, after the link's check
        st.stop()
    who, token = held
    meta = None
    with ui.guard("Opening the session"):
        meta = ann.get_session(who.session_id)
    if meta is None:
        return
    st.caption(f"Session **{ui.md(meta['name'])}** · reviewing as **{ui.md(who.name)}** · ratings shown as rater 1, "
               "rater 2… (renumbered for every answer)"
               + (" · blind session: no gold answers" if meta["blind"] else " · gold answers shown"))
    if flash := st.session_state.pop("rv_flash", None):
        st.success(flash, icon=":material/gavel:")
    spread = int(st.number_input("Disputed: scores at least this far apart", 1, 4, 2, key="rv_spread"))
    table = None
    with ui.guard("Finding disputed answers"):
        table = ann.reviewer_disputed(token, min_spread=spread)
    item = None if table is None else disputed_pick(table)
    if item is None:
        return
    view = None
    with ui.guard("Opening the answer"):
        view = ann.reviewer_view(token, item)
    if view is None:
        return
    answer(view)
    score, _, note, pressed = verdict_controls(ask_name=False)
    if pressed:
        with ui.guard("Recording the verdict"):
            ann.reviewer_verdict(token, item, score, note=note)
            recorded()
            st.session_state["rv_flash"] = (f"Verdict {score} recorded on **{ui.md(view['query'])}** → "
                                            f"**{ui.md(view['answer'])}**.")
            st.rerun()


if __name__ == "__main__":  # run as a file of pages/ (Streamlit's first run on a fresh server, or a test's rerun):
    review_app()  # its ui.title runs app.py, whose navigation checks the link and runs review_app
