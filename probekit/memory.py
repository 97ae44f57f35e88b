"""This process's memory, and giving freed memory back to the system.

A parsed upload of a million triples is some hundreds of MB of small Python objects; when it is dropped, CPython
frees them into its allocator's arenas, and glibc keeps the freed pages, so the process' resident size (what a
server's operator sees) stays up. :func:`release` collects cycles and asks glibc to return free pages
(``malloc_trim``), so a server that drops a large upload shrinks back.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os

_LIBC: ctypes.CDLL | None = None


def rss_bytes() -> int:
    """Resident set size of this process, in bytes (0 where /proc is not available)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def release() -> None:
    """Collect garbage cycles, then return free heap pages to the system (glibc only; elsewhere a no-op)."""
    global _LIBC
    gc.collect()
    try:
        if _LIBC is None:
            _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        _LIBC.malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


__all__ = ["release", "rss_bytes"]
