"""The entity names an index looks for: a dataset's heads and tails, or an uploaded list.

Names are matched by key (:func:`probekit.corpus.match.name_key`: lower-cased, whitespace collapsed), so case
variants (MedLAMA keeps ``Fever`` and ``fever`` as two candidates) are one entity with several spellings. A
dataset also gives each entity its roles (head or tail of which relation) and the facts, so lookups can ask for
"every sentence mentioning a tail of relation R" and stats can count facts with a context.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..datasets import load_dataset
from ..errors import DataFormatError, ProbekitError
from ..vocab.sources import name_lines
from .match import has_word_char, name_key

MAX_NAME_CHARS = 300


@dataclass
class EntitySet:
    """Entity keys (ids are positions), first spelling of each, roles and facts; ``hash`` fingerprints it."""

    label: str
    keys: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    roles: set = field(default_factory=set)  # (entity id, relation, "head" | "tail")
    facts: list = field(default_factory=list)  # (subject id, relation, object id)
    dropped: int = 0  # names with no word character (they would match punctuation)

    def __post_init__(self):
        self._ids = {k: i for i, k in enumerate(self.keys)}

    def add(self, name: str) -> int | None:
        key = name_key(name)
        if not key:
            return None
        if key in self._ids:
            return self._ids[key]
        if not has_word_char(key) or len(key) > MAX_NAME_CHARS or "\x00" in key or "\x01" in key:
            self.dropped += 1
            return None
        self._ids[key] = len(self.keys)
        self.keys.append(key)
        self.names.append(" ".join(str(name).split()))
        return self._ids[key]

    def id_of(self, name: str) -> int | None:
        return self._ids.get(name_key(name))

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def hash(self) -> str:
        h = hashlib.blake2b(digest_size=12)
        h.update(json.dumps([self.keys, sorted(self.roles), sorted(self.facts)]).encode())
        return h.hexdigest()


def from_names(names, *, label: str = "names") -> EntitySet:
    """An entity set from plain names (no roles, no facts).

    >>> e = from_names(["Fever", "fever ", "Heart  failure", "--"])
    >>> e.keys, e.dropped
    (['fever', 'heart failure'], 1)
    """
    ents = EntitySet(label)
    for n in names:
        ents.add(str(n))
    if not len(ents):
        raise ProbekitError("no entity names to look for")
    return ents


def from_dataset(dataset, *, label: str | None = None, objects_only: bool = False) -> EntitySet:
    """Heads and tails of a :class:`probekit.datasets.Dataset` (or only its objects), with roles and facts."""
    ents = EntitySet(label or f"dataset:{dataset.name}:{dataset.version}" + (":objects" if objects_only else ""))
    for q in dataset.queries:
        s = None if objects_only else ents.add(q.subject)
        if s is not None:
            ents.roles.add((s, q.relation, "head"))
        for gold in q.golds:
            o = ents.add(gold)
            if o is None:
                continue
            ents.roles.add((o, q.relation, "tail"))
            if s is not None:
                ents.facts.append((s, q.relation, o))
    ents.facts = sorted(set(ents.facts))
    if not len(ents):
        raise ProbekitError(f"dataset {dataset.name!r} has no entity names")
    return ents


def from_file(path: str | Path) -> EntitySet:
    """An uploaded list: a text file with one name a line, or a CSV whose ``name`` column (first if none) holds them.

    An optional ``type`` (or ``relation``) column gives each name a role, so type lookups work on uploaded lists.
    The file is streamed line by line; a line longer than :data:`probekit.vocab.sources.MAX_NAME_LINE_CHARS` (the
    vocabularies' names files have the same limit) or not UTF-8 is one error naming the line.
    """
    import csv

    path = Path(path)
    ents = EntitySet(f"file:{path.name}")
    if path.suffix.lower() == ".csv":
        rows = csv.reader(text for _, text in name_lines(path, where=path.name, what="a row"))
        header = [h.strip().lower() for h in next(rows, [])]
        if not header:
            raise ProbekitError(f"{path.name}: no entity names")
        ni = header.index("name") if "name" in header else 0
        ti = next((header.index(c) for c in ("type", "relation") if c in header), None)
        for row in rows:
            if not row:
                continue  # a blank line
            if len(row) <= ni:
                raise DataFormatError(f"{path.name}, line {rows.line_num}: no name in column {ni + 1}")
            eid = ents.add(row[ni])
            if eid is not None and ti is not None and ti < len(row) and row[ti].strip():
                ents.roles.add((eid, row[ti].strip(), "type"))
    else:
        for _, line in name_lines(path, where=path.name):
            ents.add(line)
    if not len(ents):
        raise ProbekitError(f"{path.name}: no entity names")
    return ents


def load_entities(*, dataset: str | None = None, which: str = "full", data_dir: str | Path | None = None,
                  names_file: str | Path | None = None, objects_only: bool = False) -> EntitySet:
    """The entity set of a dataset spec (``medlama``, ``demo``, ``triples`` with ``data_dir``...) or of a list
    file: what the CLI and the Corpora page index against."""
    if (dataset is None) == (names_file is None):
        raise ProbekitError("give either a dataset or a file of entity names")
    if names_file is not None:
        return from_file(names_file)
    assert dataset is not None  # exactly one of the two is given (checked above)

    # load_dataset reads ``which`` for the datasets that have sets (demo, medlama) only
    return from_dataset(load_dataset(dataset, path=data_dir, which=which), objects_only=objects_only)
