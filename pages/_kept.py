"""Results on screen: kept with the inputs that produced them, and exported with bytes that exist when drawn.

A page shows a result only while its inputs are the current ones (after a switch of dataset, probe or
model the old table stayed under the new controls), and every export click gets its file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import streamlit as st

from probekit.memo import Memo

# ---------------------------------------------------------------- downloads
_DOWNLOADS_MAX_BYTES = 256 * 2**20
_DOWNLOADS: Memo[tuple, bytes] = Memo(max_bytes=lambda: _DOWNLOADS_MAX_BYTES, sizeof=len)


def download(label: str, make: Callable[[], bytes], *, memo: tuple, file_name: str, key: str,
             mime: str | None = None, help: str | None = None) -> None:  # noqa: A002 - streamlit's name
    """A download button whose bytes exist when it is drawn, so every click gets its file.

    Streamlit's deferred downloads (a callable as ``data``) are dropped by the next rerun, and pages with a
    job panel rerun every second: clicks then fetched nothing ("Deferred file … not found"). Here the
    bytes are made once per ``memo`` (e.g. ``("run", run_id, "csv")``; finished runs never change) and kept
    in a small byte-bounded memo; the click does not rerun the page.
    """
    data = _DOWNLOADS.get(memo)
    if data is None:
        data = make()
        _DOWNLOADS.put(memo, data)
    st.download_button(label, data, file_name=file_name, mime=mime, key=key, help=help, on_click="ignore",
                       icon=":material/download:")


# ---------------------------------------------------------------- results that match their inputs
def _signature(inputs: dict) -> str:
    return hashlib.sha1(repr(sorted((str(k), repr(v)) for k, v in inputs.items())).encode()).hexdigest()


def keep(key: str, inputs: dict, value) -> None:
    """Remember ``value`` (a page's result) together with the ``inputs`` that produced it.

    Pair with :func:`kept`: a page draws a result only while the current inputs (model, dataset, probe, options,
    query…) are the ones it was computed from, so switching any of them never leaves an old table under new
    controls.
    """
    st.session_state[key] = (_signature(inputs), value)


def kept(key: str, inputs: dict, *, note: bool = True):
    """The value :func:`keep` stored under ``key`` if it was computed from exactly ``inputs``, else None.

    When a result exists but its inputs differ, it is hidden and (``note``) one caption says so.
    """
    held = st.session_state.get(key)
    if held is None:
        return None
    if held[0] == _signature(inputs):
        return held[1]
    if note:
        st.caption("The settings changed since the last result; run again to see results for these settings.")
    return None


def forget(key: str) -> None:
    """Drop a kept result (e.g. after an input error, so no stale result stays on screen)."""
    st.session_state.pop(key, None)
