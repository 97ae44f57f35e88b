"""User facts as a plain triples file: CSV or JSONL with ``subject, relation, object[, template]``.

Several rows with the same (subject, relation) form one query with several gold objects. Without a
template column the relation name itself becomes one: ``[X] <relation words> [Y] .``
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from ..errors import DataFormatError
from ..types import MASK, OBJECT, SUBJECT, Query
from .base import Dataset, fingerprint_files

REQUIRED = ("subject", "relation", "object")


def default_template(relation: str) -> str:
    """The template used when a triples file has no ``template`` column.

    >>> default_template("may_treat")
    '[X] may treat [Y] .'
    """
    return f"{SUBJECT} {relation.replace('_', ' ').strip()} {OBJECT} ."


def _rows(text: str, label: str, fmt: str):
    if fmt == "jsonl":
        for line, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except json.JSONDecodeError as e:
                raise DataFormatError(f"{label}, line {line}: not valid JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise DataFormatError(f"{label}, line {line}: expected a JSON object")
            yield line, row
    else:
        reader = csv.DictReader(io.StringIO(text), strict=True)
        try:
            fields = reader.fieldnames or []  # None for an empty file
        except csv.Error as e:
            raise DataFormatError(f"{label}, line 1: not a valid CSV header ({e})") from None
        missing = [c for c in REQUIRED if fields and c not in fields]
        if missing:
            raise DataFormatError(f"{label}, line 1: missing column {missing[0]!r} "
                                  f"(need {', '.join(REQUIRED)}[, template])")
        start = reader.line_num + 1  # physical line where the next record starts
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                raise DataFormatError(f"{label}, line {start}: malformed CSV ({e}); an opening quote is "
                                      "probably never closed") from None
            if None in row:
                raise DataFormatError(f"{label}, line {start}: {len(fields) + len(row[None])} fields but the "
                                      f"header has {len(fields)}; quote values that contain commas")
            spanning = [c for c in fields if isinstance(row.get(c), str) and ("\n" in row[c] or "\r" in row[c])]
            if spanning:
                raise DataFormatError(f"{label}, line {start}: column {spanning[0]!r} runs over several lines "
                                      f"(to line {reader.line_num}); an opening quote is probably never closed")
            yield start, row
            start = reader.line_num + 1


def parse(text: str, *, label: str = "<upload>", fmt: str = "csv", name: str = "triples",
          version: str = "") -> Dataset:
    """Parse triples from text (used for uploads as well as files).

    A byte-order mark (Excel's "CSV UTF-8") is dropped; a record that spans lines (an unclosed quote)
    or has more fields than the header is refused with its file and line, never merged silently.
    """
    text = text.removeprefix("\ufeff")
    groups: dict[tuple[str, str], dict] = {}
    templates: dict[str, str] = {}
    for line, row in _rows(text, label, fmt):
        missing = [c for c in REQUIRED if not str(row.get(c) or "").strip()]
        if missing:
            raise DataFormatError(f"{label}, line {line}: missing column {missing[0]!r} "
                                  f"(need {', '.join(REQUIRED)}[, template])")
        subj, rel, obj = (" ".join(str(row[c]).split()) for c in REQUIRED)
        tpl = " ".join(str(row.get("template") or "").split()).replace(MASK, OBJECT)
        if tpl:
            if OBJECT not in tpl:
                raise DataFormatError(f"{label}, line {line}: template {tpl!r} has no [Y] (or [MASK]) slot")
            if templates.get(rel, tpl) != tpl:
                raise DataFormatError(f"{label}, line {line}: relation {rel!r} has two different templates")
            templates[rel] = tpl
        g = groups.setdefault((subj, rel), {"golds": [], "line": line})
        if obj not in g["golds"]:
            g["golds"].append(obj)
    if not groups:
        raise DataFormatError(f"{label}: no facts found")
    queries = []
    for i, ((subj, rel), g) in enumerate(groups.items()):
        tpl = templates.setdefault(rel, default_template(rel))
        queries.append(Query(id=f"{rel}:{i:04d}", subject=subj, relation=rel, template=tpl, golds=tuple(g["golds"])))
    return Dataset(name=name, queries=queries, templates=templates, version=version, source=label)


def load(path: str | Path, *, name: str | None = None) -> Dataset:
    path = Path(path).expanduser()
    if not path.exists():
        raise DataFormatError(f"{path}: file not found")
    fmt = "jsonl" if path.suffix.lower() in (".jsonl", ".json", ".ndjson") else "csv"
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise DataFormatError(f"{path}: not a UTF-8 text file") from None
    return parse(text, label=str(path), fmt=fmt, name=name or path.stem, version=fingerprint_files([path]))
