"""The annotator's side: next query, what they see, rate / skip / undo as append-only events, progress.

Ratings are an append-only log of events (``rate``, ``skip``, ``undo``); an edit is a new ``rate`` that
supersedes the annotator's previous one, an undo is an event that supersedes (cancels) the annotator's last
effective event, and the view ``annotation_current`` holds each (item, annotator)'s latest effective event.
Nothing is ever updated or deleted, so concurrent annotators never conflict on a row (DuckDB 2.0 rejects
concurrent updates of one row). Each write is one short transaction on its own cursor, with parameterised
SQL only; a rating acknowledged to the caller is committed, so killing the server loses nothing acknowledged.

An annotator only ever gets their own ratings back (:func:`query_view`, :func:`my_ratings`); in blind
sessions the gold marks, ranks and model scores are not even returned.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime

import duckdb
import numpy as np
import pandas as pd

from ..errors import ProbekitError
from ..store.db import StoreBusyError
from . import presses as _presses
from .access import _member_key
from .sessions import _load, _now, _store

_MAX_ELAPSED_MS = 24 * 3600 * 1000
_MAX_GAP_MS = 10 * 60 * 1000
_RETRIES = 8
_ASSIGN_LOCK = threading.Lock()


# ---------------------------------------------------------------- assignment (raters per item)
def _assigned(sid: str, key: str) -> set[int]:
    return {r[0] for r in _store().fetch("SELECT query_index FROM annotation_assignments WHERE session_id = ? "
                                         "AND annotator = ?", [sid, key])}


def _claim(entry: dict, key: str, query_index: int | None = None) -> int | None:
    """Give ``key`` the query ``query_index`` (or the first open one) if it still needs raters.

    Runs under a process lock: the app is the only process holding the database, so this keeps every
    query at exactly ``raters_per_item`` annotators even when several claim at once.
    """
    meta = entry["meta"]
    sid, limit = meta["session_id"], meta["raters_per_item"]
    store = _store()
    with _ASSIGN_LOCK:
        counts = dict(store.fetch("SELECT query_index, count(*) FROM annotation_assignments WHERE session_id = ? "
                                  "GROUP BY query_index", [sid]))
        mine = _assigned(sid, key)
        if query_index is not None:
            if query_index in mine:
                return query_index
            candidates = [query_index] if counts.get(query_index, 0) < limit else []
        else:
            candidates = [qi for qi in sorted(entry["by_query"]) if qi not in mine and counts.get(qi, 0) < limit]
        if not candidates:
            return None
        with store.transaction() as cur:
            cur.execute("INSERT INTO annotation_assignments VALUES (?, ?, ?, ?)", [sid, key, candidates[0], _now()])
        return candidates[0]



# ---------------------------------------------------------------- the annotator's side
def _done(sid: str, key: str) -> dict[str, tuple]:
    """item_id -> (kind, score, event_id, elapsed_ms) of the annotator's effective events."""
    rows = _store().fetch("SELECT item_id, kind, score, event_id, elapsed_ms FROM annotation_current "
                          "WHERE session_id = ? AND annotator = ?", [sid, key])
    return {r[0]: tuple(r[1:]) for r in rows}


def _queue(entry: dict, key: str) -> list[int]:
    """The queries this annotator works on, in session order (all of them without raters_per_item)."""
    if entry["meta"]["raters_per_item"] is None:
        return sorted(entry["by_query"])
    return sorted(_assigned(entry["meta"]["session_id"], key))


def next_query(session_id: str, annotator: str) -> int | None:
    """The query the annotator should see now: the first of theirs with an answer not yet rated or skipped
    (so a reload, or an undo into an earlier query, resumes exactly there); None when all are done."""
    entry = _load(session_id)
    sid = entry["meta"]["session_id"]
    key = _member_key(sid, annotator)
    done = _done(sid, key)
    for qi in _queue(entry, key):
        if any(it["item_id"] not in done for it in entry["by_query"][qi]):
            return qi
    if entry["meta"]["raters_per_item"] is not None:
        return _claim(entry, key)
    return None


def query_view(session_id: str, annotator: str, query_index: int) -> dict:
    """One query as its annotator sees it: text and answers in display order with *their own* ratings.

    Blind sessions return no gold answers, gold marks, ranks or model scores at all.
    """
    entry = _load(session_id)
    meta = entry["meta"]
    sid = meta["session_id"]
    key = _member_key(sid, annotator)
    if isinstance(query_index, bool) or not isinstance(query_index, int | np.integer) or \
            int(query_index) not in entry["by_query"]:
        raise ProbekitError(f"session {sid} has no query {query_index!r}")
    qi = int(query_index)
    q = entry["queries"].iloc[qi]
    done = _done(sid, key)
    answers = []
    for it in entry["by_query"][qi]:
        kind, score, event, elapsed = done.get(it["item_id"], (None, None, None, None))
        row = {"item_id": it["item_id"], "position": int(it["display_order"]), "answer": it["answer"],
               "status": kind, "score": None if score is None else int(score)}
        if not meta["blind"]:
            row.update(rank=int(it["rank"]), model_score=float(it["model_score"]), gold=bool(it["is_gold"]))
        answers.append(row)
    view = {"session_id": sid, "query_index": qi, "query": q["query_text"], "subject": q["subject"],
            "relation": q["relation"], "blind": bool(meta["blind"]), "answers": answers,
            "complete": all(a["status"] is not None for a in answers)}
    if not meta["blind"]:
        view["golds"] = list(q["golds"])
    return view


def _check_score(score) -> int:
    if isinstance(score, bool) or not isinstance(score, int | np.integer) or not 1 <= int(score) <= 5:
        raise ProbekitError(f"a rating must be a whole number from 1 to 5 (see the rubric); got {score!r}")
    return int(score)


def _check_elapsed(elapsed_ms) -> int | None:
    if elapsed_ms is None:
        return None
    if isinstance(elapsed_ms, bool) or not isinstance(elapsed_ms, int | float | np.integer | np.floating) \
            or not np.isfinite(elapsed_ms) or elapsed_ms < 0:
        raise ProbekitError(f"elapsed time must be a non-negative number of milliseconds, got {elapsed_ms!r}")
    return int(min(elapsed_ms, _MAX_ELAPSED_MS))


def _write(fn):
    """Run one short write transaction, retrying while DuckDB reports a transaction conflict: a conflict means
    another writer is busy, so the rating waits its turn (up to the store's lock wait since the last attempt
    began, with pauses of at most 50 ms) rather than being refused after a few quick tries. A full disk is no
    conflict: the store raises :class:`~probekit.errors.DiskFullError` at once, nothing of the write stored."""
    store = _store()
    deadline = time.monotonic() + store.lock_wait
    attempt = 0
    while True:
        try:
            with store.transaction() as cur:
                return fn(cur)
        except duckdb.TransactionException:
            attempt += 1
            if attempt >= _RETRIES and time.monotonic() >= deadline:
                raise StoreBusyError("the database is busy; please try again") from None
            time.sleep(min(0.002 * attempt, 0.05))


def _current_event(cur, item_id: str, key: str) -> int | None:
    rows = cur.execute("""
        SELECT max(event_id) FILTER (WHERE kind <> 'undo' AND event_id NOT IN (
                   SELECT supersedes FROM annotation_events
                   WHERE item_id = $1 AND annotator = $2 AND kind = 'undo'))
        FROM annotation_events WHERE item_id = $1 AND annotator = $2
        """, [item_id, key]).fetchall()
    return rows[0][0] if rows else None


def _since_last(cur, sid: str, key: str, now: datetime) -> int | None:
    """Milliseconds since the annotator's previous action (or joining): the default time per answer.
    Gaps over :data:`_MAX_GAP_MS` are breaks, not answering time, and give None."""
    rows = cur.execute("SELECT max(t) FROM (SELECT max(created_at) AS t FROM annotation_events WHERE session_id = ? "
                       "AND annotator = ? UNION ALL SELECT joined_at FROM annotation_annotators WHERE session_id = ? "
                       "AND annotator = ?)", [sid, key, sid, key]).fetchall()
    if not rows or rows[0][0] is None:
        return None
    ms = int((now - rows[0][0]).total_seconds() * 1000)
    return ms if 0 <= ms <= _MAX_GAP_MS else None


def _item_of(entry: dict, item_id) -> int:
    sid = entry["meta"]["session_id"]
    if not isinstance(item_id, str) or item_id not in entry["item_query"]:
        other = isinstance(item_id, str) and _store().fetch(
            "SELECT session_id FROM annotation_items WHERE item_id = ?", [item_id])
        if other:
            raise ProbekitError(f"answer {item_id!r} belongs to another session ({other[0][0]}), not {sid}")
        raise ProbekitError(f"session {sid} has no answer {item_id!r}")
    return entry["item_query"][item_id]


def _record(session_id, item_id, annotator, kind: str, score, elapsed_ms) -> int:
    entry = _load(session_id)
    sid = entry["meta"]["session_id"]
    qi = _item_of(entry, item_id)
    elapsed_ms = _check_elapsed(elapsed_ms)
    key = _member_key(sid, annotator)
    if entry["meta"]["raters_per_item"] is not None and _claim(entry, key, qi) is None:
        raise ProbekitError(f"this query already has its {entry['meta']['raters_per_item']} annotator(s); "
                            "it is not assigned to you (use the next query you are given)")

    def write(cur):
        previous = _current_event(cur, item_id, key)
        now = _now()
        elapsed = elapsed_ms if elapsed_ms is not None else _since_last(cur, sid, key, now)
        rows = cur.execute("INSERT INTO annotation_events (session_id, item_id, annotator, kind, score, supersedes, "
                           "elapsed_ms, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING event_id",
                           [sid, item_id, key, kind, score, previous, elapsed, now]).fetchall()
        _presses.record(cur, sid, key, int(rows[0][0]), now)  # the key press behind it, in the same transaction
        return int(rows[0][0])

    event = _write(write)
    _recorded(sid, key)
    return event


def _recorded(sid: str, key: str) -> None:
    """The current key press (if it is this expert's) was committed with its event."""
    press = _presses.current()
    if press is not None and press.owner == (sid, key):
        press.recorded = True


def rate(session_id: str, item_id: str, annotator: str, score: int, *, elapsed_ms: float | None = None) -> int:
    """Record the annotator's 1..5 rating of one answer (rating it again replaces their earlier rating);
    returns the committed event id. Refused with a message, writing nothing: a score outside 1..5 or not a
    whole number, an unknown session or answer, an answer of another session, a name that has not joined,
    a query assigned to other annotators."""
    score = _check_score(score)
    return _record(session_id, item_id, annotator, "rate", score, elapsed_ms)


def skip(session_id: str, item_id: str, annotator: str, *, elapsed_ms: float | None = None) -> int:
    """Mark an answer as skipped (cannot judge); it counts as done but never enters the statistics."""
    return _record(session_id, item_id, annotator, "skip", None, elapsed_ms)


def undo(session_id: str, annotator: str, *, event_id: int | None = None) -> dict | None:
    """Take back the annotator's last effective rating or skip (or ``event_id``, which must be theirs and
    still in effect) by appending an event that supersedes it; their earlier rating of that answer, if
    any, applies again. Returns {event_id, item_id, query_index} of what was undone, None if nothing left."""
    entry = _load(session_id)
    sid = entry["meta"]["session_id"]
    key = _member_key(sid, annotator)
    if event_id is not None and (isinstance(event_id, bool) or not isinstance(event_id, int | np.integer)):
        raise ProbekitError(f"event id must be a whole number, got {event_id!r}")

    def write(cur):
        live = """SELECT e.event_id, e.item_id, e.annotator FROM annotation_events e
                  WHERE e.session_id = ? AND e.kind IN ('rate', 'skip')
                    AND NOT EXISTS (SELECT 1 FROM annotation_events u
                                    WHERE u.kind = 'undo' AND u.supersedes = e.event_id)"""
        if event_id is None:
            rows = cur.execute(live + " AND e.annotator = ? ORDER BY e.event_id DESC LIMIT 1", [sid, key]).fetchall()
            if not rows:
                _presses.record(cur, sid, key, None, _now())  # a U with nothing to undo is still handled, once
                return None
        else:
            rows = cur.execute(live + " AND e.event_id = ?", [sid, int(event_id)]).fetchall()
            if not rows:
                raise ProbekitError(f"event {event_id} is not an effective rating in session {sid}")
            if rows[0][2] != key:
                raise ProbekitError("you can only undo your own ratings")
        target, item = int(rows[0][0]), rows[0][1]
        now = _now()
        made = cur.execute("INSERT INTO annotation_events (session_id, item_id, annotator, kind, score, supersedes, "
                           "elapsed_ms, created_at) VALUES (?, ?, ?, 'undo', NULL, ?, NULL, ?) RETURNING event_id",
                           [sid, item, key, target, now]).fetchall()
        _presses.record(cur, sid, key, int(made[0][0]), now)  # the U behind it, in the same transaction
        return {"event_id": target, "item_id": item, "query_index": entry["item_query"][item]}

    undone = _write(write)
    _recorded(sid, key)
    return undone


def progress(session_id: str, annotator: str) -> dict:
    """The annotator's answers done (rated or skipped) out of their total, queries done, and time per answer."""
    entry = _load(session_id)
    sid = entry["meta"]["session_id"]
    key = _member_key(sid, annotator)
    done = _done(sid, key)
    queue = _queue(entry, key)
    if entry["meta"]["raters_per_item"] is not None:  # plus the queries still open to them
        counts = dict(_store().fetch("SELECT query_index, count(*) FROM annotation_assignments WHERE session_id = ? "
                                     "GROUP BY query_index", [sid]))
        mine = set(queue)
        queue += [qi for qi in entry["by_query"] if qi not in mine
                  and counts.get(qi, 0) < entry["meta"]["raters_per_item"]]
    items = [it["item_id"] for qi in queue for it in entry["by_query"][qi]]
    n_done = sum(i in done for i in items)
    times = [v[3] / 1000 for v in done.values() if v[3] is not None]
    return {"done": n_done, "total": len(items),
            "rated": sum(v[0] == "rate" for v in done.values()), "skipped": sum(v[0] == "skip" for v in done.values()),
            "queries_done": sum(all(it["item_id"] in done for it in entry["by_query"][qi]) for qi in queue),
            "queries_total": len(queue),
            "seconds_per_answer": float(np.median(times)) if times else None,
            "mean_seconds_per_answer": float(np.mean(times)) if times else None}


def my_ratings(session_id: str, annotator: str) -> pd.DataFrame:
    """The annotator's own effective ratings and skips (never anyone else's)."""
    entry = _load(session_id)
    sid = entry["meta"]["session_id"]
    key = _member_key(sid, annotator)
    return _store().fetch_df("SELECT item_id, kind, score, elapsed_ms, created_at FROM annotation_current "
                             "WHERE session_id = ? AND annotator = ? ORDER BY event_id", [sid, key])
