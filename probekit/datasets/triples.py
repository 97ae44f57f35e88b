"""User facts as a plain triples file: CSV or JSONL with ``subject, relation, object[, template]``.

Several rows with the same (subject, relation) form one query with several gold objects. Without a
template column the relation name itself becomes one: ``[X] <relation words> [Y] .``
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..errors import DataFormatError
from ..types import MASK, OBJECT, SUBJECT, Query
from .base import Dataset, fingerprint_files
from .records import read_records

REQUIRED = ("subject", "relation", "object")
_NEED = f"need {', '.join(REQUIRED)}[, template]"


def default_template(relation: str) -> str:
    """The template used when a triples file has no ``template`` column.

    >>> default_template("may_treat")
    '[X] may treat [Y] .'
    """
    return f"{SUBJECT} {relation.replace('_', ' ').strip()} {OBJECT} ."


def parse(text: str, *, label: str = "<upload>", fmt: str = "csv", name: str = "triples",
          version: str = "", progress: Callable[[int, int, str], None] | None = None) -> Dataset:
    """Parse triples from text (used for uploads as well as files).

    A byte-order mark (Excel's "CSV UTF-8") is dropped; a record that spans lines (an unclosed quote)
    or has more fields than the header is refused with its file and line, never merged silently.
    """
    text = text.removeprefix("\ufeff")
    groups: dict[tuple[str, str], dict] = {}
    templates: dict[str, str] = {}
    for line, row in read_records(text, label=label, fmt=fmt, required=REQUIRED, need=_NEED, progress=progress):
        missing = [c for c in REQUIRED if not str(row.get(c) or "").strip()]
        if missing:
            raise DataFormatError(f"{label}, line {line}: missing column {missing[0]!r} ({_NEED})")
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
