"""A tour as one offline HTML file (a deck) for a talk on a machine without the workbench: the same steps, titles,
notes, tables and charts as presenting in the app (:mod:`.slides` builds both), the same keys, a step counter.

Everything is inside the file: the CSS, the script, plotly.js itself (from the installed plotly package) and each
chart as JSON that it draws; fonts are the system's. A Content-Security-Policy allows no fetch at all, so a name
in the data that slipped past escaping still could not load anything. Every text from the tour and its data is
HTML-escaped; JSON inside a ``<script>`` has ``<``, ``>`` and ``&`` as ``\\u`` escapes, so no text ends it.

A step whose data are missing on this machine (a stored run deleted, a model not here) stops the export with one
line naming it, unless ``skip_missing`` leaves it out (the deck then says which steps it left out).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import atomic
from ..errors import ProbekitError
from ..jobs import Progress
from .check import Outcome, warm_up
from .figures import plotly_js
from .slides import COUNTER, Chart, Columns, Metrics, Table, Text, slide
from .steps import Loader
from .tour import Tour

KEYS = {"next": ("ArrowRight", "PageDown"), "prev": ("ArrowLeft", "PageUp"), "first": ("Home",), "last": ("End",),
        "notes": ("n", "N"), "fullscreen": ("f", "F")}
"""The deck's keys: those of presenting in the app (→ / PageDown, ← / PageUp; a clicker sends PageDown / PageUp),
plus Home / End, N (notes hidden / shown) and F (full screen)."""
HELP = "→ / PageDown next, ← / PageUp back, Home / End, N notes, F full screen"

CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data: blob:; font-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'")
"""Nothing may be fetched: inline script and style only; plotly draws heatmaps as ``data:`` images."""


@dataclass
class Deck:
    """An exported deck: its ``html``, the number of steps it ``shows`` and one line per step it ``left_out``."""

    html: str
    shows: int
    left_out: list[str] = field(default_factory=list)


def _esc(value) -> str:
    return html.escape(str(value), quote=True)


def _json(obj_json: str) -> str:
    """JSON text made safe inside ``<script type="application/json">``: no ``</script>``, no ``<!--``."""
    return obj_json.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float):
        return f"{value:.6f}"  # as the app's tables (a pandas Styler) print a float
    return str(value)


def _table(frame) -> str:
    frame = frame.reset_index(drop=True)
    head = "".join(f"<th>{_esc(c)}</th>" for c in frame.columns)
    rows = "".join("<tr>" + "".join(f"<td>{_esc(_cell(v))}</td>" for v in row) + "</tr>"
                   for row in frame.itertuples(index=False, name=None))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


class _Render:
    """Blocks to HTML; charts become an empty ``div`` and their figure as JSON, drawn when the step is shown."""

    def __init__(self) -> None:
        self.charts = 0

    def block(self, b, where: int) -> str:
        if isinstance(b, Text):
            return "<p>" + "".join(f"<strong>{_esc(t)}</strong>" if strong else _esc(t) for t, strong in b.parts) \
                + "</p>"
        if isinstance(b, Table):
            return _table(b.frame)
        if isinstance(b, Metrics):
            return "<div class='pk-metrics'>" + "".join(
                f"<div class='pk-metric'><div class='pk-label'>{_esc(label)}</div>"
                f"<div class='pk-value'>{_esc(value)}</div></div>" for label, value in b.items) + "</div>"
        if isinstance(b, Columns):
            return "<div class='pk-columns'>" + "".join(
                "<div class='pk-column'>" + "".join(self.block(x, where) for x in col) + "</div>"
                for col in b.columns) + "</div>"
        if isinstance(b, Chart):
            self.charts += 1
            cid = f"pk-fig-{where}-{self.charts}"
            return (f"<div class='pk-plot' data-fig='{cid}' data-name='{_esc(b.name)}'></div>"
                    f"<script type='application/json' id='{cid}'>{_json(b.figure.to_json())}</script>")
        raise ProbekitError(f"a slide holds a block the deck cannot draw ({type(b).__name__})")


def _missing_line(position: int, outcome: Outcome) -> str:
    return f"step {position} {outcome.step.title!r}: {outcome.error}"


def make_deck(tour: Tour, outcomes: Sequence[Outcome], *, skip_missing: bool = False) -> Deck:
    """The deck of ``tour`` from its prepared steps (:func:`probekit.tours.warm_up`, or the presenter's own).

    A step that could not be prepared raises one line naming it (and how many more are missing), unless
    ``skip_missing``: then it is left out and named in :attr:`Deck.left_out`."""
    if not isinstance(tour, Tour):
        raise ProbekitError(f"a deck is made of a tour, not {type(tour).__name__}")
    if len(outcomes) != len(tour.steps) or any(o.step != s for o, s in zip(outcomes, tour.steps)):
        raise ProbekitError(f"the prepared steps are not tour {tour.name!r}'s ({len(outcomes)} prepared, "
                            f"{len(tour.steps)} in the tour): prepare the tour again")
    missing = [_missing_line(i, o) for i, o in enumerate(outcomes, start=1) if not o.ok or o.result is None]
    kept = [(i, o) for i, o in enumerate(outcomes, start=1) if o.ok and o.result is not None]
    if missing and not skip_missing:
        more = f" (and {len(missing) - 1} more missing)" if len(missing) > 1 else ""
        raise ProbekitError(f"tour {tour.name!r} cannot be exported: {missing[0]}{more}; make its data available "
                            "here, or leave missing steps out (--skip-missing)")
    if not kept:
        raise ProbekitError(f"no step of tour {tour.name!r} can be shown on this machine: {missing[0]}" if missing
                            else f"tour {tour.name!r} has no steps to export")
    return Deck(_page(tour, kept), len(kept), missing)


def _page(tour: Tour, kept: list[tuple[int, Outcome]]) -> str:
    render = _Render()
    sections = []
    for j, (position, o) in enumerate(kept):
        step = o.step
        body = "".join(render.block(b, j) for b in slide(o.result))
        note = f"<p class='pk-note'>{_esc(step.note)}</p>" if step.note else ""
        sections.append(f"<section class='pk-slide pk-kind-{_esc(step.page)}' data-step='{position}' hidden>"
                        f"<h1>{_esc(step.title)}</h1>{note}<div class='pk-result'>{body}</div></section>")
    counter = COUNTER.replace("{i}", "<span id='pk-i'>1</span>").replace("{n}", str(len(kept)))
    return (f"<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{_esc(tour.name)}</title><style>{_CSS}</style>"
            f"<script>{plotly_js()}</script></head>\n<body>"
            f"<header class='pk-counter'><button id='pk-prev' type='button' title='back'>‹</button>"
            f"<span id='pk-counter'>{counter}</span><button id='pk-next' type='button' title='next'>›</button>"
            f" · {_esc(tour.name)} · {_esc(HELP)}</header>"
            f"<main>{''.join(sections)}</main>"
            f"<script>const PK_KEYS = {json.dumps(KEYS)};\n{_JS}</script></body></html>\n")


def export_deck(tour: Tour, path: str | Path, *, load_model: Loader, skip_missing: bool = False,
                progress: Progress | None = None) -> Deck:
    """Prepare every step of ``tour`` and write its deck to ``path`` (through the one atomic writer); nothing is
    written when a step is missing and ``skip_missing`` is off."""
    target = Path(path)
    if target.suffix.lower() not in (".html", ".htm"):
        raise ProbekitError(f"a deck is an HTML file: name it with .html (got {str(path)!r})")
    deck = make_deck(tour, warm_up(tour, load_model, progress=progress), skip_missing=skip_missing)
    atomic.write_text(target, deck.html)
    return deck


_CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; padding: 0.8rem 1.6rem 1rem 1.6rem; font-family: system-ui, -apple-system, "Segoe UI", Roboto,
  "Helvetica Neue", Arial, sans-serif; font-size: 22px; color: #262730; background: #fff; }
.pk-counter { font-size: 20px; opacity: 0.7; }
.pk-counter button { font: inherit; border: 1px solid #ccc; background: #fafafa; border-radius: 4px;
  padding: 0 0.5rem; margin: 0 0.3rem; cursor: pointer; }
h1 { font-size: 2.1rem; margin: 0.4rem 0 0.3rem 0; }
.pk-note { font-size: 24px; margin: 0 0 0.4rem 0; }
body.pk-hide-notes .pk-note { display: none; }
p { margin: 0.4rem 0; }
table { border-collapse: collapse; margin: 0.4rem 0; }
td, th { padding: 0.2rem 0.6rem; border-bottom: 1px solid #e6e6e6; text-align: left; }
th { font-weight: 600; }
.pk-columns { display: flex; gap: 1.5rem; align-items: flex-start; }
.pk-column { flex: 1 1 0; min-width: 0; }
.pk-metrics { display: flex; gap: 1.5rem; margin: 0.4rem 0; }
.pk-metric { flex: 1 1 0; }
.pk-label { font-size: 20px; }
.pk-value { font-size: 2.4rem; }
.pk-plot { width: 100%; }
@media print { .pk-counter button { display: none; } }
"""

_JS = """
(function () {
  "use strict";
  var slides = Array.prototype.slice.call(document.querySelectorAll("section.pk-slide"));
  var n = slides.length, at = 0;
  function draw(slide) {
    slide.querySelectorAll("div.pk-plot").forEach(function (div) {
      if (div.getAttribute("data-drawn")) { Plotly.Plots.resize(div); return; }
      var fig = JSON.parse(document.getElementById(div.getAttribute("data-fig")).textContent);
      Plotly.newPlot(div, fig.data, fig.layout || {}, {displayModeBar: false, responsive: true});
      div.setAttribute("data-drawn", "1");
    });
  }
  function show(i) {
    at = Math.min(Math.max(i, 0), n - 1);
    slides.forEach(function (s, j) { s.hidden = j !== at; });
    document.getElementById("pk-i").textContent = String(at + 1);
    draw(slides[at]);
    if (location.hash !== "#" + (at + 1)) { location.replace("#" + (at + 1)); }  /* a reload stays here */
  }
  var moves = {
    next: function () { show(at + 1); }, prev: function () { show(at - 1); },
    first: function () { show(0); }, last: function () { show(n - 1); },
    notes: function () { document.body.classList.toggle("pk-hide-notes"); },
    fullscreen: function () {
      if (document.fullscreenElement) { document.exitFullscreen(); }
      else if (document.documentElement.requestFullscreen) { document.documentElement.requestFullscreen(); }
    }
  };
  var byKey = {};
  Object.keys(PK_KEYS).forEach(function (m) { PK_KEYS[m].forEach(function (k) { byKey[k] = m; }); });
  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey) { return; }
    var m = byKey[e.key];
    if (m) { e.preventDefault(); moves[m](); }
  });
  document.getElementById("pk-next").addEventListener("click", moves.next);
  document.getElementById("pk-prev").addEventListener("click", moves.prev);
  var start = parseInt(location.hash.slice(1), 10);
  show(isNaN(start) ? 0 : start - 1);
})();
"""
