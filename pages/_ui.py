"""Shared UI pieces: the sidebar (model, device, dataset), cached model loading, error guard, progress.

Pages stay thin by calling these; all real work happens in ``probekit`` (which never imports streamlit).
"""

from __future__ import annotations

import gc
import hashlib
import logging
import runpy
import threading
import traceback
from contextlib import contextmanager
from pathlib import Path

import streamlit as st
import torch

from probekit import config, memory, models
from probekit.datasets import Dataset, available_datasets, formats, load_spec
from probekit.errors import ProbekitError
from probekit.memo import Memo

log = logging.getLogger("probekit.app")

# the pieces live in their own modules; pages use them all through ``ui``
from pages._access import EXPERT_KEY, ORGANISER_KEY, access, expert, remember_sign_in  # noqa: E402, F401
from pages._display import FONT_PX, chart_text, html_text, legible, md, message  # noqa: E402, F401
from pages._job_panel import job_panel  # noqa: E402, F401
from pages._kept import download, forget, keep, kept  # noqa: E402, F401
from pages._options import (  # noqa: E402, F401
    NONE_LABELS,
    none_label,
    option_axes,
    option_state,
    probe_option_widgets,
    vocab_picker,
)

CUSTOM = "__custom__"
UPLOAD = "__upload__"
MODEL_KEY, CUSTOM_KEY, CPU_KEY = "pk_model", "pk_model_custom", "pk_cpu"
DATASET_KEY, UPLOAD_KEY, UPLOAD_FORMAT_KEY = "pk_dataset", "pk_upload", "pk_upload_format"
PAGE_KEY = "_pk_page"  # the URL path of the page app.py runs (set by app.py each run)


# ---------------------------------------------------------------- the app shell
APP = Path(__file__).resolve().parent.parent / "app.py"
_SHELL = threading.local()


@contextmanager
def shell():
    """app.py runs the selected page inside this, so a page can tell it has the app's navigation and sidebar.

    After a whole page has run, a full garbage collection frees what the run left in reference cycles (a replaced
    upload's parsed frames). Streamlit would run one after every script run, fragment reruns included (its
    ``runner.postScriptGC``, turned off in ``.streamlit/config.toml``): a job panel polling every second then
    stalled the job it watched. Here it runs after full page runs only, which follow a user's action."""
    _SHELL.depth = getattr(_SHELL, "depth", 0) + 1
    try:
        yield
    finally:
        _SHELL.depth -= 1
        if not _SHELL.depth:
            gc.collect()


def title(text: str) -> None:
    """The page title; first makes sure the page runs inside app.py.

    Why: next to a ``pages/`` folder Streamlit starts in its old multipage mode, in which a page URL runs that
    page file alone (no sidebar, a file-name navigation), until app.py's ``st.navigation`` has run once in the
    server process. A fresh server whose first visitor opens a shared link (``/annotate?session=…``) would
    stay in that mode. A page run outside app.py therefore runs app.py instead (which runs this page through
    its navigation) and stops.
    """
    if not getattr(_SHELL, "depth", 0):
        runpy.run_path(str(APP), run_name="__main__")
        st.stop()
    st.title(text)


# ---------------------------------------------------------------- errors and progress
@contextmanager
def guard(what: str = "That"):
    """Show user errors as a message, never a traceback (the traceback goes to the server log)."""
    try:
        yield
    except ProbekitError as e:
        st.error(message(str(e)), icon=":material/error:")
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        st.error("The GPU ran out of memory. Lower the batch size, or tick 'Force CPU' in the sidebar.")
    except MemoryError:
        st.error("Out of memory. Try a smaller dataset, fewer relations or a smaller batch size.")
    except Exception as e:  # noqa: BLE001 - last line of defence for the UI
        log.error("unexpected error\n%s", traceback.format_exc())
        st.error(message(f"{what} failed unexpectedly ({type(e).__name__}: {str(e)[:300]}). Details are in the "
                         "server log."))


class progress:  # noqa: N801 - used like a function: report = ui.progress("…"); report(done, total, stage)
    """A ``progress(done, total, stage)`` callback drawing one st.progress bar; ``clear()`` removes it."""

    def __init__(self, label: str = "Working…"):
        self.label = label
        self.slot = st.empty()
        self.bar = self.slot.progress(0.0, text=label)

    def __call__(self, done: int, total: int, stage: str = "") -> None:
        self.bar.progress(min(1.0, done / max(total, 1)), text=f"{stage or self.label}: {done:,}/{total:,}")

    def clear(self) -> None:
        self.slot.empty()


# ---------------------------------------------------------------- models
def _release(model) -> None:  # streamlit passes the released value only
    models.release(model)


@st.cache_resource(max_entries=1, on_release=_release, show_spinner="Loading model…")
def _load_model(model_id: str, device: str | None) -> models.LoadedModel:
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
        return _load_model(model_id, selected_device())
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
    try:
        if spec == UPLOAD:
            up = st.session_state.get(UPLOAD_KEY)
            if up is None:
                st.info("Upload a dataset file in the sidebar, one of:\n" + formats.upload_help())
                return None
            data = up.getvalue()
            if len(data) > config.MAX_UPLOAD_MB * 2**20:
                raise ProbekitError(f"{up.name} is larger than {config.MAX_UPLOAD_MB} MB")
            return _parse_upload(up.name, data, st.session_state.get(UPLOAD_FORMAT_KEY) or formats.AUTO)
        return load_spec(spec)
    except ProbekitError as e:
        st.error(message(str(e)), icon=":material/error:")
    except UnicodeDecodeError:
        st.error("The uploaded file is not UTF-8 text.")
    return None


UPLOADS_SHARED = 1
"""Parsed uploads kept for sharing between sessions besides the ones sessions hold. A parsed triples file takes
some 15-30 times its file size (a 34 MB file of a million rows, about 500 MB), so a bound on the files' bytes
kept several parsed files alive: an upload replacing another grew the server by a whole parsed file each time."""
_UPLOADS: Memo[str, tuple[int, Dataset]] = Memo(max_entries=lambda: UPLOADS_SHARED,
                                                max_bytes=lambda: UPLOADS_MAX_BYTES, sizeof=lambda e: e[0])
"""Parsed uploads shared by sessions (the same file uploaded again, or by another session, is parsed once): the
most recent :data:`UPLOADS_SHARED`, within :data:`UPLOADS_MAX_BYTES` of files; each session also keeps its own
upload for as long as it lives (and drops it when it uploads another)."""
UPLOADS_MAX_BYTES = 2 * config.MAX_UPLOAD_MB * 2**20


def _parse(name: str, data: bytes, fmt: str = formats.AUTO) -> Dataset:
    """An uploaded file read by the format ``fmt`` (by default the one its first record fits)."""
    return formats.parse_upload(name, data, fmt=fmt)


def upload_cache_bytes() -> int:
    return _UPLOADS.bytes


def _parse_upload(name: str, data: bytes, fmt: str = formats.AUTO) -> Dataset:
    key = f"{hashlib.sha1(data).hexdigest()}:{fmt}"
    mine = st.session_state.get("_pk_upload")
    if mine is not None and mine[0] == key:
        return mine[1]
    hit = _UPLOADS.get(key)
    if hit is None:  # a new file: drop the session's previous one and the shared one first, so that two parsed
        st.session_state["_pk_upload"] = None  # files are never held at once (the peak was the old one + the new)
        _UPLOADS.clear()
        del mine
        memory.release()
    ds = hit[1] if hit is not None else _parse(name, data, fmt)
    _UPLOADS.put(key, (len(data), ds))
    st.session_state["_pk_upload"] = (key, ds)  # released with the session
    return ds


def memory_line() -> str:
    """The server's memory for the sidebar: resident size and the parsed uploads it shares."""
    return (f"Server memory: {memory.rss_bytes() / 2**20:,.0f} MB · {len(_UPLOADS)} parsed upload(s) shared "
            f"({_UPLOADS.bytes / 2**20:,.0f} MB of files)")


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
    if "dataset" in qp and qp["dataset"] in dict(available_datasets()):
        st.session_state[DATASET_KEY] = qp["dataset"]
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
        cuda = torch.cuda.is_available()
        st.checkbox("Force CPU", key=CPU_KEY, disabled=not cuda,
                    help="Use the CPU even though a GPU is available." if cuda else "No CUDA GPU on this server.")
        device = "cpu" if (st.session_state.get(CPU_KEY) or not cuda) else f"cuda ({torch.cuda.get_device_name(0)})"
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
            st.caption(memory_line())


# ---------------------------------------------------------------- share links
def share_link(params: dict, *, label: str = "Share this view", show: bool = True) -> str:
    """Make the page URL hold exactly ``params`` (values None/"" are dropped, and so is any stale parameter)
    and show the full link with a copy button. Returns the link.

    The sidebar's model and dataset are added unless ``params`` names them; an expert's token never is.
    ``show=False`` only makes the URL follow the view (no link box).
    """
    full = {"model": selected_model_id(), "dataset": st.session_state.get(DATASET_KEY, "demo")}
    if st.session_state.get(CPU_KEY):
        full["device"] = "cpu"
    full.update(params)
    clean = {str(k): str(v) for k, v in full.items() if v is not None and str(v) != ""}
    if dict(st.query_params) != clean:
        st.query_params.from_dict(clean)
    from urllib.parse import urlencode

    base = (st.context.url or "").split("?")[0] if hasattr(st, "context") else ""
    link = f"{base}?{urlencode(clean)}"
    if not show:
        return link
    st.caption(f"{label} (the link holds every setting of this view):")
    st.code(link, language=None, wrap_lines=True)  # st.code has a copy button
    from pages._tour_button import add_to_tour  # here: that module uses this one

    add_to_tour(clean)
    return link
