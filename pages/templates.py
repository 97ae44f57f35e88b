"""Templates vs free text (Shaier et al.): stored runs of several models on a template-based and a template-free
dataset -> the two model rankings (slope chart, Kendall's tau, Spearman's rho), mean perplexity against accuracy
(Figure 2) and how often each object is a model's top answer (prediction frequency, flags)."""

import dataclasses

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from pages import _bench
from pages import _ui as ui
from probekit import models
from probekit.bench import runs, views
from probekit.metrics.accuracy import counting_label
from probekit.metrics.registry import metric_names
from probekit.templates import compare, stored

# a model's name beside the slope chart's points is cut to this many characters ("…"), so the labels and the plot
# share a 1024 px screen; the hover has the whole name
SLOPE_NAME_CHARS = 16


def slope_margin(fig) -> int:
    """Pixels either side of the slope chart for its longest point label (plotly's 12 px type: ~7 px a character),
    which its traces draw outside the plot (``cliponaxis=False``): clipped to the plot, the labels showed as "3.9)"
    and "(22." beside the points."""
    longest = max((len(t) for trace in fig.data for t in (trace.text or ())), default=0)
    return 24 + 7 * longest


ui.title("Templates vs free text")
listed = None
with ui.guard("Stored runs"):
    listed = runs.list_runs(status="done")
if listed is None or listed.empty:
    st.info("No finished runs yet. Run each model on a template dataset (demo, MedLAMA) and on a template-free one "
            "(upload prompts with [MASK] in the sidebar, or `python -m probekit bench --dataset freetext --data-dir "
            "FILE --save`) on the Benchmark page.")
    st.stop()
names = {r.run_id: f"{r.label} · k={r.k} [{r.run_id[-6:]}]" for r in listed.itertuples()}
st.session_state.tpl_sel = [r for r in st.session_state.get("tpl_sel", []) if r in names]
selected = st.multiselect("Runs: one per model and kind (template-based / template-free)", list(names),
                          key="tpl_sel", persist_state="session", format_func=names.get)
if not selected:
    st.info("Pick the runs to compare: each model's run on a template-based dataset and on a template-free one.")
    st.stop()
# the runs' table first, the settings folded under it: the table sat under ~250 px of settings at 1024×768
result_box = st.container(key="tpl_result")
settings = st.expander("Ranking metric, perplexity and prediction frequency", icon=":material/tune:")
c1, c2, c3 = settings.columns(3)
metric = c1.segmented_control("Rank models by", metric_names(), default="acc@1", key="tpl_metric",
                              persist_state="session") or "acc@1"
aggregates = list(stored.PERPLEXITY_AGGREGATES)
aggregate = c1.radio("Perplexity per run", aggregates, key="tpl_agg", horizontal=True,
                     help=" · ".join(f"{n}: {stored.PERPLEXITY_AGGREGATES[n][1]}" for n in aggregates))
top_n = c2.number_input("Top-n objects", 1, 50, 5, key="tpl_n", persist_state="session")
freq_k = int(c2.number_input("Prediction frequency: top k", 1, 100, 10, key="tpl_freq_k",
                             help="the paper counts each model's top-10 predictions (fewer when a run stored fewer)"))
threshold = c3.slider("Flag objects in the top k of at least", 0.05, 1.0, 0.1, 0.05, key="tpl_thr",
                      persist_state="session", format="%.2f")
cmp = None
with ui.guard("Comparing runs"):
    cmp = compare.compare_runs(selected, metric=metric, top_n=int(top_n), flag_threshold=threshold, frequency_k=freq_k,
                               perplexity_aggregate=aggregate or "prompt-mean")
if cmp is None:
    st.stop()
acc = cmp.metric
# models by their picker names (a rewired checkpoint is "MiniLM-L6 rewired on pubmed_0, step 150", not its folder)
named = dict(models.available_models())
cmp = dataclasses.replace(cmp, runs=cmp.runs.assign(model=cmp.runs.model.map(lambda m: named.get(m, m))),
                          rankings=None if cmp.rankings is None else cmp.rankings.assign(
                              model=cmp.rankings.model.map(lambda m: named.get(m, m))))
shown_runs = cmp.runs.drop(columns=["label"])
first = ["model", "kind", *metric_names()]  # the metrics beside the model: acc@10 hid behind a scroll at 1280 px
result_box.dataframe(shown_runs[first + [c for c in shown_runs.columns if c not in first]], hide_index=True,
                     key="tpl_runs", column_config={
                         "model": st.column_config.TextColumn(width="medium"),
                         **{c: st.column_config.NumberColumn(format="%.4f", width="small") for c in (
                             *metric_names(), "top object share", f"top-{top_n} share", "distinct share",
                             "mean perplexity", "corpus perplexity")}})
with result_box:
    _bench.subject_note({names[r]: runs.load_run(r) for r in selected},
                        other="store runs with *Exclude subject* ticked (Benchmark page, or `bench --exclude-subject`)")

# ---- rankings
st.subheader("Model rankings")
if cmp.rankings is None:
    st.info("Rankings need runs of the same models on both a template-based and a template-free dataset.")
else:
    fig = go.Figure()
    tb, tf = compare.KINDS
    for r in cmp.rankings.to_dict(orient="records"):
        name = ui.short_label(ui.chart_text(r["model"]), SLOPE_NAME_CHARS)  # whole in the hover
        fig.add_trace(go.Scatter(x=[tb, tf], y=[r[f"{tb} rank"], r[f"{tf} rank"]], mode="lines+markers+text",
                                 name=ui.chart_text(r["model"]), textposition=["middle left", "middle right"],
                                 cliponaxis=False,  # the labels lie outside the plot, in the margins
                                 text=[f"{name} ({100 * r[f'{tb} score']:.1f}) #{r[f'{tb} rank']:g}",
                                       f"#{r[f'{tf} rank']:g} ({100 * r[f'{tf} score']:.1f}) {name}"]))
    # the rank beside each point (#1 = best, at the top), no axis: its ticks and title sat under the left labels
    fig.update_yaxes(autorange="reversed", showticklabels=False, title=None, dtick=1)
    fig.update_xaxes(tickangle=0)  # the two kinds read level, also when the plot between the labels is narrow
    fig.update_layout(height=120 + 45 * len(cmp.rankings), showlegend=False,
                      margin=dict(l=slope_margin(fig), r=slope_margin(fig), t=20, b=0))
    st.plotly_chart(fig, key="tpl_slope")
    c = cmp.correlation
    fmt = lambda v: "undefined" if v != v else f"{v:.3f}"  # noqa: E731 - NaN check
    st.caption(f"{c['n']} models ranked by {cmp.average} {acc} (in brackets, %; {counting_label(compare.COUNTING)}). "
               f"Kendall's τ-b {fmt(c['kendall_tau'])} "
               f"(p {fmt(c['kendall_p'])}), Spearman's ρ {fmt(c['spearman_rho'])} (p {fmt(c['spearman_p'])}).")
    st.dataframe(cmp.rankings, hide_index=True, key="tpl_rankings")
    held = cmp.stability
    if held is not None:
        st.markdown("**Does the ranking hold?** " + ui.md(
            f"Kendall's τ-b {fmt(held['tau'])}, {100 * (1 - held['alpha']):g} % interval [{fmt(held['lo'])}, "
            f"{fmt(held['hi'])}] over {held['defined']:,} of {held['n_boot']:,} prompt resamples"))
        st.dataframe(views.styled(held["pairs"], numbers=[f"{tb} order kept", "holds"], digits=2), hide_index=True,
                     key="tpl_stability")
        st.caption(f"Each kind's prompts resampled with replacement within their relations, the same draw for every "
                   f"model (seed {held['seed']}). 'holds': the share of resamples in which a pair's {tb} order is "
                   f"also its {tf} order; holds ≥ {1 - held['alpha']:.2f}, flips ≤ {held['alpha']:.2f}, else "
                   "uncertain (the change is within the noise of the prompts).")

# ---- perplexity vs accuracy
ppl_col = compare.PPL_COLUMNS[stored.PERPLEXITY_AGGREGATES[cmp.perplexity_aggregate][0]]
st.subheader(f"{ppl_col.capitalize()} vs {acc} (Figure 2)")
points = cmp.runs.dropna(subset=[ppl_col])
if points.empty:
    st.info("No stored perplexities for these runs. Score their prompts: `python -m probekit perplexity --run RUN_ID "
            "--model MLM` (a masked LM; the run's own model is used when it has an MLM head), or below.")
else:
    points = points.assign(model=points.model.map(ui.chart_text), scorer=points.scorer.map(ui.chart_text))
    fig = px.scatter(points, x=ppl_col, y=acc, color="kind", text="model", hover_data=["run_id", "scorer"])
    fig.update_traces(textposition="top center")
    fig.update_layout(height=420, margin=dict(l=0, r=0, t=20, b=0))
    st.plotly_chart(fig, key="tpl_ppl_chart")
    st.caption(f"x: {stored.PERPLEXITY_AGGREGATES[cmp.perplexity_aggregate][1]}. Pearson's r below uses it; the "
               "other aggregate can change r (switch above).")
    st.dataframe(cmp.perplexity_fit, hide_index=True, key="tpl_ppl_fit")
model = ui.current_model() if st.toggle("Score prompts with the sidebar model", key="tpl_score_on",
                                        persist_state="session") else None
if model is not None:
    if not model.has_mlm:
        st.warning(f"{ui.md(ui.model_label())} has no MLM head: pick a masked LM in the sidebar for "
                   "pseudo-perplexity.")
    elif st.button(f"Score the prompts of {len(selected)} runs with {ui.md(ui.model_label())}", key="tpl_score"):
        with ui.guard("Scoring prompts"):
            report = ui.progress("Pseudo-perplexity", stop_key="tpl_stop")
            for rid in selected:
                stored.score_run(rid, model, progress=report)
            report.clear()
            st.rerun()

if ui.stopped("tpl_stop"):
    st.info("Stopped: the runs scored before the stop keep their perplexities; press the button to score the rest.",
            icon=":material/stop_circle:")

# ---- prediction frequency
st.subheader("Prediction frequency")
if cmp.flags:  # one box, one table (a box per flagged object pushed the charts off the screen)
    st.warning(f"{len(cmp.flags)} object{'s' if len(cmp.flags) != 1 else ''} in the top k of at least "
               f"{threshold:.0%} of a run's prompts: a model that says them to everything knows less than its "
               "accuracy suggests.", icon=":material/flag:")
    st.dataframe(pd.DataFrame({"flagged": cmp.flags}), hide_index=True, key="tpl_flags")
label = st.selectbox("Run", list(cmp.frequency), key="tpl_freq_run", persist_state="session")
freq = cmp.frequency[label].head(15).melt(id_vars="object", value_vars=["share", "gold_share"], var_name="what",
                                          value_name="prompts (share)")
freq["object"] = freq["object"].map(ui.chart_text)
fk = int(cmp.runs.set_index("label").loc[label, "frequency k"])
freq["what"] = freq["what"].map({"share": f"in the top {fk}", "gold_share": "gold answer"})
fig = px.bar(freq, x="object", y="prompts (share)", color="what", barmode="group")
fig.update_layout(yaxis_tickformat=".0%")
st.plotly_chart(ui.legible(fig, height=380), key="tpl_freq_chart")
st.caption(f"The 15 objects most often in {ui.md(label)}'s top {fk}, with the share of prompts each is in the top {fk} "
           f"of and the share it is a gold answer of (names compared case- and space-folded). Top-{top_n} objects take "
           f"{100 * cmp.runs.set_index('label').loc[label, f'top-{top_n} share']:.1f} % of the top-{fk} slots.")
