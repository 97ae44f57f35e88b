"""Who may act in a session: annotators (joined by name, kept as typed) and their access tokens.

An annotator's identity within a session is their name, trimmed, spaces collapsed and compared without case
(:func:`annotator_key`), so "Carol" and "carol" cannot be two experts; the name is shown as typed.
"""

from __future__ import annotations

import re

import duckdb

from ..errors import ProbekitError
from .sessions import MAX_NAME, _load, _now, _store

_NAME_RE = re.compile(r"^[\w .@'-]+$")


# ---------------------------------------------------------------- annotators
def annotator_key(name) -> str:
    """The identity of an annotator within a session: the name, trimmed, spaces collapsed, lower-cased.

    >>> annotator_key("  Dr  Alice ")
    'dr alice'
    """
    if not isinstance(name, str):
        raise ProbekitError("the annotator name must be text")
    clean = " ".join(name.split())
    if not clean:
        raise ProbekitError("enter your name to start annotating")
    if len(clean) > MAX_NAME or not _NAME_RE.match(clean):
        raise ProbekitError(f"use a plain name (letters, digits, spaces, . _ - @ '; at most {MAX_NAME} characters); "
                            f"got {name[:80]!r}")
    return clean.lower()


def join(session_id: str, name: str) -> str:
    """Register ``name`` in the session (idempotent); returns the annotator key used by the other calls."""
    entry = _load(session_id)
    key = annotator_key(name)
    sid = entry["meta"]["session_id"]
    store = _store()
    if store.fetch("SELECT 1 FROM annotation_annotators WHERE session_id = ? AND annotator = ?", [sid, key]):
        return key
    try:
        with store.transaction() as cur:
            cur.execute("INSERT INTO annotation_annotators VALUES (?, ?, ?, ?)",
                        [sid, key, " ".join(name.split()), _now()])
    except duckdb.ConstraintException:  # joined at the same moment from another tab
        pass
    return key


def annotators(session_id: str) -> list[str]:
    sid = _load(session_id)["meta"]["session_id"]
    return [r[0] for r in _store().fetch("SELECT annotator FROM annotation_annotators WHERE session_id = ? "
                                         "ORDER BY joined_at, annotator", [sid])]


_MEMBERS: set[tuple] = set()


def _member(cur, sid: str, annotator) -> str:
    key = annotator_key(annotator)
    known = (_store().path, sid, key)  # annotators are never removed: remember who has joined
    if known in _MEMBERS:
        return key
    if not cur.execute("SELECT 1 FROM annotation_annotators WHERE session_id = ? AND annotator = ?",
                       [sid, key]).fetchall():
        raise ProbekitError(f"{key!r} has not joined session {sid}: enter your name on the Annotate page first")
    _MEMBERS.add(known)
    return key


def _member_key(sid: str, annotator) -> str:
    if (_store().path, sid, annotator_key(annotator)) in _MEMBERS:
        return annotator_key(annotator)
    cur = _store().cursor()
    try:
        return _member(cur, sid, annotator)
    finally:
        cur.close()
