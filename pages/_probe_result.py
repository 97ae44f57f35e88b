"""The Probe page's result: top-k table and chart (green = gold answer), where each gold ranks, how the probe
reached its answer (its :class:`~probekit.probes.Explanation`, e.g. mask_predict's decoding); and the first-visit
paragraph. Data shows as text (ui.md, ui.chart_text)."""

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages import _ui as ui

GOLD, OTHER = "#2e7d32", "#90a4ae"
ABOUT = (
    "**probekit** asks a biomedical language model cloze questions (*Metformin might treat [MASK].*) and ranks "
    "candidate entities for the blank, to see which facts the model holds. **What to try first:** press "
    "**Probe** to rank the answers of a dataset query (green bars are gold answers), then *Type a query* and "
    "press Enter. "
    "Benchmark scores a whole dataset; Context shows how a document moves the answer; Rewire trains a model "
    "and Checkpoint sweep compares its checkpoints.")


def gold_table(ranking) -> pd.DataFrame:
    """One row per gold answer: its rank (a whole number, empty when it has none) and what that means."""
    missing = "not generated" if ranking.generated else "not a candidate"
    status = [missing if r is None else ("hit (in the top k)" if r <= ranking.k else "no hit (below the top k)")
              for r in ranking.gold_ranks]
    return pd.DataFrame({"gold answer": list(ranking.query.golds),
                         "rank": pd.array(list(ranking.gold_ranks), dtype="Int64"), "status": status})


def chart(top: pd.DataFrame):
    """Top-k scores, best at the top; gold answers green, named in the legend."""
    fig = go.Figure()
    labels = [f"{i}. {ui.chart_text(n)}" for i, n in zip(top["rank"], top.entity)]
    for gold, name, colour in ((True, "gold answer", GOLD), (False, "other candidate", OTHER)):
        part = top.gold == gold
        fig.add_bar(x=top.score[part], y=[lab for lab, p in zip(labels, part) if p], orientation="h", name=name,
                    marker_color=colour, hovertemplate="%{y}: %{x:.4f}<extra></extra>")
    fig.update_yaxes(categoryorder="array", categoryarray=labels[::-1])
    fig.update_xaxes(title="score")
    return ui.legible(fig, height=max(280, 26 * len(top) + 60))


def draw(model, ranking, model_id: str, probe_name: str, n_cands: int, explanation) -> None:
    q = ranking.query
    st.markdown(f"**{ui.md(q.text(model.mask_token))}** — {ui.md(model_id)}, {probe_name}, {n_cands:,} candidates")
    if ranking.search:  # an approximate index served the top-k: say which, and its measured recall
        st.caption(ui.md(ranking.search))
    tok = model.tokenizer
    top = pd.DataFrame({"rank": range(1, ranking.k + 1), "entity": ranking.names,
                        "score": [round(s, 4) for s in ranking.scores],
                        "gold": list(ranking.gold_flags()),
                        "tokens": [len(tok.tokenize(n)) for n in ranking.names]})
    t1, t2 = st.columns([3, 2])
    t1.dataframe(top, hide_index=True, key="pk_top", column_config={
        "gold": st.column_config.CheckboxColumn("gold"), "score": st.column_config.NumberColumn(format="%.4f")})
    t2.plotly_chart(chart(top), width="stretch", key="pk_chart")
    if q.golds:
        st.subheader("Gold answers")
        st.dataframe(gold_table(ranking), hide_index=True, key="pk_golds_table",
                     column_config={"rank": st.column_config.NumberColumn("rank", format="%d")})
    if explanation is not None and explanation.views:
        explain(explanation)


def explain(e) -> None:
    """Any probe's :class:`~probekit.probes.Explanation`: its tables, one at a time when there are several."""
    st.subheader(e.title)
    labels = list(e.views)
    label = e.default if e.default in e.views else labels[0]
    if len(labels) > 1:
        label = st.segmented_control(e.choose or "View", labels, default=label, key="pk_explain_view",
                                     format_func=ui.md, help=e.help or None) or label
    st.dataframe(pd.DataFrame(e.views[label]), hide_index=True, key="pk_explain")
    if e.caption:
        st.caption(e.caption)
