"""MedLAMA (Meng et al. 2022) in its published CSV layout; the shipped demo set uses the same layout.

Layout: ``<root>/prompts.csv`` (pid, default_prompt, human_prompt) and ``<root>/2021AA/`` holding
``<relation>_1000.csv`` (full) and ``<relation>_<n>_hard.csv`` (hard subset).
"""

from __future__ import annotations

import ast
import csv
import json
import re
from pathlib import Path

from ..errors import DataFormatError, ProbekitError, UnknownNameError
from ..types import OBJECT, SUBJECT, Query
from .base import Dataset, fingerprint_files

COLUMNS = ("head_cui", "head_name", "rel", "tail_cuis_list", "tail_names_list")
SETS = ("full", "hard")
TEMPLATE_COLUMNS = ("human_prompt", "default_prompt")


def _relation_files(root: Path, which: str) -> dict[str, Path]:
    folder = root / "2021AA"
    if not folder.is_dir():
        raise ProbekitError(f"MedLAMA folder {folder} not found: set PROBEKIT_MEDLAMA_DIR (or --data-dir) to the "
                            "folder holding prompts.csv and 2021AA/")
    files = {}
    for f in sorted(folder.glob("*.csv")):
        hard = f.stem.endswith("_hard")
        if (which == "hard") != hard:
            continue
        rel = re.sub(r"_\d+(_hard)?$", "", f.stem)
        files[rel] = f
    if not files:
        raise ProbekitError(f"no {which} relation files (*.csv) in {folder}")
    return files


def _parse_list(text: str, path: Path, line: int, column: str) -> list[str]:
    """A list column as MedLAMA's files write it: Python's ``repr`` of a list (``['C0431122', 'C5438535']``).

    Most cells quote every item with ``'`` and hold no ``"`` nor ``\\``: such a cell is the same list in JSON once its
    quotes are swapped, which reads ~10× faster than :func:`ast.literal_eval` (a MedLAMA load parsed 30,700 cells
    that way, 0.65 s of a warm ``bench``). Any other cell (an item with an apostrophe is written in ``"``, escapes,
    a trailing comma, a tuple) goes to :func:`ast.literal_eval`, as before."""
    if text.startswith("[") and '"' not in text and "\\" not in text:
        try:
            value = json.loads(text.replace("'", '"'))
        except ValueError:
            value = None
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise DataFormatError(f"{path}, line {line}: column {column!r} is not a Python list literal: "
                              f"{text[:60]!r}") from None
    if not isinstance(value, (list, tuple)):
        raise DataFormatError(f"{path}, line {line}: column {column!r} must be a list, got {text[:60]!r}")
    return [str(v) for v in value]


def read_templates(path: Path, column: str = "human_prompt") -> dict[str, str]:
    if column not in TEMPLATE_COLUMNS:
        raise ProbekitError(f"unknown template column {column!r}; available: {', '.join(TEMPLATE_COLUMNS)}")
    if not path.exists():
        raise ProbekitError(f"templates file {path} not found")
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in ("pid", column) if c not in (reader.fieldnames or [])]
        if missing:
            raise DataFormatError(f"{path}, line 1: missing column {missing[0]!r}")
        out = {}
        for line, row in enumerate(reader, start=2):
            tpl = " ".join((row[column] or "").split())
            if OBJECT not in tpl or SUBJECT not in tpl:
                raise DataFormatError(f"{path}, line {line}: template {tpl!r} needs both [X] and [Y]")
            out[row["pid"]] = tpl
    return out


def read_relation_file(path: Path, relation: str, template: str) -> list[Query]:
    """One relation CSV -> queries; golds keep the order of ``tail_names_list`` without repeats."""
    queries = []
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise DataFormatError(f"{path}, line 1: missing column {missing[0]!r} (expected {', '.join(COLUMNS)})")
        for line, row in enumerate(reader, start=2):
            short = [c for c in COLUMNS if row[c] is None]
            if short:
                raise DataFormatError(f"{path}, line {line}: no value for column {short[0]!r} (row too short)")
            names = _parse_list(row["tail_names_list"], path, line, "tail_names_list")
            cuis = _parse_list(row["tail_cuis_list"], path, line, "tail_cuis_list")
            golds, gold_ids = [], []
            for name, cui in zip(names, cuis + [""] * (len(names) - len(cuis))):
                if name not in golds:
                    golds.append(name)
                    gold_ids.append(cui)
            if not row["head_name"].strip() or not golds:
                raise DataFormatError(f"{path}, line {line}: empty head_name or tail_names_list")
            queries.append(Query(id=f"{relation}:{line - 2:04d}", subject=row["head_name"].strip(),
                                 relation=relation, template=template, golds=tuple(golds),
                                 gold_ids=tuple(gold_ids), subject_id=row["head_cui"]))
    return queries


HARD_VOCAB_SALT = "vocab=heads+tails of the *_hard.csv files"
"""Part of the hard set's version: its vocabulary changed (from the full set's 22,923 names to the hard
files' own 17,532), so runs stored under the old version must not be read back as if they matched."""


def load(root: str | Path, *, which: str = "full", template_column: str = "human_prompt",
         relations: list[str] | None = None, name: str = "medlama") -> Dataset:
    """Load the full or hard set of a MedLAMA-layout folder.

    The candidate vocabularies are built from the files of the set loaded, as the reference does
    (``heads+tails``: 22,923 names for the full set; with ``--prob_hard`` the 19 ``*_hard.csv`` give
    17,532). ``relations`` keeps only those relations' queries and, like :meth:`Dataset.filter`,
    leaves the vocabularies those of the whole set.
    """
    root = Path(root).expanduser()
    if which not in SETS:
        raise ProbekitError(f"unknown MedLAMA set {which!r}; available: {', '.join(SETS)}")
    files = _relation_files(root, which)
    templates = read_templates(root / "prompts.csv", template_column)
    if relations:
        unknown = [r for r in relations if r not in files]
        if unknown:
            raise UnknownNameError("relation", unknown[0], sorted(files))
    queries = []
    for rel, path in files.items():
        if rel not in templates:
            raise DataFormatError(f"{root / 'prompts.csv'}: no template for relation {rel!r}")
        queries += read_relation_file(path, rel, templates[rel])
    meta = {"set": which, "template": template_column}
    paths = [root / "prompts.csv", *files.values()]
    ds = Dataset(name=f"{name}-{which}", queries=queries, templates={r: templates[r] for r in files},
                 version=fingerprint_files(paths, salt=HARD_VOCAB_SALT if which == "hard" else ""),
                 source=str(root), meta=meta)
    return ds.filter(relations=relations) if relations else ds
