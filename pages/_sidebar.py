"""The sidebar every page shares: the model (registry, any Hugging Face id or folder; one loaded at a time,
released on switch), the device and the dataset (shipped, found, or uploaded); a shared URL preselects them."""

from __future__ import annotations

import logging
import traceback

import streamlit as st

from pages import _uploads as uploads
from pages._display import md, message
from pages._guard import progress, stopped
from probekit import config, models
from probekit.datasets import Dataset, available_datasets, formats, load_spec
from probekit.errors import ProbekitError

log = logging.getLogger("probekit.app")
CUSTOM = "__custom__"
UPLOAD = "__upload__"
MODEL_KEY, CUSTOM_KEY, CPU_KEY = "pk_model", "pk_model_custom", "pk_cpu"
DATASET_KEY, UPLOAD_KEY, UPLOAD_FORMAT_KEY = "pk_dataset", "pk_upload", "pk_upload_format"
LINK_UPLOAD_KEY, LINK_MISSING_KEY = "_pk_link_upload", "_pk_link_missing"
UPLOAD_STOP_KEY, UPLOAD_STOPPED_KEY, UPLOAD_READ_KEY = "pk_upload_stop", "_pk_upload_stopped", "pk_upload_read"
UPLOAD_NOT_IN_LINK = "The uploaded file is not part of a link: whoever opens it uploads the same file."


# ---------------------------------------------------------------- models
def _release(model) -> None:  # streamlit passes the released value only
    models.release(model)


@st.cache_resource(max_entries=1, on_release=_release, show_spinner="Loading model…")
def load_model(model_id: str, device: str | None) -> models.LoadedModel:
    """The app's one loaded model: loading another releases it (the sidebar's and a tour step's alike)."""
    return models.load(model_id, device=device)


def selected_model_id() -> str:
    choice = st.session_state.get(MODEL_KEY, config.DEFAULT_MODEL)
    if choice == CUSTOM:
        return (st.session_state.get(CUSTOM_KEY) or "").strip()
    return choice


def selected_device() -> str | None:
    return "cpu" if st.session_state.get(CPU_KEY) else None


def current_model() -> models.LoadedModel | None:
    """The sidebar's model, loaded once (one model in memory; switching releases the previous one)."""
    model_id = selected_model_id()
    if not model_id:
        st.info("Type a Hugging Face id or a local model folder in the sidebar.")
        return None
    try:
        return load_model(model_id, selected_device())
    except ProbekitError as e:
        st.error(message(str(e)), icon=":material/error:")
    except Exception as e:  # noqa: BLE001
        log.error("model load failed\n%s", traceback.format_exc())
        st.error(message(f"Could not load model {model_id!r}: {type(e).__name__}: {str(e)[:300]}"))
    return None


def model_label(model_id: str | None = None) -> str:
    model_id = model_id or selected_model_id()
    return dict(models.available_models()).get(model_id, model_id)


# ---------------------------------------------------------------- datasets
def current_dataset() -> Dataset | None:
    """The sidebar's dataset (shipped demo, MedLAMA full/hard when present, or an uploaded file of any registered
    file format: ``probekit.datasets.formats``)."""
    spec = st.session_state.get(DATASET_KEY, "demo")
    missing = st.session_state.get(LINK_MISSING_KEY)
    if missing and missing[1] == spec:  # said until another dataset is picked
        st.warning(f"The link's dataset **{md(missing[0])}** is not on this server; **{md(dataset_label(spec))}** "
                   "is shown instead (`probekit data add` or `probekit data fetch` makes it available).",
                   icon=":material/warning:")
    elif missing:
        del st.session_state[LINK_MISSING_KEY]
    try:
        if spec == UPLOAD:
            up = st.session_state.get(UPLOAD_KEY)
            if up is None:
                lead = ("This link was made on an uploaded file, which a link does not carry: upload the same file "
                        "in the sidebar to open the view. " if st.session_state.get(LINK_UPLOAD_KEY) else "")
                st.info(lead + "Upload a dataset file in the sidebar, one of:\n" + formats.upload_help())
                return None
            return _parsed_upload(up)
        return load_spec(spec)
    except ProbekitError as e:
        st.error(message(str(e)), icon=":material/error:")
    except UnicodeDecodeError:
        st.error("The uploaded file is not UTF-8 text.")
    return None


def _parsed_upload(up, *, report=None) -> Dataset:
    """The session's uploaded file, parsed once (:mod:`pages._uploads`), refused past the upload limit, and not read
    again once its reading was stopped (until *Read it*)."""
    data = up.getvalue()
    if len(data) > config.MAX_UPLOAD_MB * 2**20:
        raise ProbekitError(f"{up.name} is larger than {config.MAX_UPLOAD_MB} MB")
    fmt = st.session_state.get(UPLOAD_FORMAT_KEY) or formats.AUTO
    if st.session_state.get(UPLOAD_STOPPED_KEY) == uploads.upload_key(data, fmt):
        raise ProbekitError(f"Reading {up.name} was stopped: press Read it in the sidebar to read it, or upload "
                            "another file.")
    return uploads._parse_upload(up.name, data, fmt, report)


def _upload_in_sidebar(up) -> None:
    """Read a new upload here, once, with a bar and a Stop (a million-row file takes seconds to read); a stopped
    reading is remembered for that file, so no rerun starts it again until *Read it* is pressed."""
    data = up.getvalue()
    key = uploads.upload_key(data, st.session_state.get(UPLOAD_FORMAT_KEY) or formats.AUTO)
    if stopped(UPLOAD_STOP_KEY):  # this run comes from the bar's Stop: the reading it ended stays stopped
        st.session_state[UPLOAD_STOPPED_KEY] = key
    if st.session_state.get(UPLOAD_STOPPED_KEY) == key:
        st.caption(f"Reading **{md(up.name)}** stopped: nothing of it is kept.")
        if st.button("Read it", key=UPLOAD_READ_KEY, icon=":material/play_arrow:"):
            del st.session_state[UPLOAD_STOPPED_KEY]
            st.rerun()
        return
    report = None if uploads.is_parsed(key) or len(data) > config.MAX_UPLOAD_MB * 2**20 else \
        progress(f"Reading {up.name}", stop_key=UPLOAD_STOP_KEY)
    try:
        _parsed_upload(up, report=report)
    except (ProbekitError, UnicodeDecodeError):
        pass  # the page says what is wrong with the file
    finally:
        if report is not None:
            report.clear()


def dataset_label(spec: str) -> str:
    return dict(available_datasets()).get(spec, spec)


# ---------------------------------------------------------------- sidebar
def _init_from_query_params() -> None:
    """A shared URL (``?model=…&dataset=…``) preselects the sidebar on first load."""
    if st.session_state.get("_pk_init"):
        return
    st.session_state["_pk_init"] = True
    qp = st.query_params
    known_models = [m for m, _ in models.available_models()]
    if "model" in qp:
        if qp["model"] in known_models:
            st.session_state[MODEL_KEY] = qp["model"]
        else:
            st.session_state[MODEL_KEY] = CUSTOM
            st.session_state[CUSTOM_KEY] = qp["model"]
    if qp.get("dataset") == UPLOAD:  # a view of an uploaded file: the file is not in the link
        st.session_state[DATASET_KEY] = UPLOAD
        st.session_state[LINK_UPLOAD_KEY] = True
    elif "dataset" in qp and qp["dataset"] in dict(available_datasets()):
        st.session_state[DATASET_KEY] = qp["dataset"]
    elif "dataset" in qp:  # never another dataset in silence
        st.session_state[LINK_MISSING_KEY] = (qp["dataset"], st.session_state.get(DATASET_KEY, "demo"))
    if qp.get("device") == "cpu":
        st.session_state[CPU_KEY] = True


def sidebar() -> None:
    """Model, device and dataset pickers shared by every page."""
    _init_from_query_params()
    with st.sidebar:
        st.markdown("### probekit")
        options = dict(models.available_models())
        options[CUSTOM] = "Other: Hugging Face id or local folder…"
        st.selectbox("Model", list(options), format_func=options.get, key=MODEL_KEY,
                     help="Registry models need their weights in the local Hugging Face cache; "
                          "'MiniLM-L6 (embedded default)' always works offline.")
        if st.session_state.get(MODEL_KEY) == CUSTOM:
            st.text_input("Model id or folder", key=CUSTOM_KEY, placeholder="dmis-lab/biobert-v1.1 or /path/to/model")
        found = models.pick_device()  # CUDA when present (PROBEKIT_DEVICE=cpu says no)
        cuda = found.type == "cuda"
        st.checkbox("Force CPU", key=CPU_KEY, disabled=not cuda,
                    help="Use the CPU even though a GPU is available." if cuda else "No CUDA GPU on this server.")
        device = "cpu" if (st.session_state.get(CPU_KEY) or not cuda) else str(found)
        st.caption(f"Device: **{device}**")
        ds = dict(available_datasets())
        ds[UPLOAD] = "Upload a file (" + ", ".join(f.name for f in formats.upload_formats()) + ")…"
        st.selectbox("Dataset", list(ds), format_func=ds.get, key=DATASET_KEY)
        if st.session_state.get(DATASET_KEY) == UPLOAD:
            choices = dict(formats.upload_choices())
            st.selectbox("File format", list(choices), format_func=choices.get, key=UPLOAD_FORMAT_KEY,
                         help="Detect: the format whose fields the file's first record holds.")
            st.file_uploader("Dataset file", type=formats.upload_suffixes(), key=UPLOAD_KEY,
                             help=formats.upload_help())
            up = st.session_state.get(UPLOAD_KEY)
            if up is not None:  # parsed here (once: the page gets it from the session), so the line counts it
                _upload_in_sidebar(up)
            st.caption(uploads.memory_line())
