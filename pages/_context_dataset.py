"""The Context page's dataset mode: UCM over a dataset on real corpus contexts (or labelled KB contexts), as a
background job; accuracy in %; stored runs compared. The result shown is the one computed from the settings on
screen."""

import pandas as pd
import plotly.express as px
import streamlit as st

from pages import _ui as ui
from probekit import context as ctx
from probekit.context import store as context_runs
from probekit.metrics.accuracy import DEFAULT_COUNTING, counting_label
from probekit.metrics.intervals import interval_note
from probekit.metrics.registry import metric_names

UCM_COLOURS = {"U": "#2e7d32", "C": "#9e9e9e", "M": "#c62828"}
PCT = {n: st.column_config.NumberColumn(n, format="%.1f %%") for n in metric_names()}


def percent(frame: pd.DataFrame) -> pd.DataFrame:
    """Metric columns (acc@k, MRR: every registered one) as percentages (one decimal and a % sign)."""
    frame = frame.copy()
    for c in [c for c in frame.columns if c in PCT]:
        frame[c] = 100 * frame[c]
    return frame


def ucm_bars(frame: pd.DataFrame, x: str, facet: str | None = None):
    """U/C/M shares in % of the steps that added an O_cor, stacked."""
    long = frame.melt(id_vars=[c for c in frame.columns if c not in "UCM"], value_vars=list("UCM"), var_name="share")
    long["value"] = 100 * long["value"]
    long[x] = [ui.chart_text(v) for v in long[x]]
    fig = px.bar(long, x=x, y="value", color="share", facet_col=facet, color_discrete_map=UCM_COLOURS,
                 hover_data=["n"], labels={"value": "steps adding an O_cor (%)"})
    fig.update_layout(barmode="stack")
    return ui.legible(fig, height=440, percent_axis="y")


def settings(ds):
    """The dataset-mode widgets; returns (start keyword arguments, the context source or None)."""
    kinds = {"corpus": "Real contexts from a corpus (the paper's experiment)", "kb": ctx.KB_LABEL}
    files = {ctx.short_name(f): f for f in ctx.corpus_files()}
    kind = st.radio("Contexts", list(kinds), format_func=kinds.get, key="ctx_d_kind",
                    persist_state="session", horizontal=True,
                    index=0 if files else 1)
    source, described = "kb", ("kb",)
    if kind == "corpus" and not files:
        st.info("No corpus file found: set PROBEKIT_CORPORA_DIR to a folder of text files, one sentence a line.")
        source = None
    elif kind == "corpus":
        c1, c2, c3 = st.columns([3, 1, 1])
        chosen = c1.multiselect("Corpora", list(files), default=list(files)[:1], key="ctx_d_corpora",
                                persist_state="session")
        window = c2.number_input("Lines either side", 0, 20, 0, key="ctx_d_window", persist_state="session",
                                 help="0: a context is one line holding S and O_t; N: the N lines around an O_t line")
        most = c3.number_input("Contexts per triple", 1, 50, 5, key="ctx_d_most", persist_state="session")
        st.caption("Every gold answer of a query is a target O_t; its contexts are lines mentioning both S and O_t. "
                   "The shipped corpora are single short sentences (10 × 10k lower-cased PubMed lines and a "
                   "Wikipedia set), so few triples find a context: coverage is low (all ten PubMed files: 178 of "
                   "MedLAMA's 43,647 triples, 0.4 %), and a sentence rarely holds a second correct object, so UCM "
                   "rests on few steps.")
        source = ctx.CorpusScan([files[c] for c in chosen], window=int(window), limit=int(most),
                                name=", ".join(chosen)) if chosen else None
        described = ("corpus", tuple(chosen), int(window), int(most))
    else:
        st.caption("Knowledge-only contexts from the KB for every query with ≥ 2 golds: O_t = first gold in the "
                   "middle, other golds (O_cor) and as many sampled same-relation tails (O_incor) around it, "
                   "shuffled (seeded). Not retrieved text: a fallback when no corpus holds the facts.")
    c1, c2, c3 = st.columns(3)
    rels = c1.multiselect("Relations", ds.relations, key="ctx_d_rels",
                          persist_state="session", placeholder="all relations")
    limit = c2.number_input("Queries per relation (seeded sample; 0 = all)", 0, 1000, 20, key="ctx_d_limit",
                            persist_state="session")
    variant = c3.selectbox("Variant", ctx.DATASET_VARIANTS if kind == "corpus" else ctx.KNOWLEDGE_VARIANTS,
                           key="ctx_d_variant", persist_state="session")
    c3.caption(ctx.VARIANT_HELP[variant])
    negative = c1.checkbox("Also negative target", True, key="ctx_d_neg",
                           persist_state="session", help=ctx.VARIANT_HELP["negative-target"])
    save = c2.checkbox("Store the run", True, key="ctx_d_save", persist_state="session")
    kw = dict(relations=rels or None, limit=int(limit) or None, negative=negative, variant=variant, save=save)
    return kw, source, described


SETTINGS = "Contexts, relations and variant"


def draw(model, ds, probe: str) -> None:
    """The run's result first, its settings folded under it once there is one (the UCM bars sat under ~450 px of
    settings at 1024×768), open while nothing was computed or a run goes on; the stored runs last."""
    box = st.container(key="ctx_d_result")
    job = st.session_state.get("ctx_d_job")
    running = job is not None and not job.finished
    with st.expander(SETTINGS, icon=":material/tune:",
                     expanded=running or "ctx_d_result" not in st.session_state):
        kw, source, described = settings(ds)
        inputs = {**{k: v for k, v in kw.items() if k != "save"}, "contexts": described, "probe": probe,
                  "model": model.id, "dataset": st.session_state.get(ui.DATASET_KEY), "device": ui.selected_device()}
        if st.button("Run dataset mode", type="primary", key="ctx_d_run", disabled=running or source is None):
            with ui.guard("Dataset run"):
                ui.forget("ctx_d_result")
                st.session_state.ctx_d_job = ctx.start_dataset(model, ds, contexts=source, probe=probe,
                                                               label=ui.model_label(), **kw)
                st.session_state.ctx_d_job.inputs = inputs
                st.rerun()
    with box:
        ui.job_panel("ctx_d_job", stop_key="ctx_d_cancel")
        if job is not None and job.finished and st.session_state.get("ctx_d_seen") is not job:
            st.session_state.ctx_d_seen = job
            if job.status == "done":
                ui.keep("ctx_d_result", getattr(job, "inputs", inputs), job.result)
        if job is not None and job.finished and job.status != "done":
            (st.warning if job.status == "cancelled" else st.error)(ui.message(job.error or job.status))
        res = ui.kept("ctx_d_result", inputs)
        if res is not None:
            result(res)
    with ui.guard("Stored runs"):
        stored()


def result(res) -> None:
    saved = res.settings.get("run_id")
    st.markdown(f"{res.settings['n_queries']} queries, {res.settings['variant']}, in {res.seconds:.1f} s"
                + (f" — stored as `{saved}`" if saved else ""))
    cov = res.coverage
    if res.settings.get("contexts") != "kb" and cov:
        st.markdown(f"**Coverage**: {cov['with_context']:,} of {cov['triples']:,} triples (S, R, O_t) found a "
                    f"context ({100 * cov['share']:.1f} %); {cov['contexts']:,} contexts used.")
    ucm, acc = ctx.summary_frames(res.summary)
    for mode, summ in res.summary.items():
        st.caption(f"UCM_m, {mode}: {ctx.ucm_sentence(summ['ucm_m'])}")
        if summ.get("name_overlap_triples"):
            w = summ["without_name_overlap"]
            acc1 = (f"; acc@1 without → with context {100 * w['acc']['none']['macro']['acc@1']:.1f} → "
                    f"{100 * w['acc']['full']['macro']['acc@1']:.1f} %" if w["acc"] else "")
            st.caption(f"Without the {summ['name_overlap_triples']} facts whose object is in the subject's name "
                       f"(MedLAMA's hardness rule; {w['n_triples']} left): {ctx.ucm_sentence(w['ucm_m'])}{acc1}")
    if len(ucm) and ucm.n.sum():
        st.plotly_chart(ucm_bars(ucm, "relation", facet="mode"), key="ctx_d_ucm")
    elif not res.rows:
        st.info("No triple found a usable context: nothing was ranked. Try more corpora or a wider window.")
    if len(acc):
        st.dataframe(percent(acc), hide_index=True, key="ctx_d_acc", column_config=PCT)
        st.caption("acc@k and MRR (macro, %) with the prompt alone (none) and with the whole context (full), per "
                   f"context; {counting_label(DEFAULT_COUNTING)}. {interval_note(None, ['macro'])}.")


def stored() -> None:
    runs = context_runs.list_runs()
    if not len(runs):
        return
    st.subheader("Stored runs")
    ids = st.multiselect("Compare runs", list(runs.run_id), default=list(runs.run_id[:3]), key="ctx_d_runs",
                         persist_state="session",
                         format_func=lambda r: f"{runs.set_index('run_id').label[r]} ({r})")
    if ids:
        table = context_runs.ucm_table(ids)
        table["run"] = table.label + " · " + table.run_id.str[-6:]
        st.plotly_chart(ucm_bars(table[table.relation == "UCM_m"], "run", facet="mode"), key="ctx_d_cmp")
        st.dataframe(runs[runs.run_id.isin(ids)], hide_index=True, key="ctx_d_list")
        exp = st.selectbox("Export the steps of", ids, key="ctx_d_export", persist_state="session")
        ui.download("Download CSV", lambda: context_runs.steps_frame(exp).to_csv(index=False).encode(),
                    memo=("context", exp, "csv"), file_name=f"{exp}.csv", mime="text/csv", key="ctx_d_download")
