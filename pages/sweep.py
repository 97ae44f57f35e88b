"""Sweep: probe every checkpoint of one or more rewiring runs on the sidebar dataset and plot acc@k against the
training step (MedLAMA Fig. 4): macro with a ±1 std band over runs (seeds, corpora), and per relation."""

import plotly.graph_objects as go
import streamlit as st

from pages import _ui as ui
from probekit import rewire
from probekit.bench import runs
from probekit.datasets import VOCABS
from probekit.metrics.accuracy import DEFAULT_COUNTING, counting_label
from probekit.metrics.intervals import interval_note
from probekit.metrics.registry import metric_names
from probekit.probes.retrieval import PRESETS
from probekit.rewire.sweep import sweep_intervals

ui.title("Checkpoint sweep")
ds = ui.current_dataset()
if ds is None:
    st.stop()
listed = None
with ui.guard("Listing rewiring runs"):
    listed = rewire.list_runs()
if listed is None or listed.empty:
    st.info("No rewiring runs yet: train one on the **Rewire** page (or `probekit rewire`).")
    st.stop()
for note in rewire.damage_notes(listed):  # left out, and said so
    st.warning(ui.md(note), icon=":material/broken_image:")
listed = listed[listed.model.notna()]
listed = listed[listed.checkpoints > 0]
# identity only (a run still training gains checkpoints; the browser sends the shown text back)
labels = {r.run_id: f"{r.label} · seed {r.seed} [{r.run_id[-4:]}]" for r in listed.itertuples()}


def stored_sweeps() -> None:
    """Every stored sweep, its points grouped under it (the points are also benchmark runs)."""
    points = None
    with ui.guard("Listing stored sweeps"):
        points = rewire.stored_sweeps()
    if points is None or points.empty:
        return
    with st.expander(f"Stored sweeps ({points.sweep.nunique()})", icon=":material/history:"):
        for n, (name, part) in enumerate(points.groupby("sweep", sort=False)):
            st.markdown(f"**{ui.md(name)}**: {len(part)} points")
            scores = [f"macro {name}" for name in metric_names()]
            st.dataframe(part.drop(columns="sweep").assign(**{c: part[c] * 100 for c in scores}), hide_index=True,
                         key=f"sw_stored_{n}",
                         column_config={c: st.column_config.NumberColumn(format="%.2f %%") for c in scores})


st.session_state.sw_runs = [r for r in st.session_state.get("sw_runs", []) if r in labels] or list(labels)[:1]

job = st.session_state.get("sw_job")
running = job is not None and not job.finished
with st.container(border=True):
    st.markdown(f"Retrieval-probe each checkpoint on **{ui.md(ds.name)}** ({len(ds):,} queries) with the pooling "
                "and layer it was trained with; step 0 is the base model. Points are stored runs: a repeat reads "
                "them back.")
    chosen = st.multiselect("Rewiring runs (several: mean ± 1 std)", list(labels), format_func=labels.get,
                            key="sw_runs", persist_state="session")
    c0, c1, c2, c3 = st.columns(4)
    preset = ui.choice_box(c0, "Preset", [None, *PRESETS], key="sw_preset", persist_state="session",
                           format_func=lambda p: p or "none (the run's pooling)",
                          help="medlama-reference: [CLS] and L2 on raw vectors, as MedLAMA's probing code; it "
                               "replaces the similarity. Use it to compare with the paper's Fig. 4.")
    similarity = c1.selectbox("Similarity", ["cosine", "l2", "dot"], key="sw_similarity",
                              persist_state="session", disabled=bool(preset))
    vocab = c2.radio("Candidates", VOCABS, key="sw_vocab", persist_state="session", horizontal=True)
    base = c3.checkbox("Include the base model (step 0)", value=True, key="sw_base", persist_state="session")
    # the result on screen is the one computed from exactly these settings (no stale chart)
    inputs = {"runs": tuple(chosen), "dataset": (ds.name, ds.version, len(ds)), "preset": preset,
              "similarity": None if preset else similarity, "vocab": vocab, "base": base}
    if st.button("Run sweep", type="primary", icon=":material/play_arrow:", key="sw_start",
                 disabled=running or not chosen):
        with ui.guard("Starting the sweep"):
            ui.forget("sw_result")
            st.session_state.sw_job = rewire.start_sweep(chosen, ds, similarity=similarity, vocab=vocab,
                                                         preset=preset, include_base=base,
                                                         device=ui.selected_device())
            st.session_state.sw_job.inputs = inputs
            st.rerun()


ui.job_panel("sw_job", stop_key="sw_cancel")
if job is not None and job.finished:
    if job.status == "done":
        ui.keep("sw_result", getattr(job, "inputs", inputs), job.result)
    else:
        (st.warning if job.status == "cancelled" else st.error)(job.error or job.status)
frame = ui.kept("sw_result", inputs)
if frame is None:
    st.info("Press **Run sweep**.")
    stored_sweeps()
    st.stop()

c1, c2 = st.columns(2)
shown = [n for n in metric_names() if n in frame.columns]  # the metrics the sweep computed
metric = c1.segmented_control("Metric", shown, default=shown[-1], key="sw_metric", persist_state="session") \
    or shown[-1]
present = [s for s in rewire.SUBSETS if s in set(frame["subset"])]
if st.session_state.get("sw_subset") not in present:
    st.session_state.sw_subset = present[0]
subset = c2.segmented_control("Queries", present, key="sw_subset", persist_state="session") or present[0]
st.caption(f"**{subset}**: {rewire.SUBSETS[subset]}. Every point by one rule: {counting_label(DEFAULT_COUNTING)}.")
n_runs = frame["rewire_run"].nunique()
best = rewire.best_checkpoint(frame, metric=metric, subset=subset)
m1, m2, m3 = st.columns(3)
if best["base"] is not None:
    m1.metric(f"base model, macro {metric}", f"{100 * best['base']:.2f}%")
if best["step"] is not None:
    delta = None if best["base"] is None else f"{100 * (best['acc'] - best['base']):+.2f} points"
    m2.metric(f"best checkpoint (step {best['step']})", f"{100 * best['acc']:.2f}%", delta)
m3.metric("runs averaged", n_runs)

ci = sweep_intervals(frame, metric=metric, subset=subset)  # each point's 95 % interval, from its stored run
fig = go.Figure()
for avg, color in (("macro", "#1565c0"), ("micro", "#2e7d32")):
    curve = rewire.sweep_curve(frame, metric=metric, relation=avg, subset=subset)
    x, mean, std = curve["step"], 100 * curve["mean"], 100 * curve["std"]
    # several runs: the ±1 std band over runs; one run: its 95 % interval (over its queries) at each step
    lower, upper = ((mean - std, mean + std) if n_runs > 1 else
                    (100 * ci.set_index("step").loc[x, f"{avg} lo"].to_numpy(),
                     100 * ci.set_index("step").loc[x, f"{avg} hi"].to_numpy()))
    if n_runs > 1 or ci[f"{avg} lo"].notna().any():  # upper edge, then lower edge filled up to it
        fig.add_scatter(x=x, y=upper, mode="lines", line=dict(width=0), showlegend=False, hoverinfo="skip")
        fig.add_scatter(x=x, y=lower, mode="lines", line=dict(width=0), fill="tonexty", showlegend=False,
                        fillcolor="rgba(21,101,192,0.15)" if avg == "macro" else "rgba(46,125,50,0.15)",
                        hoverinfo="skip")
    band = "± 1 std over runs" if n_runs > 1 else "95 % interval"
    fig.add_scatter(x=x, y=mean, mode="lines+markers", name=f"{avg} (mean of {n_runs})" if n_runs > 1 else avg,
                    line=dict(color=color, width=3), customdata=std if n_runs > 1 else
                    ci.set_index("step").loc[x, f"{avg} [lo, hi]"].to_numpy(),
                    hovertemplate="step %{x}: %{y:.2f}% " + ("± %{customdata:.2f}" if n_runs > 1 else
                                                              "%{customdata}") + "<extra></extra>")
fig.update_layout(xaxis_title="training step", yaxis_title=f"{metric} (%)")
st.plotly_chart(ui.legible(fig, height=380, percent_axis="y"), key="sw_macro")
st.caption(f"Band: {band}. " + interval_note(metric) + ".")
points = frame[(frame.subset == subset) & frame.relation.isin(["macro", "micro"])].pivot_table(
    index=["rewire_run", "step", "run_id"], columns="relation", values=metric).reset_index()
point_table = points.merge(ci[["run_id", "macro [lo, hi]", "micro [lo, hi]"]], on="run_id")
point_table[["macro", "micro"]] = point_table[["macro", "micro"]] * 100
with st.expander(f"Each point's {metric} (%) with its 95 % interval"):
    st.dataframe(point_table[["rewire_run", "step", "macro", "macro [lo, hi]", "micro", "micro [lo, hi]", "run_id"]],
                 hide_index=True, key="sw_points",
                 column_config={c: st.column_config.NumberColumn(format="%.2f") for c in ("macro", "micro")})

st.subheader(f"Per relation ({metric}, %)")
per = frame[(frame.subset == subset) & ~frame.relation.isin(["macro", "micro"])]
table = per.groupby(["relation", "step"])[metric].mean().unstack("step") * 100
lines = go.Figure()
for rel, row in table.iterrows():
    lines.add_scatter(x=list(row.index), y=list(row.values), mode="lines+markers", name=ui.chart_text(rel),
                      hovertemplate=f"{ui.chart_text(rel)}<br>step %{{x}}: %{{y:.2f}}%<extra></extra>")
lines.update_layout(xaxis_title="training step", yaxis_title=f"{metric} (%)")
st.plotly_chart(ui.legible(lines, height=460, percent_axis="y"), key="sw_relations")
st.dataframe(table.round(2).rename(columns=lambda step: f"step {step}").reset_index(), hide_index=True, key="sw_table")
points = tuple(sorted(set(frame.run_id)))  # stored runs never change: they name the file's content
d1, d2 = st.columns(2)
with d1:
    ui.download("Sweep (CSV)", lambda: runs.frame_bytes(frame, "csv"), memo=("sweep", points, "csv"),
                file_name="sweep.csv", mime="text/csv", key="sw_csv")
with d2:
    ui.download("Sweep (Parquet)", lambda: runs.frame_bytes(frame, "parquet"), memo=("sweep", points, "parquet"),
                file_name="sweep.parquet", key="sw_parquet")
stored_sweeps()
