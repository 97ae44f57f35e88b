"""Building a mention index: stream the corpus in batches, write Parquet row groups, publish atomically.

The build writes into ``.tmp-<fingerprint>-<pid>-<thread>`` next to the finished indexes; the manifest is
written last (temp file, fsync, rename) and the folder becomes visible with one rename, so a build killed at any
point (SIGKILL included) never leaves something that reads as complete. :func:`sweep_incomplete` removes the
folders of builds whose process is gone.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .. import atomic
from ..errors import ProbekitError
from ..jobs import Cancelled, Progress
from . import match
from .entities import EntitySet
from .index import INDEX_VERSION, TABLES, CorpusIndex, building_pid, corpus_key, fingerprint, pid_alive, root_dir
from .sources import CorpusSource, ReadState, iter_batches, read_documents


def _schemas():
    import pyarrow as pa

    return {
        "entities": pa.schema([("entity_id", pa.int32()), ("key", pa.string()), ("name", pa.string())]),
        "roles": pa.schema([("entity_id", pa.int32()), ("relation", pa.string()), ("role", pa.string())]),
        "facts": pa.schema([("subject_id", pa.int32()), ("relation", pa.string()), ("object_id", pa.int32())]),
        "documents": pa.schema([("doc_id", pa.int64()), ("file", pa.string()), ("key", pa.string()),
                                ("text", pa.string()), ("n_sentences", pa.int32()), ("n_mentions", pa.int32())]),
        "sentences": pa.schema([("doc_id", pa.int64()), ("sent", pa.int32()), ("para", pa.int32()),
                                ("start", pa.int32()), ("end", pa.int32())]),
        "mentions": pa.schema([("doc_id", pa.int64()), ("sent", pa.int32()), ("entity_id", pa.int32()),
                               ("start", pa.int32()), ("end", pa.int32())]),
    }


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_manifest(folder: Path, manifest: dict) -> None:
    atomic.write_json(folder / "manifest.json", manifest, indent=1)


def _batch_tables(batch, first_doc: int, matcher: match.Matcher, one_sentence: bool):
    """Arrow tables (documents, sentences, mentions) for one batch of documents."""
    import pyarrow as pa

    texts = [d.text for d in batch]
    n = len(batch)
    if one_sentence:
        sent_doc = np.arange(n, dtype=np.int64)
        sent_idx = np.zeros(n, dtype=np.int32)
        sent_para = np.zeros(n, dtype=np.int32)
        sent_start = np.zeros(n, dtype=np.int64)
        sent_end = np.fromiter((len(t) for t in texts), dtype=np.int64, count=n)
    else:
        per_doc = [match.sentences(t) for t in texts]
        counts = np.fromiter((len(s) for s in per_doc), dtype=np.int64, count=n)
        flat = np.array([x for s in per_doc for x in s], dtype=np.int64).reshape(-1, 3)
        sent_doc = np.repeat(np.arange(n, dtype=np.int64), counts)
        sent_idx = (np.arange(len(flat)) - np.repeat(np.cumsum(counts) - counts, counts)).astype(np.int32)
        sent_para, sent_start, sent_end = flat[:, 0].astype(np.int32), flat[:, 1], flat[:, 2]
    doc, ent, start, end = matcher.find_arrays(texts)
    # the sentence of a mention: the last sentence of its document starting at or before it
    key_sent = sent_doc * (1 << 32) + sent_start
    pos = np.searchsorted(key_sent, doc * (1 << 32) + start, side="right") - 1
    pos = np.maximum(pos, 0)
    m_sent = np.where(sent_doc[pos] == doc, sent_idx[pos], 0).astype(np.int32)
    n_sent = np.bincount(sent_doc, minlength=n).astype(np.int32)
    n_ment = np.bincount(doc, minlength=n).astype(np.int32)
    schemas = _schemas()
    docs = pa.table({"doc_id": np.arange(first_doc, first_doc + n, dtype=np.int64),
                     "file": [d.file for d in batch], "key": [d.key for d in batch], "text": texts,
                     "n_sentences": n_sent, "n_mentions": n_ment}, schema=schemas["documents"])
    sents = pa.table({"doc_id": sent_doc + first_doc, "sent": sent_idx, "para": sent_para,
                      "start": sent_start.astype(np.int32), "end": sent_end.astype(np.int32)},
                     schema=schemas["sentences"])
    ments = pa.table({"doc_id": doc + first_doc, "sent": m_sent, "entity_id": ent.astype(np.int32),
                      "start": start.astype(np.int32), "end": end.astype(np.int32)}, schema=schemas["mentions"])
    return docs, sents, ments


def _counts(folder: Path, entities: EntitySet) -> dict:
    import duckdb

    con = duckdb.connect(":memory:")
    con.execute("SET memory_limit = '512MB'")
    con.execute(f"SET temp_directory = '{(folder / 'duckdb_tmp').as_posix()}'")
    for t in ("documents", "sentences", "mentions", "facts"):
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{(folder / f'{t}.parquet').as_posix()}')")
    one = lambda q: con.execute(q).fetchall()[0][0]
    counts = {"documents": one("SELECT count(*) FROM documents"), "sentences": one("SELECT count(*) FROM sentences"),
              "mentions": one("SELECT count(*) FROM mentions"),
              "entity_names": len(entities),
              "entities_mentioned": one("SELECT count(DISTINCT entity_id) FROM mentions"),
              "facts": len(entities.facts)}
    if entities.facts:
        counts["facts_with_document"] = one(
            "SELECT count(*) FROM (SELECT DISTINCT f.subject_id, f.relation, f.object_id FROM facts f "
            "JOIN (SELECT DISTINCT doc_id, entity_id FROM mentions) a ON a.entity_id = f.subject_id "
            "JOIN (SELECT DISTINCT doc_id, entity_id FROM mentions) b ON b.doc_id = a.doc_id "
            "AND b.entity_id = f.object_id WHERE f.subject_id <> f.object_id)")
        counts["facts_with_sentence"] = one(
            "SELECT count(*) FROM (SELECT DISTINCT f.subject_id, f.relation, f.object_id FROM facts f "
            "JOIN (SELECT DISTINCT doc_id, sent, entity_id FROM mentions) a ON a.entity_id = f.subject_id "
            "JOIN (SELECT DISTINCT doc_id, sent, entity_id FROM mentions) b ON b.doc_id = a.doc_id "
            "AND b.sent = a.sent AND b.entity_id = f.object_id WHERE f.subject_id <> f.object_id)")
        counts["facts_same_name"] = sum(1 for f in entities.facts if f[0] == f[2])
    con.close()
    shutil.rmtree(folder / "duckdb_tmp", ignore_errors=True)
    return counts


def build_index(source: CorpusSource, entities: EntitySet, *, progress: Progress | None = None,
                should_cancel: Callable[[], bool] | None = None, force: bool = False,
                batch_chars: int = 2_000_000) -> CorpusIndex:
    """Index every mention of ``entities`` in ``source`` (or return the complete index already there).

    Streams the corpus in batches of about ``batch_chars`` characters, each written as Parquet row groups, so
    memory stays bounded whatever the corpus size. ``progress(bytes_done, bytes_total, stage)``;
    ``should_cancel()`` returning true stops the build with :class:`probekit.jobs.Cancelled` and removes the
    partial files (the signature of :class:`probekit.jobs.Job`'s function).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not len(entities):
        raise ProbekitError("no entity names to index")
    files = source.file_records()
    ctimes = {f["path"]: p.stat().st_ctime_ns for f, p in zip(files, source.files, strict=True)}
    fp = fingerprint(source, entities, files)
    final = root_dir() / fp
    if (final / "manifest.json").exists() and not force:
        idx = CorpusIndex(final)
        if not idx.changes():
            return idx
        idx.close()  # same size, time and sampled bytes, other content: rebuilt in place
        force = True
    sweep_incomplete()
    tmp = root_dir() / f".tmp-{fp}-{os.getpid()}-{threading.get_ident()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    started = time.time()
    total = sum(f["size"] for f in files)
    report = progress or (lambda done, tot, stage: None)
    try:
        matcher = match.Matcher(entities.keys)
        schemas = _schemas()
        pq.write_table(pa.table({"entity_id": np.arange(len(entities), dtype=np.int32), "key": entities.keys,
                                 "name": entities.names}, schema=schemas["entities"]), tmp / "entities.parquet")
        roles = sorted(entities.roles)
        pq.write_table(pa.table({"entity_id": [r[0] for r in roles], "relation": [r[1] for r in roles],
                                 "role": [r[2] for r in roles]}, schema=schemas["roles"]), tmp / "roles.parquet")
        pq.write_table(pa.table({"subject_id": [f[0] for f in entities.facts],
                                 "relation": [f[1] for f in entities.facts],
                                 "object_id": [f[2] for f in entities.facts]}, schema=schemas["facts"]),
                       tmp / "facts.parquet")
        writers = {t: pq.ParquetWriter(tmp / f"{t}.parquet", schemas[t], compression="zstd")
                   for t in ("documents", "sentences", "mentions")}
        state = ReadState()
        next_doc = 0
        report(0, total, "indexing")
        try:
            for batch in iter_batches(read_documents(source, state), max_chars=batch_chars):
                if should_cancel is not None and should_cancel():
                    raise Cancelled("indexing was cancelled; nothing was kept")
                tables = _batch_tables(batch, next_doc, matcher, one_sentence=source.kind == "lines")
                for name, table in zip(("documents", "sentences", "mentions"), tables):
                    writers[name].write_table(table)
                next_doc += len(batch)
                report(state.bytes_done, total, "indexing")
        finally:
            for w in writers.values():
                w.close()
        report(total, total, "counting facts with a context")
        counts = _counts(tmp, entities)
        manifest = {"version": INDEX_VERSION, "fingerprint": fp, "corpus_key": corpus_key(source),
                    "source": {**source.spec(), "files": files, "content_hashes": state.hashes,
                               "ctimes": ctimes},
                    "entities": {"label": entities.label, "hash": entities.hash, "count": len(entities),
                                 "dropped": entities.dropped},
                    "counts": counts,
                    "build": {"seconds": round(time.time() - started, 2), "bytes": total,
                              "created": time.strftime("%Y-%m-%d %H:%M:%S")}}
        for t in TABLES:
            _fsync(tmp / f"{t}.parquet")
        _write_manifest(tmp, manifest)
        _fsync(tmp)
        _publish(tmp, final, force=force)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return CorpusIndex(final)


def _publish(tmp: Path, final: Path, *, force: bool) -> None:
    """Make ``tmp`` visible as ``final`` with one rename (a concurrent identical build: keep the first)."""
    if final.exists():
        if not force and (final / "manifest.json").exists():
            shutil.rmtree(tmp, ignore_errors=True)
            return
        old = final.with_name(f".old-{final.name}-{os.getpid()}")
        os.rename(final, old)
        shutil.rmtree(old, ignore_errors=True)
    try:
        os.rename(tmp, final)
    except OSError:
        if not (final / "manifest.json").exists():
            raise
        shutil.rmtree(tmp, ignore_errors=True)
    _fsync(final.parent)


def sweep_incomplete() -> list[str]:
    """Remove the partial folders of builds whose process is gone (killed mid-index); returns their names."""
    removed: list[str] = []
    root = root_dir()
    if not root.is_dir():
        return removed
    for p in root.iterdir():
        if p.name.startswith((".tmp-", ".old-")) and p.is_dir():
            pid = building_pid(p)
            if pid != os.getpid() and not pid_alive(pid):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p.name)
    return removed
