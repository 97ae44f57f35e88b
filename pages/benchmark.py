"""Benchmark: probe a whole dataset with one or more models in the background, store the runs, and read them
as MedLAMA does (Table 4: full vs hard; Fig. 5: per relation; Fig. 3: by gold-answer length)."""

import plotly.express as px
import streamlit as st

from pages import _bench
from pages import _ui as ui
from probekit import rewire
from probekit.bench import runs, views
from probekit.metrics import compare as rm
from probekit.metrics import intervals as ci
from probekit.metrics.accuracy import COUNTINGS, DEFAULT_COUNTING, counting_label
from probekit.metrics.registry import METRICS, hit_depth, metric_names
from probekit.probes import get_probe, probes_for

ui.title("Benchmark")
if goto := st.session_state.pop("bm_goto", None):
    st.switch_page("pages/probe.py", query_params=goto)
_bench.restore_link()  # a shared link opens on its runs and view
model, ds = ui.current_model(), ui.current_dataset()
if model is None or ds is None:
    st.stop()


# ---- settings and start: folded once runs are stored, so their results come first (a 1024×768 screen too)
job = st.session_state.get("bm_job")
running = job is not None and not job.finished
listed = sweeps = None
with ui.guard("Stored runs"):
    listed = runs.list_runs()
    sweeps = rewire.stored_sweeps()
with st.expander("New run: settings and Start", icon=":material/tune:",
                 expanded=running or listed is None or listed.empty):
    c1, c2, c3 = st.columns([3, 2, 2])
    c1.markdown(f"**{ui.md(ui.model_label())}** on **{ui.md(ds.name)}** ({len(ds):,} queries, "
                f"{len(ds.relations)} relations)")
    extra = c1.text_input("Also benchmark (model ids or folders, comma-separated)", key="bm_extra",
                          persist_state="session",
                          placeholder="bert-base-uncased, dmis-lab/biobert-v1.1")
    probe = get_probe(c2.selectbox("Probe", probes_for(model), key="bm_probe", persist_state="session"))
    vocab = ui.vocab_picker(probe, key="bm_vocab", container=c2,
                            help="heads+tails of the dataset (MedLAMA's reference), all tails, each relation's "
                                 "tails, or a vocabulary built with `probekit vocab build`; each probe opens on its "
                                 "own (likelihood: each relation's answers)")
    k = int(c3.number_input("k (top-k kept per query)", 1, 100, 10, key="bm_k", persist_state="session"))
    opts = ui.probe_option_widgets(probe, key="bm", columns=3)  # in rows: Start stays on screen at 1024×768
    ids = [m.strip() for m in extra.split(",") if m.strip()]
    inputs = {"models": (model.id, *ids), "dataset": (ds.name, ds.version, len(ds)), "probe": probe.name,
              "options": opts, "vocab": vocab, "k": k}
    if st.button("Start", type="primary", icon=":material/play_arrow:", key="bm_start", disabled=running):
        ui.forget("bm_result")
        with ui.guard("Starting the benchmark"):
            st.session_state.bm_job = runs.start_benchmark([model, *ids], ds, probe=probe, options=opts, vocab=vocab,
                                                           k=k, device=ui.selected_device())
            st.session_state.bm_job.inputs = inputs
            st.rerun()

ui.job_panel("bm_job", stop_key="bm_cancel")
if job is not None and job.finished and st.session_state.get("bm_seen") is not job:
    st.session_state.bm_seen = job
    ui.keep("bm_result", getattr(job, "inputs", inputs), job)
    if job.status == "done":
        st.session_state.bm_sel = list(dict.fromkeys(job.result))  # the runs just finished are the ones shown
        st.toast(f"Benchmark finished in {job.elapsed:.0f} s", icon=":material/check:")
finished = ui.kept("bm_result", inputs, note=False)  # its message only while the settings are the job's
if finished is not None and finished.status != "done":
    (st.warning if finished.status == "cancelled" else st.error)(ui.message(finished.error or finished.status))

# ---- stored runs (listed above: a finished job's runs are stored before the rerun it triggers)
if listed is None or listed.empty:
    st.info("No stored runs yet: choose the settings above and press Start.")
    st.stop()
info = listed.set_index("run_id")
names = views.run_names(listed, sweeps)
st.session_state.bm_sel = views.keep_known(st.session_state.get("bm_sel"), names) or views.default_runs(listed,
                                                                                                        sweeps)
selected = st.multiselect("Runs to show", list(names), key="bm_sel", persist_state="session", format_func=names.get,
                          help="Checkpoint-sweep points are listed after the other runs, as 'sweep … › step N'.")
with st.expander(f"All stored runs ({len(listed)}; accuracy in %)"):
    accs = [c for c in listed.columns if c.split(" ", 1)[-1] in METRICS]
    st.dataframe(views.styled(views.percent(listed, accs), numbers=accs), hide_index=True, key="bm_list")
if not selected:
    st.info("Pick the runs to show.")
    st.stop()
unfinished = [f"{names[r]}: {info.status[r]}" for r in selected if info.status[r] != "done"]
if unfinished:  # a run's state is said here, not in its picker label (which must not change under a selection)
    st.caption("Not finished: " + "; ".join(ui.md(u) for u in unfinished))
loaded = {}
with ui.guard("Loading runs"):
    short = rm.short_labels({r: names[r] for r in selected})
    loaded = {short[r]: runs.load_run(r) for r in selected if info.n_done[r]}  # finished runs are memoised
if len(loaded) < len(selected):
    st.caption("Runs without results yet (cancelled before their first relation) are left out.")
if not loaded:
    st.stop()
frames = {label: run.frame for label, run in loaded.items()}
hard_set = {label for label, run in loaded.items() if run.hard_set}

st.subheader("Accuracy (%): full set vs its hard subset")
st.session_state.setdefault("bm_counting", DEFAULT_COUNTING)
counting = st.segmented_control("Counting", list(COUNTINGS), key="bm_counting",
                                help="; ".join(f"{k}: {v}" for k, v in COUNTINGS.items())) or DEFAULT_COUNTING
depths = {label: run.meta.get("answers_per_query") for label, run in loaded.items()}
table = rm.full_hard_table(frames, hard_set=hard_set, counting=counting, depths=depths)
pct = [c for c in table.columns if c.split(" ", 1)[-1] in METRICS]  # not the "… [lo, hi]" text merged below
table = views.percent(table, pct)
shown = st.session_state.get("bm_show_metric") or "acc@10"  # its intervals only: the table stays 1280 px wide
table = table.merge(ci.full_hard_intervals(frames, metrics=[shown], hard_set=hard_set, counting=counting,
                                           depths=depths), on=["run", "average"], how="left")
columns, widths = _bench.accuracy_columns(table, first=shown, metrics=metric_names())
st.dataframe(views.styled(table[columns], numbers=pct), hide_index=True, key="bm_table", column_config=widths)
present = views.subsets_of(run.hard_set for run in loaded.values())
st.caption(f"Every run here by one rule: {counting_label(counting)}. Macro = mean over relations, micro = over "
           "the items counted; MRR = mean reciprocal rank of the gold (0 when it is not ranked). \u2013 = not defined "
           "(a method with one answer per query has no acc@5/10). "
           + " ".join(views.subset_note(s) for s in present) + " " + ci.interval_note(shown))
_bench.subject_note(loaded)
for label, run in loaded.items():  # a top-k served by an approximate index says so, with its measured recall
    if run.meta.get("search"):
        st.caption(f"{ui.md(label)}: {ui.md(run.meta['search'])}")

c1, c2 = st.columns(2)
st.session_state.setdefault("bm_show_metric", "acc@10")
metric = c1.segmented_control("Metric", metric_names(), key="bm_show_metric", persist_state="session") or "acc@10"
if st.session_state.get("bm_show_set") not in present:
    st.session_state.bm_show_set = present[0]
which = c2.segmented_control("Queries", present, key="bm_show_set", persist_state="session") or present[0]
per = rm.relation_accuracy(frames, metric=metric, which=which, hard_set=hard_set, counting=counting, depths=depths)
bars = ci.relation_intervals(frames, metric=metric, which=which, hard_set=hard_set, counting=counting,
                             depths=depths)  # its rows in relation_accuracy's order: an error bar per bar
per = per.assign(value=per.value * 100, relation=per.relation.map(ui.chart_text), run=per.run.map(ui.chart_text),
                 up=(bars.hi.to_numpy() - per.value.to_numpy()) * 100,
                 down=(per.value.to_numpy() - bars.lo.to_numpy()) * 100, interval=bars["[lo, hi]"].to_numpy())
fig = px.bar(per, x="relation", y="value", color="run", barmode="group", hover_data=["n", "interval"],
             error_y="up", error_y_minus="down", labels={"value": f"{metric} (%), {which}, counting: {counting}",
                                                         "interval": "95 % interval (%)"})
st.plotly_chart(ui.legible(fig, height=440, percent_axis="y"), key="bm_rel_chart")
by_len = rm.accuracy_by_length({ui.chart_text(lab): rm.subset(f, which, hard_set=lab in hard_set)
                                for lab, f in frames.items()}, metrics=[metric])
by_len[metric] *= 100
fig = px.bar(by_len, x="bin", y=metric, color="run", barmode="group", hover_data=["n"],
             labels={"bin": "gold answer length (characters, mean over a query's golds)",
                     metric: f"{metric} (%), {which}, counting: query"})
st.plotly_chart(ui.legible(fig, height=340, legend=False, percent_axis="y"), key="bm_len_chart")

# ---- drill down: one relation's queries
st.subheader("Queries of a relation")
c1, c2 = st.columns(2)
run_label = c1.selectbox("Run", list(loaded), key="bm_drill_run", persist_state="session")
run = loaded[run_label]
relations = sorted(run.frame.relation.unique())
if (linked := st.session_state.pop("bm_link_rel", None)) in relations:  # a shared link's drill-down
    st.session_state.bm_drill_rel = linked
rel = c2.selectbox("Relation", relations, key="bm_drill_rel", persist_state="session")
queries = rm.relation_queries(run.frame, rel, k=hit_depth(metric))
picked = st.dataframe(views.styled(queries, ranks=["best rank"]), hide_index=True, key="bm_queries",
                      on_select="rerun", selection_mode="single-row")
rows = picked.selection.rows if picked is not None else []
if rows and run.meta.get("dataset_spec"):
    qid = queries.query_id.iloc[rows[0]]
    st.button(f"Open {qid} on the Probe page", icon=":material/open_in_new:", key="bm_open",
              on_click=_bench.open_on_probe, args=(run.meta, rel, qid))
elif not run.meta.get("dataset_spec"):
    st.caption("This run's dataset was uploaded; it cannot be reopened on the Probe page.")
else:
    st.caption("Select a row to open that query on the Probe page.")

st.subheader("Export")
done = tuple((r, int(info.n_done[r])) for r in selected if info.n_done[r])  # a run's file changes only as it grows
cols = st.columns(3)
for col, fmt in zip(cols, ("csv", "parquet")):
    with col:
        ui.download(f"Run results ({'CSV' if fmt == 'csv' else 'Parquet'})", key=f"bm_{fmt}",
                    make=lambda fmt=fmt: runs.frame_bytes(runs.export_frame(run), fmt),
                    memo=("run", run.run_id, len(run.frame), fmt), file_name=f"{run.run_id}.{fmt}")
with cols[2]:
    ui.download("Accuracy table (CSV)", lambda: runs.frame_bytes(table, "csv"), memo=("bm_table", done),
                file_name="accuracy.csv", mime="text/csv", key="bm_table_csv")
ui.share_link({"runs": ",".join(selected), "metric": metric, "set": which, "relation": rel})
