"""Vocabulary names and their vectors on disk, shard by shard: bounded memory, resumable after a kill.

Two stages, each kept under ``<cache dir>/vocab/<source fingerprint>/``:

- **rows**: the source is streamed once into row shards ``rows-00000.tsv`` (name, CUI, semantic types), each
  written atomically (:mod:`probekit.atomic`) as soon as it is full, then ``rows.json`` (the count and the
  fingerprint). Only ``rows.json`` makes the rows complete; a killed read starts again (reading is cheap).
- **vectors**: per encoding key (:func:`vector_key`: everything the embedding cache keys on, the names being the
  source fingerprint, plus the stored dtype and the shard size) one ``.npy`` per shard in ``vectors/<key>/``.
  A shard counts as done only when its ``.npy`` was renamed into place (atomic) AND its ``.done.json`` receipt,
  written after it, names its shape and dtype; so a kill never leaves a shard that reads as complete, and a rerun
  encodes only the shards without a receipt. Shards are read back memory-mapped (``np.load(mmap_mode="r")``).

Encoding uses :func:`probekit.encode.encode_layers` (length-sorted batches, GPU when the model is on one, the
out-of-memory fallbacks) with names cut at :data:`probekit.index.NAME_MAX_LENGTH` tokens, as the entity index
does. :func:`probekit.vocab.ray_shards.encode_on_ray` spreads the missing shards over Ray actors (one model per
actor, one task per shard, each shard handed out once).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import atomic, config
from ..errors import ProbekitError, positive_int
from ..jobs import Cancelled, Progress
from .sources import Entry, Source

DTYPES = ("float16", "float32")
SHARD_SIZE = 50_000
"""Names per shard by default: 73 MiB of float32 384-d vectors, a few seconds to minutes of encoding each."""
NAME_MAX_LENGTH = 25
"""Tokens kept of each name: the entity index's (:data:`probekit.index.NAME_MAX_LENGTH`)."""


def root() -> Path:
    """Every vocabulary's rows and vectors (``<cache dir>/vocab``; ``PROBEKIT_CACHE_DIR`` moves it)."""
    return config.cache_dir() / "vocab"


@dataclass(frozen=True)
class Rows:
    """The rows of a source, stored as shards: ``folder`` holds ``rows-NNNNN.tsv`` and ``rows.json``."""

    folder: Path
    fingerprint: str
    n_rows: int
    shard_size: int
    has_cuis: bool

    @property
    def n_shards(self) -> int:
        return -(-self.n_rows // self.shard_size)

    def shard_path(self, i: int) -> Path:
        return self.folder / f"rows-{i:05d}.tsv"

    def shard(self, i: int) -> list[Entry]:
        """The rows of shard ``i`` (one shard's worth of memory)."""
        out = []
        with open(self.shard_path(i), encoding="utf-8") as fh:
            for line in fh:
                name, cui, types = line.rstrip("\n").split("\t")
                out.append(Entry(name, cui, types))
        return out

    def names(self) -> list[str]:
        return [e.name for i in range(self.n_shards) for e in self.shard(i)]

    def cuis(self) -> list[str]:
        return [e.cui for i in range(self.n_shards) for e in self.shard(i)]

    def entries(self) -> Iterator[Entry]:
        for i in range(self.n_shards):
            yield from self.shard(i)


def _clean(text: str) -> str:
    return " ".join(text.replace("\t", " ").split())


def read_rows(source: Source, *, shard_size: int = SHARD_SIZE, progress: Progress | None = None) -> Rows:
    """The source's rows as shards on disk (read once per fingerprint and shard size; reused while complete)."""
    shard_size = positive_int("shard_size", shard_size)
    fp = source.fingerprint()
    folder = root() / fp / f"rows-{shard_size}"
    done = folder / "rows.json"
    try:
        meta = json.loads(done.read_text(encoding="utf-8"))
        return Rows(folder, fp, int(meta["n_rows"]), shard_size, bool(meta["has_cuis"]))
    except (OSError, ValueError, KeyError):
        pass
    n, has_cuis, buf, shard = 0, False, [], 0
    for entry in source.rows():
        buf.append(f"{_clean(entry.name)}\t{entry.cui.strip()}\t{entry.types}\n")
        has_cuis = has_cuis or bool(entry.cui)
        n += 1
        if len(buf) == shard_size:
            atomic.write_text(folder / f"rows-{shard:05d}.tsv", "".join(buf))
            shard, buf = shard + 1, []
            if progress:
                progress(n, n, "reading names")
    if buf:
        atomic.write_text(folder / f"rows-{shard:05d}.tsv", "".join(buf))
    atomic.write_json(done, {"n_rows": n, "has_cuis": has_cuis, "fingerprint": fp, "source": source.describe()})
    return Rows(folder, fp, n, shard_size, has_cuis)


def vector_key(model, *, fingerprint: str, layer: int, pooling: str, dtype: str, shard_size: int,
               fast: bool = False) -> str:
    """The key of one encoding of a vocabulary: the embedding cache's key (model, revision, layer, pooling, name
    length, precision, encoder version, names) with the names' fingerprint, plus the stored dtype and shard size."""
    from ..cache import embedding_key

    base = embedding_key(model, texts=f"vocab:{fingerprint}", layer=layer, pooling=pooling,
                         max_length=NAME_MAX_LENGTH, fast=fast)
    return f"{base}-{dtype}-{shard_size}"


@dataclass(frozen=True)
class Vectors:
    """The shards of one encoding of :class:`Rows`: ``folder`` holds ``shard-NNNNN.npy`` and their receipts."""

    rows: Rows
    folder: Path
    dtype: str

    def npy(self, i: int) -> Path:
        return self.folder / f"shard-{i:05d}.npy"

    def receipt(self, i: int) -> Path:
        return self.folder / f"shard-{i:05d}.done.json"

    def shard_rows(self, i: int) -> int:
        return min(self.rows.shard_size, self.rows.n_rows - i * self.rows.shard_size)

    def is_done(self, i: int) -> bool:
        """A receipt naming this shard's shape and dtype, and an ``.npy`` with them (never a half file)."""
        try:
            meta = json.loads(self.receipt(i).read_text(encoding="utf-8"))
            arr = np.load(self.npy(i), mmap_mode="r")
        except (OSError, ValueError, EOFError):
            return False
        return (meta.get("rows") == self.shard_rows(i) == arr.shape[0] and meta.get("dtype") == self.dtype
                and str(arr.dtype) == self.dtype and meta.get("dim") == arr.shape[1])

    def missing(self) -> list[int]:
        return [i for i in range(self.rows.n_shards) if not self.is_done(i)]

    @property
    def complete(self) -> bool:
        return not self.missing()

    def shards(self) -> list[np.ndarray]:
        """Every shard, memory-mapped read-only: (n_i, dim) of :attr:`dtype` each."""
        missing = self.missing()
        if missing:
            raise ProbekitError(f"{len(missing)} of {self.rows.n_shards} shards are not encoded yet "
                                "(run `probekit vocab build` again: it resumes)")
        return [np.load(self.npy(i), mmap_mode="r") for i in range(self.rows.n_shards)]

    def publish(self, i: int, vec: np.ndarray, *, seconds: float) -> None:
        """Write shard ``i`` (atomic), then its receipt: only both together make it done."""
        vec = np.ascontiguousarray(vec, dtype=self.dtype)
        if vec.shape[0] != self.shard_rows(i):
            raise ProbekitError(f"shard {i} has {vec.shape[0]} vectors for {self.shard_rows(i)} names")
        atomic.write(self.npy(i), lambda fh: np.save(fh, vec, allow_pickle=False))
        atomic.write_json(self.receipt(i), {"rows": int(vec.shape[0]), "dim": int(vec.shape[1]),
                                            "dtype": self.dtype, "seconds": round(seconds, 3)})

    @property
    def nbytes(self) -> int:
        return sum(self.npy(i).stat().st_size for i in range(self.rows.n_shards) if self.npy(i).exists())


def vectors_for(rows: Rows, key: str, dtype: str) -> Vectors:
    if dtype not in DTYPES:
        raise ProbekitError(f"unknown dtype {dtype!r}; available: {', '.join(DTYPES)}")
    return Vectors(rows, rows.folder.parent / "vectors" / key, dtype)


def index_folder(vectors: Vectors, kind: str, similarity: str) -> Path:
    """Where the search index of ``kind`` over these vectors is saved."""
    return vectors.folder / f"index-{kind}-{similarity}"


def encode_shard(model, vectors: Vectors, i: int, *, layer: int, pooling: str, batch_size: int,
                 fast: bool = False) -> float:
    """Encode and publish shard ``i``; returns its seconds."""
    from ..encode import encode_layers

    t0 = time.perf_counter()
    names = [e.name for e in vectors.rows.shard(i)]
    vec = encode_layers(model, names, layers=[layer], pooling=pooling, batch_size=batch_size,
                        max_length=NAME_MAX_LENGTH, fast=fast)[0]  # (n_i, dim) float32
    seconds = time.perf_counter() - t0
    vectors.publish(i, vec, seconds=seconds)
    return seconds


class Rate:
    """Names per second and the time left, for the progress line (``12,345 names/s, ETA 3m05s``)."""

    def __init__(self, total: int):
        self.total, self.t0 = total, time.perf_counter()

    def text(self, done_now: int, done_before: int) -> str:
        elapsed = time.perf_counter() - self.t0
        did = done_now - done_before
        if did <= 0 or elapsed <= 0:
            return ""
        rate = did / elapsed
        left = (self.total - done_now) / rate
        return f"{rate:,.0f} names/s, ETA {int(left // 60)}m{int(left % 60):02d}s"


def resume_note(vectors: Vectors, missing: list[int]) -> str | None:
    """The line a rerun shows when it finds finished shards (``resuming: 4 of 9 shards done``), else None."""
    n = vectors.rows.n_shards
    if len(missing) in (0, n):
        return f"all {n} shards already encoded" if n and not missing else None
    return f"resuming: {n - len(missing)} of {n} shards done"


def encode(model, rows: Rows, *, layer: int | None = None, pooling: str | None = None, dtype: str = "float32",
           batch_size: int = 128, fast: bool = False, progress: Progress | None = None,
           should_cancel=lambda: False, notice: Callable[[str], None] | None = None) -> Vectors:
    """Encode every shard of ``rows`` not encoded yet with ``model`` (in this process); returns the vectors.
    ``notice`` gets :func:`resume_note`'s line when shards were found done (said even without progress)."""
    layer = model.num_layers if layer in (None, -1) else int(layer)
    pooling = pooling or model.spec.pooling
    key = vector_key(model, fingerprint=rows.fingerprint, layer=layer, pooling=pooling, dtype=dtype,
                     shard_size=rows.shard_size, fast=fast)
    vectors = vectors_for(rows, key, dtype)
    missing = vectors.missing()
    note = resume_note(vectors, missing)
    if note and notice is not None:
        notice(note)
    before = rows.n_rows - sum(vectors.shard_rows(i) for i in missing)
    done, rate = before, Rate(rows.n_rows)
    for i in missing:
        if should_cancel():
            raise Cancelled(f"cancelled after {done:,} of {rows.n_rows:,} names (finished shards are kept)")
        if progress:
            progress(done, rows.n_rows, f"encoding shard {i + 1}/{rows.n_shards} {rate.text(done, before)}".strip())
        encode_shard(model, vectors, i, layer=layer, pooling=pooling, batch_size=batch_size, fast=fast)
        done += vectors.shard_rows(i)
    if progress:
        progress(rows.n_rows, rows.n_rows, f"encoded {rows.n_shards} shards {rate.text(done, before)}".strip())
    return vectors
