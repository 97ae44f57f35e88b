"""Background jobs: one runner for every long computation (benchmarks, layers, rewiring, sweeps, context).

A :class:`Job` runs ``fn(progress, should_cancel)`` in a thread; pages poll it and the CLI drives the
same function in the foreground with its progress bar (``probekit.cli.common.progress_bar``).
``progress(done, total, stage)`` (:data:`Progress`) is the one progress signature of probekit;
``should_cancel()`` is checked by the work between steps, which then raises :class:`Cancelled` (finished
parts stay stored and resume on the next start).
"""

from __future__ import annotations

import secrets
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from .errors import ProbekitError

Progress = Callable[[int, int, str], None]
"""progress(done, total, stage): the one progress signature of probekit (every module imports this one)."""


class Cancelled(ProbekitError):
    """The user cancelled the work; what was finished is kept and resumes on the next start."""


_WORK = threading.Semaphore(1)
"""One heavy job at a time per process: the CPU (or GPU) is shared by every user of the app."""


class Job:
    """Run ``fn(progress, should_cancel)`` in a thread; pages poll ``status``/``fraction``/``text``.

    ``status`` goes ``queued`` -> ``running`` -> ``done`` | ``cancelled`` | ``failed``; ``result`` holds
    fn's return value, ``error`` a user-facing message.
    """

    def __init__(self, fn: Callable[[Progress, Callable[[], bool]], object], *, label: str = "job"):
        self.fn, self.label = fn, label
        self.id = secrets.token_hex(16)  # unguessable (and a valid widget key: no "__"): a browser told it may read
        # this job's progress
        self.status = "queued"
        self.done, self.total, self.stage = 0, 0, "waiting for another job to finish"
        self.result: Any = None  # fn's return value once done: its caller knows which fn it started
        self.error: str | None = None
        self.started_at = time.time()
        self.finished_at: float | None = None
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._main, name=f"probekit-{label}", daemon=True)

    def start(self) -> Job:
        self._thread.start()
        return self

    def progress(self, done: int, total: int, stage: str = "") -> None:
        self.done, self.total, self.stage = done, total, stage

    def cancel(self) -> None:
        self._cancel.set()

    def should_cancel(self) -> bool:
        return self._cancel.is_set()

    @property
    def finished(self) -> bool:
        return self.status in ("done", "cancelled", "failed")

    @property
    def fraction(self) -> float:
        return 1.0 if self.status == "done" else min(1.0, self.done / self.total) if self.total else 0.0

    @property
    def elapsed(self) -> float:
        return (self.finished_at or time.time()) - self.started_at

    def snapshot(self) -> dict:
        """What a watcher needs, as plain values (read without a lock: each attribute is one assignment).

        >>> Job(lambda progress, cancelled: None).snapshot()["status"]
        'queued'
        """
        return {"status": self.status, "finished": self.finished, "fraction": round(self.fraction, 4),
                "stage": self.stage, "elapsed": round(self.elapsed, 1), "done": self.done, "total": self.total}

    def wait(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return self.finished

    def _main(self) -> None:
        acquired = False
        try:
            while not (acquired := _WORK.acquire(timeout=0.2)):
                if self._cancel.is_set():
                    break
            if self._cancel.is_set():
                raise Cancelled("cancelled before it started")
            self.status = "running"
            self.stage = "starting"
            self.result = self.fn(self.progress, self.should_cancel)
            self.status = "done"
        except Cancelled as e:
            self.error, self.status = str(e), "cancelled"
        except ProbekitError as e:
            self.error, self.status = str(e), "failed"
        except MemoryError:
            self.error, self.status = "out of memory: try fewer relations or a smaller batch size", "failed"
        except Exception as e:  # noqa: BLE001 - reported to the page, traceback to the log
            traceback.print_exc()
            self.error, self.status = f"unexpected {type(e).__name__}: {str(e)[:300]}", "failed"
        finally:
            if acquired:
                _WORK.release()
            self.finished_at = time.time()


def run_in_foreground(fn: Callable[[Progress, Callable[[], bool]], object], *, progress: Progress | None = None):
    """Run a job function in this thread (the CLI): same function, no thread, never cancelled."""
    return fn(progress or no_progress, lambda: False)


def no_progress(done: int, total: int, stage: str = "") -> None:
    """A ``progress(done, total, stage)`` that reports nothing."""
