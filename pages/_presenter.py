"""Presenting a tour (``/?tour=NAME&present=1``): one step at a time, full-screen, large type, no sidebar or pickers,
a step counter; → / PageDown (a clicker's forward key) and ← / PageUp move, Esc leaves for the Tours page.

Every step is prepared when the tour opens (:func:`probekit.tours.warm_up`, with a progress bar) and kept in a
memo shared by the server's sessions, so moving between steps only draws a prepared result: it never waits on a
model. Keys come through the Annotate page's listener (pages/_rating_keys.py), each press handled once, in order.
"""

from __future__ import annotations

import streamlit as st

from pages import _presenter_steps as steps
from pages import _ui as ui
from pages._rating_keys import Desk, keyboard
from probekit import config, tours
from probekit.errors import ProbekitError
from probekit.memo import Memo

KEYS = {"ArrowRight": "next", "PageDown": "next", "ArrowLeft": "prev", "PageUp": "prev", "Escape": "leave"}
"""Browser key -> move. Presentation clickers send PageDown / PageUp."""
COUNTER = tours.COUNTER
"""The step counter (the offline deck's too; the browser tests wait on it)."""

_PREPARED: Memo[str, list] = Memo(max_entries=4)
"""Warm-ups by tour content (steps, store): a reload or a second tab finds its tour prepared; an edited tour
(another content) is prepared again."""

CSS = """
<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stHeader"],
[data-testid="stToolbar"], [data-testid="stDecoration"], [data-testid="stStatusWidget"] { display: none !important; }
.stMainBlockContainer, .block-container { padding: 0.8rem 1.6rem 1rem 1.6rem !important; max-width: 100% !important; }
.stApp { font-size: 22px; }
.stApp p, .stApp li, .stApp td, .stApp th, .stApp [data-testid="stMarkdownContainer"] { font-size: 22px; }
.stApp h1 { font-size: 2.1rem !important; padding: 0 !important; }
.stApp table td, .stApp table th { padding: 0.2rem 0.6rem !important; }
.pk-counter { font-size: 20px; opacity: 0.7; }
.pk-note { font-size: 24px; margin: 0 0 0.4rem 0; }
.stApp [data-testid="stMetricValue"] { font-size: 2.4rem; }
.stApp [data-testid="stMetricLabel"] p { font-size: 20px; }
</style>
"""


def wanted(params) -> bool:
    """Whether the URL asks to present a tour."""
    return bool(params.get("tour")) and str(params.get("present", "")).lower() in ("1", "true", "yes")


def load_model(model_id: str, device: str | None):
    """The app's one-model cache (a step's model is loaded once, the previous one released)."""
    return ui.load_model(model_id, device)


def _signature(tour: tours.Tour) -> str:
    return repr((str(config.db_path()), tour.name, [(s.page, sorted(s.params.items())) for s in tour.steps]))


def prepared(tour: tours.Tour) -> list[tours.Outcome]:
    """The tour's steps prepared (once per content: later calls find them in the memo), with a progress bar."""
    key = _signature(tour)
    done = _PREPARED.get(key)
    if done is None:
        bar = ui.progress("Preparing the tour")
        done = tours.warm_up(tour, load_model, progress=lambda d, t, s="": bar(d, t, ui.md(s)))  # titles: text
        bar.clear()
        _PREPARED.put(key, done)
    return done


def show(*, leave) -> None:
    """The presenter; ``leave`` is the page Esc opens (the Tours page)."""
    st.markdown(CSS, unsafe_allow_html=True)
    qp = st.query_params
    try:
        tour = tours.get_tour(qp.get("tour", ""))
    except ProbekitError as e:
        st.error(ui.message(str(e)))
        st.page_link(leave, label="Open the Tours page")
        return
    if not tour.steps:
        st.warning(f"Tour {ui.md(tour.name)} has no steps yet: press 'Add to tour' next to a share link.")
        st.page_link(leave, label="Open the Tours page")
        return
    outcomes = prepared(tour)
    where = f"tp_step_{tour.name}"
    if where not in st.session_state:
        raw = qp.get("step", "1")
        st.session_state[where] = min(max(int(raw) - 1, 0), len(tour.steps) - 1) if raw.isdigit() else 0
    stage(tour, outcomes, where, leave)


@st.fragment
def stage(tour: tours.Tour, outcomes: list, where: str, leave) -> None:
    """The step on screen and the keys: a fragment, so a key press reruns this alone (not the app around it)."""
    n = len(tour.steps)
    desk: Desk = st.session_state.setdefault("tp_desk", Desk())
    leaving: list[bool] = []

    def act(key: str, _ms: int | None = None) -> None:
        i = st.session_state[where]
        if key == "next":
            st.session_state[where] = min(i + 1, n - 1)
        elif key == "prev":
            st.session_state[where] = max(i - 1, 0)
        elif key == "leave":
            leaving.append(True)

    c1, c2 = st.columns([5, 2], vertical_alignment="center")
    with c2:
        keyboard(desk, act, key="tp_keys", names=KEYS, endpoint=False)
    if leaving:
        st.switch_page(leave, query_params={"tour": tour.name})
    i = st.session_state[where]
    if st.query_params.get("step") != str(i + 1):
        st.query_params["step"] = str(i + 1)  # a reload stays on this step
    step, outcome = tour.steps[i], outcomes[i]
    c1.markdown(f"<span class='pk-counter'>{COUNTER.format(i=i + 1, n=n)} · {ui.md(tour.name)} · "
                "→ / PageDown next, ← / PageUp back, Esc leaves</span>", unsafe_allow_html=True)
    st.title(ui.md(step.title), anchor=False)  # a tour's title is data (tours are imported): text, never markup
    if step.note:
        st.markdown(f"<p class='pk-note'>{ui.chart_text(step.note)}</p>", unsafe_allow_html=True)
    if outcome.error is not None:
        st.error(f"This step cannot be shown: {ui.message(outcome.error)}")
        return
    with st.container(key=f"tp_result_{step.page}"):
        steps.draw(outcome.result, i)
