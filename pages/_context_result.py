"""The Context page's single-triple result: rank-change curves (integer step and rank axes), UCM as a sentence,
one line for inputs cut to the token budget, the RC table and the inputs. Data shows as text."""

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages import _ui as ui
from pages._display import rank_axis

ROLE_COLOURS = {"target": "#1565c0", "cor": "#2e7d32", "incor": "#c62828"}


def draw(result) -> None:
    run = result.runs[0]
    if len(result.runs) > 1:
        run = result.runs[st.selectbox("Permutation", range(len(result.runs)), key="ctx_perm", persist_state="session")]
    rows = pd.DataFrame(run.rows)
    rows["input"] = [r["input"] for r in run.results]
    fig = go.Figure()
    shown_inputs = [ui.chart_text(t) for t in rows.input]
    shown_added = [ui.chart_text(t) if t else "" for t in rows.added]
    for col, name in (("rank_target", "O_t"), ("mean_rank_cor", "mean O_cor"), ("mean_rank_incor", "mean O_incor")):
        fig.add_scatter(x=rows.step, y=rows[col], name=name, mode="lines+markers", customdata=shown_inputs,
                        hovertemplate="step %{x}: rank %{y}<br>%{customdata}<extra>" + name + "</extra>")
    colours = [ROLE_COLOURS.get(r, "#777") for r in rows.added_role]
    fig.add_scatter(x=rows.step, y=rows.rank_added, name="O_a (just added)", mode="markers",
                    marker=dict(size=12, color=colours, symbol="diamond"), text=shown_added,
                    hovertemplate="step %{x}: %{text} rank %{y}<extra>O_a</extra>")
    # integer axes: steps are whole segments, ranks whole places
    rank_axis(fig, pd.concat([rows[c] for c in ("rank_target", "mean_rank_cor", "mean_rank_incor", "rank_added")])
                 .max(skipna=True))
    fig.update_xaxes(tickformat="d", dtick=max(1, -(-len(rows) // 20)), title="step (segments added)")
    st.plotly_chart(ui.legible(fig, height=450), key="ctx_curve")
    st.markdown(f"**{ui.md(result.target)}** ({'negative target' if result.negative else 'target'}), "
                f"{result.variant}. {result.ucm_text()}")
    for notice in result.notices:  # one summary line per run, not one per input
        st.warning(ui.message(notice))
    st.dataframe(rows[["step", "added", "added_role", "rank_target", "rank_added", "rc_target", "rc_added",
                       "rc_cor", "rc_incor"]], hide_index=True, key="ctx_rc")
    with st.expander("Inputs input_0 … input_n"):
        st.dataframe(rows[["step", "input"]], hide_index=True)
