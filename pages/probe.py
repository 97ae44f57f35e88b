"""Probe: pick a query, rank candidate entities live, see the top-k and where the gold answers rank."""

import streamlit as st

from pages import _probe_result as shown
from pages import _ui as ui
from probekit import views
from probekit.datasets.base import available_vocabs
from probekit.probes import ONE_QUERY_DEFAULTS, get_probe, probes_for
from probekit.probes.every import EveryProbe, every_probe
from probekit.types import parse_free_query

DATASET, TYPED = "From the dataset", "Type a query"
SOURCES = {views.DATASET: DATASET, views.TEXT: TYPED}

ui.title("Probe")
# open on a first visit only: a link with a query, or a result, needs the room for the answer
first_visit = "pk_result" not in st.session_state and not (st.query_params.get("query") or st.query_params.get("text"))
with st.expander("About probekit", expanded=first_visit, icon=":material/info:"):
    st.markdown(shown.ABOUT)
model, ds = ui.current_model(), ui.current_dataset()
if model is None or ds is None:
    st.stop()
names = probes_for(model)


def restore(params) -> None:
    """First visit: the view a shared link holds (views.probe_view) goes into the widgets' state."""
    name = params.get("probe") if params.get("probe") in names else names[0]
    ignored: list[str] = []
    view = views.probe_view(params, spec=get_probe(name).options, ignored=ignored)
    state = {"pk_source": SOURCES[view.source], "pk_probe": name, "pk_autorun": bool(view.query or view.text),
             "pk_text": view.text or "Metformin might treat [MASK].", "pk_subject": view.subject or "",
             "pk_golds": "; ".join(view.golds), "pk_k": view.k, "pk_every": view.every,
             "pk_vocab": view.vocab if view.vocab in available_vocabs() else None,
             "pk_rel": view.relation if view.relation in ds.relations else None,
             "pk_qid": view.query if view.query in {q.id for q in ds.queries} else None}
    if view.query and state["pk_qid"] and not state["pk_rel"]:
        state["pk_rel"] = ds.query(view.query).relation
    if view.query and not state["pk_qid"]:  # never another query in silence
        state["pk_autorun"] = False
        st.session_state.pk_unknown = view.query
    state.update(ui.option_state(get_probe(name), view.options, key="pk_opt"))
    st.session_state.update({k: v for k, v in state.items() if v is not None})
    if ignored:
        st.session_state.pk_ignored = ignored


if "pk_source" not in st.session_state:
    restore(st.query_params)
if unknown := st.session_state.pop("pk_unknown", None):
    st.warning(f"The link's query {unknown!r} is not in {ds.name}: pick a query below.", icon=":material/warning:")
if bad := st.session_state.pop("pk_ignored", None):
    st.caption(f"The link's {', '.join(bad)} could not be read; the defaults are used there.")

source = st.segmented_control("Query", [DATASET, TYPED], key="pk_source", persist_state="session") or DATASET
left, right = st.columns([3, 2])
with right:  # short, so the answer starts above the fold of a 1024x768 projector
    probe = get_probe(st.selectbox("Probe", names, key="pk_probe",
                                   persist_state="session", help="mask_average needs a model with an MLM head"))
    every = st.toggle("Every probe", key="pk_every", persist_state="session",
                      help="Run every probe this model supports on the query and show them side by side. "
                           "Each ranks its own candidates unless you pick others; the options below apply to the "
                           "probe picked above, the others keep their defaults.")
    with st.expander("Candidates, k and probe options", icon=":material/tune:") as box:
        vocab = ui.vocab_picker(probe, key="pk_vocab", has_relation=source != TYPED,
                                help="heads+tails of the dataset (MedLAMA's reference), all tails, tails of this "
                                     "relation, or a vocabulary built with `probekit vocab build`; each probe opens "
                                     "on its own (likelihood: the relation's answers)")
        st.session_state.setdefault("pk_k", 10)  # a link's k is in the state already: one default, no warning
        k = st.slider("k", 1, views.MAX_K, key="pk_k", persist_state="session")
        opts = ui.probe_option_widgets(probe, key="pk_opt", defaults=ONE_QUERY_DEFAULTS, container=box,
                                       nested=True)
        if opts.get("exclude_subject"):
            st.caption("The query's own subject (in a typed query: any candidate its text names) is left out of "
                       "the candidates: untuned encoders return it as answer #1 (e.g. 'Nephrolithiasis → "
                       "Nephrolithiasis'). Stored benchmark runs keep it, as the papers do.")
    st.caption(f"{ui.md(vocab)} · k={k}" + (" · own subject left out" if opts.get("exclude_subject") else ""))
with left:
    if source == TYPED:  # a form: Enter in the query box runs the probe
        with st.form("pk_form", border=False):
            st.text_input("Cloze query", key="pk_text", persist_state="session",
                          help="Write [MASK] where the answer goes, or a template with [X] and [Y].")
            st.text_input("Subject for [X] (templates only)", key="pk_subject", persist_state="session")
            st.text_input("Gold answers to locate (optional, separated by ';')", key="pk_golds",
                          persist_state="session")
            clicked = st.form_submit_button("Probe", type="primary", icon=":material/play_arrow:", key="pk_submit")
        text, subject = st.session_state.pk_text, st.session_state.pk_subject
        golds = tuple(g.strip() for g in st.session_state.pk_golds.split(";") if g.strip())
        view = views.ProbeView(source=views.TEXT, text=text, subject=subject, golds=golds)
    else:
        relation = st.selectbox("Relation", ds.relations, key="pk_rel", persist_state="session")
        qs = ds.queries_for(relation)
        by_id = {q.id: q for q in qs}
        if st.session_state.get("pk_qid") not in by_id:
            st.session_state.pk_qid = qs[0].id
        st.selectbox("Query", list(by_id), key="pk_qid",
                     persist_state="session", format_func=lambda i: f"{by_id[i].subject}  ({i})")
        clicked = st.button("Probe", type="primary", icon=":material/play_arrow:", key="pk_run")
        view = views.ProbeView(relation=relation, query=st.session_state.pk_qid)

view = views.ProbeView(**{**view.__dict__, "vocab": vocab, "k": k, "probe": probe.name, "options": opts,
                          "every": every})
params = views.probe_params(view, probe.options)
inputs = {**params, "model": model.id, "dataset": st.session_state.get(ui.DATASET_KEY), "device": ui.selected_device()}
ran = clicked or st.session_state.pop("pk_autorun", False)
if ran:
    ui.forget("pk_result")  # an input error leaves no result of other inputs on screen
    with ui.guard("Probing"):
        if view.source == views.TEXT:
            q = parse_free_query(view.text, subject=view.subject or "", golds=view.golds)
            cands = ds.candidates(vocab if vocab != "relation" else "tails")
        else:
            q = ds.query(view.query)
            cands = ds.candidates(vocab, q.relation)
        report = ui.progress("Preparing candidates", stop_key="pk_stop")
        if every:  # each probe its own vocabulary, unless the radio was moved off the picked probe's own
            typed = view.source == views.TEXT
            own = vocab == probe.vocab(has_relation=not typed)
            load = (lambda name: ds.candidates(name if name != "relation" else "tails")) if typed else \
                (lambda name: ds.candidates(name, q.relation))
            found = every_probe(model, q, load, k=k, vocab=None if own else vocab, has_relation=not typed,
                                 options={probe.name: opts}, common={"exclude_subject": opts["exclude_subject"]},
                                 progress=report)
            report.clear()
            ui.keep("pk_result", inputs, (found, model.id))
        else:
            ranking, explanation = probe.explain(model, q, cands, k=k, progress=report, **opts)
            report.clear()
            ui.keep("pk_result", inputs, (ranking, model.id, probe.name, len(cands), explanation))

if ui.stopped("pk_stop"):
    st.info("Stopped: no answer was computed and nothing half-done was cached. Press **Probe** to start again.",
            icon=":material/stop_circle:")
result = ui.kept("pk_result", inputs)
if result and isinstance(result[0], EveryProbe):
    shown.draw_every(model, *result)
    ui.share_link(params)
elif result:
    shown.draw(model, *result)
    ui.share_link(params)
else:
    if view.source == views.TEXT and not ran:  # a link's text, or a rerun after the box: its message on every run
        with ui.guard("Probing"):
            parse_free_query(view.text, subject=view.subject or "", golds=view.golds)
    ui.share_link(params, show=False)  # the URL follows the inputs, with no stale parameter
