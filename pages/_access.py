"""Who a browser session is: an expert or a reviewer (by the token of their link), or the organiser."""

from __future__ import annotations

import logging
import traceback

import streamlit as st

from pages._display import message
from probekit.annotations.organiser import COOKIE
from probekit.errors import ProbekitError

log = logging.getLogger("probekit.app")


# ---------------------------------------------------------------- access: expert links and the organiser
# Who a browser session is decides which app it gets (app.py): an expert link's token opens the annotation-only
# app, a reviewer link's the review-only app; everyone else is the organiser, asked for PROBEKIT_ORGANISER_TOKEN
# when it is set. The token checks live in probekit.annotations.access; these helpers only keep the answer in
# the browser session's state (server side: never in the page or a cookie).
EXPERT_KEY, ORGANISER_KEY = "pk_expert", "pk_organiser"


def expert():
    """The :class:`probekit.annotations.Expert` this browser session acts as, or None on the organiser side.
    A reviewer's link gives its holder too (``.role`` says which): never None for a link, so a page that only
    an expert should reach can never take a reviewer for the organiser."""
    held = st.session_state.get(EXPERT_KEY)
    return held[0] if held else None


def reviewer():
    """``(who, token)`` of the reviewer link this browser session acts by, or None (an expert, the organiser).
    The reviewer app passes the token to every core call, which checks it again (role, revocation)."""
    held = st.session_state.get(EXPERT_KEY)
    return held if held and held[0].role == "reviewer" else None


def access(pages=()) -> str:
    """``"expert"``, ``"reviewer"`` or ``"organiser"`` for this browser session; stops the run with a message
    (and no data) when a link's token is wrong or revoked, or when the organiser pages ask for a credential
    (:mod:`probekit.annotations.organiser`) and this browser has none.

    A token in the URL (``?token=…``) makes the session an expert's or a reviewer's (the link's role); it is
    checked again on every run (so a revoked link stops working at once) and remembered, so the holder stays in
    when the URL loses it. The
    organiser is in by a sign-in in this session, or by the signed cookie a sign-in leaves for the browser session.
    ``pages``: the app's pages; the sign-in screen answers at each of their paths (and lists none), so a shared link
    keeps its page and parameters through the sign-in.
    """
    from probekit import annotations as ann

    qp = st.query_params
    held = st.session_state.get(EXPERT_KEY)
    token = qp.get("token") or (held[1] if held else None)
    if token is not None:
        who = None
        try:
            who = ann.verify_token(token, session_id=qp.get("session") if "token" in qp else None)
        except ProbekitError as e:
            st.error(message(str(e)), icon=":material/link_off:")
        except Exception as e:  # noqa: BLE001 - e.g. the database is busy: say so, show nothing
            log.error("token check failed\n%s", traceback.format_exc())
            st.error(f"Could not check this link ({type(e).__name__}); try again in a moment.")
        if who is None:
            st.session_state.pop(EXPERT_KEY, None)
            st.stop()
        st.session_state[EXPERT_KEY] = (who, token)
        if qp.get("token") != token or qp.get("session") != who.session_id:
            qp.from_dict({"session": who.session_id, "token": token})
        return who.role
    if st.session_state.get(ORGANISER_KEY):
        return "organiser"
    if not ann.organiser_token_required():  # a workbench with no expert links asks nothing; this browser session
        st.session_state[ORGANISER_KEY] = True  # stays the organiser's once it hands out the first link
        return "organiser"
    if ann.check_organiser_cookie(st.context.cookies.get(COOKIE)):
        st.session_state[ORGANISER_KEY] = _COOKIE_SET
        return "organiser"
    lock = [st.Page(_organiser_sign_in, title=p.title, url_path=p.url_path or None, default=p._default)
            for p in pages] or [st.Page(_organiser_sign_in, title="Sign in", default=True)]
    st.navigation(lock, position="hidden").run()
    st.stop()


_COOKIE_SET = "cookie"  # ORGANISER_KEY's value once the browser holds the signed cookie


def remember_sign_in() -> None:
    """Once this organiser session needs a credential (a sign-in, or the first expert link it handed out), leave
    the signed cookie in the browser, once: a session cookie, gone when the browser closes, whose signature expires
    after :data:`probekit.annotations.organiser.COOKIE_HOURS` hours. A reload or a new tab then opens signed in."""
    from probekit import annotations as ann

    if st.session_state.get(ORGANISER_KEY) not in (None, False, _COOKIE_SET) and ann.organiser_token_required():
        st.html(f"<script>document.cookie = '{COOKIE}={ann.organiser_cookie()}; path=/; SameSite=Strict';</script>",
                unsafe_allow_javascript=True)
        st.session_state[ORGANISER_KEY] = _COOKIE_SET


def _organiser_sign_in() -> None:
    from probekit import annotations as ann

    st.title("probekit")
    st.info(f"This server asks organisers to sign in: {ann.where_is_the_token()}. Experts: open the personal link "
            "your organiser sent you.", icon=":material/lock:")
    with st.form("pk_org_form", border=False):  # Enter in the box signs in, as the button does
        given = st.text_input("Organiser token", type="password", key="pk_org_token")
        pressed = st.form_submit_button("Sign in", type="primary", key="pk_org_sign_in")
    if pressed:
        if ann.check_organiser_token(given):
            st.session_state[ORGANISER_KEY] = True  # the next run leaves the cookie (remember_sign_in)
            st.rerun()
        st.error("That is not the organiser token.", icon=":material/error:")
