"""User-facing errors: each carries a message that the app and CLI show as is, without a traceback."""

from __future__ import annotations

import difflib
import errno
import numbers
import os
import re
import sys


class ProbekitError(Exception):
    """An error whose message is meant for the user (bad input, missing model, malformed file)."""


class UnknownNameError(ProbekitError, KeyError):
    """Raised by registries: names what was asked, close matches and what exists.

    When nothing exists (no vocabulary built yet, no stored tour) the message says so instead of ending on an
    empty list, and gives ``empty_hint`` (how to make one) when the caller knows it:

    >>> str(UnknownNameError("vocabulary", "snomed", []))
    "unknown vocabulary 'snomed'; there is no vocabulary yet"
    >>> str(UnknownNameError("tour", "talk", [], empty_hint="import one with `probekit tour import FILE`"))
    "unknown tour 'talk'; there is no tour yet: import one with `probekit tour import FILE`"
    """

    def __init__(self, kind: str, name: str, available: list[str], *, empty_hint: str = ""):
        available = list(available)
        close = difflib.get_close_matches(name, available, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}" if close else ""
        self.kind, self.name, self.available = kind, name, available
        if available:
            known = f"; available: {', '.join(available)}"
        else:
            known = f"; there is no {kind} yet" + (f": {empty_hint}" if empty_hint else "")
        super().__init__(f"unknown {kind} {name!r}{hint}{known}")

    def __str__(self) -> str:  # KeyError would quote the message otherwise
        return self.args[0]


class ModelLoadError(ProbekitError):
    """A model could not be loaded; the message says what was tried and how to fix it."""


class DataFormatError(ProbekitError):
    """A data file is malformed; the message names the file, line and column."""


class DiskFullError(ProbekitError):
    """A write failed for want of disk space. Nothing half-written is kept: DuckDB rolls the transaction back and
    the atomic writer removes its temporary file, so what was stored before is intact and the same command (or key
    press) succeeds once space is freed. ``path``: what could not be written; ``free_bytes``: the space left there
    (None when it cannot be read)."""

    def __init__(self, path: str, free_bytes: int | None):
        self.path, self.free_bytes = path, free_bytes
        super().__init__(f"disk full: could not write {path} ({self.free}); free space and rerun — what was stored "
                         "before is kept")

    @property
    def free(self) -> str:
        """The space left, for a message: ``"0.0 MB free"``."""
        return "free space unknown" if self.free_bytes is None else f"{self.free_bytes / 2**20:.1f} MB free"


_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_NO_SPACE_TEXT = ("no space left on device", "disk quota exceeded")
_QUOTED_FILE = re.compile(r'file "([^"]+)"')  # DuckDB: Could not write file "/x/p.duckdb.wal": No space left …


def free_bytes(path: str | os.PathLike) -> int | None:
    """Bytes an unprivileged user may still write on the file system holding ``path`` (its nearest existing
    folder); None when none can be read."""
    where = os.path.abspath(os.fspath(path))
    while not os.path.exists(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    try:
        st = os.statvfs(where)
    except (OSError, AttributeError):  # no statvfs (Windows) or an unreadable folder
        return None
    return st.f_bavail * st.f_frsize


def _no_space(error: BaseException) -> BaseException | None:
    """``error`` or the error behind it (its cause or context) that says the disk is full, else None."""
    seen: set[int] = set()
    todo: BaseException | None = error
    while todo is not None and id(todo) not in seen:
        seen.add(id(todo))
        if isinstance(todo, OSError) and todo.errno in _NO_SPACE:
            return todo
        if any(text in str(todo).lower() for text in _NO_SPACE_TEXT):  # DuckDB's errors, pyarrow's
            return todo
        todo = todo.__cause__ or todo.__context__
    return None


def disk_full(error: BaseException, *, path: str | os.PathLike | None = None,
              places: tuple | list = ()) -> DiskFullError | None:
    """``error`` as a :class:`DiskFullError` when it (or the error behind it) is a full disk: an ``OSError`` with
    ``ENOSPC``/``EDQUOT`` or an error whose text says so (DuckDB reports a full disk as a transaction, I/O or
    fatal error with the system's text); else None. The path named is the error's own file, else ``path``, else
    the fullest of ``places`` (the folders the command writes to).

    >>> import errno
    >>> e = disk_full(OSError(errno.ENOSPC, "No space left on device"), path="/")
    >>> e.path, str(e).startswith("disk full: could not write / (")
    ('/', True)
    >>> disk_full(ValueError("no"), path="/") is None
    True
    """
    if isinstance(error, DiskFullError):
        return error
    full = _no_space(error)
    if full is None:
        return None
    quoted = _QUOTED_FILE.search(str(full))
    where = getattr(full, "filename", None) or (quoted.group(1) if quoted else None) or path
    if where is None and places:
        free = {p: free_bytes(p) for p in places}
        where = min(places, key=lambda p: float("inf") if (b := free[p]) is None else float(b))
    where = os.fspath(where) if where is not None else "a file"
    return DiskFullError(where, free_bytes(where) if where != "a file" else None)


def command() -> str:
    """How the user runs probekit here, for the hints in messages: ``python -m probekit`` when this process was
    started so (a checkout), else ``probekit`` (the installed command: pipx, pip, and the app's own messages)."""
    main = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    started_as_module = main == "__main__.py" and os.path.basename(os.path.dirname(sys.argv[0])) == "probekit"
    return "python -m probekit" if started_as_module else "probekit"


def positive_int(name: str, value, *, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` as an ``int`` when it is a whole number (Python or numpy integer, never ``True``/``False``)
    from ``minimum`` to ``maximum``; else one line naming the parameter ``name``.

    >>> positive_int("k", 5), positive_int("seed", 0, minimum=0)
    (5, 0)
    >>> positive_int("k", True)
    Traceback (most recent call last):
    ...
    probekit.errors.ProbekitError: k must be a positive integer, got True
    >>> positive_int("beam", 2.5, maximum=50)
    Traceback (most recent call last):
    ...
    probekit.errors.ProbekitError: beam must be an integer from 1 to 50, got 2.5
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < minimum or (
            maximum is not None and int(value) > maximum):
        if maximum is not None:
            want = f"an integer from {minimum} to {maximum}"
        else:
            want = "a positive integer" if minimum == 1 else f"an integer of at least {minimum}"
        raise ProbekitError(f"{name} must be {want}, got {value!r}")
    return int(value)


def decode_utf8(raw: bytes, *, where: str, note: str) -> str:
    r"""A whole file's bytes as UTF-8 text (a byte-order mark allowed); else one line naming ``where``, the line
    that fails (or that the file is UTF-16) and ``note`` (what the file should be).

    >>> decode_utf8(b"a: 1\n", where="g.yaml", note="save it as UTF-8")
    'a: 1\n'
    >>> decode_utf8("a: 1".encode("utf-16"), where="g.yaml", note="save it as UTF-8")
    Traceback (most recent call last):
    ...
    probekit.errors.ProbekitError: g.yaml: UTF-16 text, not UTF-8 (save it as UTF-8)
    >>> decode_utf8(b"a\ncaf\xe9\n", where="g.yaml", note="save it as UTF-8")
    Traceback (most recent call last):
    ...
    probekit.errors.ProbekitError: g.yaml, line 2: not UTF-8 text (save it as UTF-8)
    """
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise ProbekitError(f"{where}: UTF-16 text, not UTF-8 ({note})")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise ProbekitError(f"{where}, line {line}: not UTF-8 text ({note})") from None


class Registry(dict):
    """A plain name -> object mapping whose lookups fail with a helpful message.

    >>> r = Registry("probe"); r["retrieval"] = 1
    >>> r.get_or_raise("retreival")
    Traceback (most recent call last):
    ...
    probekit.errors.UnknownNameError: unknown probe 'retreival'; did you mean 'retrieval'; available: retrieval
    """

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind
        self.checks: list = []

    def __setitem__(self, name, obj) -> None:
        """Register ``obj``; every check added by :meth:`add_check` must accept it first."""
        for check in self.checks:
            check(name, obj)
        super().__setitem__(name, obj)

    def add_check(self, check, *, now: bool = True) -> None:
        """``check(name, obj)`` raises for an entry that breaks a rule of the registry's users (e.g. a probe option
        clashing with a command's flag); it runs at each later registration and, with ``now``, over every entry.

        >>> r = Registry("probe"); r["a"] = 1
        >>> def positive(name, obj):
        ...     if obj <= 0:
        ...         raise ProbekitError(f"{name} must be positive")
        >>> r.add_check(positive); r["b"] = 0
        Traceback (most recent call last):
        ...
        probekit.errors.ProbekitError: b must be positive
        """
        for name, obj in self.items() if now else ():
            check(name, obj)
        if check not in self.checks:
            self.checks.append(check)

    def remove_check(self, check) -> None:
        if check in self.checks:
            self.checks.remove(check)

    def get_or_raise(self, name: str):
        if name not in self:
            raise UnknownNameError(self.kind, name, sorted(self))
        return self[name]

    def register(self, name: str):
        """Decorator: ``@REGISTRY.register("name")``."""

        def deco(obj):
            self[name] = obj
            return obj

        return deco
