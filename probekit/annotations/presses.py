"""Key presses from a browser, each handled exactly once however often it is sent.

The Annotate page's key listener (``pages/_rating_keys.py``) runs in the browser window: it numbers the window's
presses 1, 2, 3, … and sends *every press not yet acknowledged* each time it sends, and again after a quiet
spell, until the server's acknowledgement (the last number handled from that window) comes back. So a press
can arrive many times, in many overlapping messages. :func:`take_presses` is the server's side of that
contract: a press is handled when its number is greater than the last one handled from its window, and then
never again. ``handled`` (window id → last number handled) is the only memory needed and is also the
acknowledgement sent back.

A press may carry a third element, the milliseconds the expert spent on it as the browser measured them
(:func:`take_timed_presses`): from the moment the answer became the one to rate in that window (the page
showing it, or the previous press) to the press. It is measured where the expert is, so neither a lagging page
nor presses handled together in one server run squeeze it to 0.

**Across a server restart** ``handled`` is gone, but the browser is not: Streamlit's page reconnects to the new
server without reloading, so the window keeps its id, its numbering and its unacknowledged presses, and sends
them again. The database therefore remembers too: a press that went through :func:`probekit.annotations.press`
while :func:`pressing` named it is stored in ``annotation_presses`` (annotations migration 6, key (session,
expert, window, number)) in the *same transaction* as the event it produced (or alone when it changed nothing),
and the first press a desk sees from a window makes it read that window's stored last number
(:func:`stored_last`) once, then keep it in memory. A re-sent press at or below it is skipped, and the
acknowledgement is that stored number. A *reloaded* page is a new window (a new id, numbering from 1, an empty
queue: what it had unacknowledged was flushed by a beacon on the way out), so no press is ever re-sent under a
different id.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

MAX_CLIENT = 64  # characters of a window id (the listener makes 10 to 20)
MAX_MS = 24 * 3600 * 1000  # a press's time beyond a day is not answering time


def take_presses(handled: dict[str, int], state) -> list[str]:
    """The keys of ``state``'s presses not handled yet, in the order typed; marks them handled in ``handled``.

    ``state`` is what the listener sends, ``{"client": window id, "queue": [[number, key], …]}`` with numbers
    increasing; it comes from the browser, so anything else (None, a missing or overlong id, an entry that is
    not a ``[whole number, text]`` pair) is ignored rather than trusted. Taking the same state twice, or an
    older one, takes nothing:

    >>> handled = {}
    >>> take_presses(handled, {"client": "w1", "queue": [[1, "5"], [2, "3"]]}), handled
    (['5', '3'], {'w1': 2})
    >>> take_presses(handled, {"client": "w1", "queue": [[1, "5"], [2, "3"], [3, "s"]]})
    ['s']
    >>> take_presses(handled, {"client": "w1", "queue": [[2, "3"]]}), take_presses(handled, None)
    ([], [])
    >>> take_presses(handled, {"client": "w2", "queue": [[1, "u"]]}), handled
    (['u'], {'w1': 3, 'w2': 1})
    """
    return [key for key, _ in take_timed_presses(handled, state)]


def take_timed_presses(handled: dict[str, int], state) -> list[tuple[str, int | None]]:
    """:func:`take_presses` with each press's time in milliseconds (its third element, a number from 1 to a day,
    rounded up; None when it has none or an unusable one: the press still counts).

    >>> take_timed_presses({}, {"client": "w", "queue": [[1, "5", 812.4], [2, "3", 0.2], [3, "s", -1], [4, "u"]]})
    [('5', 813), ('3', 1), ('s', None), ('u', None)]
    """
    found = new_presses(handled, state)
    if found:
        handled[state["client"]] = found[-1][0]
    return [(key, ms) for _, key, ms in found]


def new_presses(handled: dict[str, int], state) -> list[tuple[int, str, int | None]]:
    """(number, key, milliseconds) of ``state``'s presses not handled yet according to ``handled``, in the order
    typed, *without* marking them handled (the caller marks each once it is done with it: a press that fails
    half-way is then sent again rather than lost). Ill-formed states and entries are ignored as in
    :func:`take_presses`.

    >>> new_presses({"w": 1}, {"client": "w", "queue": [[1, "5"], [2, "3", 40], [2, "4"], [3, "u"]]})
    [(2, '3', 40), (3, 'u', None)]
    """
    if not isinstance(state, dict):
        return []
    client, queue = state.get("client"), state.get("queue")
    if not isinstance(client, str) or not 0 < len(client) <= MAX_CLIENT or not isinstance(queue, list):
        return []
    last = handled.get(client, 0)
    found: list[tuple[int, str, int | None]] = []
    for entry in queue:
        if not (isinstance(entry, list | tuple) and len(entry) in (2, 3)):
            continue
        seq, key = entry[0], entry[1]
        if isinstance(seq, bool) or not isinstance(seq, int) or not isinstance(key, str) or seq <= last:
            continue
        last = seq
        found.append((seq, key, _ms(entry[2]) if len(entry) == 3 else None))
    return found


def _ms(value) -> int | None:
    """A press's time from the browser as whole milliseconds (rounded up, so a real press is never 0 ms)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_MS:
        return None  # NaN fails the comparison too
    return max(1, math.ceil(value))


# ---------------------------------------------------------------- presses in the database (across restarts)
@dataclass(eq=False)
class Press:
    """One press being handled, as :func:`pressing` names it to :func:`probekit.annotations.press`.

    ``known``: the (session, expert, window) triples whose stored last number the handler (a desk) has already
    read, shared between its presses so the database is read once per window. What the press did comes back on
    it: ``owner`` (session, expert key) once a press function took it, ``stored`` (the window's stored last
    number, when it was read for this press), ``skipped`` (already stored: nothing done), ``recorded`` (stored
    with its event), ``failed`` (the error that kept it from being stored, e.g. a full disk: not handled, so the
    browser sends it again)."""

    client: str
    seq: int
    key: str
    known: set = field(default_factory=set)
    owner: tuple[str, str] | None = None
    stored: int | None = None
    skipped: bool = False
    recorded: bool = False
    failed: BaseException | None = None


class PressHandled(Exception):
    """Raised inside a write transaction when its press is already stored (another handler of the same window
    stored it first): the transaction rolls back, so the press's event is not written twice."""


_CURRENT: ContextVar[Press | None] = ContextVar("probekit_press", default=None)


@contextmanager
def pressing(press: Press) -> Iterator[Press]:
    """While this block runs (in this thread), :func:`probekit.annotations.press` stores ``press`` with what it
    does, and skips it when the database already has it."""
    token = _CURRENT.set(press)
    try:
        yield press
    finally:
        _CURRENT.reset(token)


def current() -> Press | None:
    """The press :func:`pressing` names now, if any."""
    return _CURRENT.get()


def stored_last(cur, session_id: str, annotator: str, client: str) -> int:
    """The last press number stored from window ``client`` of this expert in this session (0 if none); ``cur``
    is a cursor or the store (anything with ``execute`` or ``fetch``)."""
    sql = "SELECT max(seq) FROM annotation_presses WHERE session_id = ? AND annotator = ? AND client = ?"
    args = [session_id, annotator, client]
    rows = cur.fetch(sql, args) if hasattr(cur, "fetch") else cur.execute(sql, args).fetchall()
    return int(rows[0][0]) if rows and rows[0][0] is not None else 0


def seen(store, session_id: str, annotator: str) -> bool:
    """Whether the current press (if any) is already stored: called first by a press function, it names the
    press's owner and reads the window's stored last number when this handler has not read it yet. True: skip
    the press (it is marked ``skipped``)."""
    press = current()
    if press is None:
        return False
    press.owner = (session_id, annotator)
    window = (session_id, annotator, press.client)
    if window not in press.known:
        press.stored = stored_last(store, session_id, annotator, press.client)
        press.known.add(window)
        if press.seq <= press.stored:
            press.skipped = True
            return True
    return False


def record(cur, session_id: str, annotator: str, event_id: int | None, now) -> None:
    """Inside a write transaction: store the current press (if it belongs to this expert) with the event it
    produced. A press already stored from its window (same or later number) raises :class:`PressHandled`, which
    rolls the transaction back; the primary key refuses an exact duplicate written concurrently."""
    press = current()
    if press is None or press.owner != (session_id, annotator):
        return
    if stored_last(cur, session_id, annotator, press.client) >= press.seq:
        raise PressHandled(press.client, press.seq)
    cur.execute("INSERT INTO annotation_presses VALUES (?, ?, ?, ?, ?, ?, ?)",
                [session_id, annotator, press.client, press.seq, press.key[:16], event_id, now])
