"""Compare: two or more stored benchmark runs (models or settings) side by side: per-relation differences,
queries one run gets and another misses, and how alike they rank."""

import plotly.express as px
import streamlit as st

from pages import _ui as ui
from probekit import rewire
from probekit.bench import paired as paired_runs
from probekit.bench import runs, views
from probekit.exports import comparison as cmp_export
from probekit.metrics import compare as rm
from probekit.metrics import paired
from probekit.metrics.accuracy import COUNTINGS, DEFAULT_COUNTING, counting_label
from probekit.metrics.registry import hit_depth, metric_from_params, metric_names

ui.title("Compare runs")
if not st.session_state.get("_cmp_link"):  # a shared link opens on its runs and view
    st.session_state._cmp_link = True
    qp = st.query_params
    if qp.get("runs"):
        st.session_state.cmp_sel = qp["runs"].split(",")
    if qp.get("set") in rm.SUBSETS:
        st.session_state.cmp_set = qp["set"]
    if metric_from_params(qp):
        st.session_state.cmp_metric = metric_from_params(qp)
listed = sweeps = None
with ui.guard("Stored runs"):
    listed = runs.list_runs(status="done")
    sweeps = rewire.stored_sweeps()
if listed is None or len(listed) < 2:
    st.info("Comparing needs at least two finished runs: start them on the Benchmark page "
            "(or `probekit bench --save`).")
    st.stop()
names = views.run_names(listed, sweeps)
kept, pair = views.keep_known(st.session_state.get("cmp_sel"), names), []
if not kept:  # by default the newest two runs that can be compared (sharing queries), not merely the newest two
    with ui.guard("Stored runs"):
        pair = paired_runs.default_pair(listed, sweeps)
st.session_state.cmp_sel = kept or pair
selected = st.multiselect("Runs (the first is the baseline)", list(names), key="cmp_sel",
                          persist_state="session", format_func=names.get,
                          max_selections=8, help="Checkpoint-sweep points are listed last, as 'sweep … › step N'.")
if len(selected) < 2:
    st.info("Pick at least two runs." if kept or pair else "No two finished runs share a query (runs of one "
            "dataset do): pick two runs to see them side by side anyway.")
    st.stop()
loaded = {}
short = rm.short_labels({r: names[r] for r in selected})
with ui.guard("Loading runs"):
    loaded = {short[r]: runs.load_run(r) for r in selected}
if len(loaded) < len(selected):
    st.stop()
frames = {label: run.frame for label, run in loaded.items()}
hard_set = {label for label, run in loaded.items() if run.hard_set}
labels = list(frames)
present = views.subsets_of(run.hard_set for run in loaded.values())
st.session_state.setdefault("cmp_metric", "acc@10")
metric = st.segmented_control("Metric", metric_names(), key="cmp_metric",  # its own row: all metrics at 1024 px
                              persist_state="session") or "acc@10"
k = hit_depth(metric)  # the top-k of the hit/miss and agreement views
c2, c3 = st.columns(2)
st.session_state.setdefault("cmp_counting", DEFAULT_COUNTING)
counting = c3.segmented_control("Counting", list(COUNTINGS), key="cmp_counting",
                                help="; ".join(f"{k_}: {v}" for k_, v in COUNTINGS.items())) or DEFAULT_COUNTING
depths = {label: run.meta.get("answers_per_query") for label, run in loaded.items()}
if st.session_state.get("cmp_set") not in present:
    st.session_state.cmp_set = present[0]
which = c2.segmented_control("Queries", present, key="cmp_set", persist_state="session") or present[0]
lacking = [lab for lab in labels if which not in rm.run_subsets(lab in hard_set)]
st.caption(views.subset_note(which) + (f" Runs without {which} queries are empty: {ui.md(', '.join(lacking))}."
                                         if lacking else ""))

# ---- per relation
st.subheader(f"{metric} per relation and difference to the baseline")
diff = rm.relation_differences(frames, metric=metric, which=which, hard_set=hard_set, counting=counting, depths=depths)
deltas = [c for c in diff.columns if c.startswith("Δ ")]
long = (diff.drop(index="macro")[deltas] * 100).reset_index().melt(id_vars="relation", var_name="run",
                                                                   value_name="points")
long = long.assign(run=long["run"].str[2:].map(ui.chart_text), relation=long["relation"].map(ui.chart_text))
fig = px.bar(long, x="relation", y="points", color="run", barmode="group",
             labels={"points": f"{metric} − baseline (points of %), {which}"})
st.plotly_chart(ui.legible(fig, height=440), key="cmp_diff_chart")
shown = (diff * 100).reset_index()
st.dataframe(views.styled(shown, numbers=shown.columns[1:]), hide_index=True, key="cmp_diff")
st.caption(f"Baseline: {ui.md(labels[0])}. {metric} in %, differences in points; \"–\": a relation a run lacks "
           "(or acc@k above a one-answer method's depth). 'macro' is the mean over a run's relations. Every run by "
           f"one rule: {counting_label(counting)}.")

# ---- hit / miss
st.subheader("Queries one run gets and the other misses")
c1, c2 = st.columns(2)
for key, default in (("cmp_a", 0), ("cmp_b", 1)):  # a run dropped from the selection is no longer offered
    if st.session_state.get(key) not in labels:
        st.session_state[key] = labels[default]
a = c1.selectbox("Run A", labels, key="cmp_a", persist_state="session")
b = c2.selectbox("Run B", labels, key="cmp_b", persist_state="session")
pair = (a in hard_set, b in hard_set)
only_a = rm.hit_miss(frames[a], frames[b], k=k, which=which, hard_set=pair)
only_b = rm.hit_miss(frames[b], frames[a], k=k, which=which, hard_set=pair[::-1])
t1, t2 = st.tabs([f"A gets, B misses ({len(only_a)})", f"B gets, A misses ({len(only_b)})"])
t1.dataframe(views.styled(only_a, ranks=["rank a", "rank b"]), hide_index=True, key="cmp_only_a")
t2.dataframe(views.styled(only_b, ranks=["rank a", "rank b"]), hide_index=True, key="cmp_only_b")

# ---- is the difference real?
st.subheader("Is the difference real?")
run_ids = {short[r]: r for r in selected}
if a == b:
    st.info("Pick two different runs as A and B above to test their difference.")
elif any(which not in rm.run_subsets(lab in hard_set) for lab in (a, b)):
    st.info(f"A and B do not both have {which} queries: nothing to pair (pick another set of queries).")
elif not paired_runs.shared_queries(run_ids[a], run_ids[b]):
    st.info("A and B share no query (runs of one dataset do): nothing to pair.")
else:
    tested = None
    with ui.guard("Paired test"):
        tested = paired_runs.compare_runs(run_ids[a], run_ids[b], metric=metric, which=which)
    if tested is not None:
        st.markdown("**" + ui.md(tested.sentence("micro", a="A", b="B")) + "**  \n"
                    + ui.md(tested.sentence("macro", a="A", b="B")))
        shown_test = views.percent(tested.table, ["A", "B", "diff", "lo", "hi"])
        st.dataframe(views.styled(shown_test, numbers=["A", "B", "diff", "lo", "hi", "p", "p adjusted"], digits=3),
                     hide_index=True, key="cmp_paired")
        st.caption(f"A = {ui.md(a)}, B = {ui.md(b)}, on the {which} queries both hold (%; diff = A − B in points). "
                   f"Interval: {100 * tested.confidence:g} % paired bootstrap, queries resampled within each relation "
                   f"({tested.n_boot:,} resamples, seed {tested.seed}). Test: exact McNemar on the queries one run "
                   "gets and the other misses (acc@k), else a sign-flip permutation test. 'p adjusted': "
                   f"{paired.CORRECTIONS[tested.correction]} over the relations.")
        st.session_state.setdefault("cmp_export_fmt", "json")
        fmt = st.segmented_control("Export the comparison as", list(cmp_export.COMPARISON_FORMATS),
                                   key="cmp_export_fmt", help="; ".join(f"{f.name}: {f.description}" for f in
                                                                         cmp_export.COMPARISON_FORMATS.values())
                                   ) or "json"
        with ui.guard("Comparison export"):
            ui.download(f"Comparison ({fmt})" if fmt == "json" else f"Comparison ({fmt}, zip)",
                        lambda: cmp_export.comparison_bytes(run_ids[a], run_ids[b], fmt=fmt, metric=metric,
                                                            which=which),
                        memo=("cmp-export", run_ids[a], run_ids[b], metric, which, fmt),
                        file_name="comparison.json" if fmt == "json" else f"comparison-{fmt}.zip",
                        mime="application/json" if fmt == "json" else "application/zip", key="cmp_dl_paired",
                        help="The test above with both runs' provenance (eee, lm-eval: and each run's own export); "
                             "`probekit runs compare --from` shows it again. See docs/exports.md.")

# ---- agreement
st.subheader("Rank agreement")
agree = rm.agreement_table(frames, k=k, which=which, hard_set=hard_set)
st.dataframe(views.styled(agree, numbers=["spearman", "kendall", "top1_agreement", "jaccard"], digits=3),
             hide_index=True, key="cmp_agree")
st.caption(f"Over the queries both runs hold: hit@{k} counts (both / only a / only b / neither); Spearman and "
           f"Kendall τ-b of the best gold ranks (where both rank a gold); share with the same top-1; mean Jaccard "
           f"overlap of the top-{k} names; \"–\": undefined (too few shared queries ranked).")
memo = ("cmp", tuple(selected), metric, which)  # stored finished runs never change
c1, c2 = st.columns(2)
with c1:
    ui.download("Per-relation table (CSV)", lambda: runs.frame_bytes(shown, "csv"), memo=(*memo, "diff"),
                file_name="compare_relations.csv", mime="text/csv", key="cmp_dl_diff")
with c2:
    ui.download("Agreement (CSV)", lambda: runs.frame_bytes(agree, "csv"), memo=(*memo, "agree"),
                file_name="compare_agreement.csv", mime="text/csv", key="cmp_dl_agree")
ui.share_link({"runs": ",".join(selected), "metric": metric, "set": which})
