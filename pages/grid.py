"""Grid: declare models x datasets x probes x options x layers, run it here or on a Ray cluster, and watch every
cell land as a stored benchmark run (cells already stored are skipped, so a grid resumes after any failure)."""

import importlib.util
import json

import plotly.express as px
import streamlit as st

from pages import _ui as ui
from probekit import grid, models
from probekit.bench import runs
from probekit.datasets import available_datasets
from probekit.datasets.base import available_vocabs
from probekit.errors import ProbekitError
from probekit.grid import scores
from probekit.metrics.accuracy import COUNTINGS
from probekit.metrics.registry import metric_names
from probekit.model_registry import short_model_id
from probekit.probes import PROBES

ui.title("Probing grid")
job = st.session_state.get("gr_job")
running = job is not None and not job.finished
has_ray = importlib.util.find_spec("ray") is not None

with st.container(border=True):
    h1, h2 = st.columns([1, 2], vertical_alignment="bottom")
    how = h1.segmented_control("Declare the grid", ["Pick", "YAML"], default="Pick", key="gr_how",
                               persist_state="session") or "Pick"
    action = h2.container()  # Run grid at the top, on the first screen: filled once the grid below is read
    if how == "Pick":
        model_names = dict(models.available_models())
        c1, c2 = st.columns(2)
        chosen_models = c1.multiselect("Models", list(model_names), default=["default"], key="gr_models",
                                       persist_state="session",
                                       format_func=model_names.get)
        data_names = dict(available_datasets())
        chosen_data = c2.multiselect("Datasets", list(data_names), default=["demo"], key="gr_datasets",
                                     persist_state="session",
                                     format_func=data_names.get)
        chosen_probes = st.multiselect("Probes", list(PROBES), default=["retrieval"], key="gr_probes",
                                       persist_state="session",
                                       help="every chosen model runs every chosen probe; each probe's options "
                                            "below are grid axes")
        probes = [{"name": name, "options": ui.option_axes(PROBES[name], key="gr_opt")} for name in chosen_probes]
        c1, c2, c3 = st.columns(3)
        layers = c1.text_input("Layers", "", key="gr_layers", persist_state="session",
                               placeholder="e.g. 2 4 6 (empty: last)")
        vocab = c2.selectbox("Candidates", available_vocabs(), key="gr_vocab", persist_state="session")
        spec_dict = {"name": c3.text_input("Grid name", "grid", key="gr_name", persist_state="session"),
                     "models": chosen_models,
                     "datasets": chosen_data, "vocab": vocab, "probes": probes,
                     "layers": layers.replace(",", " ").split()}
    else:
        example = ("name: minilm-layers\nmodels: [default]\ndatasets: [demo]\nprobes:\n  - name: retrieval\n"
                   "    options: {pooling: [cls, mean]}\nlayers: [2, 4, 6]\nk: 10\n")
        text = st.text_area("Grid (YAML)", example, height=220, key="gr_yaml", persist_state="session",
                            help=f"Fields: {', '.join(grid.spec.FIELDS)}. Probes: {', '.join(PROBES)}.")
        spec_dict = {}
    spec = None
    with ui.guard("The grid"):
        spec = grid.GridSpec.from_yaml(text) if how == "YAML" else grid.GridSpec.from_dict(spec_dict, check_names=True)
    c1, c2, c3 = st.columns([2, 1, 2])
    backend = c1.radio("Backend", ["local", "ray"], horizontal=True, key="gr_backend", persist_state="session",
                       captions=["this process, one cell at a time",
                                 "Ray workers" if has_ray else "not installed: pip install -r requirements-ray.txt"])
    workers = c2.number_input("Workers", 1, 64, 2, key="gr_workers", persist_state="session", disabled=backend != "ray")
    address = c3.text_input("Ray address", "", key="gr_address", persist_state="session", disabled=backend != "ray",
                            placeholder="empty: a local Ray on this machine (or RAY_ADDRESS)")
    r1, r2 = action.columns([1, 2], vertical_alignment="center")
    if spec is not None:
        n_cells = len(spec.cells())
        r2.caption(f"{n_cells} cell{'s' if n_cells != 1 else ''} · grid id {grid.grid_id_of(spec)}")
    go = r1.button("Run grid", type="primary", icon=":material/play_arrow:", key="gr_run",
                   disabled=running or spec is None or (backend == "ray" and not has_ray))
    if go:
        with ui.guard("Starting the grid"):
            options = {"address": address or None, "workers": int(workers)} if backend == "ray" else {}
            st.session_state.gr_job = grid.start_grid(spec, backend=backend, **options)
            st.session_state.gr_follow = grid.grid_id_of(spec)  # selected once the job has stored it
            st.rerun()

ui.job_panel("gr_job", stop_key="gr_cancel", step_rerun_s=2)  # each stored cell shows below as it lands
if job is not None and job.finished and job.status != "done":
    (st.warning if job.status == "cancelled" else st.error)(job.error or job.status)

listed = None
with ui.guard("Stored grids"):
    listed = grid.list_grids()
if listed is None or listed.empty:
    st.info("No grids yet: declare one above and press Run grid.")
    st.stop()
names = {r.grid_id: f"{r.name} [{r.grid_id}]" for r in listed.itertuples()}  # identity; progress is shown below
if st.session_state.get("gr_follow") in names:  # the grid just started (not yet stored at the rerun after Run)
    st.session_state.gr_sel = st.session_state.pop("gr_follow")
if st.session_state.get("gr_sel") not in names:
    st.session_state.gr_sel = listed.grid_id[0]
sel = st.selectbox("Grid", list(names), key="gr_sel", persist_state="session", format_func=names.get)
st.session_state.setdefault("gr_metric", "acc@10")
metric = st.segmented_control("Metric", metric_names(), key="gr_metric", persist_state="session",
                              help="charted, given its interval and ranked below") or "acc@10"
cells = scores.cell_intervals(sel, metric=metric)  # every cell, with the metric's interval beside its scores
counts = cells.status.value_counts().to_dict()
st.markdown(" · ".join(f"**{counts.get(s, 0)}** {s}" for s in ("done", "failed", "pending")))
numbers = [f"macro {name}" for name in metric_names()]  # every registered metric, in %
bounds = [f"{a} {metric} {b}" for a in ("macro", "micro") for b in ("lo", "hi")]
shown = cells.drop(columns=["settings", "cell_key", "position", *bounds]).copy()
for c in numbers:
    shown[c] = shown[c] * 100
st.dataframe(shown, hide_index=True, key="gr_cells",
             column_config={**{c: st.column_config.NumberColumn(format="%.2f %%") for c in numbers},
                            "seconds": st.column_config.NumberColumn(format="%.1f")})
counted = "; ".join(f"{k}: {v}" for k, v in COUNTINGS.items())
st.caption(f"Each cell is a stored benchmark run: open it on the Benchmark or Compare page. Its numbers are counted "
           f"as its run was stored (column counting: {counted}). {cells.attrs['note']}.")
done = cells.dropna(subset=[f"macro {metric}"])
if not done.empty:
    # each bar named by what sets its cell apart (two cells read "default · demo · retrieval (exc…" when the whole
    # label was cut); names are data, not markup
    apart = grid.distinguishing_labels([grid.Cell.from_settings(json.loads(s) if isinstance(s, str) else s)
                                        for s in done["settings"]])
    value = done[f"macro {metric}"] * 100
    bars = done.assign(label=[ui.chart_text(s) for s in apart], value=value,
                       above=done[f"macro {metric} hi"] * 100 - value, below=value - done[f"macro {metric} lo"] * 100)
    fig = px.bar(bars, x="value", y="label", orientation="h", error_x="above", error_x_minus="below",
                 labels={"label": "", "value": f"macro {metric} (%), 95 % interval"})
    st.plotly_chart(ui.legible(fig, height=max(260, 34 * len(done) + 80), legend=False, percent_axis="x"),
                    key="gr_chart")

    st.subheader("Does the model ranking hold across the grid?")
    held = None
    try:
        held = scores.grid_stability(sel, metric=metric)
    except ProbekitError as e:  # one model, or one condition: nothing to compare, said as a note
        st.caption(ui.md(str(e)) + ".")
    if held is not None:
        fmt = lambda v: "undefined" if v != v else f"{v:.3f}"  # noqa: E731 - NaN check
        between = (f"the grid's {len(held['conditions'])} conditions" if len(held["taus"]) == 1 else
                   f"the grid's conditions (mean over {len(held['taus'])} pairs of conditions)")
        st.markdown(ui.md(
            f"Kendall's τ-b of the models' {held['average']} {metric} between {between} {fmt(held['tau'])}, "
            f"{100 * (1 - held['alpha']):g} % interval [{fmt(held['lo'])}, {fmt(held['hi'])}] over "
            f"{held['defined']:,} of {held['n_boot']:,} query resamples; {held['counting']}."
            if len(held["models"]) > 2 else
            f"Two models: the pair's verdict below is the whole ranking (Kendall's τ-b needs three); "
            f"{held['average']} {metric}, {held['counting']}."))
        pairs = held["pairs"][["model a", "model b", "reference order", "verdict", "in resamples", "flips in"]]
        pairs = pairs.assign(**{m: pairs[m].map(short_model_id) for m in ("model a", "model b")})
        st.dataframe(pairs, hide_index=True, key="gr_pairs")
        st.caption(ui.md(f"Conditions: {', '.join(map(str, held['conditions']))}. The reference order is the "
                         f"models' mean score over the conditions; {held['rule']}"))
ui.download("Cells (CSV)", lambda: runs.frame_bytes(shown, "csv"),
            memo=("grid", sel, metric, tuple(sorted(counts.items())), len(done)), file_name=f"grid_{sel}.csv",
            mime="text/csv", key="gr_csv")
