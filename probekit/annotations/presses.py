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
"""

from __future__ import annotations

import math

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
    if not isinstance(state, dict):
        return []
    client, queue = state.get("client"), state.get("queue")
    if not isinstance(client, str) or not 0 < len(client) <= MAX_CLIENT or not isinstance(queue, list):
        return []
    last = handled.get(client, 0)
    keys: list[tuple[str, int | None]] = []
    for entry in queue:
        if not (isinstance(entry, list | tuple) and len(entry) in (2, 3)):
            continue
        seq, key = entry[0], entry[1]
        if isinstance(seq, bool) or not isinstance(seq, int) or not isinstance(key, str) or seq <= last:
            continue
        last = seq
        keys.append((key, _ms(entry[2]) if len(entry) == 3 else None))
    if keys:
        handled[client] = last
    return keys


def _ms(value) -> int | None:
    """A press's time from the browser as whole milliseconds (rounded up, so a real press is never 0 ms)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_MS:
        return None  # NaN fails the comparison too
    return max(1, math.ceil(value))
