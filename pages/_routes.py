"""HTTP routes of the app's own, next to Streamlit's: the press endpoint (``pages/_press_route.py``) and the job
status endpoint (``pages/_job_progress.py``). Both answer the browser outside Streamlit's rerun cycle, which is
their point: a press stored while the page lags, a job's progress read without rerunning any script.

Streamlit (1.67) gives a script no way to add a route to the server that ``streamlit run`` starts (``st.App``
does, for an app launched as an ASGI app instead). So each route is added once per server process to the running
Starlette application's router, in front of its catch-all page route; where there is no such application
(AppTest, or a Streamlit without Starlette) there is no route, and :func:`add_route` says so by returning None:
its caller then takes the path through Streamlit.
"""

from __future__ import annotations

import gc
import logging
import threading

import streamlit as st

log = logging.getLogger("probekit.app")
_LOCK = threading.Lock()
_ADDED: dict[str, str | None] = {}  # route tail -> its full URL path (None: this process has no web application)


def _application():
    """This process's Starlette application, or None (none, or several: then which one serves is unknown)."""
    try:
        from starlette.applications import Starlette
    except ImportError:
        return None
    apps = [o for o in gc.get_objects() if type(o) is Starlette]  # type(): no isinstance hooks of other libraries
    if len(apps) != 1:
        if apps:
            log.warning("app routes not added: %d web applications in this process", len(apps))
        return None
    return apps[0]


def add_route(tail: str, endpoint, *, methods: list[str]) -> str | None:
    """Serve ``endpoint`` (a Starlette endpoint: ``async def endpoint(request) -> Response``) at ``/<base>/<tail>``
    (``tail`` may hold Starlette path parameters, e.g. ``probekit/jobs/{job}``) and return that URL path; once per
    process, later calls return the same path. None when this process has no web application to add it to."""
    with _LOCK:
        if tail in _ADDED:
            return _ADDED[tail]
        app = _application()
        path = None
        if app is not None:
            from starlette.routing import Route

            base = (st.get_option("server.baseUrlPath") or "").strip("/")
            path = f"/{base}/{tail}" if base else f"/{tail}"
            routes = app.router.routes
            if not any(getattr(r, "path", None) == path for r in routes):
                routes.insert(0, Route(path, endpoint, methods=methods))
        _ADDED[tail] = path
        return path
