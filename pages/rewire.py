"""Rewire: contrastive rewiring (Contrastive-Probe, MedLAMA §4): train the sidebar model on a corpus whose
sentence tails are cut into [MASK], watch the InfoNCE loss fall live, stop at any time. Every checkpoint
appears in the model pickers and can be swept on the Sweep page."""

import plotly.graph_objects as go
import streamlit as st

from pages import _ui as ui
from probekit import rewire
from probekit.rewire import CPU_BATCH_SIZE, RewireSettings

UPLOAD = "__upload__"
ui.title("Contrastive rewiring")
st.caption("From each sentence a tail span, through its last word, is cut into one mask token, so the query ends "
           "in the mask (the paper's \"Social-distancing largely [MASK].\" for \"… reduces coronavirus "
           "infections.\"); the encoder learns to place the masked sentence next to its span and away from the rest "
           "of the batch (InfoNCE, cosine / τ). Probe the checkpoints on the **Sweep** page, or pick one in the "
           "sidebar.")
model = ui.current_model()
if model is None:
    st.stop()


def loss_figure(log, checkpoints=(), height=300) -> go.Figure:
    fig = go.Figure()
    fig.add_scatter(x=log["step"], y=log["loss"], mode="lines", name="loss", line=dict(color="#1565c0"))
    if len(log) >= 20:
        smooth = log["loss"].rolling(10, min_periods=1).mean()
        fig.add_scatter(x=log["step"], y=smooth, mode="lines", name="mean of 10", line=dict(color="black", width=2))
    ck = [c for c in checkpoints if c["step"] <= (log["step"].max() if len(log) else 0)]
    if ck:
        fig.add_scatter(x=[c["step"] for c in ck], y=[c["loss"] for c in ck], mode="markers", name="checkpoint",
                        marker=dict(symbol="diamond", size=10, color="#c62828"))
    fig.update_layout(xaxis_title="step", yaxis_title="InfoNCE loss")
    return ui.legible(fig, height=height)


job = st.session_state.get("rw_job")
running = job is not None and not job.finished
cuda = model.device.type == "cuda"
with st.container(border=True):
    corpora = dict(rewire.list_corpora())
    names = {**{n: n for n in corpora}, UPLOAD: "Upload a text file (one sentence a line)…"}
    c1, c2, c3, c4 = st.columns(4)
    c1.markdown(f"**{ui.md(ui.model_label())}** ({model.num_layers} layers, {model.device})")
    corpus = c1.selectbox("Corpus", list(names), format_func=names.get, key="rw_corpus", persist_state="session",
                          help="The MedLAMA elicit corpora (PROBEKIT_CORPORA_DIR): 10 × 10k PubMed and 10k Wikipedia "
                               "sentences" + ("" if corpora else ". None found here: upload one."))
    if corpus == UPLOAD:
        up = c1.file_uploader("Corpus file", type=["txt"], key="rw_upload")
        corpus = None
        if up is not None:
            with ui.guard("Reading the corpus"):
                corpus = str(rewire.save_corpus(up.name, up.getvalue()))
    steps = int(c2.number_input("Steps", 1, 100_000, 500, key="rw_steps", persist_state="session"))
    every = int(c2.number_input("Checkpoint every", 1, 100_000, 50, key="rw_every", persist_state="session"))
    batch = int(c2.number_input("Batch size (pairs)", 2, 4096, 192 if cuda else CPU_BATCH_SIZE, key="rw_batch",
                                persist_state="session"))
    lr = c3.number_input("Learning rate", 1e-7, 1e-2, 2e-5, format="%.1e", key="rw_lr", persist_state="session")
    tau = c3.number_input("Temperature τ", 0.001, 10.0, 0.04, format="%.3f", key="rw_tau",
                         persist_state="session")
    ratio = c3.slider("Mask ratio", 0.05, 1.0, 0.5, 0.05, key="rw_ratio",
                      persist_state="session", help="span length k ~ U(1, 1+⌊ratio·n⌋)")
    layer = c4.selectbox("Layer", ["last", *range(1, model.num_layers + 1)], key="rw_layer", persist_state="session",
                         help="train (and later probe) hidden_states[L]")
    pooling = c4.selectbox("Pooling", ["cls", "mean"], key="rw_pooling",
                           persist_state="session", help="[CLS] is the paper's")
    seed = int(c4.number_input("Seed", 0, 2**31 - 1, 0, key="rw_seed", persist_state="session"))
    if not cuda:
        st.caption(f":material/info: On CPU the batch defaults to {CPU_BATCH_SIZE} pairs (the paper's 192 is "
                   "sized for a GPU); training is deterministic for a fixed seed. The app's own model is not "
                   "changed: the run trains a copy.")
    if st.button("Start training", type="primary", icon=":material/play_arrow:", key="rw_start",
                 disabled=running or corpus is None):
        with ui.guard("Starting the rewiring run"):
            settings = RewireSettings(model=ui.selected_model_id(), corpus=corpus, mask_ratio=ratio, tau=tau, lr=lr,
                                      batch_size=batch, steps=steps, checkpoint_every=every, pooling=pooling,
                                      layer=None if layer == "last" else int(layer), seed=seed)
            st.session_state.rw_job = rewire.start_train(settings, device=ui.selected_device())
            st.session_state.rw_follow = st.session_state.rw_job.run_id  # selected once its folder exists
            st.rerun()


def live_curve(job) -> None:
    """The live loss curve, redrawn each time a training step has finished (the job panel reruns the page)."""
    log = rewire.load_log(job.run_id) if (rewire.runs_dir() / job.run_id / "run.json").exists() else None
    if log is not None and len(log):
        st.plotly_chart(loss_figure(log, rewire.checkpoints(job.run_id)), key="rw_live")


ui.job_panel("rw_job", stop="Stop", stop_key="rw_stop", extra=live_curve, step_rerun_s=2)
if job is not None and job.finished and job.status == "failed":
    st.error(ui.message(job.error))

st.subheader("Runs")
listed = None
with ui.guard("Listing runs"):
    listed = rewire.list_runs()
if listed is None or listed.empty:
    st.info("No rewiring runs yet: press Start training.")
    st.stop()
for note in rewire.damage_notes(listed):  # left out, and said so
    st.warning(ui.md(note), icon=":material/broken_image:")
listed = listed[listed.model.notna()].reset_index(drop=True)
if listed.empty:
    st.stop()
# a run's identity only: its state changes while it trains and the browser sends the shown text back
labels = {r.run_id: f"{r.label} · seed {r.seed} [{r.run_id[-4:]}]" for r in listed.itertuples()}
# the run just started is listed only once its model is loaded (not yet at the rerun after Start): select it then
if st.session_state.get("rw_follow") in labels:
    st.session_state.rw_sel = st.session_state.pop("rw_follow")
if st.session_state.get("rw_sel") not in labels:
    st.session_state.rw_sel = listed.run_id[0]
sel = st.selectbox("Run", list(labels), format_func=labels.get, key="rw_sel", persist_state="session")
info = rewire.run_info(sel)
if not (running and sel == job.run_id):
    log = rewire.load_log(sel)
    if len(log):
        st.plotly_chart(loss_figure(log, info["checkpoints"]), key="rw_curve")
s = info["settings"]
state = listed.set_index("run_id").loc[sel]
st.caption(f"**{state.status}** · {state.steps} steps · {ui.md(info['corpus_file'])} · {info['n_pairs']:,} pairs"
           f" · batch {info['batch_size']} · lr {s['lr']:g} · "
           f"τ {s['tau']:g} · mask ratio {s['mask_ratio']} · {s['pooling']} of layer {info['layer']} · seed {s['seed']}"
           f" · {info['device']}" + (f" · {info['steps_per_s']:.2f} steps/s" if info.get("steps_per_s") else "")
           + ("" if info.get("span_rule") else " · :orange[trained before the span fix: its queries kept the last "
              "word after the mask]"))
c1, c2 = st.columns([3, 1])
c1.dataframe([{"step": c["step"], "loss": round(c["loss"], 4), "checkpoint": c["label"]} for c in info["checkpoints"]],
             hide_index=True, key="rw_ckpts")
if c2.button("Sweep these checkpoints", icon=":material/query_stats:", key="rw_to_sweep",
             disabled=not info["checkpoints"]):
    st.session_state.sw_runs = [sel]
    st.switch_page("pages/sweep.py")
if c2.button("Delete run", icon=":material/delete:", key="rw_delete", disabled=running and sel == job.run_id):
    with ui.guard("Deleting"):
        rewire.delete_run(sel)
        st.session_state.pop("rw_sel", None)
        st.rerun()
