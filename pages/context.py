"""Context: rank-change curves for one triple with a document, and UCM over a dataset (Yao et al.)."""

import html

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from pages import _ui as ui
from probekit import context as ctx
from probekit.context import store as context_runs
from probekit.probes import probes_for

ROLE_COLOURS = {"target": "#1565c0", "cor": "#2e7d32", "incor": "#c62828"}
UCM_COLOURS = {"U": "#2e7d32", "C": "#9e9e9e", "M": "#c62828"}

ui.title("Context variance")
model, ds = ui.current_model(), ui.current_dataset()
if model is None or ds is None:
    st.stop()
probe = st.sidebar.selectbox("Context probe", probes_for(model), key="ctx_probe",
                             help="retrieval for encoders, mask_average for MLMs (one forward per candidate length)")
single, dataset = st.tabs(["Single triple", "Dataset (UCM)"])


def ucm_bars(frame: pd.DataFrame, x: str, facet: str | None = None):
    long = frame.melt(id_vars=[c for c in frame.columns if c not in "UCM"], value_vars=list("UCM"), var_name="share")
    fig = px.bar(long, x=x, y="value", color="share", facet_col=facet, color_discrete_map=UCM_COLOURS,
                 hover_data=["n"], labels={"value": "share of steps adding an O_cor"})
    fig.update_layout(barmode="stack", height=420, margin=dict(l=0, r=0, t=30, b=0))
    return fig


with single:
    left, right = st.columns([2, 1])
    rel = left.selectbox("Relation", ds.relations, key="ctx_rel")
    qs = ds.queries_for(rel)
    by_id = {q.id: q for q in qs}
    if st.session_state.get("ctx_qid") not in by_id:
        st.session_state.ctx_qid = max(qs, key=lambda q: len(q.golds)).id
    left.selectbox("Query (S, R)", list(by_id), key="ctx_qid", format_func=lambda i: f"{by_id[i].subject}  ({i})")
    query = by_id[st.session_state.ctx_qid]
    target = right.selectbox("Target O_t", query.golds, key="ctx_target")
    variant = right.selectbox("Variant", ctx.VARIANTS, key="ctx_variant")
    perms = right.number_input("Permutations", 1, 10, 3, key="ctx_perms", disabled=variant != "knowledge-random")
    seed = right.number_input("Seed", 0, 10**6, 0, key="ctx_seed")
    st.caption(f"Prompt: **{query.text(model.mask_token)}** — golds: {', '.join(query.golds)}")

    source = st.segmented_control("Document", ["Paste", "Upload", "Search a corpus"], key="ctx_src", default="Paste")
    document = ""
    if source == "Upload":
        up = st.file_uploader("Text file", type=["txt", "md"], key="ctx_upload")
        document = up.getvalue().decode("utf-8", errors="replace") if up else ""
    elif source == "Search a corpus":
        files = {p.name: p for p in ctx.corpus_files()}
        corpus = st.selectbox("Corpus", list(files) or ["(no corpus found)"], key="ctx_corpus")
        if st.button("Find sentences with S and O_t", key="ctx_search") and corpus in files:
            with ui.guard("Search"):
                st.session_state.ctx_hits = ctx.search_sentences(query.subject, target, files=[files[corpus]])
        hits = st.session_state.get("ctx_hits", [])
        if hits:
            chosen = st.multiselect("Sentences to use", hits, default=hits[:3], key="ctx_chosen")
            document = " ".join(chosen)
        elif "ctx_hits" in st.session_state:
            st.info("No sentence in this corpus mentions both the subject and the target.")
    else:
        document = st.text_area("Document (e.g. a clinical note mentioning S and O_t)", key="ctx_doc", height=150)

    pool = ds.candidates("relation", rel).names
    seg = None
    if document.strip():
        with ui.guard("Segmentation"):
            seg = ctx.segment_document(document, target, ctx.unique_names([*pool, *query.golds]))
            if variant == "negative-target":
                seg = ctx.negative_target(seg, query.golds)
            pieces = ctx.document_pieces(seg, [*query.golds, target])
            marked = "".join(
                html.escape(p["text"]) if p["role"] is None else
                f"<mark style='background:{ROLE_COLOURS[p['role']]}22;border-bottom:2px solid "
                f"{ROLE_COLOURS[p['role']]}'>{html.escape(p['text'])}<sup><b>S{p['segment']}</b></sup></mark>"
                for p in pieces)
            st.markdown(f"<div style='line-height:1.9'>{marked}</div>", unsafe_allow_html=True)
            st.caption(f"{len(seg)} segments; blue = O_t, green = O_cor, red = O_incor; S-numbers give the order "
                       f"in which segments are added (left first, then alternating).")

    if st.button("Run", type="primary", key="ctx_run", disabled=seg is None):
        with ui.guard("Context run"), (bar := st.empty()).container():
            st.session_state.ctx_result = ctx.run_context(
                model, query, target=target, pool=pool, document=document, variant=variant, probe=probe,
                seed=int(seed), permutations=int(perms), progress=ui.progress("Ranking the pool"))
        bar.empty()
    result = st.session_state.get("ctx_result")
    if result is not None and result.query.id == query.id:
        run = result.runs[0]
        if len(result.runs) > 1:
            run = result.runs[st.selectbox("Permutation", range(len(result.runs)), key="ctx_perm")]
        rows = pd.DataFrame(run.rows)
        rows["input"] = [r["input"] for r in run.results]
        fig = go.Figure()
        for col, name in (("rank_target", "O_t"), ("mean_rank_cor", "mean O_cor"), ("mean_rank_incor", "mean O_incor")):
            fig.add_scatter(x=rows.step, y=rows[col], name=name, mode="lines+markers", customdata=rows.input,
                            hovertemplate="step %{x}: rank %{y}<br>%{customdata}<extra>" + name + "</extra>")
        colours = [ROLE_COLOURS.get(r, "#777") for r in rows.added_role]
        fig.add_scatter(x=rows.step, y=rows.rank_added, name="O_a (just added)", mode="markers",
                        marker=dict(size=12, color=colours, symbol="diamond"), text=rows.added,
                        hovertemplate="step %{x}: %{text} rank %{y}<extra>O_a</extra>")
        fig.update_yaxes(type="log", autorange="reversed", title="rank at [MASK] (1 = best)")
        fig.update_layout(xaxis_title="step (segments added)", height=430, margin=dict(l=0, r=0, t=30, b=0))
        st.plotly_chart(fig, key="ctx_curve")
        u = result.ucm()
        st.markdown(f"**{result.target}** ({'negative target' if result.negative else 'target'}), "
                    f"{result.variant}: U {u['U']:.2f} · C {u['C']:.2f} · M {u['M']:.2f} over {u['n']} O_cor steps")
        st.dataframe(rows[["step", "added", "added_role", "rank_target", "rank_added", "rc_target", "rc_added",
                           "rc_cor", "rc_incor"]], hide_index=True, key="ctx_rc")
        for notice in result.notices:
            st.warning(notice)
        with st.expander("Inputs input_0 … input_n"):
            st.dataframe(rows[["step", "input"]], hide_index=True)

with dataset:
    st.caption("Knowledge-only contexts from the KB for every query with ≥ 2 golds: O_t = first gold in the middle, "
               "other golds (O_cor) and as many sampled same-relation tails (O_incor) around it, shuffled (seeded).")
    c1, c2, c3 = st.columns(3)
    rels = c1.multiselect("Relations", ds.relations, key="ctx_d_rels", placeholder="all relations")
    limit = c2.number_input("Queries per relation (seeded sample; 0 = all)", 0, 1000, 20, key="ctx_d_limit")
    negative = c3.checkbox("Also negative target", True, key="ctx_d_neg")
    save = c3.checkbox("Store the run", True, key="ctx_d_save")
    if st.button("Run dataset mode", type="primary", key="ctx_d_run"):
        with ui.guard("Dataset run"), (bar := st.empty()).container():
            res = ctx.run_dataset(model, ds, probe=probe, relations=rels or None, limit=int(limit) or None,
                                  negative=negative, progress=ui.progress("Context runs"))
            bar.empty()
            st.session_state.ctx_d_result = res
            if save:
                st.session_state.ctx_d_saved = context_runs.save_run(res, model=model, label=ui.model_label())
    res = st.session_state.get("ctx_d_result")
    if res is not None:
        ucm, acc = ctx.summary_frames(res.summary)
        st.markdown(f"{res.settings['n_queries']} triples in {res.seconds:.1f} s"
                    + (f" — stored as `{st.session_state.ctx_d_saved}`" if st.session_state.get("ctx_d_saved") else ""))
        st.plotly_chart(ucm_bars(ucm, "relation", facet="mode"), key="ctx_d_ucm")
        st.dataframe(acc, hide_index=True, key="ctx_d_acc")
        st.caption("acc@k (macro) with the prompt alone (none) and with the whole context (full). Target and "
                   "negative target agree by construction: both start from the same prompt and end with the same "
                   "full context; they differ only in the order segments are added, which UCM measures.")
    with ui.guard("Stored runs"):
        runs = context_runs.list_runs()
        if len(runs):
            st.subheader("Stored runs")
            ids = st.multiselect("Compare runs", list(runs.run_id), default=list(runs.run_id[:3]), key="ctx_d_runs",
                                 format_func=lambda r: f"{runs.set_index('run_id').label[r]} ({r})")
            if ids:
                table = context_runs.ucm_table(ids)
                table["run"] = table.label + " · " + table.run_id.str[-6:]
                st.plotly_chart(ucm_bars(table[table.relation == "UCM_m"], "run", facet="mode"), key="ctx_d_cmp")
                st.dataframe(runs[runs.run_id.isin(ids)], hide_index=True, key="ctx_d_list")
                exp = st.selectbox("Export the steps of", ids, key="ctx_d_export")
                st.download_button("Download CSV", context_runs.steps_frame(exp).to_csv(index=False),
                                   file_name=f"{exp}.csv", mime="text/csv", key="ctx_d_download")
