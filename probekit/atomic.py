"""The one atomic file writer: every file probekit writes (exports, caches, manifests, uploads) goes through it.

- the content is written to a temporary file with a unique name (``.<name>.<random>.tmp``) in the target's
  folder, flushed and fsynced, then ``os.replace``\\ d over the target: a reader (or a concurrent writer) sees
  the old file or the new one, never half of one, and a crash mid-write leaves the old file as it was;
- the temporary file is removed on every failure path (a crash can leave one behind; its hidden name never
  reads as the target);
- the target must be absent or a regular file: a folder, device node (``/dev/null``), FIFO or socket is
  refused with one :class:`~probekit.errors.ProbekitError` (renaming over it would replace it). A symlink is
  followed and its *target* is replaced, so the link stays a link (and a link to a FIFO is refused alike);
- a new file gets the usual ``0666 & ~umask`` permissions (or ``mode``: a secret is written 0600 from its first
  byte), a replaced file keeps its mode;
- ``exclusive``: publish only if the target does not exist yet (``os.link``, atomic): of two processes creating
  the same file at once, one wins and the other gets :class:`FileExistsError` and reads the winner's file.

>>> import tempfile, pathlib
>>> out = pathlib.Path(tempfile.mkdtemp()) / "t.txt"
>>> write_text(out, "one").read_text(), write(out, lambda fh: fh.write(b"two")).read_text()
('one', 'two')
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from .errors import ProbekitError

_UMASK_LOCK = threading.Lock()


def _umask() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _UMASK_LOCK:  # the portable way: set and restore
        old = os.umask(0o022)
        os.umask(old)
    return old


def safe_target(path: str | Path) -> Path:
    """The regular file a write to ``path`` will replace (symlinks followed), or a clear refusal."""
    path = Path(path).expanduser()
    if path.is_symlink():
        path = path.resolve()
    try:
        st = path.stat()
    except FileNotFoundError:
        if path.parent.exists() and not path.parent.is_dir():
            raise ProbekitError(f"cannot write {path}: {path.parent} is not a folder") from None
        return path
    if stat.S_ISDIR(st.st_mode):
        raise ProbekitError(f"cannot write {path}: it is a folder; give a file name (e.g. {path / 'export.csv'})")
    if not stat.S_ISREG(st.st_mode):
        raise ProbekitError(f"refusing to write {path}: it is not a regular file (a device, FIFO or socket)")
    return path


def temp_name(target: Path) -> Path:
    """A fresh hidden name beside ``target`` for its temporary file."""
    return target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")


def write(path: str | Path, fill: Callable[[IO[Any]], object], *, text: bool = False, encoding: str = "utf-8",
          newline: str | None = None, check: Callable[[Path], object] | None = None, mode: int | None = None,
          exclusive: bool = False) -> Path:
    """Write ``path`` atomically: ``fill(fh)`` writes the content to an open temporary file (binary, or text with
    ``text``); ``check(tmp_path)``, when given, may refuse the finished file (raise) before it replaces anything.
    ``mode``: the file's permissions (default: a replaced file's, else ``0666 & ~umask``); ``exclusive``: never
    replace, raise :class:`FileExistsError` when the target exists (module docstring).
    Returns the path written (a symlink's target)."""
    target = safe_target(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
    while True:
        tmp = temp_name(target)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            break
        except FileExistsError:  # pragma: no cover - 32 random bits taken: draw again
            continue
    try:
        with (os.fdopen(fd, "w", encoding=encoding, newline=newline) if text else os.fdopen(fd, "wb")) as fh:
            fill(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        if check is not None:
            check(tmp)
        if exclusive:
            os.link(tmp, target)  # FileExistsError when another writer was first
            tmp.unlink()
        else:
            os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def write_bytes(path: str | Path, data: bytes, **kw) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`write`)."""
    return write(path, lambda fh: fh.write(data), **kw)


def write_text(path: str | Path, data: str, *, encoding: str = "utf-8", **kw) -> Path:
    """Write ``data`` to ``path`` atomically as text (see :func:`write`)."""
    return write(path, lambda fh: fh.write(data), text=True, encoding=encoding, **kw)


def write_json(path: str | Path, obj, **dumps) -> Path:
    """Write ``obj`` as JSON (``json.dumps`` keywords in ``dumps``) to ``path`` atomically (see :func:`write`)."""
    return write_text(path, json.dumps(obj, **dumps))


__all__ = ["safe_target", "temp_name", "write", "write_bytes", "write_json", "write_text"]
