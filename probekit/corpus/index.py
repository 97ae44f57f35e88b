"""The mention index: built once per (corpus, entity set), stored as Parquet, read through in-memory DuckDB.

Layout under ``config.cache_dir()/corpora/<fingerprint>/`` (derived data, safe to delete)::

    entities.parquet   entity_id, key, name          roles.parquet  entity_id, relation, role
    facts.parquet      subject_id, relation, object_id (when built from a dataset)
    documents.parquet  doc_id, file, key, text, n_sentences, n_mentions
    sentences.parquet  doc_id, sent, para, start, end          (character offsets in the document text)
    mentions.parquet   doc_id, sent, entity_id, start, end
    manifest.json      what produced it, counts, per-file fingerprints; written LAST

The fingerprint hashes what produced the index: the index version, the source spec, every file's size, mtime and
a sample of its bytes, and the entity set. An index is built in ``.tmp-<fingerprint>-<pid>`` and becomes visible
only by renaming the whole folder after its manifest was written and every file fsynced, so an index killed
mid-build (SIGKILL included) leaves at most a ``.tmp-*`` folder that never reads as complete (and is swept
later). Queries use an in-memory DuckDB connection over ``read_parquet``: they never take the app database's
write lock. A corpus changed after indexing is detected on open (:class:`CorpusChangedError`), never used stale.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .. import config
from ..errors import ProbekitError
from ..jobs import Cancelled
from . import match
from .entities import EntitySet
from .sources import CorpusSource, ReadState, iter_batches, read_documents

INDEX_VERSION = 2
IN_MEMORY_MENTIONS = 5_000_000
TABLES = ("entities", "roles", "facts", "documents", "sentences", "mentions")
Progress = Callable[[int, int, str], None]


class CorpusChangedError(ProbekitError):
    """The corpus differs from what an index was built on: re-index (never search a stale index)."""

    def __init__(self, message: str, *, stale: str | None = None):
        super().__init__(message)
        self.stale = stale


def root_dir() -> Path:
    return config.cache_dir() / "corpora"


def _hash(obj) -> str:
    return hashlib.blake2b(json.dumps(obj, sort_keys=True).encode(), digest_size=8).hexdigest()


def corpus_key(source: CorpusSource) -> str:
    """The corpus' identity regardless of content (kind, path, columns)."""
    spec = source.spec()
    return _hash({k: spec[k] for k in ("kind", "root", "text_column", "id_column")})


def fingerprint(source: CorpusSource, entities: EntitySet, files: list[dict] | None = None) -> str:
    files = files if files is not None else source.file_records()
    return _hash({"version": INDEX_VERSION, "corpus": corpus_key(source), "files": files,
                  "entities": entities.hash})


def _diff_files(old: list[dict], new: list[dict]) -> list[str]:
    before, after = {f["path"]: f for f in old}, {f["path"]: f for f in new}
    out = [f"{p} added" for p in sorted(set(after) - set(before))]
    out += [f"{p} removed" for p in sorted(set(before) - set(after))]
    for p in sorted(set(before) & set(after)):
        a, b = before[p], after[p]
        if a["size"] != b["size"]:
            out.append(f"{p} size {a['size']} -> {b['size']}")
        elif a["sample"] != b["sample"]:
            out.append(f"{p} content changed")
        elif a["mtime_ns"] != b["mtime_ns"]:
            out.append(f"{p} modified (mtime)")
    return out


# ---------------------------------------------------------------- the index as read
class CorpusIndex:
    """A complete index on disk; ``con`` is an in-memory DuckDB with one view per table."""

    def __init__(self, path: Path):
        import duckdb

        self.path = Path(path)
        self.manifest = json.loads((self.path / "manifest.json").read_text())
        self.fingerprint = self.manifest["fingerprint"]
        self._con = duckdb.connect(":memory:")
        self._con.execute("SET threads = 2")
        self._lock = threading.Lock()
        for t in TABLES:
            f = (self.path / f"{t}.parquet").as_posix().replace("'", "''")
            self._con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{f}')")
        # The mention table is small next to the text: hold it in memory (sorted by entity) for millisecond
        # lookups, unless it is very large (a multi-GB corpus), where the Parquet view serves.
        if self.manifest["counts"]["mentions"] <= IN_MEMORY_MENTIONS:
            self._con.execute("CREATE TABLE m AS SELECT * FROM mentions ORDER BY entity_id, doc_id")
        else:
            self._con.execute("CREATE VIEW m AS SELECT * FROM mentions")
        ents = self.sql("SELECT key, name FROM entities ORDER BY entity_id")
        self.keys = [k for k, _ in ents]
        self.names = [n for _, n in ents]
        self._ids = {k: i for i, k in enumerate(self.keys)}
        _OPEN.add(self)

    # -- identity
    @property
    def name(self) -> str:
        return self.manifest["source"]["name"]

    @property
    def counts(self) -> dict:
        return self.manifest["counts"]

    def source_files(self) -> list[dict]:
        return self.manifest["source"]["files"]

    def changes(self) -> list[str]:
        """How the corpus on disk differs from what was indexed (empty: unchanged)."""
        root = Path(self.manifest["source"]["root"])
        if not root.exists():
            return [f"{root} is gone"]
        current = []
        for f in self.source_files():
            p = root / f["path"] if root.is_dir() else root
            if p.exists():
                current.append(_record_for(p, f["path"]))
        if root.is_dir():
            pattern = "*.txt" if self.manifest["source"]["kind"] == "txt" else "*"
            known = {f["path"] for f in self.source_files()}
            for p in sorted(root.glob(pattern)):
                rel = str(p.relative_to(root))
                if p.is_file() and not p.name.startswith(".") and rel not in known:
                    current.append(_record_for(p, rel))
        return _diff_files(self.source_files(), current)

    def check(self) -> None:
        """Raise :class:`CorpusChangedError` when the corpus changed since it was indexed (or the index is from
        an older probekit)."""
        if self.manifest.get("version") != INDEX_VERSION:
            raise CorpusChangedError(f"index {self.fingerprint} was built by an older probekit (index version "
                                     f"{self.manifest.get('version')}, now {INDEX_VERSION}); re-index the corpus",
                                     stale=self.fingerprint)
        diff = self.changes()
        if diff:
            raise CorpusChangedError(
                f"corpus {self.name!r} changed since it was indexed ({'; '.join(diff[:3])}"
                f"{' …' if len(diff) > 3 else ''}); re-index it (python -m probekit corpus index)",
                stale=self.fingerprint)

    # -- queries
    def sql(self, query: str, params=None) -> list[tuple]:
        with self._lock:
            return self._con.cursor().execute(query, params or []).fetchall()

    def df(self, query: str, params=None):
        with self._lock:
            return self._con.cursor().execute(query, params or []).df()

    def entity_id(self, name: str) -> int | None:
        return self._ids.get(match.name_key(name))

    def require_entity(self, name: str, what: str = "entity") -> int:
        eid = self.entity_id(name)
        if eid is None:
            raise ProbekitError(f"{what} {name!r} is not among the {len(self.keys):,} names this index was built "
                                f"with ({self.manifest['entities']['label']}); index with a list that has it")
        return eid

    def stats(self) -> dict:
        m = self.manifest
        return {"fingerprint": self.fingerprint, "corpus": m["source"]["name"], "kind": m["source"]["kind"],
                "entities": m["entities"]["label"], **m["counts"], "seconds": m["build"]["seconds"],
                "created": m["build"]["created"]}

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None


_OPEN: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def close_all() -> None:
    """Close every open index (its in-memory DuckDB) before the interpreter tears the bindings down."""
    for idx in list(_OPEN):
        idx.close()


def _record_for(path: Path, rel: str) -> dict:
    src = CorpusSource(kind="lines", root=path, files=(path,), name=rel)
    rec = src.file_records()[0]
    rec["path"] = rel
    return rec


# ---------------------------------------------------------------- building
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
    tmp = folder / "manifest.json.tmp"
    with open(tmp, "w") as fh:
        json.dump(manifest, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, folder / "manifest.json")


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
    fp = fingerprint(source, entities, files)
    final = root_dir() / fp
    if (final / "manifest.json").exists() and not force:
        return CorpusIndex(final)
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
                    "source": {**source.spec(), "files": files, "content_hashes": state.hashes},
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


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError, ValueError):
        return False
    except PermissionError:
        return True
    return True


def sweep_incomplete() -> list[str]:
    """Remove the partial folders of builds whose process is gone (killed mid-index); returns their names."""
    removed = []
    root = root_dir()
    if not root.is_dir():
        return removed
    for p in root.iterdir():
        if p.name.startswith((".tmp-", ".old-")) and p.is_dir():
            try:
                pid = int(p.name.split("-")[2])
            except (IndexError, ValueError):
                pid = -1
            if pid != os.getpid() and not _pid_alive(pid):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p.name)
    return removed


# ---------------------------------------------------------------- finding indexes
def _complete(folder: Path) -> bool:
    return folder.is_dir() and not folder.name.startswith(".") and (folder / "manifest.json").is_file()


def list_indexes() -> list[dict]:
    """Every index under the cache: complete ones with their status (``ok`` / ``stale``), and interrupted builds."""
    out = []
    root = root_dir()
    if not root.is_dir():
        return out
    for p in sorted(root.iterdir()):
        if _complete(p):
            try:
                idx = CorpusIndex(p)
            except Exception as e:  # a damaged index is listed, never fatal
                out.append({"fingerprint": p.name, "status": f"damaged ({type(e).__name__})"})
                continue
            diff = idx.changes()
            if idx.manifest.get("version") != INDEX_VERSION:
                diff = [f"index version {idx.manifest.get('version')}, now {INDEX_VERSION}"] + diff
            out.append({**idx.stats(), "status": "stale: " + "; ".join(diff[:2]) if diff else "ok"})
            idx.close()
        elif p.name.startswith(".tmp-"):
            out.append({"fingerprint": p.name, "status": "incomplete (interrupted build)"})
    return out


def open_index(ref: str, *, allow_stale: bool = False) -> CorpusIndex:
    """An index by fingerprint (or unique prefix); checks the corpus has not changed unless ``allow_stale``."""
    root = root_dir()
    hits = [p for p in root.iterdir() if _complete(p) and p.name.startswith(ref)] if root.is_dir() and ref else []
    if not hits:
        known = [p.name for p in root.iterdir() if _complete(p)] if root.is_dir() else []
        raise ProbekitError(f"no corpus index {ref!r}; available: {', '.join(known) or 'none (build one first)'}")
    if len(hits) > 1:
        raise ProbekitError(f"{ref!r} matches several indexes: {', '.join(p.name for p in hits)}")
    idx = CorpusIndex(hits[0])
    if not allow_stale:
        try:
            idx.check()
        except CorpusChangedError:
            idx.close()
            raise
    return idx


def find_index(source: CorpusSource, entities: EntitySet) -> CorpusIndex | None:
    """The complete index for exactly this corpus content and entity set, or None.

    Raises :class:`CorpusChangedError` when an index of the same corpus and entities exists but the corpus
    changed since (so the caller offers a re-index rather than silently building or using a stale one).
    """
    files = source.file_records()
    fp = fingerprint(source, entities, files)
    if _complete(root_dir() / fp):
        return CorpusIndex(root_dir() / fp)
    key = corpus_key(source)
    root = root_dir()
    for p in sorted(root.iterdir()) if root.is_dir() else []:
        if not _complete(p):
            continue
        try:
            m = json.loads((p / "manifest.json").read_text())
        except (OSError, ValueError):
            continue
        if m.get("corpus_key") == key and m.get("entities", {}).get("hash") == entities.hash:
            diff = _diff_files(m["source"]["files"], files)
            if not diff:
                raise CorpusChangedError(f"index {p.name} of corpus {source.name!r} was built by an older probekit "
                                         f"(index version {m.get('version')}, now {INDEX_VERSION}); re-index it",
                                         stale=p.name)
            raise CorpusChangedError(
                f"corpus {source.name!r} changed since it was indexed ({'; '.join(diff[:3])}); re-index it",
                stale=p.name)
    return None


def remove_index(ref: str) -> str:
    idx = open_index(ref, allow_stale=True)
    path = idx.path
    idx.close()
    shutil.rmtree(path)
    return path.name
