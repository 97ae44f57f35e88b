"""The Annotation results page's experts panel: a personal link per expert (rates the answers) or reviewer (records
verdicts on the disputed answers, in a review-only app) and session, revocable."""

import re

import streamlit as st

from pages import _ui as ui
from probekit import annotations as ann

ROLE_HELP = ("Expert: rates the session's answers (the annotation-only app). Reviewer: sees only the disputed "
             "answers, their ratings as rater 1, rater 2… (never names), and records a verdict under their name; "
             "a reviewer cannot rate, and nobody is both in one session.")


def app_base() -> str:
    """The app's address as the organiser's browser sees it (what the experts' links start with)."""
    return re.sub(r"/results/?$", "", (st.context.url or "http://localhost:8501").rstrip("/"))


def experts_panel(sid: str, links: dict) -> None:
    """Personal links: one per expert or reviewer and session (only a hash is stored, so a link is shown once),
    revocable. ``links`` holds the link just created per session (the page's session state), shown once."""
    st.subheader("Experts, reviewers and their links")
    c1, c2, c3 = st.columns([3, 2, 2], vertical_alignment="bottom")
    new = c1.text_input("Name", key="rs_expert", max_chars=ann.MAX_NAME,
                        help="As the expert or reviewer should appear in the results. A name that has a link gets a "
                             "new one (the old link stops working).")
    role = c2.segmented_control("Role", ann.ROLES, default="expert", key="rs_role", format_func=str.capitalize,
                                help=ROLE_HELP) or "expert"
    if c3.button("Create link", key="rs_link", icon=":material/link:"):
        with ui.guard("Creating the link"):
            first = not ann.organiser_token_required()
            token = ann.issue_token(sid, new, role=role)
            make = ann.reviewer_link if role == "reviewer" else ann.expert_link
            links[sid] = (" ".join(new.split()), make(app_base(), sid, token), role)
            if first:  # from now on the organiser pages ask for a credential: say so now, not at the next reload
                st.session_state["rs_locked_note"] = sid
    if sid in links:
        who, link, made = links[sid]
        kind = "Reviewer link" if made == "reviewer" else "Personal link"
        st.success(f"{kind} for **{ui.md(who)}**: send it to them only. It is shown once (only its hash is "
                   "stored); create a new one if it is lost.", icon=":material/link:")
        st.code(link, language=None)
    if st.session_state.get("rs_locked_note") == sid:
        st.warning("Expert links are out, so this server now asks organisers to sign in: "
                   f"{ui.md(ann.where_is_the_token())}. This browser stays signed in until it closes; keep the token "
                   "to sign in from another browser or after a restart.", icon=":material/lock:")
    team, reviewers = ann.experts(sid), ann.reviewers(sid)
    if team.empty and reviewers.empty:
        st.caption("No expert yet: create a link for each expert.")
        return
    if not team.empty:
        st.dataframe(team, hide_index=True, key="rs_experts")
    if not reviewers.empty:
        st.dataframe(reviewers, hide_index=True, key="rs_reviewers")
    active = team.loc[team["link active"], "expert"].tolist() + \
        reviewers.loc[reviewers["link active"], "reviewer"].tolist()
    c1, c2 = st.columns(2, vertical_alignment="bottom")
    gone = c1.selectbox("Revoke the link of", active, index=None, key="rs_revoke_who",
                        placeholder="Expert or reviewer…" if active else "No active links")
    if c2.button("Revoke link", key="rs_revoke", icon=":material/link_off:", disabled=not gone):
        with ui.guard("Revoking"):
            ann.revoke_tokens(sid, gone)
            links.pop(sid, None)
            st.rerun()
    st.caption("A revoked link stops working at once; the expert's ratings and the reviewer's verdicts stay. Experts "
               "see only the Annotate page and their own ratings; reviewers only the disputed answers, blind.")
