"""The server log of a healthy session has no traceback: one harmless record of Streamlit's is filtered out.

Streamlit's Starlette server (``streamlit/web/server/starlette/starlette_websocket.py``) sends a session's messages
from a background task that ends quietly on ``starlette.websockets.WebSocketDisconnect`` but logs any other
exception with its traceback ("Error sending websocket payload"). Starlette raises a different class,
``WebSocketDisconnected`` (a ``RuntimeError``: 'Cannot call "send" once a close message has been sent.'), for a send
on a websocket whose close has already gone out (the class came with Kludex/starlette#2766, "Replace
RuntimeError with WebSocketDisconnected once the socket has been disconnected"); Streamlit's sender does not catch
it, so a tab that goes away while its page is still being sent leaves a traceback for a connection that simply
ended. The cause is upstream (Streamlit's sender), so that one record, and nothing else, is dropped here; every
other record of that logger, and that message with any other exception, is still logged.
"""

from __future__ import annotations

import logging

LOGGER = "streamlit.web.server.starlette.starlette_websocket"
MESSAGE = "Error sending websocket payload"
CLOSED = 'Cannot call "send" once a close message has been sent'


class SendAfterClose(logging.Filter):
    """Drops Streamlit's "Error sending websocket payload" record when its exception is Starlette's
    ``WebSocketDisconnected`` for a send after the close."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != LOGGER or record.getMessage() != MESSAGE or not record.exc_info:
            return True
        exc = record.exc_info[1]
        return not (type(exc).__name__ == "WebSocketDisconnected" and type(exc).__module__ == "starlette.websockets"
                    and str(exc).startswith(CLOSED))


def install() -> None:
    """Add the filter to Streamlit's websocket logger, once per process (the app script runs on every rerun)."""
    logger = logging.getLogger(LOGGER)
    if not any(isinstance(f, SendAfterClose) for f in logger.filters):
        logger.addFilter(SendAfterClose())
