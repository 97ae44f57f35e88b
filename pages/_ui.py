"""Shared UI pieces: the sidebar (model, device, dataset), cached model loading, error guard, progress.

Pages stay thin by calling these; all real work happens in ``probekit`` (which never imports streamlit).
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import logging
import re
import runpy
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import streamlit as st
import torch

from probekit import config, models
from probekit.bench.views import DEFAULT_TEXT, option_text
from probekit.datasets import Dataset, available_datasets, freetext, load_spec, triples
from probekit.errors import ProbekitError

log = logging.getLogger("probekit.app")
CUSTOM = "__custom__"
UPLOAD = "__upload__"
MODEL_KEY, CUSTOM_KEY, CPU_KEY = "pk_model", "pk_model_custom", "pk_cpu"
DATASET_KEY, UPLOAD_KEY = "pk_dataset", "pk_upload"


# ---------------------------------------------------------------- the app shell
APP = Path(__file__).resolve().parent.parent / "app.py"
_SHELL = threading.local()


@contextmanager
def shell():
    """app.py runs the selected page inside this, so a page can tell it has the app's navigation and sidebar."""
    _SHELL.depth = getattr(_SHELL, "depth", 0) + 1
    try:
        yield
    finally:
        _SHELL.depth -= 1


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
        st.error(f"{what} failed unexpectedly ({type(e).__name__}: {str(e)[:300]}). Details are in the server log.")


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


def job_panel(state_key: str, *, stop: str = "Cancel", stop_key: str | None = None, extra=None) -> None:
    """Poll the background job ``st.session_state[state_key]`` (a :class:`probekit.jobs.Job`) once a second.

    While it runs: a progress bar with its stage and elapsed time, a stop button, and ``extra(job)`` (e.g. a
    live loss curve), all in a fragment so only this panel reruns; other pages and sessions stay usable.
    When it finishes the whole page reruns once, so the page can show the result.
    """
    job = st.session_state.get(state_key)
    running = job is not None and not job.finished

    @st.fragment(run_every=1.0 if running else None)
    def panel():
        job = st.session_state.get(state_key)
        if job is None or job.finished:
            if running:  # it just finished: refresh the whole page
                st.rerun()
            return
        c1, c2 = st.columns([5, 1], vertical_alignment="bottom")
        c1.progress(job.fraction, text=f"{job.stage} · {job.elapsed:.0f} s")
        if c2.button(stop, icon=":material/stop:", key=stop_key or f"{state_key}_stop"):
            job.cancel()
        if extra is not None:
            extra(job)

    panel()


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
        st.error(str(e), icon=":material/error:")
    except Exception as e:  # noqa: BLE001
        log.error("model load failed\n%s", traceback.format_exc())
        st.error(f"Could not load model {model_id!r}: {type(e).__name__}: {str(e)[:300]}")
    return None


def model_label(model_id: str | None = None) -> str:
    model_id = model_id or selected_model_id()
    return dict(models.available_models()).get(model_id, model_id)


# ---------------------------------------------------------------- datasets
def current_dataset() -> Dataset | None:
    """The sidebar's dataset (shipped demo, MedLAMA full/hard when present, or an uploaded triples file)."""
    spec = st.session_state.get(DATASET_KEY, "demo")
    try:
        if spec == UPLOAD:
            up = st.session_state.get(UPLOAD_KEY)
            if up is None:
                st.info("Upload a triples file (CSV or JSONL: subject, relation, object[, template]) or template-free "
                        "prompts (prompt with [MASK], object[, subject, relation, source]) in the sidebar.")
                return None
            data = up.getvalue()
            if len(data) > config.MAX_UPLOAD_MB * 2**20:
                raise ProbekitError(f"{up.name} is larger than {config.MAX_UPLOAD_MB} MB")
            return _parse_upload(up.name, data)
        return load_spec(spec)
    except ProbekitError as e:
        st.error(str(e), icon=":material/error:")
    except UnicodeDecodeError:
        st.error("The uploaded file is not UTF-8 text.")
    return None


_UPLOADS: OrderedDict[str, tuple[int, Dataset]] = OrderedDict()
"""Parsed uploads shared by sessions (the same file uploaded twice is parsed once), least recently used
first, bounded by the bytes of the uploaded files (:data:`UPLOADS_MAX_BYTES`): a server that sees many large
uploads keeps only the recent ones; each session also keeps its own upload for as long as it lives."""
UPLOADS_MAX_BYTES = 2 * config.MAX_UPLOAD_MB * 2**20
_UPLOADS_LOCK = threading.Lock()


def _parse(name: str, data: bytes) -> Dataset:
    """A triples file, or a template-free one (a ``prompt`` column: sentences with [MASK]) by its first record."""
    fmt = "jsonl" if name.lower().endswith((".jsonl", ".json", ".ndjson")) else "csv"
    digest = hashlib.sha1(data).hexdigest()[:12]
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ProbekitError(f"{name}: not UTF-8 text (byte {e.start}); save it as UTF-8 CSV or JSONL") from None
    first = next((line for line in text.splitlines() if line.strip()), "")
    free = '"prompt"' in first if fmt == "jsonl" else "prompt" in [c.strip() for c in first.split(",")]
    parser = freetext.parse if free else triples.parse
    return parser(text, label=name, fmt=fmt, name=f"upload:{name}", version=digest)


def upload_cache_bytes() -> int:
    with _UPLOADS_LOCK:
        return sum(size for size, _ in _UPLOADS.values())


def _parse_upload(name: str, data: bytes) -> Dataset:
    key = hashlib.sha1(data).hexdigest()
    mine = st.session_state.get("_pk_upload")
    if mine is not None and mine[0] == key:
        return mine[1]
    with _UPLOADS_LOCK:
        hit = _UPLOADS.get(key)
        if hit is not None:
            _UPLOADS.move_to_end(key)
    ds = hit[1] if hit is not None else _parse(name, data)
    with _UPLOADS_LOCK:
        _UPLOADS[key] = (len(data), ds)
        _UPLOADS.move_to_end(key)
        while len(_UPLOADS) > 1 and sum(size for size, _ in _UPLOADS.values()) > UPLOADS_MAX_BYTES:
            _UPLOADS.popitem(last=False)
    st.session_state["_pk_upload"] = (key, ds)  # released with the session
    return ds


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
        ds[UPLOAD] = "Upload triples (CSV / JSONL)…"
        st.selectbox("Dataset", list(ds), format_func=ds.get, key=DATASET_KEY)
        if st.session_state.get(DATASET_KEY) == UPLOAD:
            st.file_uploader("Triples file", type=["csv", "jsonl", "json"], key=UPLOAD_KEY,
                             help="Columns subject, relation, object and optionally template ([X] … [Y]); or, "
                                  "template-free: prompt (a sentence with [MASK]), object[, subject, relation].")


# ---------------------------------------------------------------- downloads
_DOWNLOADS: OrderedDict[tuple, bytes] = OrderedDict()
_DOWNLOADS_MAX_BYTES = 256 * 2**20
_DOWNLOADS_LOCK = threading.Lock()


def download(label: str, make: Callable[[], bytes], *, memo: tuple, file_name: str, key: str,
             mime: str | None = None, help: str | None = None) -> None:  # noqa: A002 - streamlit's name
    """A download button whose bytes exist when it is drawn, so every click gets its file.

    Streamlit's deferred downloads (a callable as ``data``) are dropped by the next rerun, and pages with a
    job panel rerun every second: clicks then fetched nothing ("Deferred file … not found"). Here the
    bytes are made once per ``memo`` (e.g. ``("run", run_id, "csv")``; finished runs never change) and kept
    in a small byte-bounded memo; the click does not rerun the page.
    """
    with _DOWNLOADS_LOCK:
        data = _DOWNLOADS.get(memo)
        if data is not None:
            _DOWNLOADS.move_to_end(memo)
    if data is None:
        data = make()
        with _DOWNLOADS_LOCK:
            _DOWNLOADS[memo] = data
            while len(_DOWNLOADS) > 1 and sum(len(v) for v in _DOWNLOADS.values()) > _DOWNLOADS_MAX_BYTES:
                _DOWNLOADS.popitem(last=False)
    st.download_button(label, data, file_name=file_name, mime=mime, key=key, help=help, on_click="ignore",
                       icon=":material/download:")


# ---------------------------------------------------------------- data shown as text, never as markup
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def md(text) -> str:
    """``text`` (an entity, a session name, anything from data) escaped for ``st.markdown``/captions, so
    ``![x](http://…)`` shows as written instead of fetching an image, and ``<a href>`` stays text.
    """
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("/", "\\/")


_MARKUP = re.compile(r"!\[|\]\(|<[A-Za-z/!]|https?:|www\.")


def message(text) -> str:
    """A message for st.error/st.warning that may quote data (a name typed, a session name): shown as text when it
    holds link, image or HTML syntax (the browser would fetch an image named in an error), else unchanged (so
    messages keep their `code` marks)."""
    return md(text) if _MARKUP.search(str(text)) else str(text)


def chart_text(text) -> str:
    """``text`` for plotly labels and hovers: plotly renders a subset of HTML, so tags are escaped."""
    return html.escape(str(text), quote=False)


FONT_PX = 13
"""Chart text size: legible on a projector at 1280×720 (issue 18: grey 10-px labels)."""


def legible(fig, *, height: int = 360, legend: bool = True, percent_axis: str | None = None):
    """``fig`` laid out for a projector: fonts ≥ 12 px, the legend in a row above the plot (never over an axis
    title), axis labels never cut (automargin). ``percent_axis`` (``"x"`` or ``"y"``) is an accuracy axis in
    percent: it starts at zero, so a few points' difference does not look like a cliff."""
    fig.update_layout(height=height, font=dict(size=FONT_PX), hoverlabel=dict(font_size=FONT_PX),
                      margin=dict(l=10, r=10, t=48 if legend else 16, b=10), showlegend=legend,
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0,
                                  font=dict(size=FONT_PX), title_text=""))
    fig.update_xaxes(automargin=True, tickfont_size=FONT_PX - 1, title_font_size=FONT_PX + 1)
    fig.update_yaxes(automargin=True, tickfont_size=FONT_PX - 1, title_font_size=FONT_PX + 1)
    if percent_axis:
        fig.update_layout({f"{percent_axis}axis": dict(rangemode="tozero", ticksuffix="%")})
    return fig


# ---------------------------------------------------------------- access: expert links and the organiser (issue 18)
# Who a browser session is decides which app it gets (app.py): an expert link's token opens the annotation-only
# app; everyone else is the organiser, asked for PROBEKIT_ORGANISER_TOKEN when it is set. The token checks live
# in probekit.annotations.access; these helpers only keep the answer in the browser session's state.
EXPERT_KEY, ORGANISER_KEY = "pk_expert", "pk_organiser"


def expert():
    """The :class:`probekit.annotations.Expert` this browser session acts as, or None on the organiser side."""
    held = st.session_state.get(EXPERT_KEY)
    return held[0] if held else None


def access() -> str:
    """``"expert"`` or ``"organiser"`` for this browser session; stops the run with a message (and no data) when
    an expert link's token is wrong or revoked, or when the organiser token is required and not yet given.

    A token in the URL (``?token=…``) makes the session an expert's; it is checked again on every run (so a
    revoked link stops working at once) and remembered, so the expert stays in when the URL loses it.
    """
    from probekit import annotations as ann

    qp = st.query_params
    held = st.session_state.get(EXPERT_KEY)
    token = qp.get("token") or (held[1] if held else None)
    if token is not None:
        who = None
        try:
            who = ann.verify_token(token, session_id=qp.get("session") if "token" in qp else None)
        except ProbekitError as e:
            st.error(str(e), icon=":material/link_off:")
        except Exception as e:  # noqa: BLE001 - e.g. the database is busy: say so, show nothing
            log.error("token check failed\n%s", traceback.format_exc())
            st.error(f"Could not check this link ({type(e).__name__}); try again in a moment.")
        if who is None:
            st.session_state.pop(EXPERT_KEY, None)
            st.stop()
        st.session_state[EXPERT_KEY] = (who, token)
        if qp.get("token") != token or qp.get("session") != who.session_id:
            qp.from_dict({"session": who.session_id, "token": token})
        return "expert"
    if ann.organiser_token_required() and not st.session_state.get(ORGANISER_KEY):
        _organiser_sign_in()
        st.stop()
    return "organiser"


def _organiser_sign_in() -> None:
    from probekit import annotations as ann

    st.title("probekit")
    st.info("This server asks organisers for the organiser token (PROBEKIT_ORGANISER_TOKEN). Experts: open the "
            "personal link your organiser sent you.", icon=":material/lock:")
    given = st.text_input("Organiser token", type="password", key="pk_org_token")
    if st.button("Sign in", type="primary", key="pk_org_sign_in"):
        if ann.check_organiser_token(given):
            st.session_state[ORGANISER_KEY] = True
            st.rerun()
        st.error("That is not the organiser token.", icon=":material/error:")


# ---------------------------------------------------------------- probe options
def _option_label(name: str) -> str:
    return name.replace("_", " ").capitalize()


NONE_LABELS = DEFAULT_TEXT
"""What an option left unset (None) means, in the same words on every page (issue 18: the Probe page said
"mean / layer 6" where Benchmark said "model default / last layer")."""


def none_label(name: str) -> str:
    return option_text(name, None)


def _option_widget(where, option, default, key: str):
    """One widget for one :class:`probekit.probes.Option`, chosen by its type and choices. A value already in the
    session state (set by another page, e.g. "open on the Probe page") wins over the default."""
    label, kind, help_ = _option_label(option.name), option.value_type, option.help or None
    preset = key in st.session_state
    if kind is bool:
        return where.checkbox(label, key=key, help=help_, **({} if preset else {"value": bool(default)}))
    if option.choices:
        choices = list(option.choices)
        if preset and st.session_state[key] not in choices:
            del st.session_state[key]
            preset = False
        start = {} if preset else {"index": choices.index(default) if default in choices else 0}
        return where.selectbox(label, choices, key=key, help=help_, **start,
                               format_func=lambda v: option_text(option.name, v))  # one vocabulary (issue 18)
    if kind in (int, float):
        start = {} if preset else {"value": None if default is None else kind(default)}
        return where.number_input(label, min_value=kind(0), step=kind(1), key=key, help=help_,
                                  placeholder=option_text(option.name, None), **start)
    start = {} if preset else {"value": "" if default is None else str(default)}
    value = where.text_input(label, key=key, help=help_, placeholder=none_label(option.name), **start)
    return value or (None if default is None else value)


def option_state(probe, options: dict, *, key: str) -> dict:
    """Session-state entries that make :func:`probe_option_widgets` open with ``options`` (other pages use it
    to open the Probe page on a run's own options)."""
    spec = {o.name: o for o in probe.options}
    return {(f"{key}_{probe.name}_{name}" if spec[name].advanced else f"{key}_{name}"): value
            for name, value in options.items() if name in spec}


def probe_option_widgets(probe, *, key: str, defaults: dict | None = None, container=None,
                         nested: bool = False) -> dict:
    """Widgets for every option of ``probe``, generated from its :class:`~probekit.probes.Option`s: a selectbox
    for choices, a number input for numbers, a checkbox for flags, a text input otherwise; ``advanced`` options
    go in an expander. Widget keys are ``f"{key}_{option name}"`` (advanced ones ``f"{key}_{probe}_{option name}"``);
    ``defaults`` overrides an option's default
    on this page. Returns ``{option name: value}`` for ``probe.rank(..., **values)``.

    A new probe's options therefore appear on every page with no page change. ``nested``: the container is
    already an expander (Streamlit allows no expander in an expander), so advanced options follow under a caption.
    """
    defaults = defaults or {}
    where = container if container is not None else st
    values = {}
    advanced = [o for o in probe.options if o.advanced]
    for o in probe.options:
        if not o.advanced:
            values[o.name] = _option_widget(where, o, defaults.get(o.name, o.default), f"{key}_{o.name}")
    if advanced:
        if nested:
            where.caption("Advanced")
        with (contextlib.nullcontext(where) if nested else where.expander("Advanced options")) as box:
            for o in advanced:
                # advanced options (batch size, length limits) differ between probes: one widget per probe, so
                # switching probe never carries retrieval's 50-token limit over to a generative probe
                values[o.name] = _option_widget(box if nested else st, o, defaults.get(o.name, o.default),
                                                f"{key}_{probe.name}_{o.name}")
    return values


# ---------------------------------------------------------------- results that match their inputs (issue 18)
def _signature(inputs: dict) -> str:
    return hashlib.sha1(repr(sorted((str(k), repr(v)) for k, v in inputs.items())).encode()).hexdigest()


def keep(key: str, inputs: dict, value) -> None:
    """Remember ``value`` (a page's result) together with the ``inputs`` that produced it.

    Pair with :func:`kept`: a page draws a result only while the current inputs (model, dataset, probe, options,
    query…) are the ones it was computed from, so switching any of them never leaves an old table under new
    controls.
    """
    st.session_state[key] = (_signature(inputs), value)


def kept(key: str, inputs: dict, *, note: bool = True):
    """The value :func:`keep` stored under ``key`` if it was computed from exactly ``inputs``, else None.

    When a result exists but its inputs differ, it is hidden and (``note``) one caption says so.
    """
    held = st.session_state.get(key)
    if held is None:
        return None
    if held[0] == _signature(inputs):
        return held[1]
    if note:
        st.caption("The settings changed since the last result; run again to see results for these settings.")
    return None


def forget(key: str) -> None:
    """Drop a kept result (e.g. after an input error, so no stale result stays on screen)."""
    st.session_state.pop(key, None)


# ---------------------------------------------------------------- share links (issue 18)
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
    return link
