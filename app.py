"""probekit: the Streamlit entry point. Run with `make app` (or see README).

Two apps in one: an expert's personal link (``/annotate?session=…&token=…``) opens the annotation-only app (the
Annotate page alone: no navigation, no sidebar, no model or dataset pickers); everyone else gets the research
app, behind the organiser's sign-in once the server asks for one (pages/_access.py, ``access``). ``serve.py``
serves this script with the gate that also keeps exports behind the sign-in.
"""

from pathlib import Path

import streamlit as st

from pages import _presenter as _present
from pages import _server_log
from pages import _ui as ui

_server_log.install()  # a tab closed while its page is sent logs no traceback (an upstream record; see the module)

# The tab icon is a file shipped here: Streamlit sends an image as a data: URI, while a ":material/…:" icon is
# fetched from fonts.gstatic.com by the browser (console errors offline) and an emoji needs an emoji font.
ICON = str(Path(__file__).resolve().parent / "docs" / "icon.svg")
st.set_page_config(page_title="probekit", page_icon=ICON, layout="wide")

TOURS = st.Page("pages/tours.py", title="Tours", icon=":material/slideshow:")
# (section, page); each feature adds its page here.
PAGES = [
    ("Explore", st.Page("pages/probe.py", title="Probe", icon=":material/search:", default=True)),
    ("Explore", st.Page("pages/context.py", title="Context", icon=":material/segment:")),
    ("Explore", st.Page("pages/corpora.py", title="Corpora", icon=":material/library_books:")),
    ("Benchmark", st.Page("pages/benchmark.py", title="Benchmark", icon=":material/leaderboard:")),
    ("Benchmark", st.Page("pages/compare.py", title="Compare runs", icon=":material/compare_arrows:")),
    ("Benchmark", st.Page("pages/layers.py", title="Layers", icon=":material/stacked_line_chart:")),
    ("Benchmark", st.Page("pages/grid.py", title="Grid", icon=":material/grid_view:")),
    ("Benchmark", st.Page("pages/diskne.py", title="DisKnE", icon=":material/coronavirus:")),
    ("Benchmark", st.Page("pages/templates.py", title="Templates vs free text", icon=":material/compare:")),
    ("Rewire", st.Page("pages/rewire.py", title="Rewire", icon=":material/model_training:")),
    ("Rewire", st.Page("pages/sweep.py", title="Checkpoint sweep", icon=":material/query_stats:")),
    ("Annotate", st.Page("pages/annotate.py", title="Annotate", icon=":material/rate_review:")),
    ("Annotate", st.Page("pages/results.py", title="Annotation results", icon=":material/fact_check:")),
    ("Present", TOURS),
]

if ui.access(pages=[page for _, page in PAGES]) == "expert":
    # Streamlit serves the default page at "/" only, so the Annotate page is not the default (its link,
    # /annotate?…, opens it without a "page not found"); the default page, "/" and any other path, goes there.
    ANNOTATE = st.Page("pages/annotate.py", title="Annotate", icon=":material/rate_review:")
    nav = st.navigation([st.Page(lambda: st.switch_page(ANNOTATE), title="Annotate", url_path="start",
                                 default=True), ANNOTATE], position="hidden")
    with ui.shell():
        nav.run()
    st.stop()

if _present.wanted(st.query_params):  # ?tour=NAME&present=1: the presenter alone (no sidebar); Esc opens Tours
    nav = st.navigation([st.Page("pages/present.py", title="Present", default=True), TOURS], position="hidden")
    with ui.shell():
        nav.run()
    st.stop()

sections: dict[str, list] = {}
for section, page in PAGES:
    sections.setdefault(section, []).append(page)
nav = st.navigation(sections)
ui.remember_sign_in()
st.session_state[ui.PAGE_KEY] = nav.url_path  # the page drawn in this run ("Add to tour" names it)
ui.sidebar()
with ui.shell():
    nav.run()
