"""Layers: retrieval probing with the first L layers (hidden_states[L], L = 1..N) per relation, as MedLAMA
Fig. 6–7: a relation × layer heatmap and one line per relation, the best layer per relation marked."""

import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from pages import _bench
from pages import _ui as ui
from probekit.bench import layers, runs, views
from probekit.datasets import VOCABS
from probekit.index import SIMILARITIES
from probekit.metrics.accuracy import counting_label
from probekit.metrics.intervals import interval_note, rank_table_intervals
from probekit.metrics.registry import metric_from_params, metric_names

ui.title("Layer-wise probing")
model, ds = ui.current_model(), ui.current_dataset()
if model is None or ds is None:
    st.stop()
if not st.session_state.get("_ly_link"):  # a shared link opens on its sweep, options and view
    st.session_state._ly_link = True
    qp = st.query_params
    lo, _, hi = (qp.get("layers") or "").partition("-")
    ok = {"ly_sel": qp.get("sweep"), "ly_pooling": qp.get("pooling") in ("cls", "mean"), "ly_set": qp.get("set"),
          "ly_similarity": qp.get("similarity") in SIMILARITIES, "ly_vocab": qp.get("vocab") in VOCABS,
          "ly_metric": metric_from_params(qp) is not None,
          "ly_range": lo.isdigit() and hi.isdigit() and int(lo) <= int(hi) <= model.num_layers}
    st.session_state.update({key: metric_from_params(qp) if key == "ly_metric" else (int(lo), int(hi))
                             if key == "ly_range" else
                             qp[{"ly_sel": "sweep"}.get(key, key[3:])] for key, good in ok.items() if good})
if not 0 <= min(st.session_state.get("ly_range", (0, 99))) <= max(st.session_state.get("ly_range", (0, 99))) \
        <= model.num_layers:  # first visit, or a model with fewer layers
    st.session_state.ly_range = (1, model.num_layers)

job = st.session_state.get("ly_job")
running = job is not None and not job.finished
stored_before = None
with ui.guard("Stored sweeps"):
    stored_before = layers.list_layer_runs()
# the settings fold once sweeps are stored, so the heatmap comes first (a 1024×768 screen too)
with st.expander("New sweep: settings and Run", icon=":material/tune:",
                 expanded=running or stored_before is None or stored_before.empty):
    st.markdown(f"**{ui.md(ui.model_label())}** ({model.num_layers} layers) on **{ui.md(ds.name)}** ({len(ds):,} "
                "queries); candidates and queries are encoded once for all layers.")
    c1, c2, c3 = st.columns(3)
    pooling = ui.choice_box(c1, "Pooling", [None, "cls", "mean"], key="ly_pooling", persist_state="session",
                            format_func=lambda v: views.option_text("pooling", v))
    similarity = c2.selectbox("Similarity", list(SIMILARITIES), key="ly_similarity", persist_state="session")
    vocab = c3.radio("Candidates", VOCABS, key="ly_vocab", persist_state="session", horizontal=True)
    lo, hi = c1.slider("Layers", 0, model.num_layers, key="ly_range", persist_state="session",
                       help="0 = the embedding output")
    exclude = c2.checkbox("Exclude subject", key="ly_exclude", persist_state="session",
                          help="leave each query's own subject out of its candidates (an untuned encoder ranks it "
                               "first, so acc@1 reads 0 with it in)")
    choice = {"layers": list(range(lo, hi + 1)), "pooling": pooling, "similarity": similarity, "vocab": vocab,
              "exclude_subject": exclude}
    inputs = {"model": (model.id, model.revision), "dataset": (ds.name, ds.version, len(ds)), **choice}
    if st.button("Run", type="primary", icon=":material/play_arrow:", key="ly_run", disabled=running):
        ui.forget("ly_result")
        with ui.guard("Starting the layer sweep"):
            st.session_state.ly_job = layers.start_layers(model, ds, **choice)
            st.session_state.ly_job.inputs = inputs
            st.rerun()

ui.job_panel("ly_job", stop_key="ly_cancel")
if job is not None and job.finished and st.session_state.get("ly_seen") is not job:
    st.session_state.ly_seen = job
    ui.keep("ly_result", getattr(job, "inputs", inputs), job)
    if job.status == "done":
        st.session_state.ly_sel = job.result.run_id
finished = ui.kept("ly_result", inputs, note=False)  # its message only while the settings are the job's
if finished is not None and finished.status != "done":
    (st.warning if finished.status == "cancelled" else st.error)(ui.message(finished.error or finished.status))

listed, matching = stored_before, None  # a finished sweep is stored before the rerun it triggers
with ui.guard("Stored sweeps"):
    matching = layers.find_layer_run(layers.layer_settings(model, ds, **choice))  # the sweep of these settings
if listed is None or listed.empty:
    st.info("No stored layer sweeps yet: press Run.")
    st.stop()
names = {r.run_id: f"{r.label} · layers {r.layers} [{r.run_id[-6:]}]" for r in listed.itertuples()}
if matching and st.session_state.get("_ly_inputs") != inputs:  # settings changed: show their sweep if stored
    st.session_state.ly_sel = matching
st.session_state._ly_inputs = inputs
if st.session_state.get("ly_sel") not in names:
    st.session_state.ly_sel = matching or listed.run_id[0]
sel = st.selectbox("Sweep", list(names), key="ly_sel", persist_state="session", format_func=names.get)
result = layers.load_layer_run(sel)
if sel != matching:
    st.warning("This stored sweep was made with other settings than those above (its own are in the caption "
               "below); press **Run** for these settings.", icon=":material/history:")
present = result.subsets
c1, c2 = st.columns([3, 2])  # the metric's column wide enough for every metric at 1024 px
st.session_state.setdefault("ly_metric", "acc@1")
metric = c1.segmented_control("Metric", metric_names(), key="ly_metric", persist_state="session") or "acc@1"
if st.session_state.get("ly_set") not in present:
    st.session_state.ly_set = present[0]
which = c2.segmented_control("Queries", present, key="ly_set", persist_state="session") or present[0]
st.caption(views.subset_note(which))
_bench.subject_note({result.label: result}, other="tick *Exclude subject* above and press Run")
acc = result.accuracy(metric=metric, subset=which) * 100
best = result.best_layers(metric=metric, subset=which)
marked = best.dropna(subset=["best layer"]).astype({"best layer": int})  # relations with at least one hit
rel_text = {rel: ui.chart_text(rel) for rel in acc.index}

st.subheader(f"{metric} (%) per relation and layer, {which}")
fig = px.imshow(acc.rename(index=rel_text), aspect="auto", color_continuous_scale="Blues", zmin=0,
                labels={"x": "layer", "y": "relation", "color": f"{metric} (%)"})
best_at = dict(zip(marked["relation"], marked["best layer"]))  # the star follows the value in its own cell, so
cell_text = [[("–" if v != v else f"{v:.1f}") + (" ★" if best_at.get(rel) == layer else "")  # the two never collide
              for layer, v in row.items()] for rel, row in acc.iterrows()]
fig.update_traces(text=cell_text, texttemplate="%{text}",
                  hovertemplate="%{y}, layer %{x}: %{z:.1f}%<extra></extra>")
fig.update_layout(xaxis=dict(dtick=1), coloraxis_colorbar=dict(ticksuffix="%"))
st.plotly_chart(ui.legible(fig, height=max(340, 28 * len(acc) + 80)), key="ly_heatmap")

lines = go.Figure()
for rel, row in acc.iterrows():
    lines.add_scatter(x=list(row.index), y=list(row.values), mode="lines+markers", name=rel_text[rel])
lines.add_scatter(x=marked["best layer"], y=marked["best acc"] * 100, mode="markers", name="best layer",
                  marker=dict(symbol="star", size=13, color="#c62828"), text=marked["relation"].map(rel_text),
                  hovertemplate="%{text}: best layer %{x} (%{y:.1f}%)<extra></extra>")
avg = result.averages(subset=which)
ci = rank_table_intervals(result.table, by="layer", metric=metric, subset=which).set_index("layer")  # 95 % each
macro = avg[f"macro {metric}"] * 100
lines.add_scatter(x=list(avg.index), y=list(macro), mode="lines", name="macro average (95 % interval)",
                  line=dict(color="black", width=3, dash="dash"),
                  error_y=dict(type="data", array=list(ci["macro hi"] * 100 - macro), visible=True,
                               arrayminus=list(macro - ci["macro lo"] * 100), color="black"))
lines.update_layout(xaxis=dict(title="layer", dtick=1), yaxis_title=f"{metric} (%), {which}")
st.plotly_chart(ui.legible(lines, height=480, percent_axis="y"), key="ly_lines")

c1, c2 = st.columns(2)
c1.markdown("**Best layer per relation** (%; \"–\": no layer ranks a gold answer)")
c1.dataframe(views.styled(views.percent(best, ["best acc", "last layer acc", "gain"]),
                          numbers=["best acc", "last layer acc", "gain"]), hide_index=True, key="ly_best")
c2.markdown("**Per layer (%)**")
pct = (avg.drop(columns="n") * 100)
numbers = list(pct.columns)
for a in ("macro", "micro"):  # the shown metric's interval beside its value
    pct.insert(pct.columns.get_loc(f"{a} {metric}") + 1, f"{a} {metric} [lo, hi]", ci[f"{a} [lo, hi]"])
pct = pct.reset_index()
c2.dataframe(views.styled(pct, numbers=numbers), hide_index=True, key="ly_avg")
c2.caption(interval_note(metric) + ".")
st.caption(ui.md(views.layer_caption(result.meta)) + f" · {counting_label(layers.COUNTING)}")
d1, d2 = st.columns(2)
for col, fmt in ((d1, "csv"), (d2, "parquet")):
    with col:  # a stored sweep never changes
        ui.download(f"Layer table ({'CSV' if fmt == 'csv' else 'Parquet'})", key=f"ly_{fmt}",
                    make=lambda fmt=fmt: runs.frame_bytes(result.table, fmt), memo=("layers", sel, fmt),
                    file_name=f"{sel}.{fmt}", mime="text/csv" if fmt == "csv" else None)
ui.share_link({"sweep": sel, "metric": metric, "set": which, "pooling": pooling, "similarity": similarity,
               "vocab": vocab, "layers": f"{lo}-{hi}"})
