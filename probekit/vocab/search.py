"""Search millions of candidate vectors held in shards on disk, memory-bounded; gold ranks always exact.

The surface (small and stable)::

    index = ShardedIndex.build(shards, similarity="cosine", kind="exact", params=None, progress=None)
    len(index)                                   # candidates; global id = shard offset + row
    scores, ids = index.search(queries, k)       # (n_queries, k) each, best first
    index.rank(queries, golds, k, exclude=...)   # as probekit.index.EntityIndex.rank: same signature, rule, return
    index.recall_at_k(queries, k)                # measured against exact on these queries; kept in index.info()
    index.save(folder); ShardedIndex.load(folder, shards)
    index.info()                                 # kind, params, approximate, recall: what a run records beside it

``shards``: (n_i, dim) float16/float32 arrays, typically ``np.load(path, mmap_mode="r")``; nothing copies them
whole. ``kind`` (:mod:`probekit.vocab.index_kinds`): ``exact`` streams every candidate block by block, scoring the
stored rows against the rows' norms kept from the build and re-scoring its top candidates with faiss's flat kernel
(:mod:`probekit.vocab.scan`; peak memory about one block, the mapped pages released as it goes); ``ivf-flat``,
``ivf-pq``, ``hnsw`` are faiss indexes trained on a sample; ``auto`` picks by size. Unknown kinds fail with
"unknown index kind 'x'; did you mean ...; available: ...".

Results equal :class:`probekit.index.EntityIndex`'s for the exact kind: both rank with
:mod:`probekit.index_rank` (gold rank = 1 + the candidates scoring more than :data:`TIE_TOLERANCE` of the scale
above the gold; among near-ties golds first, then lower ids; twins, i.e. identical vectors, always tie), and the
top-k scores come from the same faiss kernel. With an approximate kind only the top-k's *candidates* are
approximate: their scores are recomputed from the shards, a gold whose exact rank is within k is always listed,
and gold ranks are exact (:meth:`rank`: counted over all shards, or for a live query over the index's own stored
vectors within a proven error bound, :func:`scan.count_by_range`). ``info()["approximate"]`` says so, and
``info()["recall"]`` holds the recall@k measured by :meth:`recall_at_k`.

Saved indexes (:meth:`save`) are written through :mod:`probekit.atomic`: the data files first, then
``index.json`` naming their SHA-256; :meth:`load` refuses a folder whose files do not match it (a build killed
half-way never reads as complete) or whose shards differ from the ones given.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from .. import atomic
from ..errors import ProbekitError, positive_int
from ..index import QUERY_CHUNK, SIMILARITIES, row_hashes, twin_groups
from ..index_rank import TIE_TOLERANCE, GoldCounter, prepare, score_scale, top_k_by_rule
from ..jobs import Progress
from .index_gpu import TorchGoldCounter, default_device
from .index_kinds import IndexKind, metric_of, resolve, tuning_queries
from .index_shards import Shards
from .scan import Pass, count_by_range, exact_top, norms_of, rescore, row_norms
from .topk import first_then, overlap

FORMAT = 1
RECALL_QUERIES, RECALL_K = 200, 10
"""An approximate index's build measures its recall@RECALL_K on this many :func:`index_kinds.tuning_queries`
(held-out names, perturbed); a run's ranking pass measures it on its own queries (``run_recall``)."""
TUNING_QUERIES = "held-out names + noise 0.75 |x|"
META = "index.json"
STATS = "stats.npz"
FAISS = "index.faiss"


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


class ShardedIndex:
    """Candidates in shards; top-k from the chosen kind, gold ranks counted exactly (see the module docstring)."""

    def __init__(self, shards: Shards, *, kind: IndexKind, params: dict[str, Any], sq_norms: np.ndarray,
                 twins: list[list[int]], approx: Any = None, build_seconds: float = 0.0,
                 recall: dict[str, Any] | None = None, device: str | None = None, norms: np.ndarray | None = None):
        self.shards, self.similarity, self.kind, self.params = shards, shards.similarity, kind, params
        self.device = device
        self._sq_norms = sq_norms  # (n,) float32 squared norms of the prepared vectors
        if norms is None and self.similarity == "cosine":  # an index saved before the norms were kept
            norms = norms_of(shards)
        self._norms = norms  # (n,) float32 norms of the stored rows (cosine), as prepare() divides by them
        self._inv = (np.float32(1) / norms).astype(np.float32) if norms is not None else None
        self._max_norm = float(np.sqrt(sq_norms.max())) if len(sq_norms) else 0.0
        self._groups = twins
        self._twins = {i: g for g in twins for i in g}
        self.approx = approx
        if approx is not None and kind.tune is not None:
            kind.tune(approx, params)
        self.build_seconds = build_seconds
        self.recall = recall
        self.run_recall: dict[str, Any] | None = None  # on the last rank()'s own queries (approximate kinds)

    # ------------------------------------------------------------ building
    @classmethod
    def build(cls, shards: Sequence[np.ndarray], *, similarity: str = "cosine", kind: str = "exact",
              params: Mapping[str, Any] | None = None, progress: Progress | None = None,
              device: str | None = None) -> ShardedIndex:
        """One pass over the shards for norms and twins (row hashes); then the approximate structure, if any.

        ``device``: where gold ranks are counted: ``None`` = a GPU when torch sees one, else numpy on the CPU
        (EntityIndex's kernel); ``"numpy"``; or a torch device (``"cuda"``, ``"cpu"``)."""
        if similarity not in SIMILARITIES:
            raise ProbekitError(f"unknown similarity {similarity!r}; available: {', '.join(SIMILARITIES)}")
        t0 = time.perf_counter()
        sh = Shards(shards, similarity=similarity)
        spec, merged = resolve(kind, sh.n, sh.dim, params)
        sq = np.empty(sh.n, dtype=np.float32)
        norms = np.empty(sh.n, dtype=np.float32) if similarity == "cosine" else None
        hashes = np.empty(sh.n, dtype=np.uint64)
        for c0, raw in sh.raw_blocks(sh.block_rows):
            block = prepare(raw, similarity)
            if norms is not None:  # kept: a query then scales a score instead of normalising every row again
                norms[c0:c0 + len(raw)] = row_norms(raw)
            sq[c0:c0 + len(block)] = np.einsum("ij,ij->i", block, block)
            hashes[c0:c0 + len(block)] = row_hashes(block)
            if progress:
                progress(c0 + len(block), sh.n, "hashing")
        twins = twin_groups(hashes, sh.rows)
        del hashes
        approx = spec.build(sh, merged, metric_of(similarity), progress) if spec.build else None
        index = cls(sh, kind=spec, params=merged, sq_norms=sq, twins=twins, approx=approx, device=device,
                    norms=norms)
        if approx is not None:  # measured, never assumed: on a seeded sample of the vocabulary's own names
            if progress:
                progress(sh.n, sh.n, "measuring recall")
            index._tune_to_recall(tuning_queries(sh, RECALL_QUERIES, merged), merged.get("target_recall"))
        index.build_seconds = time.perf_counter() - t0
        return index

    def __len__(self) -> int:
        return self.shards.n

    @property
    def dim(self) -> int:
        return self.shards.dim

    @property
    def approximate(self) -> bool:
        return self.kind.approximate

    def info(self) -> dict[str, Any]:
        """What a run records beside its results: which index served the top-k and how good it was measured."""
        return {"kind": self.kind.name, "approximate": self.approximate, "params": dict(self.params),
                "similarity": self.similarity, "n": len(self), "dim": self.dim,
                "vector_bytes": self.shards.nbytes, "index_bytes": self.index_bytes,
                "build_seconds": round(self.build_seconds, 3), "recall": self.recall,
                "gold_ranks": "exact"}

    def describe(self) -> str | None:
        """One line for a ranking this index served (:attr:`probekit.types.Ranking.search`): the kind, its
        parameters and the recall measured against exact search; None for exact search (nothing to say).

        >>> ShardedIndex.build([np.eye(4, dtype=np.float32)], kind="exact").describe() is None
        True
        """
        if not self.approximate:
            return None
        params = ", ".join(f"{k} {v}" for k, v in sorted(self.params.items()) if k != "target_recall")
        line = f"approximate top-k: {self.kind.name} ({params})"
        if self.recall:
            on = f" ({self.recall['on']})" if "on" in self.recall else ""
            line += (f"; recall@{self.recall['k']} {self.recall['recall']:.3f} against exact search on "
                     f"{self.recall['queries']:,} queries{on}")
        if self.run_recall:
            line += (f", {self.run_recall['recall']:.3f} on this run's {self.run_recall['queries']:,} queries")
        return line + "; gold ranks exact"

    @property
    def index_bytes(self) -> int:
        """Memory of the approximate structure (its codes, ids, centroids or links; 0 for exact) plus the
        per-candidate norms, counted from faiss's own sizes (no copy)."""
        extra, a = 0, self.approx
        if a is not None and hasattr(a, "hnsw"):
            extra = a.ntotal * a.storage.sa_code_size() + a.hnsw.neighbors.size() * 4
        elif a is not None:
            ivf = faiss.extract_index_ivf(a)
            extra = a.ntotal * (ivf.code_size + 8) + ivf.quantizer.ntotal * self.dim * 4
        return int(extra) + int(self._sq_norms.nbytes)

    # ------------------------------------------------------------ search
    def _exact_search(self, q: np.ndarray, kk: int, counter: GoldCounter | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
        """Prepared queries -> (n_queries, kk) scores, ids: the flat kernel's top-kk (:func:`scan.exact_top`),
        :data:`~probekit.index.QUERY_CHUNK` queries per pass; ``counter`` is fed in the same pass."""
        if len(q) > QUERY_CHUNK and counter is None:
            parts = [self._exact_search(q[a:a + QUERY_CHUNK], kk) for a in range(0, len(q), QUERY_CHUNK)]
            return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        return exact_top(self.shards, q, kk, inv=self._inv, sq=self._sq_norms, max_norm=self._max_norm,
                         rows_of=self.shards.rows, counter=counter)

    def _approx_search(self, q: np.ndarray, kk: int) -> tuple[np.ndarray, np.ndarray]:
        """The approximate index's ``refine`` x kk candidates, re-scored exactly from the shards, best kk first."""
        wide = min(len(self), kk * int(self.params.get("refine", 1)))
        _, cand = self.approx.search(q, wide)  # (n_q, wide), -1 where the index found fewer
        s = rescore(q, cand, self.shards.rows, self.similarity)  # the exact kind's scores, bit for bit
        key = np.where(cand >= 0, cand, np.iinfo(np.int64).max)
        order = np.lexsort((key, -s), axis=1)[:, :kk] if len(q) else np.zeros((0, kk), dtype=np.int64)
        return np.take_along_axis(s, order, 1), np.take_along_axis(cand, order, 1)

    def _search_prepared(self, q: np.ndarray, kk: int) -> tuple[np.ndarray, np.ndarray]:
        kk = min(kk, len(self))
        if self.approx is None:
            return self._exact_search(q, kk)
        return self._approx_search(q, kk)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """queries: (n_queries, dim) -> scores, ids: (n_queries, min(k, n)), best first; ids are global."""
        positive_int("k", k)
        q = self._queries(queries)
        return self._search_prepared(q, k)

    def _queries(self, queries: np.ndarray) -> np.ndarray:
        queries = np.asarray(queries)
        if queries.ndim != 2 or queries.shape[1] != self.dim:
            raise ProbekitError(f"queries must be (n_queries, {self.dim}); got shape {queries.shape}")
        return prepare(queries, self.similarity)

    # ------------------------------------------------------------ ranking (exact gold ranks)
    def _rows_of(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ids = np.asarray(ids, dtype=np.int64)
        return self.shards.rows(ids), self._sq_norms[ids]

    def rank(self, queries: np.ndarray, golds: Sequence[Sequence[int | None]], k: int, *,
             exclude: Sequence[Sequence[int]] | None = None,
             progress: Progress | None = None) -> list[tuple[list[int], list[float], list[int | None]]]:
        """Per query: top-k ids, their scores, and the exact rank of every gold id (``None`` stays ``None``);
        as :meth:`probekit.index.EntityIndex.rank`. Gold ranks: one streamed pass over the shards per
        :data:`~probekit.index.QUERY_CHUNK` queries (or :func:`scan.count_by_range`); the top-k from this index's
        kind; an approximate kind's streamed pass also measures :attr:`run_recall` on these queries."""
        n_q = len(queries)
        if len(golds) != n_q:
            raise ProbekitError("one gold list per query is needed")
        positive_int("k", k)
        exclude = [list(e) for e in exclude] if exclude is not None else [[] for _ in range(n_q)]
        out = []
        seen: list[tuple[float, int]] = []  # per streamed pass: the share of the exact top-k found, queries
        for start in range(0, n_q, QUERY_CHUNK):
            stop = min(start + QUERY_CHUNK, n_q)
            q = self._queries(queries[start:stop])  # (chunk, dim)
            g, ex = golds[start:stop], exclude[start:stop]
            counter = self._counter(q, g, ex)
            search = self._search_prepared
            if not counter.idle:
                # one pass: the gold counts, and (exact kind) the first search top_k_by_rule will ask for
                kk0 = min(len(self), k + max((len(e) for e in ex), default=0) + 8)
                if self.approx is None:
                    search = first_then(search, self._exact_search(q, kk0, counter), len(q), kk0)
                elif not count_by_range(self.approx, counter, n=len(self), similarity=self.similarity,
                                        max_norm=self._max_norm, sq=self._sq_norms, rows_of=self.shards.rows):
                    kr = min(k, len(self))  # the pass reads every row anyway: the exact top-k for the run's recall
                    p = Pass(self.shards, q, inv=self._inv, sq=self._sq_norms, kk=kr, counter=counter)
                    p.run()
                    if p.heap is not None:
                        seen.append((overlap(p.heap.I[:, :kr], self._approx_search(q, kr)[1]), len(q)))
            ranks = counter.ranks()
            tops = top_k_by_rule(search, q, g, ex, ranks, k, n=len(self),
                                 tol=TIE_TOLERANCE * score_scale(self.similarity, q, self._max_norm),
                                 gold_score=self._gold_score(q))
            out += [(ids, scores, r) for (ids, scores), r in zip(tops, ranks)]
            if progress:
                progress(stop, n_q, "ranking")
        if seen:
            n_seen = sum(m for _, m in seen)
            self.run_recall = {"k": min(k, len(self)), "queries": n_seen,
                               "recall": float(sum(r * m for r, m in seen) / n_seen)}
        return out

    def _counter(self, q: np.ndarray, golds, exclude) -> GoldCounter:
        if self.device == "numpy" or self.device is None and default_device() == "cpu":
            return GoldCounter(q, golds, exclude, similarity=self.similarity, max_norm=self._max_norm,
                               rows_of=self._rows_of, twins=self._twins)
        return TorchGoldCounter(q, golds, exclude, similarity=self.similarity, max_norm=self._max_norm,
                                rows_of=self._rows_of, twins=self._twins, device=self.device or "cuda")

    def _gold_score(self, q: np.ndarray):
        q_norm2 = np.einsum("ij,ij->i", q, q)

        def score(i: int, g: int) -> float:
            x, sq = self._rows_of(np.array([g]))
            p = float(q[i] @ x[0])
            return 2 * p - float(sq[0]) - float(q_norm2[i]) if self.similarity == "l2" else p
        return score

    # ------------------------------------------------------------ recall
    def _tune_to_recall(self, queries: np.ndarray, target: float | None) -> None:
        """Measure recall@RECALL_K on ``queries``; for IVF kinds with a ``target``, find a small nprobe reaching it.

        Why not just double: each doubling of nprobe doubles a live query's time, so stopping at the first
        power of two past the target can leave a query up to twice as slow as needed. nprobe doubles (up to
        nlist) until the measured recall reaches the target, then the last step is bisected while the bracket is
        wider than a quarter of its lower end (two or three more measurements). The rule: the kept nprobe reached
        the target (or is nlist), and the bracket's lower end, within a quarter of it, did not. Recall is taken as
        non-decreasing in nprobe (more cells scanned, the same exact re-scoring). The exact answers are computed
        once."""
        q = self._queries(queries)
        kk = min(RECALL_K, len(self))
        _, want = self._exact_search(q, kk)

        def measure(nprobe: int) -> float:
            self.params["nprobe"] = nprobe
            if self.kind.tune is not None:
                self.kind.tune(self.approx, self.params)
            return overlap(want, self._approx_search(q, kk)[1])

        nprobe, nlist = self.params.get("nprobe"), self.params.get("nlist")
        value = measure(nprobe) if nprobe is not None else overlap(want, self._approx_search(q, kk)[1])
        if target is not None and nprobe is not None and nlist is not None:
            lo = hi = int(nprobe)
            while value < target and hi < nlist:  # doubling: recall(lo) < target until recall(hi) reaches it
                lo, hi = hi, min(int(nlist), 2 * hi)
                value = measure(hi)
            best, best_value = hi, value
            while best_value >= target and hi - lo > max(1, lo // 4):  # bisecting the last step
                mid = (lo + hi) // 2
                got = measure(mid)
                if got >= target:
                    hi, best, best_value = mid, mid, got
                else:
                    lo = mid
            value = best_value
            if self.params["nprobe"] != best:
                measure(best)
        self.recall = {"k": kk, "queries": len(q), "recall": value, "on": TUNING_QUERIES}

    def measure_recall(self, queries: np.ndarray, k: int) -> dict[str, Any]:
        """``{"k", "queries", "recall"}``: the mean fraction of the exact top-k that this index's top-k holds on
        ``queries`` (1.0 for exact), leaving the index's own recall as it is: a benchmark's sweep, a check on other
        queries."""
        positive_int("k", k)
        q = self._queries(queries)
        if not len(q):
            raise ProbekitError("recall needs at least one query")
        kk = min(k, len(self))
        value = 1.0 if self.approx is None else overlap(self._exact_search(q, kk)[1], self._approx_search(q, kk)[1])
        return {"k": kk, "queries": len(q), "recall": value}

    def recall_at_k(self, queries: np.ndarray, k: int) -> float:
        """:meth:`measure_recall`, kept as the index's own recall (``info()["recall"]``, saved with it)."""
        self.recall = self.measure_recall(queries, k)
        return float(self.recall["recall"])

    # ------------------------------------------------------------ persistence
    def save(self, folder: Path | str) -> Path:
        """Write the index into ``folder`` (data files, then ``index.json`` naming their hashes); atomic per file."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        flat = np.array([i for g in self._groups for i in g], dtype=np.int64)
        sizes = np.array([len(g) for g in self._groups], dtype=np.int64)
        arrays = {"sq_norms": self._sq_norms, "twin_ids": flat, "twin_sizes": sizes}
        if self._norms is not None:
            arrays["norms"] = self._norms
        np.savez(buf, **arrays)  # type: ignore[arg-type]  # numpy's stubs type **kwds as allow_pickle
        files = {STATS: atomic.write_bytes(folder / STATS, buf.getvalue())}
        if self.approx is not None:
            files[FAISS] = atomic.write_bytes(folder / FAISS, faiss.serialize_index(self.approx).tobytes())
        else:
            (folder / FAISS).unlink(missing_ok=True)
        meta = {"format": FORMAT, "kind": self.kind.name, "params": self.params, "similarity": self.similarity,
                "shards": self.shards.signature(), "build_seconds": self.build_seconds, "recall": self.recall,
                "files": {name: _sha256(p) for name, p in files.items()}}
        atomic.write_json(folder / META, meta, indent=1)
        return folder

    @classmethod
    def load(cls, folder: Path | str, shards: Sequence[np.ndarray], *, device: str | None = None) -> ShardedIndex:
        """The index saved in ``folder`` over these ``shards``; one clear line when it is incomplete or stale."""
        folder = Path(folder)
        try:
            meta = json.loads((folder / META).read_text())
        except FileNotFoundError:
            raise ProbekitError(f"no complete index in {folder} (no {META}): build it again") from None
        except (OSError, ValueError) as e:
            raise ProbekitError(f"unreadable index {folder / META}: {e}") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ProbekitError(f"{folder / META} is not a probekit index of format {FORMAT}: build it again")
        for name, digest in meta.get("files", {}).items():
            if not (folder / name).is_file() or _sha256(folder / name) != digest:
                raise ProbekitError(f"index file {folder / name} is missing or incomplete: build the index again")
        sh = Shards(shards, similarity=meta["similarity"])
        if sh.signature() != meta["shards"]:
            raise ProbekitError(f"the index in {folder} was built over other vectors (shard sizes or dtype "
                                f"differ): build it again")
        spec, params = resolve(meta["kind"], sh.n, sh.dim, meta["params"])
        with np.load(folder / STATS) as z:
            sq, flat, sizes = z["sq_norms"], z["twin_ids"], z["twin_sizes"]
            norms = z["norms"] if "norms" in z.files and meta["similarity"] == "cosine" else None
        groups = [g.tolist() for g in np.split(flat, np.cumsum(sizes)[:-1])] if len(sizes) else []
        approx = None
        if spec.approximate:
            approx = faiss.deserialize_index(np.fromfile(folder / FAISS, dtype=np.uint8))
        return cls(sh, kind=spec, params=params, sq_norms=sq, twins=groups, approx=approx,
                   build_seconds=float(meta.get("build_seconds", 0.0)), recall=meta.get("recall"), device=device,
                   norms=norms)


__all__ = ["ShardedIndex"]
