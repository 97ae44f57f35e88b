"""Who may act in a session: annotators, their personal links (tokens) and the organiser token.

An annotator's identity within a session is their name, trimmed, spaces collapsed and compared without case
(:func:`annotator_key`), so "Carol" and "carol" cannot be two experts; the name is shown as typed everywhere.

In the app an expert acts only through a personal link: a per-session, per-expert token
(:func:`issue_token`), random, stored as its sha256 only, compared in constant time and revocable
(:func:`revoke_tokens`). The link opens an annotation-only app; the organiser pages ask for
an organiser credential once links exist (:mod:`probekit.annotations.organiser`). The Python API (and CLI) below
is trusted code: it takes annotator names directly.

A link has a role (:data:`ROLES`): an *expert* link rates answers; a *reviewer* link records verdicts on the
session's disputed answers (:mod:`.review`) and opens a review-only app. A reviewer is not an annotator of the
session (never joined, so every rating call refuses them), and nobody is both in one session: a reviewer settles
ratings blind, which they could not do over their own.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from urllib.parse import urlencode

import duckdb
import pandas as pd

from .. import config
from ..errors import ProbekitError, UnknownNameError
from .organiser import generate_organiser_token
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
    """The session's annotators' names as typed, in the order they joined."""
    sid = _load(session_id)["meta"]["session_id"]
    return [r[0] for r in _store().fetch("SELECT display_name FROM annotation_annotators WHERE session_id = ? "
                                         "ORDER BY joined_at, annotator", [sid])]


_MEMBERS: set[tuple] = set()


def _member(cur, sid: str, annotator) -> str:
    key = annotator_key(annotator)
    known = (_store().path, sid, key)  # annotators are never removed: remember who has joined
    if known in _MEMBERS:
        return key
    if not cur.execute("SELECT 1 FROM annotation_annotators WHERE session_id = ? AND annotator = ?",
                       [sid, key]).fetchall():
        raise ProbekitError(f"{key!r} has not joined session {sid}: open your personal link (the organiser "
                            "creates it on the Annotation results page)")
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


# ---------------------------------------------------------------- personal links (per-session, per-person tokens)
_TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
INVALID_LINK = ("This annotation link is not valid: its token is wrong or was revoked. "
                "Ask the organiser of the session for a new link.")
ROLES = ("expert", "reviewer")
"""What a link lets its holder do: rate the session's answers, or record verdicts on its disputed ones."""
_WRONG_ROLE = {
    "expert": "This is a reviewer's link: it records verdicts on disputed answers and cannot rate answers.",
    "reviewer": "This is an expert's annotation link: it rates answers and cannot record a reviewer's verdict. "
                "Ask the organiser of the session for a reviewer link.",
}


@dataclass(frozen=True)
class Expert:
    """Who a link lets in: one person of one session (``annotator`` is the name's key, ``name`` as typed) in a
    ``role`` of :data:`ROLES` (an annotator for ``"expert"``; a reviewer is no annotator)."""

    session_id: str
    annotator: str
    name: str
    role: str = "expert"


def check_role(role) -> str:
    """``role`` if it is one of :data:`ROLES`, else an UnknownNameError naming them."""
    if role not in ROLES:
        raise UnknownNameError("link role", str(role), list(ROLES))
    return role


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def issue_token(session_id: str, name: str, *, new_only: bool = False, role: str = "expert") -> str:
    """A new personal link token for ``name`` in the session; returns the token.

    ``role`` (:data:`ROLES`): an expert is joined to the session as an annotator (if new); a reviewer is not,
    and their name as typed is kept with the link. The token is random (``secrets.token_urlsafe``) and only its
    sha256 is stored, so the database cannot give it back: hand it out now. Issuing again revokes the person's
    earlier tokens (a lost link is replaced, not duplicated). ``new_only`` refuses a name that has already
    joined (a self-service start must never hand out someone else's identity). Refused with one line: a
    reviewer link for an expert of the session, an expert link for one of its reviewers.
    """
    role = check_role(role)
    entry = _load(session_id)
    sid = entry["meta"]["session_id"]
    key = annotator_key(name)
    typed = " ".join(name.split())
    store = _store()
    existing = store.fetch("SELECT display_name FROM annotation_annotators WHERE session_id = ? AND annotator = ?",
                           [sid, key])
    if existing and new_only:
        raise ProbekitError(f"{existing[0][0]!r} is already an expert of this session: open your personal link "
                            "(the organiser can issue a new one on the Annotation results page)")
    if existing and role == "reviewer":
        raise ProbekitError(f"{existing[0][0]!r} is an expert of this session: a reviewer settles the raters' "
                            "scores blind, so choose someone who has not rated its answers")
    reviewer = store.fetch("SELECT display_name FROM annotation_tokens WHERE session_id = ? AND annotator = ? "
                           "AND role = 'reviewer' LIMIT 1", [sid, key])
    if reviewer and role == "expert":
        raise ProbekitError(f"{reviewer[0][0]!r} is a reviewer of this session: a reviewer does not rate its "
                            "answers (give the expert link to someone else)")
    if role == "expert":
        join(sid, name)
    token = secrets.token_urlsafe(24)
    now = _now()
    with store.transaction() as cur:
        cur.execute("UPDATE annotation_tokens SET revoked_at = ? WHERE session_id = ? AND annotator = ? "
                    "AND revoked_at IS NULL", [now, sid, key])
        cur.execute("INSERT INTO annotation_tokens (token_hash, session_id, annotator, created_at, role, "
                    "display_name) VALUES (?, ?, ?, ?, ?, ?)",
                    [_hash(token), sid, key, now, role, typed if role == "reviewer" else None])
    if config.organiser_token() is None:  # links exist now: the organiser pages need a credential

        generate_organiser_token()
    return token


def verify_token(token, *, session_id: str | None = None, role: str | None = None) -> Expert:
    """Who a link token belongs to, with its role, or :data:`INVALID_LINK` as a ProbekitError (a malformed,
    unknown or revoked token, or one of another session than ``session_id``, all get the same message).
    ``role``: the role the caller acts in; a valid link of the other role is refused with a line saying so."""
    if role is not None:
        check_role(role)
    if not isinstance(token, str) or not _TOKEN_RE.match(token):
        raise ProbekitError(INVALID_LINK)
    digest = _hash(token)
    rows = _store().fetch("SELECT t.token_hash, t.session_id, t.annotator, t.role, "
                          "CASE t.role WHEN 'expert' THEN a.display_name ELSE t.display_name END "
                          "FROM annotation_tokens t LEFT JOIN annotation_annotators a "
                          "ON a.session_id = t.session_id AND a.annotator = t.annotator "
                          "WHERE t.token_hash = ? AND t.revoked_at IS NULL", [digest])
    if not rows or not hmac.compare_digest(rows[0][0], digest) or rows[0][4] is None or rows[0][3] not in ROLES:
        raise ProbekitError(INVALID_LINK)
    _, sid, key, held, name = rows[0]
    if session_id is not None and not hmac.compare_digest(str(session_id).strip().encode(), sid.encode()):
        raise ProbekitError(INVALID_LINK)
    if role is not None and held != role:
        raise ProbekitError(_WRONG_ROLE[role])
    return Expert(sid, key, name, held)


def revoke_tokens(session_id: str, name: str) -> int:
    """Revoke every active link of ``name`` (an expert or a reviewer) in the session; returns how many were
    revoked. Their ratings and verdicts stay; a new link (:func:`issue_token`) lets them in again."""
    sid = _load(session_id)["meta"]["session_id"]
    key = annotator_key(name)
    store = _store()
    with store.transaction() as cur:
        n = cur.execute("SELECT count(*) FROM annotation_tokens WHERE session_id = ? AND annotator = ? "
                        "AND revoked_at IS NULL", [sid, key]).fetchall()[0][0]
        cur.execute("UPDATE annotation_tokens SET revoked_at = ? WHERE session_id = ? AND annotator = ? "
                    "AND revoked_at IS NULL", [_now(), sid, key])
    return int(n)


def experts(session_id: str) -> pd.DataFrame:
    """The session's experts for the organiser: name (as typed), joined, whether a link is active, when the
    latest was issued, and when the last one was revoked."""
    sid = _load(session_id)["meta"]["session_id"]
    return _store().fetch_df("""
        SELECT a.display_name AS expert, a.joined_at AS joined,
               count(t.token_hash) FILTER (WHERE t.revoked_at IS NULL) > 0 AS "link active",
               max(t.created_at) AS "link issued", max(t.revoked_at) AS "link revoked"
        FROM annotation_annotators a
        LEFT JOIN annotation_tokens t ON t.session_id = a.session_id AND t.annotator = a.annotator
             AND t.role = 'expert'
        WHERE a.session_id = ? GROUP BY a.display_name, a.joined_at ORDER BY a.joined_at""", [sid])


def reviewers(session_id: str) -> pd.DataFrame:
    """The session's reviewers for the organiser: name (as typed, from their latest link), whether a link is
    active, when the latest was issued, when the last one was revoked, and how many verdicts they recorded."""
    sid = _load(session_id)["meta"]["session_id"]
    return _store().fetch_df("""
        WITH r AS (
            SELECT annotator, arg_max(display_name, created_at) AS reviewer,
                   bool_or(revoked_at IS NULL) AS "link active", max(created_at) AS "link issued",
                   max(revoked_at) AS "link revoked", min(created_at) AS first
            FROM annotation_tokens WHERE session_id = $1 AND role = 'reviewer' GROUP BY annotator)
        SELECT reviewer, "link active", "link issued", "link revoked",
               (SELECT count(*) FROM annotation_verdicts v
                WHERE v.session_id = $1 AND lower(v.reviewer) = r.annotator) AS verdicts
        FROM r ORDER BY first, annotator""", [sid])


def expert_link(base_url: str, session_id: str, token: str) -> str:
    """The URL an expert opens: the app's Annotate page with the session and their token.

    >>> expert_link("http://localhost:8501/", "s-1", "abc")
    'http://localhost:8501/annotate?session=s-1&token=abc'
    """
    return f"{base_url.rstrip('/')}/annotate?{urlencode({'session': session_id, 'token': token})}"


REVIEW_PATH = "reviewer"
"""The URL path of a reviewer's link (app.py serves the review-only app there)."""


def reviewer_link(base_url: str, session_id: str, token: str) -> str:
    """The URL a reviewer opens: the review-only app with the session and their token.

    >>> reviewer_link("http://localhost:8501/", "s-1", "abc")
    'http://localhost:8501/reviewer?session=s-1&token=abc'
    """
    return f"{base_url.rstrip('/')}/{REVIEW_PATH}?{urlencode({'session': session_id, 'token': token})}"


