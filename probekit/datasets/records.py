"""Records of a user's CSV or JSONL file, each with the line it starts on: the one reader behind every such loader.

Why one reader: a malformed file must fail the same way whichever loader reads it, with the file and the line a
user can open, and never lose or merge a row silently. CSV is read strictly: a record holding a line break (an
opening quote never closed swallows the lines after it), more values than the header has columns, or a broken
quote is refused; JSONL wants one JSON object per non-blank line.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator, Sequence

from ..errors import DataFormatError

FORMATS = ("csv", "jsonl")
PROGRESS_EVERY = 20_000
"""Records between two progress reports: a million-row upload reports 50 times (each report is a moment the app
can stop the reading at), a small file once, at its end."""


def read_records(text: str, *, label: str, fmt: str, required: Sequence[str], need: str,
                 progress: Callable[[int, int, str], None] | None = None) -> Iterator[tuple[int, dict]]:
    """(1-based line the record starts on, row dict) for each record of ``text``.

    ``required``: CSV columns the header must hold (a JSONL row's own keys are the loader's to check); ``need``:
    the words that end a refusal, e.g. ``"need subject, relation, object[, template]"``. ``progress(line, lines,
    "reading LABEL")`` is called every :data:`PROGRESS_EVERY` records and once at the end: reading a large upload takes
    seconds, and the app draws a bar with a Stop from it.
    """
    if fmt not in FORMATS:
        raise DataFormatError(f"{label}: unknown format {fmt!r}; use {' or '.join(FORMATS)}")
    if progress is None:
        yield from _records(text, label=label, fmt=fmt, required=required, need=need)
        return
    lines = text.count("\n") + (not text.endswith("\n"))
    line = 0
    for n, (line, row) in enumerate(_records(text, label=label, fmt=fmt, required=required, need=need), start=1):
        if n % PROGRESS_EVERY == 0:
            progress(line, lines, f"reading {label}")
        yield line, row
    progress(lines, lines, f"reading {label}")


def _records(text: str, *, label: str, fmt: str, required: Sequence[str], need: str) -> Iterator[tuple[int, dict]]:
    if fmt == "jsonl":
        for line, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except json.JSONDecodeError as e:
                raise DataFormatError(f"{label}, line {line}: not valid JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise DataFormatError(f"{label}, line {line}: expected a JSON object ({need})")
            yield line, row
        return
    reader = csv.DictReader(io.StringIO(text), strict=True)
    try:
        fields = reader.fieldnames or []  # [] for an empty file
    except csv.Error as e:
        raise DataFormatError(f"{label}, line 1: not a valid CSV header ({e})") from None
    missing = [c for c in required if fields and c not in fields]
    if missing:
        raise DataFormatError(f"{label}, line 1: missing column {missing[0]!r} ({need})")
    start = reader.line_num + 1  # the physical line after the last record (blank lines may come first)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise DataFormatError(f"{label}, line {start}: malformed CSV ({e}); an opening quote is probably "
                                  "never closed") from None
        values = [v for v in row.values() if isinstance(v, str)]
        line = reader.line_num - sum(v.count("\n") for v in values)  # where this record starts
        if None in row:  # more values than header columns
            raise DataFormatError(f"{label}, line {line}: {len(fields) + len(row[None])} fields but the header has "
                                  f"{len(fields)}; quote values that contain commas")
        spanning = [c for c in fields if isinstance(row.get(c), str) and ("\n" in row[c] or "\r" in row[c])]
        if spanning:
            raise DataFormatError(f"{label}, line {line}: column {spanning[0]!r} runs over several lines (to line "
                                  f"{reader.line_num}); an opening quote is probably never closed")
        yield line, row
        start = reader.line_num + 1
