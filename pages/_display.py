"""Data shown as text, never as markup, and charts laid out for a projector.

Entity, session and annotator names come from users' files: Markdown, HTML or a link in them must reach the
screen as the characters typed (an `![x](http://…)` name once rendered as an image and fetched the URL).
"""

from __future__ import annotations

import html
import re

from probekit.tours.figures import LABEL_CHARS, chart_text, short_label, shorten_categories  # noqa: F401  # one rule for the app's and the presenter's charts

# ---------------------------------------------------------------- data shown as text, never as markup
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")
WORD_JOINER = "\u2060"
_AUTOLINK = re.compile(r"(?i)(https?|www)(?=[:.])|(?=@)")


def md(text) -> str:
    """``text`` (an entity, a session name, anything from data) escaped for ``st.markdown``/captions, so
    ``![x](http://…)`` shows as written instead of fetching an image, and ``<a href>`` stays text.

    Escaping alone does not stop a bare URL: Streamlit's Markdown (GitHub's autolink literals) links
    ``http://…``, ``www.…`` and ``name@host`` found in the text *after* escapes are resolved. An invisible
    :data:`WORD_JOINER` after ``http``/``https``/``www`` and before ``@`` breaks those patterns; the text looks
    the same.
    """
    text = _AUTOLINK.sub(lambda m: (m.group(1) or "") + WORD_JOINER, str(text))
    return _MD_SPECIAL.sub(r"\\\1", text).replace("/", "\\/")


def html_text(text) -> str:
    """``text`` from data for the inside of an HTML block (``st.markdown("<div>…</div>", unsafe_allow_html=True)``,
    the highlighted contexts): HTML escaped, line breaks as ``<br>``. The block must start with ``<div`` and hold
    no blank line: Markdown is not parsed inside an HTML block, so an ``![x](http://…)`` or a bare URL in a note
    stays text; a blank line would end the block and let what follows render as Markdown (and fetch the image).
    """
    return html.escape(str(text), quote=False).replace("\r", "").replace("\n", "<br>")


_MARKUP = re.compile(r"!\[|\]\(|<[A-Za-z/!]|https?:|www\.")


def message(text) -> str:
    """A message for st.error/st.warning that may quote data (a name typed, a session name): shown as text when it
    holds link, image or HTML syntax (the browser would fetch an image named in an error), else unchanged (so
    messages keep their `code` marks)."""
    return md(text) if _MARKUP.search(str(text)) else str(text)


FONT_PX = 13
"""Chart text size: legible on a projector at 1280×720 (grey 10-px labels are not)."""



def legible(fig, *, height: int = 360, legend: bool = True, percent_axis: str | None = None):
    """``fig`` laid out for a projector: fonts ≥ 12 px, the legend in a row above the plot (never over an axis
    title), axis labels never cut (automargin; category names past :data:`LABEL_CHARS` shortened, whole on hover).
    ``percent_axis`` (``"x"`` or ``"y"``) is an accuracy axis in percent: it starts at zero, so a few points'
    difference does not look like a cliff."""
    shorten_categories(fig)
    fig.update_layout(height=height, font=dict(size=FONT_PX), hoverlabel=dict(font_size=FONT_PX),
                      margin=dict(l=10, r=10, t=48 if legend else 16, b=10), showlegend=legend,
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0,
                                  font=dict(size=FONT_PX), title_text=""))
    fig.update_xaxes(automargin=True, tickfont_size=FONT_PX - 1, title_font_size=FONT_PX + 1)
    fig.update_yaxes(automargin=True, tickfont_size=FONT_PX - 1, title_font_size=FONT_PX + 1)
    if percent_axis:
        fig.update_layout({f"{percent_axis}axis": dict(rangemode="tozero", ticksuffix="%")})
    return fig


RANK_TICKS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000,
              500_000, 1_000_000)


def rank_axis(fig, worst, *, axis: str = "y", title: str = "rank at [MASK] (1 = best)"):
    """A rank axis on ``fig``: log scale, best (1) at the top, ticks at whole ranks only (1, 2, 5, 10, …, up to
    twice the ``worst`` rank shown). Plotly's own log ticks fall between whole ranks and ``tickformat="d"`` then
    prints 1.2, 1.5 and 2 as "1, 1, 2"; ranks are places, so every label is one."""
    worst = int(worst) if worst is not None and worst == worst and worst >= 1 else 1
    ticks = [t for t in RANK_TICKS if t <= worst * 2] or [1]
    fig.update_layout({f"{axis}axis": dict(type="log", autorange="reversed", title=title, tickvals=ticks,
                                           ticktext=[f"{t:,}" for t in ticks])})
    return fig
