"""Template-free cloze prompts (Shaier et al.): natural sentences with one masked entity, from CSV or JSONL.

Columns: ``prompt`` (a sentence holding exactly one ``[MASK]``), ``object`` (the masked entity), and
optionally ``subject``, ``relation`` and ``source`` (where the sentence came from: corpus, line, PMID).
This is the output format of the corpus layer's LIPID builder, and any file a user writes by hand.

Each prompt becomes a :class:`~probekit.types.Query` whose template is the sentence with ``[Y]`` in
place of the mask and no ``[X]``, so every probe that ranks candidates (retrieval, mask_average) runs
on it through the normal interface. Rows with the same (relation, prompt) form one query with several
gold objects. The candidate set is the dataset's own objects, as in the paper ("we allow our models
to predict any entity from the dataset's entity list"): the ``heads+tails`` and ``tails`` vocabularies
both give the objects (subjects are never candidates), ``relation`` the objects of one relation.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..errors import DataFormatError
from ..types import MASK, OBJECT, SUBJECT, Query
from .base import Dataset, fingerprint_files
from .records import read_records

REQUIRED = ("prompt", "object")
OPTIONAL = ("subject", "relation", "source")
DEFAULT_RELATION = "free"
MAX_PROMPT_CHARS = 2000
KIND = "template-free"
_NEED = f"need {', '.join(REQUIRED)}[, {', '.join(OPTIONAL)}]"


def _cell(row: dict, column: str, label: str, line: int) -> str:
    value = row.get(column)
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        raise DataFormatError(f"{label}, line {line}, column {column!r}: expected text, got a JSON "
                              f"{type(value).__name__}")
    return " ".join(str(value).split())


def prompt_problem(prompt: str) -> str | None:
    """Why the loader refuses ``prompt`` (None when it accepts it): the one rule, shared with the LIPID builder,
    so a built file always loads.

    >>> prompt_problem("Aspirin treats [MASK]."), prompt_problem("[MASK] ."), prompt_problem("no mask")
    (None, 'nothing but the mask', "needs exactly one [MASK] where the object was, found 0: 'no mask'")
    """
    if len(prompt) > MAX_PROMPT_CHARS:
        return f"{len(prompt)} characters (at most {MAX_PROMPT_CHARS})"
    n_masks = prompt.count(MASK)
    if n_masks != 1:
        return f"needs exactly one {MASK} where the object was, found {n_masks}: {prompt[:80]!r}"
    for reserved in (SUBJECT, OBJECT):
        if reserved in prompt:
            return f"{reserved} is reserved for templates; a template-free prompt has only {MASK}: {prompt[:80]!r}"
    if not prompt.replace(MASK, "").strip(" .,;:!?"):
        return "nothing but the mask"
    return None


def parse(text: str, *, label: str = "<upload>", fmt: str = "csv", name: str = "freetext",
          version: str = "", progress: Callable[[int, int, str], None] | None = None) -> Dataset:
    """Parse template-free prompts from text (uploads and files); errors name file, line and column.

    A byte-order mark (Excel's "CSV UTF-8") is dropped; a record that spans lines (an unclosed quote) or
    has more values than the header is refused, never merged silently.
    """
    text = text.removeprefix("\ufeff")
    groups: dict[tuple[str, str], dict] = {}
    objects: list[str] = []
    for line, row in read_records(text, label=label, fmt=fmt, required=REQUIRED, need=_NEED, progress=progress):
        prompt, obj = _cell(row, "prompt", label, line), _cell(row, "object", label, line)
        subject, relation, source = (_cell(row, c, label, line) for c in OPTIONAL)
        for column, value in (("prompt", prompt), ("object", obj)):
            if not value:
                raise DataFormatError(f"{label}, line {line}, column {column!r}: empty ({_NEED})")
        problem = prompt_problem(prompt)
        if problem:
            raise DataFormatError(f"{label}, line {line}, column 'prompt': {problem}")
        relation = relation or DEFAULT_RELATION
        g = groups.setdefault((relation, prompt), {"golds": [], "subject": subject, "sources": [], "line": line})
        if obj not in g["golds"]:
            g["golds"].append(obj)
        if source and source not in g["sources"]:
            g["sources"].append(source)
        if obj not in objects:
            objects.append(obj)
    if not groups:
        raise DataFormatError(f"{label}: no prompts found ({_NEED})")
    queries, sources, lines = [], {}, {}
    counters: dict[str, int] = {}
    for (relation, prompt), g in groups.items():
        i = counters.get(relation, 0)
        counters[relation] = i + 1
        qid = f"{relation}:{i:05d}"
        queries.append(Query(id=qid, subject=g["subject"], relation=relation,
                             template=prompt.replace(MASK, OBJECT), golds=tuple(g["golds"])))
        sources[qid], lines[qid] = g["sources"], g["line"]
    meta = {"kind": KIND, "vocab_names": objects, "sources": sources, "lines": lines}
    return Dataset(name=name, queries=queries, templates={}, version=version, source=label, meta=meta)


def load(path: str | Path, *, name: str | None = None) -> Dataset:
    """Read a CSV (``.csv``/``.tsv``-less text) or JSONL (``.jsonl``, ``.json``, ``.ndjson``) prompts file."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataFormatError(f"{path}: file not found (a template-free dataset is one CSV or JSONL file "
                              f"with {', '.join(REQUIRED)})")
    fmt = "jsonl" if path.suffix.lower() in (".jsonl", ".json", ".ndjson") else "csv"
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DataFormatError(f"{path}: not a UTF-8 text file") from None
    return parse(text, label=str(path), fmt=fmt, name=name or path.stem, version=fingerprint_files([path]))


def is_template_free(dataset: Dataset) -> bool:
    """True for datasets read by this module (their queries have no ``[X]`` and their own candidates)."""
    return dataset.meta.get("kind") == KIND
