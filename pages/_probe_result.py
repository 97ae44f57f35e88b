"""The Probe page's result: top-k table and chart (green = gold answer), where each gold ranks, mask_predict's
decoding; and the first-visit paragraph. Data shows as text (ui.md, ui.chart_text)."""

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages import _ui as ui
from probekit.probes import mask_predict as mp

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


def draw(model, ranking, model_id: str, probe_name: str, n_cands: int, decoded) -> None:
    q = ranking.query
    st.markdown(f"**{ui.md(q.text(model.mask_token))}** — {ui.md(model_id)}, {probe_name}, {n_cands:,} candidates")
    tok = model.tokenizer
    top = pd.DataFrame({"rank": range(1, ranking.k + 1), "entity": ranking.names,
                        "score": [round(s, 4) for s in ranking.scores],
                        "gold": [ranking.is_gold(n) for n in ranking.names],
                        "tokens": [len(tok.tokenize(n)) for n in ranking.names]})
    t1, t2 = st.columns([3, 2])
    t1.dataframe(top, hide_index=True, key="pk_top", column_config={
        "gold": st.column_config.CheckboxColumn("gold"), "score": st.column_config.NumberColumn(format="%.4f")})
    t2.plotly_chart(chart(top), width="stretch", key="pk_chart")
    if q.golds:
        st.subheader("Gold answers")
        st.dataframe(gold_table(ranking), hide_index=True, key="pk_golds_table",
                     column_config={"rank": st.column_config.NumberColumn("rank", format="%d")})
    # ---- mask_predict (issue 14): how the answer was built, each slot's top tokens per step
    if probe_name == "mask_predict" and decoded is not None and decoded.predictions:
        st.subheader("Decoding")
        counts = sorted(decoded.traces)
        n = st.segmented_control("Masks", counts, default=mp.best_n_masks(decoded), key="pk_trace_n",
                                 help="the answers of every mask count are ranked together; the best one's is shown "
                                      "first") or mp.best_n_masks(decoded)
        st.dataframe(pd.DataFrame(mp.trace_rows(decoded, n)), hide_index=True, key="pk_trace")
        st.caption("One row per step of the best hypothesis: a slot the step predicted shows its top tokens "
                   "with probabilities, the others the token kept so far.")
