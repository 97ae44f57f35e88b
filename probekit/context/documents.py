"""Context documents kept by content hash, so a share link can name the document instead of holding it.

A document pasted or uploaded on the Context page is stored once in ``documents/<hash>.txt`` next to the database
when it is run; the link carries ``doc=<hash>``. The same server opens it again; another server (or a document
deleted since) says so instead of guessing.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from .. import atomic, config
from .segment import MAX_DOCUMENT_CHARS

_HASH = re.compile(r"^[0-9a-f]{20}$")


def folder() -> Path:
    """Next to the database (``PROBEKIT_DB``): the server's own data, and a test's temporary folder in tests."""
    return config.db_path().parent / "documents"


def document_hash(text: str) -> str:
    """A short content hash of ``text`` (the name it is stored under).

    >>> len(document_hash("Metformin treats diabetes.")), document_hash("a") == document_hash("a")
    (20, True)
    """
    return hashlib.blake2b(text.encode("utf-8"), digest_size=10).hexdigest()


def save_document(text: str) -> str:
    """Store ``text`` (once: the name is its hash) and return its hash."""
    if len(text) > MAX_DOCUMENT_CHARS:
        raise ValueError(f"a document holds at most {MAX_DOCUMENT_CHARS:,} characters")
    digest = document_hash(text)
    path = folder() / f"{digest}.txt"
    if not path.exists():
        atomic.write_text(path, text)
    return digest


def load_document(digest: str) -> str | None:
    """The document stored under ``digest``, or None when this server does not hold it (or it is no hash)."""
    if not _HASH.match(digest or ""):
        return None
    path = folder() / f"{digest}.txt"
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    return text if document_hash(text) == digest else None
