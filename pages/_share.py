"""Share links: the page URL holds exactly the view, shown with a copy button and "Add to tour"."""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

from pages._sidebar import CPU_KEY, DATASET_KEY, UPLOAD, UPLOAD_NOT_IN_LINK, selected_model_id
from pages._tour_button import add_to_tour


def share_link(params: dict, *, label: str = "Share this view", show: bool = True) -> str:
    """Make the page URL hold exactly ``params`` (values None/"" are dropped, and so is any stale parameter)
    and show the full link with a copy button. Returns the link.

    The sidebar's model and dataset are added unless ``params`` names them; an expert's token never is.
    ``show=False`` only makes the URL follow the view (no link box).
    """
    full = {"model": selected_model_id(), "dataset": st.session_state.get(DATASET_KEY, "demo")}
    if st.session_state.get(CPU_KEY):
        full["device"] = "cpu"
    full.update(params)
    clean = {str(k): str(v) for k, v in full.items() if v is not None and str(v) != ""}
    if dict(st.query_params) != clean:
        st.query_params.from_dict(clean)
    base = (st.context.url or "").split("?")[0] if hasattr(st, "context") else ""
    link = f"{base}?{urlencode(clean)}"
    if not show:
        return link
    st.caption(f"{label} (the link holds every setting of this view):"
               + (f" {UPLOAD_NOT_IN_LINK}" if clean.get("dataset") == UPLOAD else ""))
    st.code(link, language=None, wrap_lines=True)  # st.code has a copy button
    add_to_tour(clean)
    return link
