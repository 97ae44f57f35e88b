"""The Annotate page's organiser side (no expert link): pick a session and start annotating under a new name."""

import streamlit as st

from pages import _ui as ui
from probekit import annotations as ann


def organiser_start(qp, keep: dict) -> None:
    """The organiser's side of this page (no expert link): choose a session and start annotating under a NEW
    name, which issues a personal link and opens it (this tab becomes the annotation-only app). The session
    and the name typed are kept (in ``keep``, the page's session state) when the organiser leaves the page and
    comes back; ``qp`` is ``st.query_params``."""
    if qp.get("annotator"):
        st.warning("Links with a name no longer open a session: each expert has a personal link, created on the "
                   "Annotation results page.", icon=":material/link_off:")
    sid = qp.get("session") or keep.get("session")
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
            keep["session"] = qp["session"] = pick
            st.rerun()
        st.stop()
    meta = None
    with ui.guard("Opening the session"):
        meta = ann.get_session(sid)
    if meta is None:
        if st.button("Choose another session", key="an_other"):
            keep.pop("session", None)
            qp.pop("session", None)
            st.rerun()
        st.stop()
    keep["session"] = qp["session"] = sid
    st.caption(f"Session **{ui.md(meta['name'])}** · {meta['n_queries']} queries × top-{meta['k']} answers"
               + (" · blind" if meta["blind"] else " · gold answers and model scores shown"))
    st.caption("Experts annotate through the personal link the organiser sends them (Annotation results → "
               "Experts). To annotate yourself, start under a new name: this tab then opens your own link.")
    typed = st.text_input("Your name", keep.get("name", ""), key="an_name", max_chars=ann.MAX_NAME,
                          help="Shown as typed in the results; it must not be an expert's name already.")
    keep["name"] = typed
    if st.button("Start annotating", type="primary", key="an_start"):
        with ui.guard("Starting"):
            token = ann.issue_token(sid, typed, new_only=True)
            qp.from_dict({"session": sid, "token": token})
            st.rerun()
    if st.button("Choose another session", key="an_other", type="tertiary"):
        keep.pop("session", None)
        qp.pop("session", None)
        st.rerun()
    st.stop()
