"""The one exporter: tables to CSV / Parquet / JSONL files, written atomically and safely.

Every export (runs, context runs, annotations, corpus results) goes through :func:`write_table`, which writes
with :mod:`probekit.atomic` (the file writer of the whole package):

- the data is written to a temporary file beside the target and renamed over it, so a reader never
  sees half a file and a failed export leaves the old file untouched;
- the target must be absent or a regular file: a directory, device node (``/dev/null``), FIFO or
  socket is refused (renaming over them would replace them). A symlink is followed and its *target*
  is replaced, so the link stays a link;
- a new file gets the usual ``0666 & ~umask`` permissions, a replaced file keeps its mode;
- the temporary file is removed on every failure path.

>>> import pandas as pd, tempfile, pathlib
>>> out = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
>>> write_table(pd.DataFrame({"a": [1, 2]}), out).read_text()
'a\\n1\\n2\\n'
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from .. import atomic
from ..atomic import safe_target
from ..errors import ProbekitError

FORMATS = ("csv", "parquet", "jsonl")


def _check_format(fmt: str | None, path: Path | None, formats: Sequence[str]) -> str:
    fmt = str(fmt or (path.suffix.lstrip(".") if path is not None else "")).lower()
    if fmt == "json":
        fmt = "jsonl"
    if fmt not in formats:
        where = f" (from the file name {path.name!r})" if path is not None and fmt else ""
        raise ProbekitError(f"unknown export format {fmt!r}{where}; available: {', '.join(formats)}")
    return fmt


def table_bytes(frame, fmt: str, *, formats: Sequence[str] = FORMATS) -> bytes:
    """``frame`` as CSV, Parquet or JSONL bytes (download buttons and files alike)."""
    fmt = _check_format(fmt, None, formats)
    if fmt == "csv":
        return frame.to_csv(index=False).encode("utf-8")
    if fmt == "jsonl":
        return frame.to_json(orient="records", lines=True, date_format="iso", force_ascii=False).encode("utf-8")
    buf = io.BytesIO()
    frame.to_parquet(buf, index=False)
    return buf.getvalue()


def write_bytes(data: bytes, path: str | Path) -> Path:
    """Write ``data`` to ``path`` atomically (see the module docstring for the rules)."""
    return atomic.write_bytes(path, data)


def write_table(frame, path: str | Path, *, fmt: str | None = None, formats: Sequence[str] = FORMATS) -> Path:
    """Write ``frame`` to ``path`` as CSV, Parquet or JSONL (``fmt``, else the file suffix)."""
    path = Path(path)
    fmt = _check_format(fmt, path, formats)
    safe_target(path)  # refuse before the work of serialising
    return write_bytes(table_bytes(frame, fmt, formats=formats), path)


__all__ = ["FORMATS", "safe_target", "table_bytes", "write_bytes", "write_table"]
