"""Uploaded dataset files, parsed once and shared between sessions within a memory bound (any registered file
format: :mod:`probekit.datasets.formats`)."""

from __future__ import annotations

import hashlib
import weakref

import streamlit as st

from probekit import config, memory
from probekit.datasets import Dataset, formats
from probekit.memo import Memo

UPLOADS_SHARED = 1
"""Parsed uploads kept for sharing between sessions besides the ones sessions hold. A parsed triples file takes
some 15-30 times its file size (a 34 MB file of a million rows, about 500 MB), so a bound on the files' bytes
kept several parsed files alive: an upload replacing another grew the server by a whole parsed file each time."""
_UPLOADS: Memo[str, tuple[int, weakref.ref[Dataset]]] = Memo(max_entries=lambda: UPLOADS_SHARED,
                                                              max_bytes=lambda: UPLOADS_MAX_BYTES,
                                                              sizeof=lambda e: e[0])
"""Parsed uploads shared by sessions (the same file uploaded again, or by another session, is parsed once): the
most recent :data:`UPLOADS_SHARED`, within :data:`UPLOADS_MAX_BYTES` of files. Only weak references: the sessions
own their uploads (each keeps its own for as long as it lives, and drops it when it uploads another), so a parsed
file is freed when the last session holding it ends; a strong shared copy kept the last upload alive after every
tab had closed."""
UPLOADS_MAX_BYTES = 2 * config.MAX_UPLOAD_MB * 2**20


def _parse(name: str, data: bytes, fmt: str = formats.AUTO, progress=None) -> Dataset:
    """An uploaded file read by the format ``fmt`` (by default the one its first record fits)."""
    return formats.parse_upload(name, data, fmt=fmt, progress=progress)


def upload_key(data: bytes, fmt: str = formats.AUTO) -> str:
    """What identifies a parsed upload: the file's bytes and the format it is read as."""
    return f"{hashlib.sha1(data).hexdigest()}:{fmt}"


def is_parsed(key: str) -> bool:
    """Whether the upload ``key`` is parsed already (this session's, or shared by another): no reading to show."""
    mine = st.session_state.get("_pk_upload")
    if mine is not None and mine[0] == key:
        return True
    entry = _UPLOADS.get(key)
    return entry is not None and entry[1]() is not None


def upload_cache_bytes() -> int:
    return _UPLOADS.bytes


def _parse_upload(name: str, data: bytes, fmt: str = formats.AUTO, progress=None) -> Dataset:
    """The upload parsed once per server while a session holds it; ``progress(line, lines, stage)`` is told how far a
    new file's reading is (a report is also where a Stop ends the reading: nothing half-read is kept)."""
    key = upload_key(data, fmt)
    mine = st.session_state.get("_pk_upload")
    if mine is not None and mine[0] == key:
        return mine[1]
    entry = _UPLOADS.get(key)
    hit = entry[1]() if entry is not None else None  # None: never parsed, or every session holding it has ended
    if hit is None:  # a new file: drop the session's previous one and the shared one first, so that two parsed
        st.session_state["_pk_upload"] = None  # files are never held at once (the peak was the old one + the new)
        _UPLOADS.clear()
        del mine
        memory.release()
    ds = hit if hit is not None else _parse(name, data, fmt, progress)
    _UPLOADS.put(key, (len(data), weakref.ref(ds)))
    st.session_state["_pk_upload"] = (key, ds)  # released with the session
    return ds


def parsed_uploads() -> int:
    """Parsed uploads alive in this server (held by at least one session)."""
    return sum(1 for key in _UPLOADS.keys() if (e := _UPLOADS.get(key)) is not None and e[1]() is not None)


def memory_line() -> str:
    """The server's memory for the sidebar: resident size and the parsed uploads its sessions hold."""
    return (f"Server memory: {memory.rss_bytes() / 2**20:,.0f} MB · {parsed_uploads()} parsed upload(s) shared "
            f"({_UPLOADS.bytes / 2**20:,.0f} MB of files)")
