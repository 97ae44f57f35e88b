"""The one harmless record of Streamlit's websocket sender is dropped from the server log, and nothing else is.

The rule (pages/_server_log.py): Streamlit's "Error sending websocket payload" with Starlette's
``WebSocketDisconnected`` for a send after the close is a connection that ended, not an error; the same message with
any other exception, and every other record of that logger, is still logged."""

from __future__ import annotations

import asyncio
import logging

from starlette.websockets import WebSocket, WebSocketDisconnected

from pages import _server_log


def _send_after_close() -> WebSocketDisconnected:
    """The exception Starlette raises for a send on a websocket whose close has gone out (made by Starlette)."""
    sent: list[dict] = []

    async def receive():
        return {"type": "websocket.connect"}

    async def send(message):
        sent.append(message)

    async def run():
        ws = WebSocket({"type": "websocket", "path": "/", "headers": []}, receive, send)
        await ws.accept()
        await ws.close()
        try:
            await ws.send_bytes(b"late")
        except WebSocketDisconnected as e:
            return e
        raise AssertionError("Starlette sent after the close")

    return asyncio.run(run())


def _logged(exc: BaseException | None, message: str = _server_log.MESSAGE) -> list[logging.LogRecord]:
    logger = logging.getLogger(_server_log.LOGGER)
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Keep()
    logger.addHandler(handler)
    try:
        if exc is None:
            logger.error(message)
        else:
            try:
                raise exc
            except BaseException:
                logger.exception(message)
    finally:
        logger.removeHandler(handler)
    return records


def test_the_send_after_close_record_is_dropped_and_nothing_else():
    _server_log.install()
    _server_log.install()  # once per process, however often the app script runs
    assert sum(isinstance(f, _server_log.SendAfterClose)
               for f in logging.getLogger(_server_log.LOGGER).filters) == 1
    assert _logged(_send_after_close()) == []
    assert len(_logged(RuntimeError("Cannot call \"send\" once a close message has been sent."))) == 1
    assert len(_logged(WebSocketDisconnected("WebSocket is not connected. Need to call \"accept\" first."))) == 1
    assert len(_logged(_send_after_close(), "another message")) == 1
    assert len(_logged(None)) == 1
