"""The index kinds a :class:`~probekit.vocab.search.ShardedIndex` can serve its top-k from.

``exact`` streams every candidate (no structure to build); the approximate kinds are faiss indexes trained on a
sample of the shards and filled block by block, never holding a float32 copy of all the vectors:

- ``ivf-flat``: an inverted file over ``nlist`` k-means cells, ``nprobe`` cells scanned per query; the vectors
  stored as float16 (``fp16=True``, half the memory of float32; the top-k is re-scored exactly anyway);
- ``ivf-pq``: the same cells, vectors compressed to ``m`` bytes (product quantisation, 8 bits per sub-vector);
  the ``refine`` x k best are re-scored exactly from the shards;
- ``hnsw``: a graph (``M`` links per node, ``ef_construction`` at build, ``ef_search`` per query), float16 vectors.

Defaults grow with the number of candidates n: nlist ~ sqrt(n) rounded to a power of two, nprobe from nlist / 16
doubled at build until the measured recall reaches ``target_recall`` (:data:`TARGET_RECALL`), the last step then
bisected;
``auto`` is ``exact`` up to :data:`AUTO_EXACT_MAX` candidates and ``ivf-flat`` above. Every approximate kind's
candidates are re-scored from the shards (exact scores), and its recall is measured against ``exact``
(:meth:`~probekit.vocab.search.ShardedIndex.recall_at_k`), never assumed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import faiss
import numpy as np

from ..errors import ProbekitError, Registry, UnknownNameError, positive_int
from ..jobs import Progress
from .index_shards import Shards

TARGET_RECALL = 0.99
"""IVF kinds: after the build, nprobe doubles (up to nlist) until the recall@10 measured on :func:`tuning_queries`
reaches this, and the last step is bisected (``target_recall=None``: keep the given nprobe)."""
QUERY_NOISE = 0.75
"""Tuning queries are held-out names moved by noise of this many times their norm (cosine to the name ~0.8): a
probe's query lies near its answer, not on it, and a name used as its own query finds itself in any cell, which
made the measured recall an overestimate (0.991 on names where the benchmark's queries saw 0.984)."""
AUTO_EXACT_MAX = 250_000
"""``auto`` streams the exact index up to this many candidates (a query reads every vector: ~0.1-0.3 s here)."""
TRAIN_PER_CELL = 256
"""k-means training points per IVF cell: faiss's own default sample (``max_points_per_centroid``). With 40 (the
least faiss accepts without a warning) the cells fitted the data worse and recall at a given nprobe fell well below
faiss's (100,000 names, nlist 256, nprobe 16: 0.870 against 0.983)."""
KMEANS_ITERATIONS = 25
PQ_TRAIN = 256 * 40
"""Training points of a product quantiser at least (256 centroids per sub-vector, 40 points each)."""
PQ_ITERATIONS = 10
"""k-means iterations of each product sub-quantiser (its codes are re-scored exactly anyway)."""
SEED = 1234


@dataclass(frozen=True)
class IndexKind:
    """One way to serve the top-k. ``build(shards, params, metric, progress)`` returns the filled faiss index
    (None for exact); ``tune(index, params)`` sets the query-time parameters."""

    name: str
    approximate: bool
    description: str
    defaults: Callable[[int, int], dict[str, Any]]
    build: Callable[[Shards, Mapping[str, Any], int, Progress | None], Any] | None = None
    tune: Callable[[Any, Mapping[str, Any]], None] | None = None


KINDS: Registry = Registry("index kind")


def _nlist(n: int) -> int:
    return int(min(65536, max(16, 2 ** round(math.log2(max(1.0, math.sqrt(n)))))))


def _ivf_defaults(n: int, dim: int) -> dict[str, Any]:
    nlist = _nlist(n)
    return {"nlist": nlist, "nprobe": max(8, nlist // 16), "refine": 2, "fp16": True, "target_recall": TARGET_RECALL}


def _pq_defaults(n: int, dim: int) -> dict[str, Any]:
    m = next(m for m in (dim // 8, dim // 4, dim // 2, dim, 1) if m >= 1 and dim % m == 0)
    nlist = _nlist(n)
    return {"nlist": nlist, "nprobe": max(8, nlist // 16), "m": m, "refine": 10, "target_recall": TARGET_RECALL}


def _hnsw_defaults(n: int, dim: int) -> dict[str, Any]:
    return {"M": 32, "ef_construction": 40, "ef_search": 128, "refine": 2}


def _sample_ids(n: int, size: int) -> np.ndarray:
    return np.sort(np.random.default_rng(SEED).choice(n, size=min(size, n), replace=False))


def _sample(shards: Shards, size: int) -> np.ndarray:
    """Prepared rows of a seeded random sample (sorted ids: a forward walk through the shards)."""
    return shards.rows(_sample_ids(shards.n, size))


def perturbed(rows: np.ndarray, *, seed: int, noise: float = QUERY_NOISE) -> np.ndarray:
    """``rows`` (n, dim) each moved by a random vector of ``noise`` times its norm: queries near names, not on them."""
    rows = np.asarray(rows, dtype=np.float32)
    g = np.random.default_rng(seed).standard_normal(rows.shape).astype(np.float32)
    g *= (noise * np.linalg.norm(rows, axis=1, keepdims=True) / np.maximum(np.linalg.norm(g, axis=1, keepdims=True),
                                                                             1e-12))
    return rows + g


def tuning_ids(n: int, size: int, params: Mapping[str, Any]) -> np.ndarray:
    """The names (sorted ids, <= size) tuning queries are made from: outside the k-means training sample while
    enough names are left outside it."""
    ids = np.random.default_rng(SEED + 1).permutation(n)[:4 * size]
    if "nlist" in params:
        seen = _sample_ids(n, max(int(params["nlist"]) * TRAIN_PER_CELL, 4096))
        held = ids[~np.isin(ids, seen)]
        ids = held if len(held) >= min(size, n - len(seen)) and len(held) else ids
    return np.sort(ids[:size])


def tuning_queries(shards: Shards, size: int, params: Mapping[str, Any]) -> np.ndarray:
    """(<= size, dim) queries an approximate index is tuned and measured on: names the k-means never saw
    (:func:`tuning_ids`), perturbed (:func:`perturbed`). Without an encoder at hand these stand in for a probe's
    prompt vectors; a run's own recall is measured on its own queries (:meth:`ShardedIndex.rank`)."""
    return perturbed(shards.rows(tuning_ids(shards.n, size, params)), seed=SEED + 2)


def _fill(index, shards: Shards, progress: Progress | None, stage: str) -> None:
    for c0, block in shards.blocks():
        index.add(block)
        if progress:
            progress(c0 + len(block), shards.n, stage)


def _fill_ivf(index, shards: Shards, progress: Progress | None, stage: str) -> None:
    """Fill a trained IVF index with every inverted list sized exactly before a code is written.

    Why: faiss's ``add`` appends block by block and each list (a ``std::vector``) grows by doubling, so at 1 M
    names the build peaked at 2.17x the vectors' bytes. Two passes over the shards instead: assign every vector to
    its cell (4 bytes per name), size each list once, then encode block by block straight into its place
    (``encode_vectors`` with the cells already known: no second assignment). Each list holds its ids in increasing
    order, as ``add`` leaves them, so the index and its answers are the same.
    """
    ivf = faiss.extract_index_ivf(index)
    lists = ivf.invlists
    if lists is None:  # faiss's stubs allow it; a trained IVF index always has its lists
        raise ProbekitError("the IVF index has no inverted lists")
    cells = np.empty(shards.n, dtype=np.int32)  # (n,) the cell of every candidate
    for c0, block in shards.blocks():  # block: (rows, dim) float32, prepared
        cells[c0:c0 + len(block)] = ivf.quantizer.assign(block, 1).ravel()
        if progress:
            progress(c0 + len(block), 2 * shards.n, f"{stage}: cells")
    counts = np.bincount(cells, minlength=ivf.nlist)  # (nlist,)
    for cell in np.flatnonzero(counts).tolist():
        lists.resize(cell, int(counts[cell]))
    filled = np.zeros(ivf.nlist, dtype=np.int64)  # (nlist,) entries written so far per list
    for c0, block in shards.blocks():
        rows = len(block)
        nos = cells[c0:c0 + rows].astype(np.int64)  # (rows,)
        codes = np.empty((rows, lists.code_size), dtype=np.uint8)  # (rows, code bytes)
        ivf.encode_vectors(rows, faiss.swig_ptr(np.ascontiguousarray(block)), faiss.swig_ptr(nos),
                           faiss.swig_ptr(codes))
        order = np.argsort(nos, kind="stable")  # by cell, ids increasing within a cell
        nos, codes, ids = nos[order], codes[order], (c0 + order).astype(np.int64)
        starts = np.concatenate([[0], np.flatnonzero(np.diff(nos)) + 1, [rows]])
        for a, b in zip(starts[:-1].tolist(), starts[1:].tolist()):
            cell = int(nos[a])
            lists.update_entries(cell, int(filled[cell]), b - a, faiss.swig_ptr(ids[a:b]), faiss.swig_ptr(codes[a:b]))
            filled[cell] += b - a
        if progress:
            progress(shards.n + c0 + rows, 2 * shards.n, stage)
    ivf.ntotal = index.ntotal = shards.n


def _train_ivf(index, shards: Shards, nlist: int, progress: Progress | None, *, least: int = 4096) -> None:
    if progress:
        progress(0, shards.n, "training")
    index.cp.niter = KMEANS_ITERATIONS
    index.cp.seed = SEED
    index.cp.max_points_per_centroid = TRAIN_PER_CELL
    index.train(_sample(shards, max(nlist * TRAIN_PER_CELL, least)))


def _quantizer(dim: int, metric: int):
    return faiss.IndexFlatL2(dim) if metric == faiss.METRIC_L2 else faiss.IndexFlatIP(dim)


def _check_nlist(params: Mapping[str, Any], n: int) -> int:
    nlist = positive_int("nlist", params["nlist"])
    if nlist > n:
        raise ProbekitError(f"nlist ({nlist}) must be at most the number of candidates ({n})")
    positive_int("nprobe", params["nprobe"])
    return nlist


def _build_ivf_flat(shards: Shards, params: Mapping[str, Any], metric: int, progress: Progress | None):
    nlist, dim = _check_nlist(params, shards.n), shards.dim
    quantizer = _quantizer(dim, metric)
    index: Any
    if params.get("fp16", True):
        index = faiss.IndexIVFScalarQuantizer(quantizer, dim, nlist, faiss.ScalarQuantizer.QT_fp16, metric)
    else:
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, metric)
    index.own_fields = True
    quantizer.this.disown()
    _train_ivf(index, shards, nlist, progress)
    _fill_ivf(index, shards, progress, "adding")
    return index


def _build_ivf_pq(shards: Shards, params: Mapping[str, Any], metric: int, progress: Progress | None):
    nlist, dim = _check_nlist(params, shards.n), shards.dim
    m = positive_int("m", params["m"])
    if dim % m:
        raise ProbekitError(f"m ({m}) must divide the vector width ({dim})")
    quantizer = _quantizer(dim, metric)
    index = faiss.IndexIVFPQ(quantizer, dim, nlist, m, 8, metric)
    index.own_fields = True
    quantizer.this.disown()
    index.pq.cp.niter = PQ_ITERATIONS
    _train_ivf(index, shards, nlist, progress, least=PQ_TRAIN)
    _fill_ivf(index, shards, progress, "adding")
    return index


def _tune_ivf(index, params: Mapping[str, Any]) -> None:
    faiss.extract_index_ivf(index).nprobe = positive_int("nprobe", params["nprobe"])


def _build_hnsw(shards: Shards, params: Mapping[str, Any], metric: int, progress: Progress | None):
    m = positive_int("M", params["M"])
    # faiss's stubs type the quantizer kind as the class; the constructor takes the enum's int
    index = faiss.IndexHNSWSQ(shards.dim, faiss.ScalarQuantizer.QT_fp16, m, metric)  # type: ignore[arg-type]
    index.hnsw.efConstruction = positive_int("ef_construction", params["ef_construction"])
    index.train(_sample(shards, 1024))  # fp16 needs no statistics; faiss wants the call
    _fill(index, shards, progress, "linking")
    return index


def _tune_hnsw(index, params: Mapping[str, Any]) -> None:
    index.hnsw.efSearch = positive_int("ef_search", params["ef_search"])


KINDS["exact"] = IndexKind("exact", False, "every candidate scored (streamed over the shards)", lambda n, d: {})
KINDS["ivf-flat"] = IndexKind("ivf-flat", True, "inverted file, float16 vectors (nlist, nprobe)", _ivf_defaults,
                              _build_ivf_flat, _tune_ivf)
KINDS["ivf-pq"] = IndexKind("ivf-pq", True, "inverted file, product-quantised (nlist, nprobe, m, refine)",
                            _pq_defaults, _build_ivf_pq, _tune_ivf)
KINDS["hnsw"] = IndexKind("hnsw", True, "graph search, float16 vectors (M, ef_construction, ef_search)",
                          _hnsw_defaults, _build_hnsw, _tune_hnsw)
KIND_NAMES = (*KINDS, "auto")


def resolve(kind: str, n: int, dim: int, params: Mapping[str, Any] | None) -> tuple[IndexKind, dict[str, Any]]:
    """The kind (``auto`` resolved by size) and its parameters: the defaults for n, overridden by ``params``."""
    if kind == "auto":
        kind = "exact" if n <= AUTO_EXACT_MAX else "ivf-flat"
    if kind not in KINDS:
        raise UnknownNameError("index kind", str(kind), list(KIND_NAMES))
    spec = KINDS[kind]
    base = spec.defaults(n, dim)
    unknown = sorted(set(params or {}) - set(base))
    if unknown:
        raise ProbekitError(f"index kind {kind!r} has no parameter {unknown[0]!r}; "
                            f"available: {', '.join(base) or 'none'}")
    merged = {**base, **(params or {})}
    if "refine" in merged:
        positive_int("refine", merged["refine"])
    return spec, merged


def metric_of(similarity: str) -> int:
    return faiss.METRIC_L2 if similarity == "l2" else faiss.METRIC_INNER_PRODUCT


__all__ = ["AUTO_EXACT_MAX", "KINDS", "KIND_NAMES", "IndexKind", "metric_of", "perturbed", "resolve", "tuning_queries"]
