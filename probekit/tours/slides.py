"""What a presented step shows, as plain blocks (text, tables, charts, figures in columns) built from its
:class:`~probekit.tours.Prepared` result: the app's presenter draws them with Streamlit, the offline deck
(:mod:`.deck`) as HTML, so both show the same tables, charts and sentences.

Text from data stays data here: a :class:`Text` is a list of parts, each plain or strong, never markup; each
drawing escapes it for its medium (Markdown in the app, HTML in the deck).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import Registry
from ..metrics.registry import METRICS
from . import figures

COUNTER = "Step {i} / {n}"
"""The step counter of the presenter and of the deck (the browser tests wait on it)."""


class Strong(str):
    """A part of a :class:`Text` shown in bold."""


@dataclass(frozen=True)
class Text:
    """A line of text: ``parts`` are ``(text, strong)`` pairs."""

    parts: tuple[tuple[str, bool], ...]


@dataclass(frozen=True)
class Table:
    """A small table, shown as an HTML table without its index (cells as text)."""

    frame: Any


@dataclass(frozen=True)
class Chart:
    """A plotly figure; ``name`` tells the step's charts apart (the app keys its widget with it)."""

    figure: Any
    name: str


@dataclass(frozen=True)
class Metrics:
    """A row of big numbers: ``(label, value)`` pairs."""

    items: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Columns:
    """Blocks side by side, one column each, in equal widths."""

    columns: tuple[tuple[Any, ...], ...]


Block = Text | Table | Chart | Metrics | Columns


def text(*parts: str) -> Text:
    """A :class:`Text` from strings, :class:`Strong` ones bold."""
    return Text(tuple((str(p), isinstance(p, Strong)) for p in parts if str(p)))


SLIDES: Registry = Registry("slide")
"""A prepared result's kind -> the function that lists what it shows (a test checks every step kind has one)."""


def _probe(data: dict) -> list[Block]:
    top = data["top"].head(10)
    shown = top.assign(gold=top.gold.map({True: "✓", False: ""}), score=top.score.map("{:.3f}".format))
    blocks: list[Block] = [
        text(Strong(data["text"]), f" — {data['model']}, {data['probe']}, {data['candidates']:,} candidates"),
        Columns(((Table(shown[["rank", "entity", "score", "gold"]]),), (Chart(figures.probe_bars(top), "chart"),)))]
    ranks = [f"{g}: {'rank ' + str(r) if r is not None else 'not a candidate'}" for g, r in data["golds"]]
    if ranks:
        blocks.append(text("Gold answers — " + "; ".join(ranks)))
    return blocks


def _context(data: dict) -> list[Block]:
    import pandas as pd

    result = data["result"]
    return [Chart(figures.context_curve(pd.DataFrame(result.runs[0].rows)), "curve"),
            text(Strong(f"{result.query.subject} → {result.target}"), f" ({result.variant}). {result.ucm_text()}")]


def _layers(data: dict) -> list[Block]:
    return [Chart(figures.layer_heatmap(data["acc"], data["best"], metric=data["metric"]), "heatmap"),
            text(f"{data['metric']} (%) per relation and layer, ", Strong(data["set"]),
                 f" queries; ★ = best layer · {data.get('label') or ''}")]


def _benchmark(data: dict) -> list[Block]:
    k, which, metric = data["k"], data["set"], data["metric"]
    table = data["table"]
    table = table[table.average == "macro"] if "average" in table.columns else table
    pct = [c for c in table.columns if c.split(" ", 1)[-1] in METRICS]
    blocks: list[Block] = [Table(table.assign(**{c: (table[c] * 100).map("{:.1f}".format) for c in pct})
                                 [["run", *pct]])]
    if data["drill"] is None:  # a Compare step
        return blocks
    drill = data["drill"].head(6)
    cols = [c for c in ("subject", "golds", "best rank", f"hit@{k}", "top-1") if c in drill.columns]
    return [*blocks, text(Strong(data["relation"]), f" — its queries in {data['run']} (hit@{k} beside {metric}, "
                                                    f"{which}):"),
            Table(drill[cols] if cols else drill)]


def _results(data: dict) -> list[Block]:
    s = data["shares"]
    blocks: list[Block] = [
        Metrics(((f"Rated top-{s['k']} answers", str(s["rated"])),
                 ("Gold hits (share of answers)", f"{100 * s['gold_share']:.1f}%"),
                 (f"Rated ≥ {s['threshold']} by experts", f"{100 * s['expert_share']:.1f}%"))),
        text(Strong("Expert score × gold hit"), f" (MedLAMA Table 5) — {data['name']}, {data['n_ratings']} ratings"),
        Table(data["table5"])]
    agreement = data["agreement"]
    if len(agreement):  # the overall row (per-relation rows would push it off a projector's screen)
        row = agreement.iloc[0]
        parts = [f"{c} {row[c]:.3f}" for c in ("alpha (ordinal)", "mean kappa (quadratic)") if c in row]
        if parts:
            blocks.append(text(f"Agreement over {row.iloc[0]}: " + ", ".join(parts)))
    return blocks


SLIDES["probe"] = _probe
SLIDES["context"] = _context
SLIDES["layers"] = _layers
SLIDES["benchmark"] = _benchmark
SLIDES["results"] = _results


def slide(result) -> list[Block]:
    """What a prepared step shows, top to bottom."""
    make: Callable[[dict], list[Block]] = SLIDES.get_or_raise(result.kind)
    return make(result.data)
