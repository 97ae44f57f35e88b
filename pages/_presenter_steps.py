"""The presenter's drawing of each step kind (:data:`probekit.tours.STEP_KINDS`): the result alone, sized for a
projector at 1024×768 (tables as HTML tables, whose type the presenter's CSS enlarges; chart text at
:data:`FONT_PX`), from a :class:`probekit.tours.Prepared` result (no model needed). Data shows as text."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from pages import _ui as ui
from pages._display import STAR_OFFSET, rank_axis
from probekit.metrics.registry import METRICS

FONT_PX = 18
"""Chart text on a projector, read from the back of a room."""
GOLD, OTHER = "#2e7d32", "#90a4ae"
ROLE_COLOURS = {"target": "#1565c0", "cor": "#2e7d32", "incor": "#c62828"}


def _big(fig, *, height: int, legend: bool = True, percent_axis: str | None = None):
    fig = ui.legible(fig, height=height, legend=legend, percent_axis=percent_axis)
    fig.update_layout(font=dict(size=FONT_PX), legend=dict(font=dict(size=FONT_PX)))
    fig.update_xaxes(tickfont_size=FONT_PX - 2, title_font_size=FONT_PX)
    fig.update_yaxes(tickfont_size=FONT_PX - 2, title_font_size=FONT_PX)
    return fig


def _table(frame: pd.DataFrame) -> None:
    """An HTML table (its cells as text: st.table escapes them), without the index."""
    st.table(frame.reset_index(drop=True).style.hide(axis="index"))


def _probe(data: dict, i: int) -> None:
    st.markdown(f"**{ui.md(data['text'])}** — {ui.md(data['model'])}, {data['probe']}, "
                f"{data['candidates']:,} candidates")
    top: pd.DataFrame = data["top"].head(10)
    left, right = st.columns([1, 1])
    with left:
        shown = top.assign(gold=top.gold.map({True: "✓", False: ""}), score=top.score.map("{:.3f}".format))
        _table(shown[["rank", "entity", "score", "gold"]])
    fig = go.Figure()
    labels = [f"{r}. {ui.chart_text(n)}" for r, n in zip(top["rank"], top.entity)]
    for gold, name, colour in ((True, "gold answer", GOLD), (False, "other candidate", OTHER)):
        part = top.gold == gold
        fig.add_bar(x=top.score[part], y=[lab for lab, p in zip(labels, part) if p], orientation="h", name=name,
                    marker_color=colour)
    fig.update_yaxes(categoryorder="array", categoryarray=labels[::-1])
    fig.update_xaxes(title="score")
    right.plotly_chart(_big(fig, height=440), key=f"tp_chart_{i}", config={"displayModeBar": False})
    ranks = [f"{ui.md(g)}: {'rank ' + str(r) if r is not None else 'not a candidate'}" for g, r in data["golds"]]
    if ranks:
        st.markdown("Gold answers — " + "; ".join(ranks))


def _context(data: dict, i: int) -> None:
    result = data["result"]
    rows = pd.DataFrame(result.runs[0].rows)
    fig = go.Figure()
    for col, name in (("rank_target", "O_t"), ("mean_rank_cor", "mean O_cor"), ("mean_rank_incor", "mean O_incor")):
        fig.add_scatter(x=rows.step, y=rows[col], name=name, mode="lines+markers", line=dict(width=3))
    colours = [ROLE_COLOURS.get(r, "#777") for r in rows.added_role]
    fig.add_scatter(x=rows.step, y=rows.rank_added, name="O_a (just added)", mode="markers",
                    marker=dict(size=14, symbol="diamond", color=colours),
                    text=[ui.chart_text(t) if t else "" for t in rows.added])
    rank_axis(fig, pd.concat([rows[c] for c in ("rank_target", "mean_rank_cor", "mean_rank_incor", "rank_added")])
                 .max(skipna=True))  # whole ranks only
    fig.update_xaxes(tickformat="d", dtick=max(1, -(-len(rows) // 20)), title="step (segments added)")
    st.plotly_chart(_big(fig, height=430), key=f"tp_curve_{i}", config={"displayModeBar": False})
    st.markdown(f"**{ui.md(result.query.subject)} → {ui.md(result.target)}** ({result.variant}). "
                f"{ui.md(result.ucm_text())}")


def _layers(data: dict, i: int) -> None:
    acc: pd.DataFrame = data["acc"]
    rel_text = {rel: ui.chart_text(rel) for rel in acc.index}
    fig = px.imshow(acc.rename(index=rel_text), aspect="auto", text_auto=".0f", color_continuous_scale="Blues",
                    zmin=0, labels={"x": "layer", "y": "relation", "color": f"{data['metric']} (%)"})
    best = data["best"]
    fig.add_scatter(x=best["best layer"].astype(int) + STAR_OFFSET, y=best["relation"].map(rel_text), mode="markers",
                    name="best layer", marker=dict(symbol="star", size=14, color="#c62828",
                                                   line=dict(width=1, color="white")))  # beside the value
    fig.update_layout(xaxis=dict(dtick=1), coloraxis_colorbar=dict(ticksuffix="%"))
    st.plotly_chart(_big(fig, height=min(520, max(360, 34 * len(acc) + 120))), key=f"tp_heatmap_{i}",
                    config={"displayModeBar": False})
    st.markdown(f"{data['metric']} (%) per relation and layer, **{data['set']}** queries; ★ = best layer · "
                f"{ui.md(data.get('label') or '')}")


def _benchmark(data: dict, i: int) -> None:
    k, which, metric = data["k"], data["set"], data["metric"]
    table: pd.DataFrame = data["table"]
    table = table[table.average == "macro"] if "average" in table.columns else table
    pct = [c for c in table.columns if c.split(" ", 1)[-1] in METRICS]
    _table(table.assign(**{c: (table[c] * 100).map("{:.1f}".format) for c in pct})[["run", *pct]])
    if data["drill"] is None:  # a Compare step
        return
    st.markdown(f"**{ui.md(data['relation'])}** — its queries in {ui.md(data['run'])} "
                f"(hit@{k} beside {metric}, {which}):")
    drill: pd.DataFrame = data["drill"].head(6)
    cols = [c for c in ("subject", "golds", "best rank", f"hit@{k}", "top-1") if c in drill.columns]
    _table(drill[cols] if cols else drill)


def _results(data: dict, i: int) -> None:
    s = data["shares"]
    m1, m2, m3 = st.columns(3)
    m1.metric(f"Rated top-{s['k']} answers", s["rated"])
    m2.metric("Gold hits (share of answers)", f"{100 * s['gold_share']:.1f}%")
    m3.metric(f"Rated ≥ {s['threshold']} by experts", f"{100 * s['expert_share']:.1f}%")
    st.markdown(f"**Expert score × gold hit** (MedLAMA Table 5) — {ui.md(data['name'])}, "
                f"{data['n_ratings']} ratings")
    _table(data["table5"])
    agreement: pd.DataFrame = data["agreement"]
    if len(agreement):  # the overall row (per-relation rows would push it off a projector's screen)
        row = agreement.iloc[0]
        parts = [f"{c} {row[c]:.3f}" for c in ("alpha (ordinal)", "mean kappa (quadratic)") if c in row]
        if parts:
            st.markdown(f"Agreement over {ui.md(row.iloc[0])}: " + ", ".join(parts))


DRAW: dict[str, Callable[[dict, int], None]] = {"probe": _probe, "context": _context, "layers": _layers,
                                                 "benchmark": _benchmark, "results": _results}
"""One drawing per step kind (a test checks each kind of the registry has one)."""


def draw(result, i: int) -> None:
    """Draw step ``i``'s prepared result."""
    DRAW[result.kind](result.data, i)
