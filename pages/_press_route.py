"""The press endpoint: ``POST /probekit/presses`` takes an expert's key presses straight from the browser and
hands them to that browser session's :class:`pages._rating_keys.Desk`, outside Streamlit's rerun cycle.

Why: a press sent as component state is stored only when the rerun it asks for runs. When the tab closes while
the page lags, Streamlit stops the session's pending run (``request_script_stop`` on disconnect) and the press,
which had reached the server, is never handled: with five experts on a loaded machine, 5 of 150 ratings were
lost that way. The listener therefore also posts every press here (a ``keepalive`` request, and a beacon when
the page goes away); it is stored at once, and the next rerun only draws it.

The body is the listener's state plus the desk's id, ``{"desk": id, "client": window, "queue": [[n, key, ms],
…]}``. The desk id is a random secret that only its own browser session was given (in the listener's data), so
the id alone says whose presses these are; an unknown id is answered 404 and changes nothing. The reply is the
acknowledgement, ``{"acked": last number handled from that window, "problem": why a press could not be stored
(a full disk) or null}``: the presses after ``acked`` stay with the browser, which shows the problem and sends
them again.

Where the server has no such route (``pages/_routes.py``: AppTest), presses travel as component state alone.
"""

from __future__ import annotations

import json
import logging
import threading
import weakref

from pages._routes import add_route

log = logging.getLogger("probekit.app")
PATH = "probekit/presses"
MAX_BODY = 64 * 1024  # bytes: a window's unacknowledged presses, thousands of them
_DESKS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # desk id -> Desk (lives in session state)
_LOCK = threading.Lock()


def press_endpoint(desk) -> str | None:
    """Register ``desk`` (its presses may now arrive at the endpoint) and return the endpoint's URL path, or None
    when the server has none."""
    with _LOCK:
        _DESKS[desk.id] = desk
    return add_route(PATH, _receive, methods=["POST"])


async def _receive(request):
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse

    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            return JSONResponse({"error": "too large"}, status_code=413)
    try:
        state = json.loads(body)
    except ValueError:
        return JSONResponse({"error": "not JSON"}, status_code=400)
    desk_id = state.get("desk") if isinstance(state, dict) else None
    with _LOCK:
        desk = _DESKS.get(desk_id) if isinstance(desk_id, str) else None
    if desk is None:
        return JSONResponse({"error": "unknown desk"}, status_code=404)
    try:
        acked, problem = await run_in_threadpool(_take, desk, state)  # database writes: off the event loop
    except Exception:  # noqa: BLE001 - one line in the log; the browser sends the press again
        log.exception("a key press from the press endpoint failed")
        return JSONResponse({"error": "failed"}, status_code=500)
    if problem:
        log.warning("key presses not stored: %s", problem)
    return JSONResponse({"acked": acked, "problem": problem})


def _take(desk, state) -> tuple[int, str | None]:
    """The desk's acknowledgement for ``state`` and its problem, read together (another request may change it)."""
    with desk.lock:
        return desk.take(state), desk.problem
