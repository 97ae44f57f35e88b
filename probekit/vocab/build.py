"""Building a vocabulary: read, encode in shards, index, and record what each stage cost.

The source is read into row shards, the missing vector shards are encoded (in this process, or across Ray
workers), the search index is built over them (:class:`probekit.vocab.search.ShardedIndex`), and the vocabulary's
record (:mod:`probekit.vocab.store`) gets names, shards, bytes on disk, seconds per stage, names/s, the process's
peak memory and, for an approximate index, its recall@10 against exact search. Each
build is one entry of the record, keyed by its vector key, so a vocabulary encoded with several models keeps one
entry for each.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable

from .. import atomic, config, models
from ..errors import ProbekitError, UnknownNameError
from ..jobs import Progress
from . import shards
from .shards import index_folder
from .sources import Source
from .store import check_name, record, record_path


def peak_rss() -> int:
    """This process's peak resident memory so far, in bytes (Linux reports KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def build(name: str, source: Source, *, model_id: str = config.DEFAULT_MODEL, model=None, layer: int | None = None,
          pooling: str | None = None, dtype: str = "float32", shard_size: int = shards.SHARD_SIZE,
          index: str = "exact", index_params: dict | None = None, similarity: str = "cosine",
          batch_size: int = 128, fast: bool = False, backend: str = "local", workers: int = 2,
          threads_per_worker: int = 1, progress: Progress | None = None,
          notice: Callable[[str], None] | None = None) -> dict:
    """Read, encode and index ``source`` as vocabulary ``name``; returns this build's measurements.

    ``model`` is a loaded model (local backend); without it ``model_id`` is loaded here (``local``) or in each Ray
    worker (``ray``). A rerun after a kill reuses every finished shard, and says so through ``notice``
    (``resuming: 4 of 9 shards done``)."""
    check_name(name)
    if backend not in ("local", "ray"):
        raise UnknownNameError("backend", backend, ["local", "ray"])
    t0 = time.perf_counter()
    rows = shards.read_rows(source, shard_size=shard_size, progress=progress)
    t_read = time.perf_counter() - t0
    t1 = time.perf_counter()
    if backend == "ray":
        from .ray_shards import encode_on_ray

        vectors, _ = encode_on_ray(model_id, rows, workers=workers, threads_per_worker=threads_per_worker,
                                       layer=layer, pooling=pooling, dtype=dtype, batch_size=batch_size, fast=fast,
                                       progress=progress, notice=notice)
        model_desc = model_id
    else:
        if model is None:
            model = models.load(model_id)
        vectors = shards.encode(model, rows, layer=layer, pooling=pooling, dtype=dtype, batch_size=batch_size,
                                fast=fast, progress=progress, notice=notice)
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


def build_index(vectors: shards.Vectors, *, kind: str, params: dict | None, similarity: str,
                progress: Progress | None = None) -> dict:
    """Build and save the :class:`ShardedIndex` over the shards; for an approximate kind, its recall@10 against
    exact search as the build measured it (:func:`probekit.vocab.index_kinds.tuning_queries`)."""
    from .search import ShardedIndex

    parts = vectors.shards()
    index = ShardedIndex.build(parts, similarity=similarity, kind=kind, params=params or None, progress=progress)
    out: dict = {"index": kind, "index_params": params or {}}
    if index.recall is not None:  # measured at build on held-out perturbed names; saved with the index
        out["recall_at_10"] = round(float(index.recall["recall"]), 4)
        out["recall_queries"] = f"{index.recall['queries']} {index.recall.get('on', 'names')}"
    index.save(index_folder(vectors, kind, similarity))
    return out
