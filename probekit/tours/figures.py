"""The charts of a presented step (a probe's top answers, a context curve, a layer sweep's heatmap), laid out for a
projector: the app's presenter and the offline deck draw these same figures, so the two cannot differ.

Text from data (entity and relation names) goes into a chart through :func:`chart_text`: plotly renders a subset
of HTML in labels, so tags are escaped and shown as typed. Plotly is imported when a figure is built (it comes with
``probekit[app]``).
"""

from __future__ import annotations

import html
import re

from ..errors import ProbekitError

FONT_PX = 18
"""Chart text on a projector, read from the back of a room."""
GOLD, OTHER = "#2e7d32", "#90a4ae"
ROLE_COLOURS = {"target": "#1565c0", "cor": "#2e7d32", "incor": "#c62828"}
LABEL_CHARS = 32
"""Longest category label drawn on an axis (MedLAMA names run past 60 characters); longer ones are shortened with
"…", the full name on hover."""
RANK_TICKS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000,
              500_000, 1_000_000)


def _go():
    try:
        import plotly.graph_objects as go  # type: ignore[import-untyped]  # plotly ships no type information
    except ImportError:
        raise ProbekitError("charts need plotly: pip install 'probekit[app]'") from None
    return go


def plotly_js() -> str:
    """plotly.js itself, from the installed plotly package (the offline deck carries it)."""
    _go()
    from plotly.offline import get_plotlyjs  # type: ignore[import-untyped]

    return get_plotlyjs()


def chart_text(text) -> str:
    """``text`` for plotly labels and hovers: tags escaped, so a name is shown as typed."""
    return html.escape(str(text), quote=False)


def short_label(text: str, limit: int = LABEL_CHARS) -> str:
    """``text`` (already :func:`chart_text`) cut to ``limit`` characters with "…", never inside an ``&…;`` escape."""
    if len(text) <= limit:
        return text
    return re.sub(r"&[#\w]*$", "", text[:limit - 1]).rstrip() + "…"


def middle_label(text: str, limit: int = LABEL_CHARS) -> str:
    """``text`` (already :func:`chart_text`) cut in the middle to ``limit`` characters, its start and its end kept,
    never inside an ``&…;`` escape: for names that differ only at the end (a rewiring run's checkpoints).

    >>> middle_label("rw-20261129-100431-8975/step-000040 · pooling=cls", 32)
    'rw-2026112…-000040 · pooling=cls'
    """
    if len(text) <= limit:
        return text
    head = re.sub(r"&[#\w]*$", "", text[:limit // 3])
    tail = text[len(text) - (limit - len(head) - 1):]
    tail = re.sub(r"^[#\w]*;", "", tail) if re.search(r"&[#\w]*$", text[:len(text) - len(tail)]) else tail
    return head + "…" + tail


def tick_labels(cats: list[str], limit: int = LABEL_CHARS) -> list[str]:
    """Shortened tick labels for the categories ``cats``: cut at the end (:func:`short_label`), or, where that makes
    two different names read the same, cut in the middle (:func:`middle_label`) so that each stays told apart.

    >>> tick_labels(["rw-20261129-100431-8975/step-000040", "rw-20261129-100431-8975/step-000120"], 24)
    ['rw-20261…975/step-000040', 'rw-20261…975/step-000120']
    """
    out = [short_label(c, limit) for c in cats]
    if len(set(out)) < len(set(cats)):
        middle = [middle_label(c, limit) for c in cats]
        if len(set(middle)) > len(set(out)):
            return middle
    return out


def shorten_categories(fig) -> None:
    """Give each axis whose categories (strings) run past :data:`LABEL_CHARS` shortened tick labels; the traces keep
    the full names, so hovers show them whole (the app's charts and the presenter's share this rule)."""
    for letter in ("x", "y"):
        cats: list[str] = []
        for trace in fig.data:
            values = getattr(trace, letter, None)
            if values is None or getattr(trace, "orientation", None) == ("v" if letter == "y" else "h"):
                continue
            cats += [v for v in values if isinstance(v, str) and v not in cats]
        if any(len(c) > LABEL_CHARS for c in cats):
            fig.update_layout({f"{letter}axis": dict(tickmode="array", tickvals=cats, ticktext=tick_labels(cats))})


def projector(fig, *, height: int, legend: bool = True):
    """``fig`` laid out for a projector at 1024×768: type at :data:`FONT_PX`, the legend in a row above the plot,
    axis labels never cut (long category names shortened, whole on hover)."""
    shorten_categories(fig)
    fig.update_layout(height=height, font=dict(size=FONT_PX), hoverlabel=dict(font_size=FONT_PX),
                      margin=dict(l=10, r=10, t=48 if legend else 16, b=10), showlegend=legend,
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0,
                                  font=dict(size=FONT_PX), title_text=""))
    fig.update_xaxes(automargin=True, tickfont_size=FONT_PX - 2, title_font_size=FONT_PX)
    fig.update_yaxes(automargin=True, tickfont_size=FONT_PX - 2, title_font_size=FONT_PX)
    return fig


def _rank_axis(fig, worst) -> None:
    """A rank axis: log scale, 1 at the top, ticks at whole ranks only (ranks are places)."""
    worst = int(worst) if worst is not None and worst == worst and worst >= 1 else 1
    ticks = [t for t in RANK_TICKS if t <= worst * 2] or [1]
    fig.update_layout(yaxis=dict(type="log", autorange="reversed", title="rank at [MASK] (1 = best)",
                                 tickvals=ticks, ticktext=[f"{t:,}" for t in ticks]))


def probe_bars(top):
    """A probe's top answers (``rank``, ``entity``, ``score``, ``gold``) as horizontal bars, gold answers green."""
    go = _go()
    fig = go.Figure()
    labels = [f"{r}. {chart_text(n)}" for r, n in zip(top["rank"], top.entity)]
    for gold, name, colour in ((True, "gold answer", GOLD), (False, "other candidate", OTHER)):
        part = top.gold == gold
        fig.add_bar(x=top.score[part].tolist(), y=[lab for lab, p in zip(labels, part) if p], orientation="h",
                    name=name, marker_color=colour)
    fig.update_yaxes(categoryorder="array", categoryarray=labels[::-1])
    fig.update_xaxes(title="score")
    return projector(fig, height=440)


def context_curve(rows):
    """One context run's rank curves (``rows``: its steps, as :class:`probekit.context` records them)."""
    import pandas as pd

    go = _go()
    fig = go.Figure()
    for col, name in (("rank_target", "O_t"), ("mean_rank_cor", "mean O_cor"), ("mean_rank_incor", "mean O_incor")):
        fig.add_scatter(x=rows.step.tolist(), y=rows[col].tolist(), name=name, mode="lines+markers",
                        line=dict(width=3))
    colours = [ROLE_COLOURS.get(r, "#777") for r in rows.added_role]
    fig.add_scatter(x=rows.step.tolist(), y=rows.rank_added.tolist(), name="O_a (just added)", mode="markers",
                    marker=dict(size=14, symbol="diamond", color=colours),
                    text=[chart_text(t) if t else "" for t in rows.added])
    _rank_axis(fig, pd.concat([rows[c] for c in ("rank_target", "mean_rank_cor", "mean_rank_incor", "rank_added")])
               .max(skipna=True))
    fig.update_xaxes(tickformat="d", dtick=max(1, -(-len(rows) // 20)), title="step (segments added)")
    return projector(fig, height=430)


def layer_heatmap(acc, best, *, metric: str):
    """A sweep's ``acc`` (relation × layer, percent) with a star after each relation's ``best`` layer's value, in
    that cell's own text (a marker laid beside the value collided with it in narrow cells: "12.★")."""
    _go()
    import plotly.express as px  # type: ignore[import-untyped]

    rel_text = {rel: chart_text(rel) for rel in acc.index}
    fig = px.imshow(acc.rename(index=rel_text), aspect="auto", color_continuous_scale="Blues",
                    zmin=0, labels={"x": "layer", "y": "relation", "color": f"{metric} (%)"})
    marked = best.dropna(subset=["best layer"])
    best_at = dict(zip(marked["relation"], marked["best layer"].astype(int)))
    cell_text = [[("–" if v != v else f"{v:.0f}") + (" ★" if best_at.get(rel) == layer else "")
                  for layer, v in row.items()] for rel, row in acc.iterrows()]  # (relations, layers)
    fig.update_traces(text=cell_text, texttemplate="%{text}",
                      hovertemplate="%{y}, layer %{x}: %{z:.1f}%<extra></extra>")
    fig.update_layout(xaxis=dict(dtick=1), coloraxis_colorbar=dict(ticksuffix="%"))
    return projector(fig, height=min(520, max(360, 34 * len(acc) + 120)))
