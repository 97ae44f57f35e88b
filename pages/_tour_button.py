""""Add to tour" next to every share link (pages/_share.py ``share_link``): the page's view, with a title and a
one-line note, appended to a tour (a new one or one stored), to be presented later (pages/_presenter.py)."""

from __future__ import annotations

from urllib.parse import urlsplit

import streamlit as st

from pages._display import md
from pages._guard import guard
from pages._shell import PAGE_KEY
from probekit import tours

NEW = "New tour…"


def current_page() -> str:
    """The page this run draws: its URL path as app.py's navigation names it (else as the browser's URL does);
    the default page (served at ``/``) is :data:`probekit.tours.DEFAULT_PAGE`."""
    path = st.session_state.get(PAGE_KEY)
    if path is None:
        url = getattr(st.context, "url", None) or ""
        path = urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]
    return path or tours.DEFAULT_PAGE


def add_to_tour(params: dict, *, key: str = "tour_add") -> None:
    """A popover that appends this view (``params``: its share link's parameters) to a tour."""
    page = current_page()
    kind = tours.STEP_KINDS.get(page)
    if kind is None:  # this page's view cannot be presented
        return
    with st.popover("Add to tour", icon=":material/playlist_add:"):
        names = []
        with guard("Listing tours"):
            names = tours.tour_names()
        choice = st.selectbox("Tour", [*names, NEW], key=f"{key}_tour")
        name = st.text_input("New tour's name", "talk", key=f"{key}_name", max_chars=64,
                             help="letters, digits, '_', '.' or '-' (it goes into the presenting link)") \
            if choice == NEW else choice
        title = st.text_input("Step title", kind.label, key=f"{key}_title", max_chars=tours.MAX_TITLE)
        note = st.text_input("One-line note", key=f"{key}_note", max_chars=tours.MAX_NOTE)
        if st.button("Add this view", type="primary", key=f"{key}_go", icon=":material/add:"):
            with guard("Adding the step"):
                tour = tours.add_step(name, tours.make_step(page, params, title=title, note=note))
                st.success(f"Step {len(tour.steps)} of tour '{md(tour.name)}'. Present it at "
                           f"`/?tour={tour.name}&present=1` or on the Tours page.")
