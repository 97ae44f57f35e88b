"""Tours: the saved views a talk walks through. Reorder or remove steps, check every step before the talk (what is
missing, and the time each takes cold and warm), export / import the tour as YAML, and start presenting."""

from urllib.parse import unquote

import streamlit as st

from pages import _presenter as _present
from pages import _ui as ui
from probekit import tours


def _steps(n: int) -> str:
    return f"{n} step{'' if n == 1 else 's'}"


ui.title("Tours")
st.caption("A tour is an ordered list of saved views: press **Add to tour** next to any page's share link. "
           "Presenting shows one step at a time, full-screen; → / PageDown next, ← / PageUp back, Esc leaves.")

with st.expander("Import a tour file (YAML)", icon=":material/upload:"):
    up = st.file_uploader("Tour file", type=["yaml", "yml"], key="tr_upload")
    replace = st.checkbox("Replace a tour of the same name", key="tr_replace")
    if up is not None and st.button("Import", key="tr_import", type="primary"):
        with ui.guard("Importing the tour"):
            text = up.getvalue().decode("utf-8", errors="replace")
            tour = tours.import_text(text, where=up.name, replace=replace)
            st.session_state.tr_tour = tour.name
            st.success(f"Imported tour '{ui.md(tour.name)}' ({_steps(len(tour.steps))}): check it below.")

names: list[str] = []
with ui.guard("Listing tours"):
    names = tours.tour_names()
if not names:
    st.info("No tours yet: open a page, get a result, and press **Add to tour** next to its share link.")
    st.stop()
wanted = st.query_params.get("tour")
if st.session_state.get("tr_tour") not in names:
    st.session_state.tr_tour = wanted if wanted in names else names[0]
name = st.selectbox("Tour", names, key="tr_tour")
st.query_params["tour"] = name
tour = tours.get_tour(name)

present = f"./?tour={name}&present=1"
st.markdown(f"<a href='{present}' target='_self' class='pk-present'>▶ Present “{ui.chart_text(name)}”</a> "
            f"&nbsp;(or open <code>{ui.chart_text(present[1:])}</code>)", unsafe_allow_html=True)

st.subheader(_steps(len(tour.steps)))
for i, step in enumerate(tour.steps):
    c0, c1, c2, c3, c4 = st.columns([6, 1, 1, 1, 0.2], vertical_alignment="center")
    label = tours.STEP_KINDS[step.page].label if step.page in tours.STEP_KINDS else step.page
    c0.markdown(f"**{i + 1}. {ui.md(step.title)}** · {ui.md(label)}" + (f" — {ui.md(step.note)}" if step.note else "")
                + f"  \n[{ui.md(unquote(step.link))}]({step.link})")  # read decoded, linked as stored
    if c1.button("Up", key=f"tr_up_{i}", disabled=i == 0, icon=":material/arrow_upward:"):
        tours.move_step(name, i, -1)
        st.rerun()
    if c2.button("Down", key=f"tr_down_{i}", disabled=i == len(tour.steps) - 1, icon=":material/arrow_downward:"):
        tours.move_step(name, i, 1)
        st.rerun()
    if c3.button("Remove", key=f"tr_rm_{i}", icon=":material/delete:"):
        tours.remove_step(name, i)
        st.rerun()

st.subheader("Tour check")
st.caption("Prepares every step as the presenter will (cold: first time, model loaded; warm: again at once) and "
           "says what is missing on this machine.")
if st.button("Check every step", key="tr_check", type="primary", icon=":material/fact_check:"):
    with ui.guard("Checking the tour"):
        bar = ui.progress("Checking", stop_key="tr_stop")
        rows = tours.check_tour(tour, _present.load_model, progress=lambda d, t, s="": bar(d, t, ui.md(s)))
        bar.clear()
        st.session_state.tr_checked = (name, repr(tour.steps), tours.check_frame(rows))
if ui.stopped("tr_stop"):
    st.info("Stopped: press **Check every step** to check the tour again.", icon=":material/stop_circle:")
checked = st.session_state.get("tr_checked")
if checked and checked[:2] == (name, repr(tour.steps)):
    frame = checked[2]
    bad = int((frame.status != "ok").sum())
    (st.success if not bad else st.error)(f"{len(frame) - bad} of {len(frame)} steps ready"
                                          + (f"; {bad} cannot be shown here (see 'what it shows')" if bad else ""))
    st.dataframe(frame, hide_index=True, key="tr_check_table")

st.subheader("Export")
ui.download("Tour file (YAML)", lambda: tours.dumps(tour).encode("utf-8"), memo=("tour", name, repr(tour.steps)),
            file_name=f"{name}.yaml", mime="application/x-yaml", key="tr_export")
st.caption("An offline deck is one HTML file that presents the tour in any browser, without the workbench or a "
           "network: the same steps, notes and keys. Steps whose data are missing here are left out.")
if st.button("Make the offline deck (HTML)", key="tr_deck_make", icon=":material/slideshow:"):
    with ui.guard("Making the offline deck"):
        deck = tours.make_deck(tour, _present.prepared(tour), skip_missing=True)  # the presenter's prepared steps
        st.session_state.tr_deck_made = (name, repr(tour.steps), deck.html.encode("utf-8"), deck.left_out)
made = st.session_state.get("tr_deck_made")
if made and made[:2] == (name, repr(tour.steps)):
    for line in made[3]:
        st.warning(f"Left out of the deck: {ui.message(line)}")
    st.download_button("Download as offline deck (HTML)", made[2], file_name=f"{name}.html", mime="text/html",
                       key="tr_deck", on_click="ignore", icon=":material/download:")
with st.expander("Delete this tour", icon=":material/delete:"):
    if st.button(f"Delete tour '{name}'", key="tr_delete"):
        tours.delete_tour(name)
        st.session_state.pop("tr_tour", None)
        st.rerun()
