"""The app shell at a demo: the browser tab's icon needs no network (a material icon is
fetched from fonts.gstatic.com: 48 console errors offline), and Streamlit's "Deploy" button is hidden."""

from __future__ import annotations

import tomllib
from pathlib import Path

import streamlit as st
from apptest_utils import errors, open_app
from streamlit.commands.page_config import _get_favicon_string

ROOT = Path(__file__).resolve().parent.parent


def test_page_icon_needs_no_network(monkeypatch):
    """Streamlit's frontend turns ``:material/…:`` into a fonts.gstatic.com URL and an emoji short code into a
    lookup; an image file becomes a data: URI the browser needs no server, let alone a network, for."""
    seen = []
    real = st.set_page_config
    monkeypatch.setattr(st, "set_page_config", lambda **kw: (seen.append(kw), real(**kw))[1])
    at = open_app()
    assert errors(at) == [] and seen
    favicon = _get_favicon_string(seen[0]["page_icon"])
    assert favicon.startswith("data:image/"), favicon[:60]


def test_deploy_button_hidden():
    client = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["client"]
    assert client["toolbarMode"] in ("minimal", "viewer")
