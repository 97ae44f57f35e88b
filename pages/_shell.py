"""The app shell: app.py runs each page inside :func:`shell`; a page opened without it (Streamlit's old multipage
mode, before app.py's navigation has run once in the server) reruns app.py (:func:`title`)."""

from __future__ import annotations

import gc
import runpy
import threading
from contextlib import contextmanager
from pathlib import Path

import streamlit as st

PAGE_KEY = "_pk_page"  # the URL path of the page app.py runs (set by app.py each run)
APP = Path(__file__).resolve().parent.parent / "app.py"
_SHELL = threading.local()


@contextmanager
def shell():
    """app.py runs the selected page inside this, so a page can tell it has the app's navigation and sidebar.

    After a whole page has run, a full garbage collection frees what the run left in reference cycles (a replaced
    upload's parsed frames). Streamlit would run one after every script run, fragment reruns included (its
    ``runner.postScriptGC``, turned off in ``.streamlit/config.toml``): a job panel polling every second then
    stalled the job it watched. Here it runs after full page runs only, which follow a user's action."""
    _SHELL.depth = getattr(_SHELL, "depth", 0) + 1
    try:
        yield
    finally:
        _SHELL.depth -= 1
        if not _SHELL.depth:
            gc.collect()


def title(text: str) -> None:
    """The page title; first makes sure the page runs inside app.py.

    Why: next to a ``pages/`` folder Streamlit starts in its old multipage mode, in which a page URL runs that
    page file alone (no sidebar, a file-name navigation), until app.py's ``st.navigation`` has run once in the
    server process. A fresh server whose first visitor opens a shared link (``/annotate?session=…``) would
    stay in that mode. A page run outside app.py therefore runs app.py instead (which runs this page through
    its navigation) and stops.
    """
    if not getattr(_SHELL, "depth", 0):
        runpy.run_path(str(APP), run_name="__main__")
        st.stop()
    st.title(text)
