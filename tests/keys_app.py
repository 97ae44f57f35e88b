"""A Streamlit page with the Annotate page's keyboard and nothing else, for the browser tests of key presses
(tests/test_browser_keys.py): the same listener, :class:`Desk` and :func:`keyboard` as pages/annotate.py, and
the same :func:`probekit.annotations.press` storing each press in the annotation store; without the page's
sixty buttons a rerun is short, so a thousand presses take a minute or two instead of ten.

Run as ``streamlit run tests/keys_app.py`` from the repository root and open ``/?session=…&token=…`` (a
personal link's token). pytest imports this file for its doctests: the page runs only under Streamlit.
"""

from __future__ import annotations

import streamlit as st

from pages._rating_keys import Desk, keyboard
from probekit import annotations as ann
from probekit.errors import ProbekitError


def page() -> None:
    expert = ann.verify_token(st.query_params["token"], session_id=st.query_params["session"])
    sid, who = expert.session_id, expert.annotator
    desk: Desk = st.session_state.setdefault("desk", Desk())

    def act(key: str, ms: int | None) -> None:
        with desk.lock:
            try:
                desk.query[sid], desk.flash = ann.press(sid, who, key, query_index=desk.query.get(sid),
                                                        elapsed_ms=ms)
            except ProbekitError as e:
                desk.flash = str(e)

    with desk.lock:
        if sid not in desk.query:
            desk.query[sid] = ann.next_query(sid, who)
    keyboard(desk, act, key="keys")
    progress = ann.progress(sid, who)
    st.markdown(f"{progress['done']}/{progress['total']} answers")
    if desk.flash:
        st.warning(desk.flash)


if __name__ == "__main__":
    page()
