"""LAMA's JSON lines (Petroni et al. 2019): one fact a line, as in LAMA's TREx, Google-RE, ConceptNet and SQuAD files.

Fields read: ``obj_label`` (the gold object), ``sub_label`` (else ``sub``), ``predicate_id`` (else ``pred``; else
the relation ``lama``), ``obj_uri``/``sub_uri`` when present; then the prompt, in this order: a ``template`` field
with ``[X]`` and ``[Y]``; a template for the relation from a ``relations.jsonl`` (``{"relation", "template"}``)
beside the file or one folder up (LAMA's ``data/`` layout); else the first of ``masked_sentences`` (or
``masked_sentence``) holding one ``[MASK]``.

With templates the file reads like a triples file (:mod:`~probekit.datasets.triples`): rows with the same subject
and relation form one query with several golds. Without, like a template-free file (:mod:`~probekit.datasets.
freetext`): each sentence is a query with ``[Y]`` for the mask and no ``[X]``, ranked among the file's objects. A
file is one or the other: a row of the other kind is refused with its line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ..errors import DataFormatError
from ..types import MASK, OBJECT, SUBJECT, Query
from .base import Dataset, fingerprint_files
from .formats import DatasetFormat
from .freetext import KIND as TEMPLATE_FREE
from .freetext import prompt_problem
from .records import read_records

REQUIRED = ("obj_label",)
DEFAULT_RELATION = "lama"
RELATIONS_FILE = "relations.jsonl"
SUFFIXES = (".jsonl", ".json", ".ndjson")
_NEED = "need obj_label, sub_label, predicate_id and a template with [X] and [Y] or masked_sentences with [MASK]"


def _text(row: dict, column: str, label: str, line: int) -> str:
    value = row.get(column)
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        raise DataFormatError(f"{label}, line {line}, field {column!r}: expected text, got a JSON "
                              f"{type(value).__name__}")
    return " ".join(str(value).split())


def _sentence(row: dict, label: str, line: int) -> str:
    """The first masked sentence with one ``[MASK]`` ("" when the row has none); one line when none fits."""
    column = "masked_sentences" if "masked_sentences" in row else "masked_sentence"
    value = row.get(column)
    if value is None or value == "":
        return ""
    sentences = value if isinstance(value, list) else [value]
    problems = []
    for s in sentences:
        if not isinstance(s, str):
            raise DataFormatError(f"{label}, line {line}, field {column!r}: expected text, got a JSON "
                                  f"{type(s).__name__}")
        sentence = " ".join(s.split())
        problem = prompt_problem(sentence)
        if problem is None:
            return sentence
        problems.append(problem)
    raise DataFormatError(f"{label}, line {line}, field {column!r}: {problems[0] if problems else 'empty'}")


class _Reader:
    """Rows of one or more files gathered into one dataset. Two passes: the rows first (each checked, with the
    relation's template where the row has one), then the queries, so a row without a ``template`` field takes its
    relation's template from any row of the file, as a triples file does."""

    def __init__(self, templates: dict[str, str]):
        self.templates = {r: t.replace(MASK, OBJECT) for r, t in templates.items()}
        self.rows: list[dict] = []

    def add(self, row: dict, label: str, line: int) -> None:
        obj = _text(row, "obj_label", label, line)
        if not obj:
            raise DataFormatError(f"{label}, line {line}: missing field 'obj_label' ({_NEED})")
        relation = _text(row, "predicate_id", label, line) or _text(row, "pred", label, line) or DEFAULT_RELATION
        template = _text(row, "template", label, line).replace(MASK, OBJECT)
        if template:
            if OBJECT not in template:
                raise DataFormatError(f"{label}, line {line}: template {template!r} has no [Y] (or [MASK]) slot")
            if self.templates.get(relation, template) != template:
                raise DataFormatError(f"{label}, line {line}: relation {relation!r} has two different templates")
            self.templates[relation] = template
        sentence, problem = "", None
        if not template:  # a problem with it matters only where the relation has no template (dataset())
            try:
                sentence = _sentence(row, label, line)
            except DataFormatError as e:
                problem = str(e)
        self.rows.append({
            "label": label, "line": line, "object": obj, "relation": relation,
            "subject": _text(row, "sub_label", label, line) or _text(row, "sub", label, line),
            "sentence": sentence, "problem": problem,
            "object_id": _text(row, "obj_uri", label, line), "subject_id": _text(row, "sub_uri", label, line),
            "source": _text(row, "uuid", label, line) or _text(row, "id", label, line)})

    def dataset(self, *, label: str, name: str, version: str) -> Dataset:
        if not self.rows:
            raise DataFormatError(f"{label}: no facts found ({_NEED})")
        first = self.rows[0]
        free = first["relation"] not in self.templates
        groups: dict[tuple[str, str], dict] = {}
        objects: list[str] = []
        for r in self.rows:
            where = f"{r['label']}, line {r['line']}"
            template = self.templates.get(r["relation"])
            if template is None and r["problem"]:
                raise DataFormatError(r["problem"])
            if template is None and not r["sentence"]:
                raise DataFormatError(f"{where}: no template for relation {r['relation']!r} and no masked sentence "
                                      f"({_NEED})")
            if (template is None) != free:
                kinds = ("template-free", "templated") if free else ("templated", "template-free")
                raise DataFormatError(f"{where}: a {kinds[1]} row, but {first['label']}, line {first['line']} is "
                                      f"{kinds[0]}; a LAMA file is read with templates or template-free, not both")
            if template is not None and SUBJECT in template and not r["subject"]:
                raise DataFormatError(f"{where}: missing field 'sub_label' (the template's [X])")
            key = (r["relation"], r["sentence"] if free else r["subject"])
            g = groups.setdefault(key, {"golds": [], "ids": [], "subject": r["subject"], "line": r["line"],
                                        "sources": [], "subject_id": r["subject_id"]})
            for field, value in (("golds", r["object"]), ("ids", r["object_id"]), ("sources", r["source"])):
                if value and value not in g[field]:
                    g[field].append(value)
            if r["object"] not in objects:
                objects.append(r["object"])
        queries, sources, lines = [], {}, {}
        counters: dict[str, int] = {}
        for (relation, text), g in groups.items():
            i = counters.get(relation, 0)
            counters[relation] = i + 1
            qid = f"{relation}:{i:05d}"
            template = text.replace(MASK, OBJECT) if free else self.templates[relation]
            queries.append(Query(id=qid, subject=g["subject"], relation=relation, template=template,
                                 golds=tuple(g["golds"]), gold_ids=tuple(g["ids"]), subject_id=g["subject_id"]))
            sources[qid], lines[qid] = g["sources"], g["line"]
        if free:
            meta = {"kind": TEMPLATE_FREE, "vocab_names": objects, "sources": sources, "lines": lines}
            return Dataset(name=name, queries=queries, templates={}, version=version, source=label, meta=meta)
        used = {q.relation for q in queries}
        return Dataset(name=name, queries=queries, templates={r: t for r, t in self.templates.items() if r in used},
                       version=version, source=label, meta={"sources": sources, "lines": lines})


def parse(text: str, *, label: str = "<upload>", fmt: str = "jsonl", name: str = "lama", version: str = "",
          templates: dict[str, str] | None = None,
          progress: Callable[[int, int, str], None] | None = None) -> Dataset:
    """Parse LAMA facts from text (uploads and files); ``templates`` (relation -> template) fill in rows without a
    ``template`` field. Every refusal is one line naming ``label`` and the line."""
    reader = _Reader(templates or {})
    for line, row in read_records(text.removeprefix("\ufeff"), label=label, fmt=fmt, required=REQUIRED, need=_NEED,
                                  progress=progress):
        reader.add(row, label, line)
    return reader.dataset(label=label, name=name, version=version)


def read_relations(path: Path) -> dict[str, str]:
    """LAMA's ``relations.jsonl`` as relation -> template; a line: ``{"relation": "P19", "template": "[X] was born in
    [Y] ."}``."""
    if not path.is_file():
        raise DataFormatError(f"{path}: file not found (LAMA's relations.jsonl: relation, template a line)")
    out: dict[str, str] = {}
    for line, row in read_records(_read_text(path), label=str(path), fmt="jsonl", required=(),
                                  need="need relation, template"):
        relation, template = _text(row, "relation", str(path), line), _text(row, "template", str(path), line)
        if not relation or not template:
            raise DataFormatError(f"{path}, line {line}: missing field {'relation' if not relation else 'template'!r} "
                                  "(need relation, template)")
        out[relation] = template
    return out


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise DataFormatError(f"{path}: not a UTF-8 text file") from None


def load(path: str | Path, *, name: str | None = None, templates: str | Path | None = None) -> Dataset:
    """Read a LAMA ``.jsonl`` file, or every ``.jsonl`` under a folder (LAMA's ``TREx/``); ``templates`` is a
    ``relations.jsonl``, by default the one beside the data or one folder up, if any."""
    path = Path(path).expanduser()
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.jsonl") if p.name != RELATIONS_FILE)
        if not files:
            raise DataFormatError(f"{path}: no LAMA .jsonl files in this folder")
    elif path.is_file():
        files = [path]
    else:
        raise DataFormatError(f"{path}: file not found (a LAMA dataset is a .jsonl file, or a folder of them)")
    if templates is not None:
        manual: Path | None = Path(templates).expanduser()
    else:
        near = files[0].parent
        manual = next((d / RELATIONS_FILE for d in (near, near.parent) if (d / RELATIONS_FILE).is_file()), None)
    relation_templates = read_relations(manual) if manual is not None else {}
    reader = _Reader(relation_templates)
    for f in files:
        for line, row in read_records(_read_text(f), label=str(f), fmt="jsonl", required=REQUIRED, need=_NEED):
            reader.add(row, str(f), line)
    read = [*files, manual] if manual is not None else files
    return reader.dataset(label=str(path), name=name or path.stem, version=fingerprint_files(read))


FORMAT = DatasetFormat(
    "lama", "LAMA's JSON lines: sub_label, obj_label, predicate_id; a template or masked sentences", load,
    suffixes=SUFFIXES, parse=parse, marks=("obj_label",),
    file_hint="a LAMA .jsonl file; on the command line also a folder of them",
    example="".join(json.dumps(row) + "\n" for row in (
        {"sub_label": "aspirin", "obj_label": "pain", "predicate_id": "may_treat", "template": "[X] may treat [Y] ."},
        {"sub_label": "aspirin", "obj_label": "fever", "predicate_id": "may_treat", "template": "[X] may treat [Y] ."},
        {"sub_label": "metformin", "obj_label": "diabetes", "predicate_id": "may_treat"})))
