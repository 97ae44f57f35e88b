"""User errors as one message on the page, never a traceback; and one progress bar for a page's long call."""

from __future__ import annotations

import logging
import traceback
from contextlib import contextmanager

import streamlit as st

from pages._display import message
from probekit.errors import ProbekitError

log = logging.getLogger("probekit.app")


def _cuda_out_of_memory(e: BaseException) -> bool:
    """torch's ``torch.cuda.OutOfMemoryError``, told by name so that the pages need not import torch."""
    return type(e).__name__ == "OutOfMemoryError" and type(e).__module__.split(".")[0] == "torch"


@contextmanager
def guard(what: str = "That"):
    """Show user errors as a message, never a traceback (the traceback goes to the server log)."""
    try:
        yield
    except ProbekitError as e:
        st.error(message(str(e)), icon=":material/error:")
    except MemoryError:
        st.error("Out of memory. Try a smaller dataset, fewer relations or a smaller batch size.")
    except Exception as e:  # noqa: BLE001 - last line of defence for the UI
        if _cuda_out_of_memory(e):
            import torch  # loaded already: it raised the error

            torch.cuda.empty_cache()
            st.error("The GPU ran out of memory. Lower the batch size, or tick 'Force CPU' in the sidebar.")
            return
        log.error("unexpected error\n%s", traceback.format_exc())
        st.error(message(f"{what} failed unexpectedly ({type(e).__name__}: {str(e)[:300]}). Details are in the "
                         "server log."))


class progress:  # noqa: N801 - used like a function: report = ui.progress("…"); report(done, total, stage)
    """A ``progress(done, total, stage)`` callback drawing one st.progress bar; ``clear()`` removes it.

    ``stop_key``: a Stop button beside the bar, for work done in the page's own script run (a cold encoding of
    thousands of names). Pressing it asks Streamlit for a rerun, which ends the running script at its next bar
    update (Streamlit checks for a rerun request whenever the script draws); the rerun finds the button pressed:
    :func:`stopped` says so, and the page does not start the work again.
    """

    def __init__(self, label: str = "Working…", *, stop_key: str | None = None):
        self.label = label
        self.slot = st.empty()
        box = self.slot.container()
        if stop_key is not None:
            bar_col, stop_col = box.columns([6, 1], vertical_alignment="bottom")
            stop_col.button("Stop", key=stop_key, icon=":material/stop:")
            self.bar = bar_col.progress(0.0, text=label)
        else:
            self.bar = box.progress(0.0, text=label)

    def __call__(self, done: int, total: int, stage: str = "") -> None:
        self.bar.progress(min(1.0, done / max(total, 1)), text=f"{stage or self.label}: {done:,}/{total:,}")

    def clear(self) -> None:
        self.slot.empty()


def stopped(stop_key: str) -> bool:
    """True on the rerun that a :class:`progress` bar's Stop button (``stop_key``) asked for."""
    return bool(st.session_state.get(stop_key))
