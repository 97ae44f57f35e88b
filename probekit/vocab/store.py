"""The vocabularies built on this machine: ``name -> <vocab dir>/<name>.json`` (source, fingerprint, builds).

:func:`build` reads the source into row shards, encodes the missing vector shards (in this process, or across Ray
workers) and builds the search index over them (:class:`probekit.vocab.search.ShardedIndex`), measuring what it
cost: names, shards, bytes on disk, seconds per stage, names/s, the process's peak memory and, for an approximate
index, its recall@10 against exact search. Each build is one entry of the record, keyed by its vector key, so a
vocabulary encoded with several models keeps one record each.

:func:`open_vocabulary` refuses a vocabulary whose source changed since it was built (the files' content
fingerprint differs): a changed file is never used stale.
"""

from __future__ import annotations

import json
import re
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import atomic, config
from ..errors import ProbekitError, UnknownNameError
from ..jobs import Progress
from ..types import CandidateSet
from . import shards
from .sources import Source, open_source

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
RECALL_K = 10
RECALL_QUERIES = 256
"""Queries used to measure an approximate index's recall: a seeded sample of the vocabulary's own vectors."""


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


def _source_of(rec: dict) -> Source:
    src = rec["source"]
    return open_source(src["kind"], src["paths"], **src["options"])


def status(rec: dict) -> str:
    """``ok``, ``stale`` (a source file changed since the build) or ``missing`` (a source file is gone)."""
    try:
        fp = _source_of(rec).fingerprint()
    except ProbekitError:
        return "missing"
    return "ok" if fp == rec["fingerprint"] else "stale"


def peak_rss() -> int:
    """This process's peak resident memory so far, in bytes (Linux reports KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def build(name: str, source: Source, *, model_id: str = config.DEFAULT_MODEL, model=None, layer: int | None = None,
          pooling: str | None = None, dtype: str = "float32", shard_size: int = shards.SHARD_SIZE,
          index: str = "exact", index_params: dict | None = None, similarity: str = "cosine",
          batch_size: int = 128, fast: bool = False, backend: str = "local", workers: int = 2,
          threads_per_worker: int = 1, progress: Progress | None = None) -> dict:
    """Read, encode and index ``source`` as vocabulary ``name``; returns this build's measurements.

    ``model`` is a loaded model (local backend); without it ``model_id`` is loaded here (``local``) or in each Ray
    worker (``ray``). A rerun after a kill reuses every finished shard."""
    check_name(name)
    if backend not in ("local", "ray"):
        raise UnknownNameError("backend", backend, ["local", "ray"])
    t0 = time.perf_counter()
    rows = shards.read_rows(source, shard_size=shard_size, progress=progress)
    t_read = time.perf_counter() - t0
    t1 = time.perf_counter()
    if backend == "ray":
        vectors, _ = shards.encode_on_ray(model_id, rows, workers=workers, threads_per_worker=threads_per_worker,
                                       layer=layer, pooling=pooling, dtype=dtype, batch_size=batch_size, fast=fast,
                                       progress=progress)
        model_desc = model_id
    else:
        if model is None:
            from .. import models

            model = models.load(model_id)
        vectors = shards.encode(model, rows, layer=layer, pooling=pooling, dtype=dtype, batch_size=batch_size,
                                fast=fast, progress=progress)
        model_desc = model.id
    t_encode = time.perf_counter() - t1
    t2 = time.perf_counter()
    measured = build_index(vectors, kind=index, params=index_params, similarity=similarity, progress=progress)
    t_index = time.perf_counter() - t2
    entry = {"model": model_desc, "vectors": vectors.folder.name, "dtype": dtype, "similarity": similarity,
             "backend": backend, "workers": workers if backend == "ray" else 1,
             "names": rows.n_rows, "shards": rows.n_shards, "dim": int(vectors.shards()[0].shape[1]),
             "vector_bytes": vectors.nbytes, "read_s": round(t_read, 3), "encode_s": round(t_encode, 3),
             "index_s": round(t_index, 3), "names_per_s": round(rows.n_rows / t_encode, 1) if t_encode > 0 else None,
             "peak_rss_bytes": peak_rss(), "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             **measured}
    try:
        rec = record(name)
    except ProbekitError:
        rec = {}
    if rec.get("fingerprint") != rows.fingerprint:
        rec = {"builds": {}}  # a new source (or a changed file): the old builds describe other names
    rec.update({"name": name, "source": source.describe(), "fingerprint": rows.fingerprint, "names": rows.n_rows,
                "shard_size": rows.shard_size, "has_cuis": rows.has_cuis})
    rec.setdefault("builds", {})[vectors.folder.name] = entry
    rec["default"] = vectors.folder.name
    atomic.write_json(record_path(name), rec, indent=1)
    return {"name": name, **entry}


def index_folder(vectors: shards.Vectors, kind: str, similarity: str) -> Path:
    return vectors.folder / f"index-{kind}-{similarity}"


def build_index(vectors: shards.Vectors, *, kind: str, params: dict | None, similarity: str,
                progress: Progress | None = None) -> dict:
    """Build and save the :class:`ShardedIndex` over the shards; for an approximate kind, its recall@10 against
    exact search on :data:`RECALL_QUERIES` of the vocabulary's own vectors (seeded sample)."""
    import numpy as np

    from .search import ShardedIndex

    parts = vectors.shards()
    index = ShardedIndex.build(parts, similarity=similarity, kind=kind, params=params or None, progress=progress)
    index.save(index_folder(vectors, kind, similarity))
    out: dict = {"index": kind, "index_params": params or {}}
    if kind != "exact":
        n = vectors.rows.n_rows
        rng = np.random.default_rng(0)
        pick = np.sort(rng.choice(n, size=min(RECALL_QUERIES, n), replace=False))
        q = np.stack([np.asarray(parts[i // vectors.rows.shard_size][i % vectors.rows.shard_size], dtype=np.float32)
                      for i in pick])  # (n_queries, dim)
        out["recall_at_10"] = round(float(index.recall_at_k(q, RECALL_K)), 4)
    return out


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
    rows = shards.read_rows(_source_of(rec), shard_size=int(rec["shard_size"]))
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
