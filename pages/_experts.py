"""The Annotation results page's experts panel: a personal link per expert and session, revocable."""

import re

import streamlit as st

from pages import _ui as ui
from probekit import annotations as ann


def app_base() -> str:
    """The app's address as the organiser's browser sees it (what the experts' links start with)."""
    return re.sub(r"/results/?$", "", (st.context.url or "http://localhost:8501").rstrip("/"))


def experts_panel(sid: str, links: dict) -> None:
    """Personal links: one per expert and session (only a hash is stored, so a link is shown once), revocable.
    ``links`` holds the link just created per session (the page's session state), shown once."""
    st.subheader("Experts and their links")
    c1, c2 = st.columns(2, vertical_alignment="bottom")
    new = c1.text_input("Expert name", key="rs_expert", max_chars=ann.MAX_NAME,
                        help="As the expert should appear in the results. A name that has a link gets a new one "
                             "(the old link stops working).")
    if c2.button("Create link", key="rs_link", icon=":material/link:"):
        with ui.guard("Creating the link"):
            first = not ann.organiser_token_required()
            token = ann.issue_token(sid, new)
            links[sid] = (" ".join(new.split()), ann.expert_link(app_base(), sid, token))
            if first:  # from now on the organiser pages ask for a credential: say so now, not at the next reload
                st.session_state["rs_locked_note"] = sid
    if sid in links:
        who, link = links[sid]
        st.success(f"Personal link for **{ui.md(who)}**: send it to them only. It is shown once (only its hash is "
                   "stored); create a new one if it is lost.", icon=":material/link:")
        st.code(link, language=None)
    if st.session_state.get("rs_locked_note") == sid:
        st.warning("Expert links are out, so this server now asks organisers to sign in: "
                   f"{ui.md(ann.where_is_the_token())}. This browser stays signed in until it closes; keep the token "
                   "to sign in from another browser or after a restart.", icon=":material/lock:")
    team = ann.experts(sid)
    if team.empty:
        st.caption("No expert yet: create a link for each expert.")
        return
    st.dataframe(team, hide_index=True, key="rs_experts")
    active = team.loc[team["link active"], "expert"].tolist()
    c1, c2 = st.columns(2, vertical_alignment="bottom")
    gone = c1.selectbox("Revoke the link of", active, index=None, key="rs_revoke_who",
                        placeholder="Expert…" if active else "No active links")
    if c2.button("Revoke link", key="rs_revoke", icon=":material/link_off:", disabled=not gone):
        with ui.guard("Revoking"):
            ann.revoke_tokens(sid, gone)
            links.pop(sid, None)
            st.rerun()
    st.caption("A revoked link stops working at once; the expert's ratings stay. Experts see only the Annotate "
               "page and their own ratings.")
