"""Layers: retrieval probing with the first L layers (hidden_states[L], L = 1..N) per relation, as MedLAMA
Fig. 6–7: a relation × layer heatmap and one line per relation, the best layer per relation marked."""

import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from pages import _ui as ui
from probekit.bench import layers, runs
from probekit.datasets import VOCABS

ui.title("Layer-wise probing")
model, ds = ui.current_model(), ui.current_dataset()
if model is None or ds is None:
    st.stop()

job = st.session_state.get("ly_job")
running = job is not None and not job.finished
with st.container(border=True):
    st.markdown(f"**{ui.model_label()}** ({model.num_layers} layers) on **{ds.name}** ({len(ds):,} queries); "
                "candidates and queries are encoded once for all layers.")
    c1, c2, c3 = st.columns(3)
    pooling = c1.selectbox("Pooling", [None, "cls", "mean"], key="ly_pooling",
                           format_func=lambda p: p or ui.none_label("pooling"))
    similarity = c2.selectbox("Similarity", ["cosine", "l2", "dot"], key="ly_similarity")
    vocab = c3.radio("Candidates", VOCABS, key="ly_vocab", horizontal=True)
    lo, hi = c1.slider("Layers", 0, model.num_layers, (1, model.num_layers), key="ly_range",
                       help="0 = the embedding output")
    if st.button("Run", type="primary", icon=":material/play_arrow:", key="ly_run", disabled=running):
        with ui.guard("Starting the layer sweep"):
            st.session_state.ly_job = layers.start_layers(
                model, ds, layers=list(range(lo, hi + 1)), pooling=pooling,
                similarity=similarity, vocab=vocab)
            st.rerun()


ui.job_panel("ly_job", stop_key="ly_cancel")
if job is not None and job.finished and st.session_state.get("ly_seen") is not job:
    st.session_state.ly_seen = job
    if job.status == "done":
        st.session_state.ly_sel = job.result.run_id
if job is not None and job.finished and job.status != "done":
    (st.warning if job.status == "cancelled" else st.error)(job.error or job.status)

listed = None
with ui.guard("Stored sweeps"):
    listed = layers.list_layer_runs()
if listed is None or listed.empty:
    st.info("No stored layer sweeps yet: press Run.")
    st.stop()
names = {r.run_id: f"{r.label} · layers {r.layers} [{r.run_id[-6:]}]" for r in listed.itertuples()}
if st.session_state.get("ly_sel") not in names:
    st.session_state.ly_sel = listed.run_id[0]
sel = st.selectbox("Sweep", list(names), key="ly_sel", format_func=names.get)
result = layers.load_layer_run(sel)
c1, c2 = st.columns(2)
k = c1.segmented_control("acc@", [1, 5, 10], default=1, key="ly_k") or 1
which = c2.segmented_control("Queries", ["full", "hard"], default="full", key="ly_set") or "full"
acc = result.accuracy(k=k, subset=which) * 100
if acc.empty:
    st.info(f"No {which} queries in this sweep.")
    st.stop()
best = result.best_layers(k=k, subset=which)
marked = best.dropna(subset=["best layer"]).astype({"best layer": int})  # relations with at least one hit

st.subheader(f"acc@{k} (%) per relation and layer")
fig = px.imshow(acc, aspect="auto", text_auto=".1f", color_continuous_scale="Blues",
                labels={"x": "layer", "y": "relation", "color": f"acc@{k}"})
fig.add_scatter(x=marked["best layer"], y=marked["relation"], mode="markers", name="best layer",
                marker=dict(symbol="star", size=14, color="#c62828", line=dict(width=1, color="white")),
                hovertemplate="%{y}: best layer %{x}<extra></extra>")
fig.update_layout(height=max(320, 28 * len(acc)), margin=dict(l=0, r=0, t=30, b=0), xaxis=dict(dtick=1),
                  legend=dict(orientation="h", y=-0.15))
st.plotly_chart(fig, key="ly_heatmap")

lines = go.Figure()
for rel, row in acc.iterrows():
    lines.add_scatter(x=list(row.index), y=list(row.values), mode="lines+markers", name=rel)
lines.add_scatter(x=marked["best layer"], y=marked["best acc"] * 100, mode="markers", name="best layer",
                  marker=dict(symbol="star", size=13, color="#c62828"), text=marked["relation"],
                  hovertemplate="%{text}: best layer %{x} (%{y:.1f})<extra></extra>")
avg = result.averages(subset=which)
lines.add_scatter(x=list(avg.index), y=list(avg[f"macro acc@{k}"] * 100), mode="lines", name="macro average",
                  line=dict(color="black", width=3, dash="dash"))
lines.update_layout(height=460, margin=dict(l=0, r=0, t=30, b=0), xaxis=dict(title="layer", dtick=1),
                    yaxis_title=f"acc@{k} (%)")
st.plotly_chart(lines, key="ly_lines")

c1, c2 = st.columns(2)
shown = best.assign(**{c: best[c] * 100 for c in ("best acc", "last layer acc", "gain")})
c1.markdown("**Best layer per relation**")
c1.dataframe(shown, hide_index=True, key="ly_best",
             column_config={c: st.column_config.NumberColumn(format="%.2f") for c in ("best acc", "last layer acc",
                                                                                       "gain")})
c2.markdown("**Per layer (%)**")
pct = avg.drop(columns="n") * 100
c2.dataframe(pct.reset_index(), hide_index=True, key="ly_avg",
             column_config={c: st.column_config.NumberColumn(format="%.2f") for c in pct.columns})
st.caption(f"{result.meta.get('model')} · {result.meta.get('dataset')} · {result.meta.get('options')} · "
           f"vocab {result.meta.get('vocab')} · {result.meta.get('seconds') or 0:.1f} s")
d1, d2 = st.columns(2)
d1.download_button("Layer table (CSV)", runs.frame_bytes(result.table, "csv"), file_name=f"{sel}.csv",
                   mime="text/csv", key="ly_csv")
d2.download_button("Layer table (Parquet)", lambda: runs.frame_bytes(result.table, "parquet"),
                   file_name=f"{sel}.parquet", key="ly_parquet")
