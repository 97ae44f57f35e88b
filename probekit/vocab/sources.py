"""Vocabulary sources: where the names of a vocabulary come from, read as a stream of (name, concept id) rows.

A source is one module's reader behind :data:`SOURCES` (``umls``: a UMLS ``MRCONSO.RRF``; ``names``: a plain
list, one name a line or a CSV with a name and an id column). Each yields :class:`Entry` rows in file order and
holds at most one concept's rows (UMLS) or one row (lists) at a time, so reading never costs more memory than the
shard a caller fills from it. :meth:`Source.fingerprint` hashes the files' bytes and the reading options: a
vocabulary built from a file that changed since is recognised as stale, never reused.

Bad input (a row with the wrong number of fields, a line that is not UTF-8, a line longer than
:data:`MAX_NAME_LINE_CHARS`, nothing left after the filters) is one :class:`~probekit.errors.DataFormatError`
naming the file and line.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..errors import DataFormatError, ProbekitError, Registry
from .entries import Entry, Source, decode_line, fingerprint, text_lines  # noqa: F401 - re-exported: the sources' shared types
from .umls import UmlsReader

MAX_NAME_LINE_CHARS = 5_000
"""The longest line a names file may hold (a name, or a CSV row with its name and id): far more than an entity name
takes, so a longer line means the file is not a names file (a binary, a JSON dump, a text on one line) and is
refused before it is read whole. Both readers of names files refuse it: vocabulary names (:class:`NamesReader`) and
the entity lists of corpus indexes (:func:`probekit.corpus.entities.from_file`)."""

_BLOCK = 1 << 20
_CONTINUATION = bytes(range(0x80, 0xC0))  # UTF-8 bytes that continue a character: not counted as characters


def _chars(raw: bytes) -> int:
    """Characters in ``raw`` (UTF-8): every byte that starts one."""
    return len(raw.translate(None, _CONTINUATION))


def name_lines(path: Path, *, where: str | None = None, what: str = "a name") -> Iterator[tuple[int, str]]:
    """(line number, text without its newline) of a UTF-8 names file, streamed; a line longer than
    :data:`MAX_NAME_LINE_CHARS` is refused once its first few kilobytes are read (the rest is counted in 1 MiB
    blocks, never held), a line that is not UTF-8 likewise, each as one error naming ``where`` (default the
    path) and the line. ``what`` is what a line holds, for the message (``a name``, ``a row``)."""
    where = str(path) if where is None else where
    try:
        fh = open(path, "rb")
    except OSError as e:
        raise ProbekitError(f"cannot read {where}: {e.strerror or e}") from None
    cap = 4 * MAX_NAME_LINE_CHARS + 8  # 4 bytes a character at most, a byte-order mark and a newline

    def too_long(number: int, raw: bytes, rest: BinaryIO | None) -> DataFormatError:
        chars = _chars(raw.rstrip(b"\r\n"))
        while rest is not None and not raw.endswith(b"\n") and (raw := rest.readline(_BLOCK)):
            chars += _chars(raw.rstrip(b"\r\n"))
        return DataFormatError(f"{where}, line {number}: {what} of {chars:,} characters (limit "
                               f"{MAX_NAME_LINE_CHARS:,}); is this a names file?")

    with fh:
        number = 0
        while raw := fh.readline(cap):
            number += 1
            if len(raw) == cap and not raw.endswith(b"\n"):
                raise too_long(number, raw, fh)
            text = decode_line(raw, number, where=where)
            if len(text) > MAX_NAME_LINE_CHARS:
                raise too_long(number, text.encode("utf-8"), None)
            yield number, text


class NamesReader:
    """A plain name list: one name a line (``.txt``), or a CSV with a header naming a name and an id column.

    Options: ``name_column`` (CSV; default ``name``), ``id_column`` (CSV; default ``id`` when present, or none).
    Blank lines are skipped; names keep their spelling (case variants are separate rows); a line may hold at most
    :data:`MAX_NAME_LINE_CHARS` characters.
    """

    kind = "names"

    def read(self, source: Source) -> Iterator[Entry]:
        found = False
        for path in source.paths:
            if path.suffix.lower() in (".csv", ".tsv"):
                rows = self._csv(path, source.options, delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
            else:
                rows = (Entry(" ".join(t.split())) for _, t in name_lines(path))
            for entry in rows:
                if entry.name:
                    found = True
                    yield entry
        if not found:
            raise DataFormatError(f"{source.paths[0]}, line 1: no name in the file")

    @staticmethod
    def _csv(path: Path, options: dict, *, delimiter: str) -> Iterator[Entry]:
        lines = name_lines(path, what="a row")
        try:
            _, header_line = next(lines)
        except StopIteration:
            raise DataFormatError(f"{path}, line 1: empty file (a CSV needs a header)") from None
        header = next(csv.reader([header_line], delimiter=delimiter))
        name_col = options.get("name_column") or "name"
        id_col = options.get("id_column") or ("id" if "id" in header else None)
        for col in (name_col, id_col):
            if col is not None and col not in header:
                raise DataFormatError(f"{path}, line 1: no column {col!r} (columns: {', '.join(header)})")
        ni = header.index(name_col)
        ii = header.index(id_col) if id_col is not None else None
        for number, text in lines:
            if not text.strip():
                continue
            row = next(csv.reader(io.StringIO(text), delimiter=delimiter))
            if len(row) != len(header):
                raise DataFormatError(f"{path}, line {number}: {len(row)} fields, the header has {len(header)} "
                                      "(a quoted field spanning lines is not supported)")
            yield Entry(" ".join(row[ni].split()), row[ii].strip() if ii is not None else "")


SOURCES: Registry = Registry("vocabulary source")
"""kind -> reader with ``read(source) -> Iterator[Entry]``: one module per format registers here."""
SOURCES["names"] = NamesReader()
SOURCES["umls"] = UmlsReader()


def open_source(kind: str, paths, **options) -> Source:
    """A :class:`Source` of a registered ``kind`` over ``paths`` (checked to exist); ``options`` as the reader takes.

    >>> open_source("umsl", ["x"])
    Traceback (most recent call last):
    ...
    probekit.errors.UnknownNameError: unknown vocabulary source 'umsl'; did you mean 'umls'; available: names, umls
    """
    reader = SOURCES.get_or_raise(kind)
    paths = tuple(Path(p).expanduser() for p in ([paths] if isinstance(paths, (str, Path)) else paths))
    if not paths:
        raise ProbekitError("no vocabulary file given")
    for p in paths:
        if not p.is_file():
            raise ProbekitError(f"vocabulary file {p} not found")
    check = getattr(reader, "check_options", None)
    clean = check(options) if check else {k: v for k, v in options.items() if v not in (None, "", ())}
    return Source(kind=kind, paths=paths, options=clean, reader=reader)
