"""Benchmark: probe a whole dataset with one or more models in the background, store the runs, and read them
as MedLAMA does (Table 4: full vs hard; Fig. 5: per relation; Fig. 3: by gold-answer length)."""

import plotly.express as px
import streamlit as st

from pages import _ui as ui
from probekit import models
from probekit.bench import runs
from probekit.datasets import VOCABS
from probekit.metrics import compare as rm
from probekit.probes import get_probe, probes_for

ui.title("Benchmark")
if goto := st.session_state.pop("bm_goto", None):
    st.switch_page("pages/probe.py", query_params=goto)
model, ds = ui.current_model(), ui.current_dataset()
if model is None or ds is None:
    st.stop()


def open_on_probe(meta: dict, relation: str, query_id: str) -> None:
    """Callback: point the sidebar and the Probe page at this query, then switch pages (in the script)."""
    known = [m for m, _ in models.available_models()]
    st.session_state[ui.MODEL_KEY] = meta["model"] if meta["model"] in known else ui.CUSTOM
    if meta["model"] not in known:
        st.session_state[ui.CUSTOM_KEY] = meta["model"]
    st.session_state[ui.DATASET_KEY] = meta["dataset_spec"]
    st.session_state.update(pk_source="From the dataset", pk_rel=relation, pk_qid=query_id, pk_autorun=True,
                            pk_probe=meta["probe"], pk_vocab=meta["vocab"])
    # the Probe page opens with the run's own options, so it shows what the run stored
    opts = dict(meta.get("options") or {})
    opts.setdefault("exclude_subject", False)
    st.session_state.update({f"pk_opt_{name}": value for name, value in opts.items()})
    st.session_state.bm_goto = {"model": meta["model"], "dataset": meta["dataset_spec"], "relation": relation,
                                "query": query_id}


# ---- settings and start
job = st.session_state.get("bm_job")
running = job is not None and not job.finished
with st.container(border=True):
    c1, c2, c3 = st.columns([3, 2, 2])
    c1.markdown(f"**{ui.model_label()}** on **{ds.name}** ({len(ds):,} queries, {len(ds.relations)} relations)")
    extra = c1.text_input("Also benchmark (model ids or folders, comma-separated)", key="bm_extra",
                          placeholder="bert-base-uncased, dmis-lab/biobert-v1.1")
    probe = get_probe(c2.selectbox("Probe", probes_for(model), key="bm_probe"))
    vocab = c2.radio("Candidates", VOCABS, key="bm_vocab", horizontal=True,
                     help="heads+tails of the dataset (MedLAMA's reference), all tails, or each relation's tails")
    k = int(c3.number_input("k (top-k kept per query)", 1, 100, 10, key="bm_k"))
    opts = ui.probe_option_widgets(probe, key="bm", container=c3)
    if st.button("Start", type="primary", icon=":material/play_arrow:", key="bm_start", disabled=running):
        with ui.guard("Starting the benchmark"):
            ids = [m.strip() for m in extra.split(",") if m.strip()]
            st.session_state.bm_job = runs.start_benchmark([model, *ids], ds, probe=probe, options=opts, vocab=vocab,
                                                           k=k, device=ui.selected_device())
            st.rerun()


ui.job_panel("bm_job", stop_key="bm_cancel")
if job is not None and job.finished and st.session_state.get("bm_seen") is not job:
    st.session_state.bm_seen = job
    if job.status == "done":
        st.session_state.bm_sel = list(dict.fromkeys(job.result))
        st.toast(f"Benchmark finished in {job.elapsed:.0f} s", icon=":material/check:")
if job is not None and job.finished and job.status != "done":
    (st.warning if job.status == "cancelled" else st.error)(job.error or job.status)

# ---- stored runs
listed = None
with ui.guard("Stored runs"):
    listed = runs.list_runs()
if listed is None or listed.empty:
    st.info("No stored runs yet: choose the settings above and press Start.")
    st.stop()
info = listed.set_index("run_id")
names = {r: f"{info.label[r]} · k={info.k[r]} · {info.vocab[r]} · {info.status[r]} [{r[-6:]}]" for r in info.index}
done = [r for r in listed.run_id if info.status[r] == "done"]
st.session_state.bm_sel = [r for r in st.session_state.get("bm_sel", []) if r in names] or (done or list(names))[:1]
selected = st.multiselect("Runs to show", list(names), key="bm_sel", format_func=names.get)
with st.expander(f"All stored runs ({len(listed)})"):
    st.dataframe(listed, hide_index=True, key="bm_list")
if not selected:
    st.stop()
loaded = {}
with ui.guard("Loading runs"):
    short = rm.short_labels({r: names[r] for r in selected})
    loaded = {short[r]: runs.load_run(r) for r in selected if info.n_done[r]}  # finished runs are memoised
if len(loaded) < len(selected):
    st.caption("Runs without results yet (cancelled before their first relation) are left out.")
if not loaded:
    st.stop()
frames = {label: run.frame for label, run in loaded.items()}

st.subheader("Accuracy (%): full set vs its hard subset")
table = rm.full_hard_table(frames)
pct = [c for c in table.columns if "acc@" in c]
table[pct] = table[pct] * 100
st.dataframe(table, hide_index=True, key="bm_table",
             column_config={c: st.column_config.NumberColumn(format="%.2f") for c in pct})
st.caption("Hard: MedLAMA's hard queries (avg_match and avg_rouge_l < 0.1) within the run; macro = mean over "
           "relations, micro = over queries.")

c1, c2 = st.columns(2)
kk = c1.segmented_control("acc@", [1, 5, 10], default=10, key="bm_show_k") or 10
which = c2.segmented_control("Queries", ["full", "hard"], default="full", key="bm_show_set") or "full"
per = rm.relation_accuracy(frames, k=kk, which=which).assign(acc=lambda d: d.acc * 100)
fig = px.bar(per, x="relation", y="acc", color="run", barmode="group", hover_data=["n"],
             labels={"acc": f"acc@{kk} (%)"})
fig.update_layout(height=420, margin=dict(l=0, r=0, t=30, b=0), legend=dict(orientation="h", y=-0.45))
st.plotly_chart(fig, key="bm_rel_chart")
by_len = rm.accuracy_by_length({lab: rm.subset(f, which) for lab, f in frames.items()}, ks=[kk])
by_len[f"acc@{kk}"] *= 100
fig = px.bar(by_len, x="bin", y=f"acc@{kk}", color="run", barmode="group", hover_data=["n"],
             labels={"bin": "gold answer length (characters, mean over a query's golds)", f"acc@{kk}": f"acc@{kk} (%)"})
fig.update_layout(height=340, margin=dict(l=0, r=0, t=30, b=0), showlegend=False)
st.plotly_chart(fig, key="bm_len_chart")

# ---- drill down: one relation's queries
st.subheader("Queries of a relation")
c1, c2 = st.columns(2)
run_label = c1.selectbox("Run", list(loaded), key="bm_drill_run")
run = loaded[run_label]
rel = c2.selectbox("Relation", sorted(run.frame.relation.unique()), key="bm_drill_rel")
queries = rm.relation_queries(run.frame, rel, k=kk)
picked = st.dataframe(queries, hide_index=True, key="bm_queries", on_select="rerun", selection_mode="single-row")
rows = picked.selection.rows if picked is not None else []
if rows and run.meta.get("dataset_spec"):
    qid = queries.query_id.iloc[rows[0]]
    st.button(f"Open {qid} on the Probe page", icon=":material/open_in_new:", key="bm_open",
              on_click=open_on_probe, args=(run.meta, rel, qid))
elif not run.meta.get("dataset_spec"):
    st.caption("This run's dataset was uploaded; it cannot be reopened on the Probe page.")
else:
    st.caption("Select a row to open that query on the Probe page.")

st.subheader("Export")
c1, c2, c3 = st.columns(3)
c1.download_button("Run results (CSV)", lambda: runs.frame_bytes(runs.export_frame(run), "csv"),
                   file_name=f"{run.run_id}.csv", mime="text/csv", key="bm_csv")
c2.download_button("Run results (Parquet)", lambda: runs.frame_bytes(runs.export_frame(run), "parquet"),
                   file_name=f"{run.run_id}.parquet", key="bm_parquet")
c3.download_button("Accuracy table (CSV)", runs.frame_bytes(table, "csv"), file_name="accuracy.csv",
                   mime="text/csv", key="bm_table_csv")
