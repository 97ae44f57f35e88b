"""The app's pages, in one list: app.py builds its navigation from it and the browser test walks it, so a new page
is one file in pages/ and one entry here. Names and titles only (no streamlit import), so tests read it cheaply."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Route:
    """One page: its file under pages/, its navigation ``title``, ``icon`` and ``section``, and the ``heading`` the page
    draws (its ``ui.title``); the ``default`` page is served at ``/``."""

    file: str
    title: str
    icon: str
    section: str
    heading: str
    default: bool = False

    @property
    def name(self) -> str:
        """The page's name: its file's stem, and its URL path unless it is the default page."""
        return Path(self.file).stem

    @property
    def url_path(self) -> str:
        """The path the page is served at: "" for the default page (``/``), else its name."""
        return "" if self.default else self.name


PAGES = (
    Route("probe.py", "Probe", ":material/search:", "Explore", "Probe", default=True),
    Route("context.py", "Context", ":material/segment:", "Explore", "Context variance"),
    Route("corpora.py", "Corpora", ":material/library_books:", "Explore", "Corpora"),
    Route("benchmark.py", "Benchmark", ":material/leaderboard:", "Benchmark", "Benchmark"),
    Route("compare.py", "Compare runs", ":material/compare_arrows:", "Benchmark", "Compare runs"),
    Route("layers.py", "Layers", ":material/stacked_line_chart:", "Benchmark", "Layer-wise probing"),
    Route("grid.py", "Grid", ":material/grid_view:", "Benchmark", "Probing grid"),
    Route("diskne.py", "DisKnE", ":material/coronavirus:", "Benchmark", "DisKnE: disease knowledge by fine-tuning"),
    Route("templates.py", "Templates vs free text", ":material/compare:", "Benchmark", "Templates vs free text"),
    Route("rewire.py", "Rewire", ":material/model_training:", "Rewire", "Contrastive rewiring"),
    Route("sweep.py", "Checkpoint sweep", ":material/query_stats:", "Rewire", "Checkpoint sweep"),
    Route("annotate.py", "Annotate", ":material/rate_review:", "Annotate", "Annotate"),
    Route("results.py", "Annotation results", ":material/fact_check:", "Annotate", "Annotation results"),
    Route("tours.py", "Tours", ":material/slideshow:", "Present", "Tours"),
)
"""Every page of the navigation, in its order (sections in order of first appearance)."""

OUTSIDE_NAVIGATION = ("present.py",)
"""Page files app.py serves outside the navigation: the presenter (``?tour=NAME&present=1``) opens alone."""


def route(name: str) -> Route:
    """The page called ``name`` (its file's stem)."""
    for r in PAGES:
        if r.name == name:
            return r
    raise KeyError(f"no page {name!r}; pages: {', '.join(r.name for r in PAGES)}")
