"""Compare: two or more stored benchmark runs (models or settings) side by side: per-relation differences,
queries one run gets and another misses, and how alike they rank."""

import plotly.express as px
import streamlit as st

from pages import _ui as ui
from probekit.bench import runs
from probekit.metrics import compare as rm

ui.title("Compare runs")
listed = None
with ui.guard("Stored runs"):
    listed = runs.list_runs(status="done")
if listed is None or len(listed) < 2:
    st.info("Comparing needs at least two finished runs: start them on the Benchmark page "
            "(or `python -m probekit bench --save`).")
    st.stop()
info = listed.set_index("run_id")
names = {r: f"{info.label[r]} · k={info.k[r]} · {info.vocab[r]} [{r[-6:]}]" for r in info.index}
st.session_state.cmp_sel = [r for r in st.session_state.get("cmp_sel", []) if r in names] or list(listed.run_id[:2])
selected = st.multiselect("Runs (the first is the baseline)", list(names), key="cmp_sel", format_func=names.get,
                          max_selections=8)
if len(selected) < 2:
    st.info("Pick at least two runs.")
    st.stop()
frames = {}
short = rm.short_labels({r: names[r] for r in selected})
with ui.guard("Loading runs"):
    frames = {short[r]: runs.load_run(r).frame for r in selected}
if len(frames) < len(selected):
    st.stop()
labels = list(frames)
c1, c2 = st.columns(2)
k = c1.segmented_control("acc@", [1, 5, 10], default=10, key="cmp_k") or 10
which = c2.segmented_control("Queries", ["full", "hard"], default="full", key="cmp_set") or "full"

# ---- per relation
st.subheader(f"acc@{k} per relation and difference to the baseline")
diff = rm.relation_differences(frames, k=k, which=which)
deltas = [c for c in diff.columns if c.startswith("Δ ")]
long = (diff.drop(index="macro")[deltas] * 100).reset_index().melt(id_vars="relation", var_name="run",
                                                                   value_name="points")
long["run"] = long["run"].str[2:]
fig = px.bar(long, x="relation", y="points", color="run", barmode="group",
             labels={"points": f"acc@{k} − baseline (points)"})
fig.update_layout(height=420, margin=dict(l=0, r=0, t=30, b=0), legend=dict(orientation="h", y=-0.45))
st.plotly_chart(fig, key="cmp_diff_chart")
shown = (diff * 100).reset_index()
st.dataframe(shown, hide_index=True, key="cmp_diff",
             column_config={c: st.column_config.NumberColumn(format="%.2f") for c in shown.columns[1:]})
st.caption(f"Baseline: {labels[0]}. Relations missing from a run are empty; 'macro' is the mean over its relations.")

# ---- hit / miss
st.subheader("Queries one run gets and the other misses")
c1, c2 = st.columns(2)
a = c1.selectbox("Run A", labels, index=0, key="cmp_a")
b = c2.selectbox("Run B", labels, index=1, key="cmp_b")
only_a = rm.hit_miss(frames[a], frames[b], k=k, which=which)
only_b = rm.hit_miss(frames[b], frames[a], k=k, which=which)
t1, t2 = st.tabs([f"A gets, B misses ({len(only_a)})", f"B gets, A misses ({len(only_b)})"])
t1.dataframe(only_a, hide_index=True, key="cmp_only_a")
t2.dataframe(only_b, hide_index=True, key="cmp_only_b")

# ---- agreement
st.subheader("Rank agreement")
agree = rm.agreement_table(frames, k=k, which=which)
st.dataframe(agree, hide_index=True, key="cmp_agree", column_config={
    c: st.column_config.NumberColumn(format="%.3f") for c in ("spearman", "kendall", "top1_agreement", "jaccard")})
st.caption(f"Over the queries both runs hold: hit@{k} counts (both / only a / only b / neither); Spearman and "
           f"Kendall τ-b of the best gold ranks (where both rank a gold); share with the same top-1; mean Jaccard "
           f"overlap of the top-{k} names.")
c1, c2 = st.columns(2)
c1.download_button("Per-relation table (CSV)", runs.frame_bytes(shown, "csv"), file_name="compare_relations.csv",
                   mime="text/csv", key="cmp_dl_diff")
c2.download_button("Agreement (CSV)", runs.frame_bytes(agree, "csv"), file_name="compare_agreement.csv",
                   mime="text/csv", key="cmp_dl_agree")
