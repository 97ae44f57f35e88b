"""Key presses from a browser, each handled exactly once however often it is sent.

The Annotate page's key listener (``pages/_rating_keys.py``) runs in the browser window: it numbers the window's
presses 1, 2, 3, … and sends *every press not yet acknowledged* each time it sends, and again after a quiet
spell, until the server's acknowledgement (the last number handled from that window) comes back. So a press
can arrive many times, in many overlapping messages. :func:`take_presses` is the server's side of that
contract: a press is handled when its number is greater than the last one handled from its window, and then
never again. ``handled`` (window id → last number handled) is the only memory needed and is also the
acknowledgement sent back.
"""

from __future__ import annotations

MAX_CLIENT = 64  # characters of a window id (the listener makes 10 to 20)


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
    if not isinstance(state, dict):
        return []
    client, queue = state.get("client"), state.get("queue")
    if not isinstance(client, str) or not 0 < len(client) <= MAX_CLIENT or not isinstance(queue, list):
        return []
    last = handled.get(client, 0)
    keys = []
    for entry in queue:
        if not (isinstance(entry, list | tuple) and len(entry) == 2):
            continue
        seq, key = entry
        if isinstance(seq, bool) or not isinstance(seq, int) or not isinstance(key, str) or seq <= last:
            continue
        last = seq
        keys.append(key)
    if keys:
        handled[client] = last
    return keys
