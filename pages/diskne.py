"""DisKnE (Alghanmi et al. 2021): does a model know which disease a premise implies? One fine-tuning per
(model, disease, seed) on a training set that never mentions the disease; F1 of the positive class per
disease, macro and weighted per category (± std over seeds); compare models."""

import plotly.graph_objects as go
import streamlit as st

from pages import _ui as ui
from probekit import models
from probekit.bench.export_table import frame_bytes
from probekit.diskne import build, data, recipes, results, runs, splits

ui.title("DisKnE: disease knowledge by fine-tuning")
with st.expander("Does a model know which disease a premise implies? About DisKnE and the sets offered",
                 icon=":material/info:"):  # folded, so Start is on a 1024×768 screen's first view
    st.caption("Binary entailment (premise → the disease name), fine-tuned per target disease on data that never "
               "mentions it or its negatives, so a correct test answer reflects what the pre-trained model knew. "
               "**To reproduce the paper**, build DisKnE itself from the repository's public annotation CSVs and "
               "your own MedNLI / MEDIQA-NLI copy (`probekit diskne build --source licensed … --out FILE`) and pick "
               "*licensed DisKnE set*. " + build.SMOKE_NOTE)

job = st.session_state.get("dk_job")
running = job is not None and not job.finished
with st.container(border=True):
    c1, c2, c3 = st.columns(3)
    source = c1.selectbox("Set", ["licensed", *build.sources()], index=1, key="dk_source", persist_state="session",
                          format_func={"licensed": "licensed DisKnE set (a file you built)",
                                       "demo": "smoke set from the demo data (not DisKnE)",
                                       "medlama": "smoke set from MedLAMA (not DisKnE)"}.get)
    set_path = None
    if source == "licensed":
        typed = c1.text_input("Set file", key="dk_set_file",
                              placeholder="~/diskne/medical_similar.json (diskne build --source licensed --out)")
        if not typed.strip():
            st.stop()
        set_path = typed.strip()
    ds = None
    with ui.guard("Reading the set"):
        set_path = set_path or build.ensure(source)
        ds = data.read_set(set_path)
    if ds is None:
        st.stop()
    options = dict(models.available_models())
    default = ui.selected_model_id()
    if default not in options:
        options[default] = default
    chosen = c1.multiselect("Models", list(options), default=[default], format_func=options.get, key="dk_models",
                            persist_state="session")
    cats = c2.multiselect("Categories", ds.categories, default=ds.categories, format_func=data.category_label,
                          key="dk_cats", persist_state="session")
    seeds = c2.multiselect("Seeds", list(range(5)), default=[0, 1, 2], key="dk_seeds", persist_state="session",
                           help="the paper averages over three runs")
    c2.caption(f"{len(ds.positives)} positives · " + " · ".join(
        f"{data.category_label(c)}: {len(ds.eligible(c))} diseases" for c in ds.categories))
    recipe = c3.selectbox("Recipe", sorted(recipes.RECIPES), key=f"dk_recipe_{ds.version}",
                          index=sorted(recipes.RECIPES).index(recipes.default_recipe(ds)),
                          help="diskne-reference: the authors' evaluate.py (Adam, linear decay, clipping 1.0, stop "
                               "at the 2nd non-improving epoch keeping the last weights, 256 tokens, their "
                               "splits.py filter); probekit: AdamW, constant lr, best epoch restored, 128 tokens")
    rec = recipes.RECIPES[recipe]
    lr = c3.number_input("Learning rate", 1e-7, 1e-2, 2e-5, format="%.1e", key="dk_lr", persist_state="session")
    epochs = int(c3.number_input("Max epochs", 1, 50, 8, key="dk_epochs", persist_state="session",
                                 help="early stopping on validation loss"))
    with st.expander("More settings"):
        e1, e2, e3 = st.columns(3)
        batch = int(e1.number_input("Batch size", 1, 256, 8, key="dk_batch", persist_state="session"))
        patience = int(e1.number_input("Patience (epochs)", 1, 10, int(rec["patience"]), key=f"dk_patience_{recipe}"))
        filters = list(splits.TRAIN_FILTERS)
        train_filter = e1.radio("Training-set filter", filters, index=filters.index(str(rec["train_filter"])),
                                key=f"dk_filter_{recipe}", horizontal=True,
                                help="repository: DisKnE's splits.py (X's names in the premise); strict: also bans "
                                     "every negative disease of X, by whole words")
        n_neg = int(e2.number_input("Negatives per disease", 1, 50, 10, key="dk_neg", persist_state="session"))
        max_train = int(e2.number_input("Cap training examples (0 = none)", 0, 100_000, 0, key="dk_cap",
                                        persist_state="session"))
        hypothesis = e3.radio("Hypothesis", ["canonical", "full"], key="dk_hyp", persist_state="session",
                              horizontal=True,
                              help="canonical: the disease name only (§3.4); full: the original sentence")
        hyp_only = e3.checkbox("Hypothesis-only baseline", key="dk_hyp_only", persist_state="session")
    n_targets = len(splits.targets(ds, cats)) if cats else 0
    b1, b2 = st.columns([1, 5], vertical_alignment="center")  # Start beside what it will run, not below it
    b2.caption(f"{len(chosen) * len(seeds) * n_targets} fine-tunings ({n_targets} diseases × {len(seeds)} seeds × "
               f"{len(chosen)} models). On CPU one takes seconds (tiny models) to many minutes (BERT-base): see "
               "docs/diskne.md for measured rates.")
    if b1.button("Start", type="primary", icon=":material/play_arrow:", key="dk_start",
                 disabled=running or not (chosen and cats and seeds)):
        with ui.guard("Starting the DisKnE run"):
            finetune = {"recipe": recipe, "lr": lr, "max_epochs": epochs, "batch_size": batch, "patience": patience,
                        "train_filter": train_filter, "hypothesis": hypothesis, "hypothesis_only": hyp_only,
                        "max_train": max_train or None}
            st.session_state.dk_job = runs.start_grid(chosen, set_path, categories=cats,
                                                      seeds=sorted(seeds), finetune=finetune, n_negatives=n_neg,
                                                      device=ui.selected_device())
            st.rerun()


def done_so_far(job) -> None:
    """Progress per disease: the cells the running job has stored so far."""
    live = runs.running_cells()
    if len(live):
        st.dataframe(live, hide_index=True, key="dk_live")


ui.job_panel("dk_job", stop="Stop", stop_key="dk_stop", extra=done_so_far, step_rerun_s=10)
if job is not None and job.finished and job.status == "failed":
    st.error(ui.message(job.error))

st.subheader("Results")
listed = None
with ui.guard("Listing runs"):
    listed = runs.list_runs()
if listed is None or listed.empty:
    st.info("No DisKnE runs yet: pick models and press Start.")
    st.stop()
# a run's identity only: its progress and status change under a selection, and the browser sends the shown
# text back (a changed label matched no option and crashed the page)
labels = {r.run_id: f"{r.label} · {r.set_name} [{r.run_id[-6:]}]" for r in listed.itertuples()}
if job is not None and job.status == "done" and st.session_state.get("dk_shown") is not job:
    st.session_state.dk_shown = job  # a run that just finished is shown once (then the picker is the user's)
    st.session_state.dk_sel = [r for r in job.result if r in labels]
if not st.session_state.get("dk_sel") or not set(st.session_state.dk_sel) <= set(labels):
    st.session_state.dk_sel = [listed.run_id[0]]
sel = st.multiselect("Runs (pick several to compare models)", list(labels), format_func=labels.get, key="dk_sel",
                     persist_state="session")
state = listed.set_index("run_id")
st.caption(" · ".join(f"{ui.md(labels[r])}: {state.status[r]}, {state.cells_done[r]}/{state.n_cells[r]} fine-tunings"
                      for r in sel))
cells = runs.load_cells(sel)
summary, diseases = results.summary(cells), results.per_disease(cells)
if summary.empty:
    st.info("The selected runs have no finished fine-tunings yet.")
    st.stop()
table = summary.assign(category=summary["category"].map(data.category_label))
for col in ("macro", "macro_std", "weighted", "weighted_std"):
    table[col] = (100 * table[col]).round(1)
st.dataframe(table.rename(columns={"macro": "macro F1 %", "macro_std": "± std", "weighted": "weighted F1 %",
                                   "weighted_std": "± std "}), hide_index=True, key="dk_summary")
for cat in summary["category"].unique():
    st.markdown(f"#### {ui.md(data.category_label(cat))}")
    wide = results.by_model(diseases, cat)
    fig = go.Figure()
    for model in [c for c in wide.columns if c != "disease"]:  # disease and run names are data, not markup
        fig.add_bar(x=wide["disease"].map(ui.chart_text), y=wide[model], name=ui.chart_text(model))
    fig.update_layout(barmode="group", yaxis_title="F1 (%)", yaxis_range=[0, 100], xaxis_tickangle=-35)
    st.plotly_chart(ui.legible(fig, height=380, percent_axis="y"), key=f"dk_chart_{cat}")
    st.dataframe(wide, hide_index=True, key=f"dk_table_{cat}")
ui.download("Results per disease (CSV)", lambda: frame_bytes(diseases, "csv"), memo=("diskne", tuple(sel), len(cells)),
            file_name="diskne_per_disease.csv", mime="text/csv", key="dk_csv")
if st.button("Delete the selected runs", icon=":material/delete:", key="dk_delete", disabled=running):
    with ui.guard("Deleting"):
        for r in sel:
            runs.delete_run(r)
        st.session_state.pop("dk_sel", None)
        st.rerun()
