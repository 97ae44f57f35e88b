"""probekit: the Streamlit entry point. Run with `make app` (or see README).

Three apps in one: an expert's personal link (``/annotate?session=…&token=…``) opens the annotation-only app (the
Annotate page alone: no navigation, no sidebar, no model or dataset pickers), a reviewer's link
(``/reviewer?session=…&token=…``) the review-only app (pages/_reviewer.py's one page); everyone else gets the research
app, behind the organiser's sign-in once the server asks for one (pages/_access.py, ``access``). ``serve.py``
serves this script with the gate that also keeps exports behind the sign-in.
"""

from pathlib import Path

import streamlit as st

from pages import _nav, _server_log
from pages import _presenter as _present
from pages import _ui as ui
from pages._reviewer import review_app
from probekit.annotations import REVIEW_PATH

_server_log.install()  # a tab closed while its page is sent logs no traceback (an upstream record; see the module)

# The tab icon is a file shipped here: Streamlit sends an image as a data: URI, while a ":material/…:" icon is
# fetched from fonts.gstatic.com by the browser (console errors offline) and an emoji needs an emoji font.
ICON = str(Path(__file__).resolve().parent / "docs" / "icon.svg")
st.set_page_config(page_title="probekit", page_icon=ICON, layout="wide")


def _page(r: _nav.Route):
    return st.Page(f"pages/{r.file}", title=r.title, icon=r.icon, default=r.default)


# (section, page), from the one page list (pages/_nav.py: a new page is one entry there; the browser test walks it)
TOURS = _page(_nav.route("tours"))
PAGES = [(r.section, TOURS if r.name == "tours" else _page(r)) for r in _nav.PAGES]

ROLE = ui.access(pages=[page for _, page in PAGES])
if ROLE == "expert":
    # Streamlit serves the default page at "/" only, so the Annotate page is not the default (its link,
    # /annotate?…, opens it without a "page not found"); the default page, "/" and any other path, goes there.
    ANNOTATE = st.Page("pages/annotate.py", title="Annotate", icon=_nav.route("annotate").icon)
    nav = st.navigation([st.Page(lambda: st.switch_page(ANNOTATE), title="Annotate", url_path="start",
                                 default=True), ANNOTATE], position="hidden")
    with ui.shell():
        nav.run()
    st.stop()

if ROLE == "reviewer":  # the review page alone, served at its link's path; any other path goes there
    REVIEW = st.Page(review_app, title="Review", icon=":material/gavel:", url_path=REVIEW_PATH)
    nav = st.navigation([st.Page(lambda: st.switch_page(REVIEW), title="Review", url_path="start", default=True),
                         REVIEW], position="hidden")
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
