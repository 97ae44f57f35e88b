"""The vocabularies built on this machine: ``name -> <vocab dir>/<name>.json`` (source, fingerprint, builds).

Records are written by :func:`probekit.vocab.build.build`; this module reads them. :func:`open_vocabulary`
refuses a vocabulary whose source changed since it was built (the files' content
fingerprint differs): a changed file is never used stale.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import config
from ..errors import ProbekitError, UnknownNameError
from ..types import CandidateSet
from . import shards
from .sources import Source, open_source

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ProbekitError(f"bad vocabulary name {name!r}: letters, digits, '_', '.', '-' (at most 64)")
    return name


def record_path(name: str) -> Path:
    return config.vocab_dir() / f"{check_name(name)}.json"


def names() -> list[str]:
    folder = config.vocab_dir()
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def record(name: str) -> dict:
    """The stored record of vocabulary ``name``; an unknown name names the close ones."""
    path = record_path(name)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UnknownNameError("vocabulary", name, names()) from None
    except ValueError:
        raise ProbekitError(f"vocabulary record {path} is not valid JSON: build it again") from None


def source_of(rec: dict) -> Source:
    src = rec["source"]
    return open_source(src["kind"], src["paths"], **src["options"])


def status(rec: dict) -> str:
    """``ok``, ``stale`` (a source file changed since the build) or ``missing`` (a source file is gone)."""
    try:
        fp = source_of(rec).fingerprint()
    except ProbekitError:
        return "missing"
    return "ok" if fp == rec["fingerprint"] else "stale"


@dataclass
class Vocabulary:
    """A built vocabulary ready to probe with: its rows, CUIs and the candidate set over its names."""

    name: str
    rows: shards.Rows
    record: dict = field(repr=False)

    @property
    def has_cuis(self) -> bool:
        return self.rows.has_cuis

    def candidates(self) -> VocabularyCandidates:
        names, cuis = [], []
        for e in self.rows.entries():
            names.append(e.name)
            cuis.append(e.cui)
        return VocabularyCandidates(names=tuple(names), key=f"vocab:{self.rows.fingerprint}", vocabulary=self.name,
                                    cuis=tuple(cuis), rows=self.rows, kind=self.record.get("index_kind", "exact"))


@dataclass(frozen=True)
class VocabularyCandidates(CandidateSet):
    """A built vocabulary's names as a candidate set (rows may repeat a spelling under another CUI): the retrieval
    probe searches its stored shards through the sharded index instead of encoding the names again."""

    vocabulary: str = ""
    cuis: tuple[str, ...] = ()
    rows: shards.Rows | None = None
    kind: str = "exact"


def open_vocabulary(name: str) -> Vocabulary:
    """Vocabulary ``name`` as built; refused when its source changed since (never used stale)."""
    rec = record(name)
    state = status(rec)
    if state != "ok":
        what = "changed" if state == "stale" else "is missing"
        raise ProbekitError(f"vocabulary {name!r} is {state}: its source {', '.join(rec['source']['paths'])} "
                            f"{what} since it was built; run `probekit vocab build {name} ...` again")
    rows = shards.read_rows(source_of(rec), shard_size=int(rec["shard_size"]))
    return Vocabulary(name=name, rows=rows, record=rec)


def listing() -> list[dict]:
    """One row per vocabulary: names, status, and its latest build's sizes and timings."""
    out = []
    for name in names():
        try:
            rec = record(name)
        except ProbekitError:
            continue
        b = rec.get("builds", {}).get(rec.get("default", ""), {})
        out.append({"name": name, "status": status(rec), "names": rec.get("names"), "cuis": rec.get("has_cuis"),
                    "source": rec["source"]["kind"], "model": b.get("model"), "index": b.get("index"),
                    "vector_mib": round(b.get("vector_bytes", 0) / 2**20, 1), "encode_s": b.get("encode_s"),
                    "names_per_s": b.get("names_per_s"), "recall_at_10": b.get("recall_at_10")})
    return out
