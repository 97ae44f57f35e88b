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


def explain(e, *, key: str = "pk_explain", heading=st.subheader) -> None:
    """Any probe's :class:`~probekit.probes.Explanation`: its tables, one at a time when there are several."""
    heading(e.title)
    labels = list(e.views)
    label = e.default if e.default in e.views else labels[0]
    if len(labels) > 1:
        label = st.segmented_control(e.choose or "View", labels, default=label, key=f"{key}_view",
                                     format_func=ui.md, help=e.help or None) or label
    st.dataframe(pd.DataFrame(e.views[label]), hide_index=True, key=key)
    if e.caption:
        st.caption(e.caption)


def per_row(n: int) -> int:
    """Probes side by side: two per row up to four probes, else three (a 1280-pixel screen reads three tables)."""
    return 2 if n <= 4 else 3


def every_top(ranking) -> pd.DataFrame:
    """One probe's top-k for the side-by-side view: rank, answer, score and whether it is a gold answer."""
    return pd.DataFrame({"rank": range(1, ranking.k + 1), "entity": ranking.names,
                         "score": [round(s, 4) for s in ranking.scores], "gold": list(ranking.gold_flags())})


def _gold_rows(top: pd.DataFrame):
    """The gold answers' rows tinted green (the chart's gold colour), said also by the gold column."""
    return top.style.apply(lambda row: [f"background-color: {GOLD}33" if row["gold"] else ""] * len(row), axis=1)


def agreement_table(result) -> pd.DataFrame:
    """One row per probe: its #1 answer, the gold's best rank, its vocabulary and candidates, and its seconds."""
    runs = result.runs
    return pd.DataFrame({"probe": [r.probe for r in runs],
                         "#1 answer": [r.ranking.names[0] if r.ranking.names else "" for r in runs],
                         "gold rank": pd.array([r.gold_rank for r in runs], dtype="Int64"),
                         "candidates": [r.vocab for r in runs], "n": [r.n_candidates for r in runs],
                         "seconds": [round(r.seconds, 2) for r in runs]})


def disagreement_table(result) -> pd.DataFrame:
    """One row per answer some probes list in their top-k and others do not: its rank in each (empty: absent)."""
    only = result.agreement.only_some
    probes = [r.probe for r in result.runs]
    golds = {a: any(r.ranking.is_gold(a) for r in result.runs) for a in only}
    return pd.DataFrame({"answer": list(only), "gold": [golds[a] for a in only],
                         **{p: pd.array([only[a].get(p) for a in only], dtype="Int64") for p in probes}})


def draw_every(model, result, model_id: str) -> None:
    """Every usable probe's answer side by side, then where they disagree and which probes did not run."""
    q = result.query
    st.markdown(f"**{ui.md(q.text(model.mask_token))}** — {ui.md(model_id)}, every probe ({len(result.runs)}), "
                f"top {result.k}")
    runs = list(result.runs)
    width = per_row(len(runs))
    for start in range(0, len(runs), width):
        # a border per probe, not per column: a row with fewer probes than columns draws no empty box
        for col, run in zip(st.columns(width), runs[start:start + width]):
            with col.container(border=True):
                gold = run.gold_rank
                st.markdown(f"**{ui.md(run.probe)}** · gold rank {gold if gold is not None else '—'}")
                st.caption(f"{ui.md(run.vocab)} · {run.n_candidates:,} candidates · {run.seconds:.2f} s")
                if run.ranking.search:
                    st.caption(ui.md(run.ranking.search))
                st.dataframe(_gold_rows(every_top(run.ranking)), hide_index=True, key=f"pk_every_top_{run.probe}",
                             column_config={"rank": st.column_config.NumberColumn("rank", width="small"),
                                            "gold": st.column_config.CheckboxColumn("gold", width="small"),
                                            "score": st.column_config.NumberColumn(format="%.4f", width="small")})
                if run.explanation is not None and run.explanation.views:
                    explain(run.explanation, key=f"pk_every_explain_{run.probe}",
                            heading=lambda title: st.markdown(f"**{ui.md(title)}**"))
    st.subheader("Where they disagree")
    top1 = result.agreement.top1
    if result.agreement.unanimous and top1:
        st.caption(f"Every probe puts {ui.md(next(iter(top1)))} first.")
    else:
        st.caption(" · ".join(f"{ui.md(a)} first: {', '.join(p)}" for a, p in top1.items()))
    st.dataframe(agreement_table(result), hide_index=True, key="pk_every_summary",
                 column_config={"gold rank": st.column_config.NumberColumn("gold rank", format="%d")})
    if result.agreement.only_some:
        st.dataframe(disagreement_table(result), hide_index=True, key="pk_every_disagree",
                     column_config={"gold": st.column_config.CheckboxColumn("gold")})
        st.caption("Answers in some probe's top-k and not in another's; the number is its rank there, None where "
                   "that probe does not list it. Answers match by the hit rule (case, spaces and word pieces aside).")
    else:
        st.caption("Every probe lists the same answers in its top-k.")
    for s in result.skipped:
        st.caption(f"Not run: {ui.md(s.reason)}")
