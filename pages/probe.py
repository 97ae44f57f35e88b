"""Probe: pick a query, rank candidate entities live, see the top-k and where the gold answers rank."""

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages import _ui as ui
from probekit.datasets import VOCABS
from probekit.probes import get_probe, probes_for
from probekit.probes import mask_predict as mp
from probekit.types import parse_free_query

ui.title("Probe")
model, ds = ui.current_model(), ui.current_dataset()
if model is None or ds is None:
    st.stop()
qp = st.query_params

# ---- query: from the dataset or typed
if "pk_source" not in st.session_state:
    st.session_state.pk_source = "Type a query" if "text" in qp else "From the dataset"
    if qp.get("relation") in ds.relations:
        st.session_state.pk_rel = qp["relation"]
    if "query" in qp and any(q.id == qp["query"] for q in ds.queries):
        st.session_state.pk_qid = qp["query"]
    st.session_state.pk_text = qp.get("text", "Metformin might treat [MASK].")
    st.session_state.pk_autorun = "query" in qp or "text" in qp
source = st.segmented_control("Query", ["From the dataset", "Type a query"], key="pk_source")
left, right = st.columns([3, 2])
with left:
    if source == "Type a query":
        text = st.text_input("Cloze query", key="pk_text", max_chars=1000,
                             help="Write [MASK] where the answer goes, or a template with [X] and [Y].")
        subject = st.text_input("Subject for [X]", key="pk_subject") if "[X]" in (text or "") else ""
        golds = st.text_input("Gold answers to locate (optional, separated by ';')", key="pk_golds")
        relation = None
    else:
        relation = st.selectbox("Relation", ds.relations, key="pk_rel")
        qs = ds.queries_for(relation)
        ids = [q.id for q in qs]
        if st.session_state.get("pk_qid") not in ids:
            st.session_state.pk_qid = ids[0]
        by_id = {q.id: q for q in qs}
        st.selectbox("Query", ids, key="pk_qid", format_func=lambda i: f"{by_id[i].subject}  ({i})")
with right:
    names = probes_for(model)
    probe = get_probe(st.selectbox("Probe", names, key="pk_probe", help="mask_average needs a model with an MLM head"))
    vocab = st.radio("Candidates", VOCABS, key="pk_vocab", horizontal=True,
                     help="heads+tails of the dataset (MedLAMA's reference), all tails, or tails of this relation")
    k = st.slider("k", 1, 50, 10, key="pk_k")
    opts = ui.probe_option_widgets(probe, key="pk_opt", defaults={"exclude_subject": True})
    if opts.get("exclude_subject"):
        st.caption("The query's own subject is left out of the candidates: untuned encoders return it as answer "
                   "#1 (e.g. 'Nephrolithiasis → Nephrolithiasis'). Stored benchmark runs keep it, as the papers do.")

clicked = st.button("Probe", type="primary", icon=":material/play_arrow:", shortcut="Enter")
if clicked or st.session_state.pop("pk_autorun", False):
    with ui.guard("Probing"):
        if source == "Type a query":
            q = parse_free_query(text, subject=subject, golds=[g.strip() for g in golds.split(";") if g.strip()])
            cands = ds.candidates(vocab if vocab != "relation" else "tails")
            st.query_params.update({"text": text})
            st.query_params.pop("query", None)
        else:
            q = ds.query(st.session_state.pk_qid)
            cands = ds.candidates(vocab, q.relation)
            st.query_params.update({"relation": q.relation, "query": q.id})
            st.query_params.pop("text", None)
        st.query_params.update({"model": ui.selected_model_id(), "dataset": st.session_state.get(ui.DATASET_KEY)})
        report = ui.progress("Preparing candidates")
        decoded = None
        if probe.name == "mask_predict":  # the same decoding, with its trace for the view below
            ranking, decoded = probe.explain(model, q, cands, k=k, progress=report, **opts)
        else:
            ranking = probe.rank(model, [q], cands, k=k, progress=report, **opts)[0]
        report.clear()
        st.session_state.pk_result = (ranking, model.id, probe.name, len(cands))
        st.session_state.pk_decoded = decoded

result = st.session_state.get("pk_result")
if result:
    ranking, model_id, probe_name, n_cands = result
    q = ranking.query
    st.markdown(f"**{q.text(model.mask_token)}** — {model_id}, {probe_name}, {n_cands:,} candidates")
    tok = model.tokenizer
    top = pd.DataFrame({"rank": range(1, ranking.k + 1), "entity": ranking.names,
                        "score": [round(s, 4) for s in ranking.scores],
                        "gold": [ranking.is_gold(n) for n in ranking.names],
                        "tokens": [len(tok.tokenize(n)) for n in ranking.names]})
    t1, t2 = st.columns([3, 2])
    t1.dataframe(top, hide_index=True, key="pk_top", column_config={
        "gold": st.column_config.CheckboxColumn("gold"), "score": st.column_config.NumberColumn(format="%.4f")})
    fig = go.Figure(go.Bar(x=top.score[::-1], y=top.entity[::-1], orientation="h",
                           marker_color=["#2e7d32" if g else "#90a4ae" for g in top.gold[::-1]]))
    fig.update_layout(height=max(250, 24 * ranking.k), margin=dict(l=0, r=0, t=10, b=0), xaxis_title="score")
    t2.plotly_chart(fig, width="stretch")
    if q.golds:
        st.subheader("Gold answers")
        missing = "not generated" if ranking.generated else "not a candidate"
        st.dataframe(pd.DataFrame({"gold answer": q.golds, "rank": [r if r is not None else missing
                                                                    for r in ranking.gold_ranks]}), hide_index=True)
    # ---- mask_predict (issue 14): how the answer was built, each slot's top tokens per step
    decoded = st.session_state.get("pk_decoded")
    if probe_name == "mask_predict" and decoded is not None and decoded.predictions:
        st.subheader("Decoding")
        counts = sorted(decoded.traces)
        n = st.segmented_control("Masks", counts, default=mp.best_n_masks(decoded), key="pk_trace_n",
                                 help="the answers of every mask count are ranked together; the best one's is shown "
                                      "first") or mp.best_n_masks(decoded)
        st.dataframe(pd.DataFrame(mp.trace_rows(decoded, n)), hide_index=True, key="pk_trace")
        st.caption("One row per step of the best hypothesis: a slot the step predicted shows its top tokens "
                   "with probabilities, the others the token kept so far.")
    st.caption("Share this view: copy the page URL (it holds model, dataset, relation and query).")
