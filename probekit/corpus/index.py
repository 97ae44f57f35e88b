"""The mention index: built once per (corpus, entity set), stored as Parquet, read through in-memory DuckDB.

Layout under ``config.cache_dir()/corpora/<fingerprint>/`` (derived data, safe to delete)::

    entities.parquet   entity_id, key, name          roles.parquet  entity_id, relation, role
    facts.parquet      subject_id, relation, object_id (when built from a dataset)
    documents.parquet  doc_id, file, key, text, n_sentences, n_mentions
    sentences.parquet  doc_id, sent, para, start, end          (character offsets in the document text)
    mentions.parquet   doc_id, sent, entity_id, start, end
    manifest.json      what produced it, counts, per-file fingerprints; written LAST

The fingerprint hashes what produced the index: the index version, the source spec, every file's size, mtime and
a sample of its bytes, and the entity set. An index is built (:mod:`probekit.corpus.build`) in
``.tmp-<fingerprint>-<pid>`` and becomes visible only by renaming the whole folder after its manifest was written
and every file fsynced, so an index killed
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
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from .. import config
from ..errors import ProbekitError, command
from ..memo import Memo
from . import match
from .entities import EntitySet
from .sources import CorpusSource

if TYPE_CHECKING:
    import duckdb

INDEX_VERSION = 2
IN_MEMORY_MENTIONS = 5_000_000
TABLES = ("entities", "roles", "facts", "documents", "sentences", "mentions")


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


def content_hash(path: Path) -> str:
    """The whole file's blake2b digest, as the build computes it while reading (memoised by size, times and inode,
    so a check that must read a file does so once per change)."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    hit = _CONTENT.get(key)
    if hit is None:
        h = hashlib.blake2b(digest_size=16)
        with open(path, "rb") as fh:
            while block := fh.read(1 << 20):
                h.update(block)
        hit = h.hexdigest()
        _CONTENT.put(key, hit)
    return hit


_CONTENT: Memo[tuple, str] = Memo(max_entries=4096)


def _content_changes(source: dict, root: Path, unchanged: list[str]) -> list[str]:
    """Files whose size, mtime and sampled bytes match what was indexed but whose content does not.

    An edit that keeps the size and restores the timestamp (``touch -r``) escapes the quick fingerprint, but not
    the inode's change time, which no user tool can set back: a file whose ctime differs from the one recorded
    at build time is hashed whole and compared with the hash the build took of what it read. A file whose
    ctime is unchanged is not read at all (the cheap common case)."""
    hashes, ctimes = source.get("content_hashes") or {}, source.get("ctimes") or {}
    out = []
    for rel in unchanged:
        if rel not in hashes:
            continue
        p = root / rel if root.is_dir() else root
        try:
            if ctimes.get(rel) == p.stat().st_ctime_ns:
                continue
            if content_hash(p) != hashes[rel]:
                out.append(f"{rel} content changed (same size and time)")
        except OSError:
            out.append(f"{rel} unreadable")
    return out


# ---------------------------------------------------------------- the index as read
class CorpusIndex:
    """A complete index on disk; ``con`` is an in-memory DuckDB with one view per table."""

    def __init__(self, path: Path):
        import duckdb

        self.path = Path(path)
        self.manifest = json.loads((self.path / "manifest.json").read_text())
        self.fingerprint = self.manifest["fingerprint"]
        self._con: duckdb.DuckDBPyConnection | None = duckdb.connect(":memory:")  # None once closed
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
        diff = _diff_files(self.source_files(), current)
        return diff or _content_changes(self.manifest["source"], root, [f["path"] for f in current])

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
                f"{' …' if len(diff) > 3 else ''}); re-index it ({command()} corpus index)",
                stale=self.fingerprint)

    # -- queries
    def sql(self, query: str, params=None) -> list[tuple]:
        with self._lock:
            return self._cursor().execute(query, params or []).fetchall()

    def df(self, query: str, params=None):
        with self._lock:
            return self._cursor().execute(query, params or []).df()

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            raise ProbekitError(f"the index of corpus {self.name!r} is closed")
        return self._con.cursor()

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


# ---------------------------------------------------------------- finding indexes
def _complete(folder: Path) -> bool:
    return folder.is_dir() and not folder.name.startswith(".") and (folder / "manifest.json").is_file()


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError, ValueError):
        return False
    except PermissionError:
        return True
    return True


def building_pid(folder: Path) -> int:
    """The process id in a partial build's name (``.tmp-<fingerprint>-<pid>-…``); -1 when it holds none."""
    try:
        return int(folder.name.split("-")[2])
    except (IndexError, ValueError):
        return -1


def list_indexes() -> list[dict]:
    """Every index under the cache: complete ones with their status (``ok`` / ``stale``), builds under way
    (``building``: their process is alive) and interrupted builds (their process is gone)."""
    out: list[dict] = []
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
            out.append({"fingerprint": p.name, "status": "building" if pid_alive(building_pid(p))
                        else "incomplete (interrupted build)"})
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
        idx = CorpusIndex(root_dir() / fp)
        edited = _content_changes(idx.manifest["source"], Path(idx.manifest["source"]["root"]),
                                  [f["path"] for f in files])
        if edited:
            idx.close()
            raise CorpusChangedError(f"corpus {source.name!r} changed since it was indexed ({'; '.join(edited[:3])})"
                                     "; re-index it", stale=fp)
        return idx
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
