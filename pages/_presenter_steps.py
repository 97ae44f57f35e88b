"""The presenter's drawing of a step: the blocks :func:`probekit.tours.slide` lists for its prepared result (the
offline deck draws the same blocks as HTML), sized for a projector at 1024×768 (tables as HTML tables, whose type
the presenter's CSS enlarges; charts laid out by :mod:`probekit.tours.figures`). Data shows as text."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages import _ui as ui
from probekit import tours
from probekit.tours import slides


def _table(frame: pd.DataFrame) -> None:
    """An HTML table (its cells as text: st.table escapes them), without the index; a long text cell cut to
    :data:`~probekit.tours.figures.LABEL_CHARS` ("…"): a run's whole name wrapped to five lines in its narrow column
    and pushed the Benchmark drill-down's last rows below a 768 px projector (the text under the table names it)."""
    cut = frame.reset_index(drop=True).map(lambda v: ui.short_label(v) if isinstance(v, str) else v)
    st.table(cut.style.hide(axis="index"))


def _block(b, i: int) -> None:
    if isinstance(b, slides.Text):
        st.markdown("".join(f"**{ui.md(t)}**" if strong else ui.md(t) for t, strong in b.parts))
    elif isinstance(b, slides.Table):
        _table(b.frame)
    elif isinstance(b, slides.Chart):
        st.plotly_chart(b.figure, key=f"tp_{b.name}_{i}", config={"displayModeBar": False})
    elif isinstance(b, slides.Metrics):
        for col, (label, value) in zip(st.columns(len(b.items)), b.items):
            col.metric(label, value)
    elif isinstance(b, slides.Columns):
        for col, blocks in zip(st.columns(len(b.columns)), b.columns):
            with col:
                for x in blocks:
                    _block(x, i)


def draw(result, i: int) -> None:
    """Draw step ``i``'s prepared result."""
    for b in tours.slide(result):
        _block(b, i)
