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
with st.expander("What O_t, O_cor, O_incor, UCM and the variants mean"):
    st.markdown("\n".join(f"- **{t}**: {line}" for t, line in ctx.TERMS.items()))
    st.markdown("\n".join(f"- **{v}**: {line}" for v, line in ctx.VARIANT_HELP.items()))
single, dataset = st.tabs(["Single triple", "Dataset (UCM)"])


def percent(frame: pd.DataFrame) -> pd.DataFrame:
    """acc@k columns as percentages (shown with one decimal and a % sign)."""
    frame = frame.copy()
    for c in [c for c in frame.columns if c.startswith("acc@")]:
        frame[c] = 100 * frame[c]
    return frame


PCT = {f"acc@{k}": st.column_config.NumberColumn(f"acc@{k}", format="%.1f %%") for k in (1, 5, 10)}


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
    variant = right.selectbox("Variant", ctx.VARIANTS, key="ctx_variant", help=ctx.VARIANT_HELP["real"])
    right.caption(ctx.VARIANT_HELP[variant])
    perms = right.number_input("Permutations", 1, 10, 3, key="ctx_perms", disabled=variant != "knowledge-random")
    seed = right.number_input("Seed", 0, 10**6, 0, key="ctx_seed")
    st.caption(f"Prompt: **{ui.md(query.text(model.mask_token))}** — golds: {ui.md(', '.join(query.golds))}")

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
        shown_inputs = [ui.chart_text(t) for t in rows.input]
        shown_added = [ui.chart_text(t) if t else "" for t in rows.added]
        for col, name in (("rank_target", "O_t"), ("mean_rank_cor", "mean O_cor"), ("mean_rank_incor", "mean O_incor")):
            fig.add_scatter(x=rows.step, y=rows[col], name=name, mode="lines+markers", customdata=shown_inputs,
                            hovertemplate="step %{x}: rank %{y}<br>%{customdata}<extra>" + name + "</extra>")
        colours = [ROLE_COLOURS.get(r, "#777") for r in rows.added_role]
        fig.add_scatter(x=rows.step, y=rows.rank_added, name="O_a (just added)", mode="markers",
                        marker=dict(size=12, color=colours, symbol="diamond"), text=shown_added,
                        hovertemplate="step %{x}: %{text} rank %{y}<extra>O_a</extra>")
        # integer axes: steps are whole segments, ranks whole places
        fig.update_yaxes(type="log", autorange="reversed", title="rank at [MASK] (1 = best)", tickformat="d")
        fig.update_xaxes(tickformat="d", dtick=max(1, -(-len(rows) // 20)), title="step (segments added)")
        fig.update_layout(height=430, margin=dict(l=0, r=0, t=30, b=0))
        st.plotly_chart(fig, key="ctx_curve")
        st.markdown(f"**{ui.md(result.target)}** ({'negative target' if result.negative else 'target'}), "
                    f"{result.variant}. {result.ucm_text()}")
        for notice in result.notices:  # one summary line per run, not one per input
            st.warning(notice)
        st.dataframe(rows[["step", "added", "added_role", "rank_target", "rank_added", "rc_target", "rc_added",
                           "rc_cor", "rc_incor"]], hide_index=True, key="ctx_rc")
        with st.expander("Inputs input_0 … input_n"):
            st.dataframe(rows[["step", "input"]], hide_index=True)

with dataset:
    kinds = {"corpus": "Real contexts from a corpus (the paper's experiment)", "kb": ctx.KB_LABEL}
    files = {ctx.short_name(f): f for f in ctx.corpus_files()}
    kind = st.radio("Contexts", list(kinds), format_func=kinds.get, key="ctx_d_kind", horizontal=True,
                    index=0 if files else 1)
    source = "kb"
    if kind == "corpus" and not files:
        st.info("No corpus file found: set PROBEKIT_CORPORA_DIR to a folder of text files, one sentence a line.")
    elif kind == "corpus":
        c1, c2, c3 = st.columns([3, 1, 1])
        chosen = c1.multiselect("Corpora", list(files), default=list(files)[:1], key="ctx_d_corpora")
        window = c2.number_input("Lines either side", 0, 20, 0, key="ctx_d_window",
                                 help="0: a context is one line holding S and O_t; N: the N lines around an O_t line")
        most = c3.number_input("Contexts per triple", 1, 50, 5, key="ctx_d_most")
        st.caption("Every gold answer of a query is a target O_t; its contexts are lines mentioning both S and O_t. "
                   "The shipped corpora are single short sentences (10 × 10k lower-cased PubMed lines and a "
                   "Wikipedia set), so few triples find a context: coverage is low (all ten PubMed files: 178 of "
                   "MedLAMA's 43,647 triples, 0.4 %), and a sentence rarely holds a second correct object, so UCM "
                   "rests on few steps.")
        if chosen:
            source = ctx.CorpusScan([files[c] for c in chosen], window=int(window), limit=int(most),
                                    name=", ".join(chosen))
    else:
        st.caption("Knowledge-only contexts from the KB for every query with ≥ 2 golds: O_t = first gold in the "
                   "middle, other golds (O_cor) and as many sampled same-relation tails (O_incor) around it, "
                   "shuffled (seeded). Not retrieved text: a fallback when no corpus holds the facts.")
    c1, c2, c3 = st.columns(3)
    rels = c1.multiselect("Relations", ds.relations, key="ctx_d_rels", placeholder="all relations")
    limit = c2.number_input("Queries per relation (seeded sample; 0 = all)", 0, 1000, 20, key="ctx_d_limit")
    variants = ctx.DATASET_VARIANTS if kind == "corpus" else ctx.KNOWLEDGE_VARIANTS
    d_variant = c3.selectbox("Variant", variants, key="ctx_d_variant")
    c3.caption(ctx.VARIANT_HELP[d_variant])
    negative = c1.checkbox("Also negative target", True, key="ctx_d_neg", help=ctx.VARIANT_HELP["negative-target"])
    save = c2.checkbox("Store the run", True, key="ctx_d_save")
    job = st.session_state.get("ctx_d_job")
    running = job is not None and not job.finished
    no_source = kind == "corpus" and source == "kb"
    if st.button("Run dataset mode", type="primary", key="ctx_d_run", disabled=running or no_source):
        with ui.guard("Dataset run"):
            st.session_state.ctx_d_job = ctx.start_dataset(
                model, ds, contexts=source, probe=probe, relations=rels or None, limit=int(limit) or None,
                negative=negative, variant=d_variant, save=save, label=ui.model_label())
            st.rerun()
    ui.job_panel("ctx_d_job", stop_key="ctx_d_cancel")
    if job is not None and job.finished and st.session_state.get("ctx_d_seen") is not job:
        st.session_state.ctx_d_seen = job
        if job.status == "done":
            st.session_state.ctx_d_result = job.result
            st.session_state.ctx_d_saved = job.result.settings.get("run_id")
    if job is not None and job.finished and job.status != "done":
        (st.warning if job.status == "cancelled" else st.error)(job.error or job.status)
    res = st.session_state.get("ctx_d_result")
    if res is not None:
        st.markdown(f"{res.settings['n_queries']} queries, {res.settings['variant']}, in {res.seconds:.1f} s"
                    + (f" — stored as `{st.session_state.ctx_d_saved}`" if st.session_state.get("ctx_d_saved") else ""))
        cov = res.coverage
        if res.settings.get("contexts") != "kb" and cov:
            st.markdown(f"**Coverage**: {cov['with_context']:,} of {cov['triples']:,} triples (S, R, O_t) found a "
                        f"context ({100 * cov['share']:.1f} %); {cov['contexts']:,} contexts used.")
        ucm, acc = ctx.summary_frames(res.summary)
        for mode, summ in res.summary.items():
            st.caption(f"UCM_m, {mode}: {ctx.ucm_sentence(summ['ucm_m'])}")
        if len(ucm) and ucm.n.sum():
            st.plotly_chart(ucm_bars(ucm, "relation", facet="mode"), key="ctx_d_ucm")
        elif not res.rows:
            st.info("No triple found a usable context: nothing was ranked. Try more corpora or a wider window.")
        if len(acc):
            st.dataframe(percent(acc), hide_index=True, key="ctx_d_acc", column_config=PCT)
            st.caption("acc@k (macro, %) with the prompt alone (none) and with the whole context (full), per context.")
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
                ui.download("Download CSV", lambda: context_runs.steps_frame(exp).to_csv(index=False).encode(),
                            memo=("context", exp, "csv"), file_name=f"{exp}.csv", mime="text/csv",
                            key="ctx_d_download")
