"""probekit's server: Streamlit serving ``app.py``, with the organiser gate in front (``make app`` and
``probekit app`` run this file; ``streamlit run app.py`` still serves the same pages, without the gate).

The gate is plain ASGI middleware (Streamlit's ``st.App`` runs user middleware before its own): while the
organiser pages ask for a credential (:func:`probekit.annotations.organiser_token_required`), every file Streamlit
serves from its media store (``/media/…``: downloads such as the ratings export, images) needs the organiser's
signed sign-in cookie, so a leaked or guessed media URL gives nothing to a browser that has not signed in.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware

from probekit.annotations.organiser import COOKIE, check_organiser_cookie, organiser_token_required

GUARDED = "media"
"""The path segment of Streamlit's media store, whose responses carry data (downloads, images); the pages themselves
are guarded by app.py. Streamlit's own static files live under ``/static/`` (its fonts under ``/static/media/``):
they are no secret and are served to everyone, or a browser that has not signed in draws icon names as words."""


def guarded(path: str) -> bool:
    """Whether ``path`` is a media-store file: a ``media`` segment not inside ``/static/`` (any base URL path).

    >>> guarded("/media/8f2c.csv"), guarded("/probekit/media/8f2c.csv"), guarded("/static/media/Icons.woff2")
    (True, True, False)
    """
    parts = path.split("/")
    return GUARDED in parts and "static" not in parts[:parts.index(GUARDED)]


def _cookie(headers: list[tuple[bytes, bytes]], name: str) -> str | None:
    for key, value in headers:
        if key.lower() != b"cookie":
            continue
        for part in value.decode("latin-1").split(";"):
            k, _, v = part.strip().partition("=")
            if k == name:
                return v
    return None


class OrganiserGate:
    """Refuses (403) a guarded path to a request without a valid organiser cookie while a credential is required."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if (scope["type"] == "http" and guarded(scope.get("path", ""))
                and organiser_token_required() and not check_organiser_cookie(_cookie(scope["headers"], COOKIE))):
            body = b"sign in as the organiser first: this file is behind the organiser token\n"
            await send({"type": "http.response.start", "status": 403,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


app = st.App(str(Path(__file__).resolve().parent / "app.py"), middleware=[Middleware(OrganiserGate)])
