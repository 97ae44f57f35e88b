"""The Annotate page's keyboard rules: which key means which action (:func:`key_action`, a pure function), and a
key press applied as that action through :mod:`.rating`, exactly once per (window, press number) even across a
server restart (:func:`press`, :func:`settle_press`, with :mod:`.presses`)."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from ..errors import DiskFullError, ProbekitError
from ..store.db import StoreBusyError
from . import presses as _presses
from .access import _member_key
from .rating import _write, next_query, query_view, rate, skip, undo
from .sessions import _load, _now, _store

KEY_HELP = "Keys: **1–5** rate the marked answer · **S** skip · **U** undo · **Enter** next query"
_KEY_NAMES = {**{str(s): str(s) for s in range(1, 6)}, "s": "s", "u": "u", "enter": "enter", "return": "enter"}
DONE_MESSAGE = "Every answer of this query is done: Enter moves on, a click changes one."
UNFINISHED_MESSAGE = "Rate or skip every answer of this query first (S skips one)."
NOT_STORED = (DiskFullError, StoreBusyError, OSError, duckdb.IOException, duckdb.FatalException)
"""Errors that keep a press from being stored (a full disk, the database busy or unreadable): such a press is not
handled, neither applied nor settled, and the browser sends it again until it is stored. A refusal (a
:class:`~probekit.errors.ProbekitError` such as a query assigned to others) is an answer, and handled."""


@dataclass(frozen=True)
class Action:
    """One thing an annotator asked for: ``rate`` (``item_id``, ``score``), ``skip`` (``item_id``), ``undo``,
    ``next`` (move to the next query), or ``none`` (nothing to do; ``message`` says why)."""

    kind: str
    item_id: str | None = None
    score: int | None = None
    message: str | None = None


def key_name(key) -> str | None:
    """The rating key a browser key name stands for (``"S"`` → ``"s"``, ``"Enter"`` → ``"enter"``), else None.

    >>> key_name("S"), key_name("Enter"), key_name("5"), key_name("x"), key_name(None)
    ('s', 'enter', '5', None, None)
    """
    return _KEY_NAMES.get(key.lower()) if isinstance(key, str) else None


def key_action(key, view: dict | None) -> Action | None:
    """What a key press means on the query shown now (pure: decides, writes nothing).

    ``view`` is :func:`query_view`'s dict, or None when the annotator has no query left. The *marked* answer is
    the first one in display order not yet rated or skipped, so keys typed faster than the page redraws rate
    successive answers, never one answer twice. Rules: **1–5** rate the marked answer and **S** skips it (when
    every answer is done they do nothing and say so); **U** undoes the last rating or skip; **Enter** moves on
    only once every answer of the query is rated or skipped. Other keys: None (ignored).
    """
    key = key_name(key)
    if key is None:
        return None
    if key == "u":
        return Action("undo")
    if key == "enter":
        if view is not None and not view["complete"]:
            return Action("none", message=UNFINISHED_MESSAGE)
        return Action("next")
    marked = next((a for a in (view or {}).get("answers", []) if a["status"] is None), None)
    if marked is None:
        return Action("none", message=DONE_MESSAGE)
    if key == "s":
        return Action("skip", marked["item_id"])
    return Action("rate", marked["item_id"], int(key))


def perform(session_id: str, annotator: str, action: Action, *, query_index: int | None,
            elapsed_ms: float | None = None) -> tuple[int | None, str | None]:
    """Carry out ``action`` for the annotator who is on ``query_index``; returns (the query to show next,
    a message or None). An undo shows the query of the rating it took back."""
    if action.kind == "rate":
        if action.item_id is None or action.score is None:
            raise ProbekitError("a rate action needs an item and a score")
        rate(session_id, action.item_id, annotator, action.score, elapsed_ms=elapsed_ms)
    elif action.kind == "skip":
        if action.item_id is None:
            raise ProbekitError("a skip action needs an item")
        skip(session_id, action.item_id, annotator, elapsed_ms=elapsed_ms)
    elif action.kind == "undo":
        undone = undo(session_id, annotator)
        if undone is None:
            return query_index, "Nothing to undo."
        return undone["query_index"], None
    elif action.kind == "next":
        return next_query(session_id, annotator), None
    elif action.kind != "none":
        raise ProbekitError(f"unknown action {action.kind!r}")
    return query_index, action.message


def press(session_id: str, annotator: str, key: str, *, query_index: int | None,
          elapsed_ms: float | None = None) -> tuple[int | None, str | None]:
    """A key press on ``query_index`` (:func:`key_action` on the query as it is *now*, then :func:`perform`).

    Inside :func:`probekit.annotations.presses.pressing` the press is a numbered press of a browser window: it is
    stored with the event it produced, in that event's transaction, and one the database already holds (re-sent
    by the browser after a server restart) does nothing (see :mod:`probekit.annotations.presses`). One that could
    not be stored (:data:`NOT_STORED`: a full disk) is marked ``failed`` before the error goes on, whatever the
    caller does with the error: its handler must not settle it (:func:`settle_press`) but wait for it again."""
    try:
        return _press(session_id, annotator, key, query_index=query_index, elapsed_ms=elapsed_ms)
    except NOT_STORED as e:
        current = _presses.current()
        if current is not None:
            current.failed = e
        raise


def _press(session_id: str, annotator: str, key: str, *, query_index: int | None,
           elapsed_ms: float | None) -> tuple[int | None, str | None]:
    current = _presses.current()
    if current is not None:
        sid = _load(session_id)["meta"]["session_id"]
        if _presses.seen(_store(), sid, _member_key(sid, annotator)):
            return query_index, None
    view = None if query_index is None else query_view(session_id, annotator, query_index)
    action = key_action(key, view)
    if action is None:
        return query_index, None
    try:
        return perform(session_id, annotator, action, query_index=query_index, elapsed_ms=elapsed_ms)
    except _presses.PressHandled:  # another handler of this window stored it first
        if current is not None:
            current.skipped = True
        return query_index, None
    except duckdb.ConstraintException:  # the same, caught by the presses' key as both committed
        if current is None or current.owner is None or \
                _presses.stored_last(_store(), *current.owner, current.client) < current.seq:
            raise
        current.skipped = True
        return query_index, None


def settle_press(press: _presses.Press) -> None:
    """Store a press that changed nothing (Enter, a key on a finished query, a refused rating): it is handled
    all the same, and a re-send after a restart must not act on it then. Does nothing for a press no press
    function took (no owner), one skipped, one already stored with its event, or one that failed to be stored
    (``failed``: it is not handled and comes again). Raises a :data:`NOT_STORED` error (and marks the press
    ``failed``) when it cannot be stored itself."""
    if press.owner is None or press.skipped or press.recorded or press.failed is not None:
        return
    sid, key = press.owner

    def write(cur):
        with _presses.pressing(press):
            _presses.record(cur, sid, key, None, _now())

    try:
        _write(write)
    except _presses.PressHandled:
        press.skipped = True
        return
    except NOT_STORED as e:
        press.failed = e
        raise
    press.recorded = True
