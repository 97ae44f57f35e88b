"""Exact faiss search over entity-name embeddings, built once per (model, layer, pooling, names).

Embeddings are cached under ``cache/embeddings`` and the faiss index under ``cache/index``, keyed by
a hash of everything that produced them, and kept in a small in-process memo so warm queries skip
both encoding and disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence

import faiss
import numpy as np

from . import config
from .encode import ENCODER_VERSION, Progress, encode_layers, precision
from .errors import ProbekitError
from .models import LoadedModel
from .types import CandidateSet

SIMILARITIES = ("cosine", "l2", "dot")
NAME_MAX_LENGTH = 25
_MEMO: OrderedDict[str, np.ndarray] = OrderedDict()
_MEMO_SIZE = 8
_INDEX_MEMO: OrderedDict[str, EntityIndex] = OrderedDict()
_LOCK = threading.Lock()


def embedding_key(model: LoadedModel, candidates: CandidateSet, *, layer: int, pooling: str,
                  max_length: int = NAME_MAX_LENGTH, fast: bool = False) -> str:
    """Hash of everything that determines the candidate embeddings."""
    # CUDA encodes under autocast and CPU ``fast`` mode with int8 weights, so their vectors differ
    # slightly from CPU fp32 ones: keep them apart.
    parts = {"model": model.source, "rev": model.revision, "layer": layer, "pooling": pooling,
             "max_length": max_length, "names": candidates.key, "enc": ENCODER_VERSION,
             "precision": precision(model, fast)}
    return hashlib.sha1(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def _memo_get(key: str) -> np.ndarray | None:
    with _LOCK:
        if key in _MEMO:
            _MEMO.move_to_end(key)
            return _MEMO[key]
    return None


def _memo_put(key: str, value: np.ndarray) -> None:
    with _LOCK:
        _MEMO[key] = value
        while len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)


def clear_memo() -> None:
    with _LOCK:
        _MEMO.clear()
        _INDEX_MEMO.clear()


def candidate_embeddings(model: LoadedModel, candidates: CandidateSet, *, layers: Sequence[int],
                         pooling: str, batch_size: int = 128, progress: Progress | None = None,
                         use_cache: bool = True, fast: bool = False) -> dict[int, np.ndarray]:
    """(n_names, dim) float32 per layer, from memo, disk cache, or by encoding the missing layers once.

    ``fast`` encodes with int8 weights on CPU (2.6-3x faster, see :func:`probekit.encode.precision`).
    """
    out: dict[int, np.ndarray] = {}
    missing: list[int] = []
    folder = config.cache_dir() / "embeddings"
    for layer in layers:
        key = embedding_key(model, candidates, layer=layer, pooling=pooling, fast=fast)
        vec = _memo_get(key) if use_cache else None
        if vec is None and use_cache and (folder / f"{key}.npy").exists():
            try:
                vec = np.load(folder / f"{key}.npy", allow_pickle=False)
            except (OSError, ValueError, EOFError):
                vec = None  # unreadable cache file: rebuild
            if vec is not None and vec.shape == (len(candidates), model.hidden_size):
                _memo_put(key, vec)
        if vec is None or vec.shape != (len(candidates), model.hidden_size):
            missing.append(layer)
        else:
            out[layer] = vec
    if missing:
        vecs = encode_layers(model, candidates.names, layers=missing, pooling=pooling,
                             batch_size=batch_size, max_length=NAME_MAX_LENGTH, progress=progress, fast=fast)
        folder.mkdir(parents=True, exist_ok=True)
        for layer, vec in zip(missing, vecs):
            key = embedding_key(model, candidates, layer=layer, pooling=pooling, fast=fast)
            if use_cache:
                tmp = folder / f"{key}.{os.getpid()}.{threading.get_ident()}.tmp.npy"
                np.save(tmp, vec)
                tmp.replace(folder / f"{key}.npy")  # atomic: a killed run leaves no half file
                _memo_put(key, vec)
            out[layer] = vec
    return out


def _prepare(vectors: np.ndarray, similarity: str) -> np.ndarray:
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if similarity == "cosine":
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.clip(norms, 1e-12, None)
    return vectors


class EntityIndex:
    """Exact (Flat) faiss index over candidate vectors; scores are 'higher is better'.

    For ``l2`` the score is the negated squared distance, so one ranking rule fits all similarities.
    """

    def __init__(self, vectors: np.ndarray, *, similarity: str = "cosine"):
        if similarity not in SIMILARITIES:
            raise ProbekitError(f"unknown similarity {similarity!r}; available: {', '.join(SIMILARITIES)}")
        self.similarity = similarity
        self.vectors = _prepare(vectors, similarity)  # (n_names, dim)
        dim = self.vectors.shape[1]
        self.faiss = faiss.IndexFlatL2(dim) if similarity == "l2" else faiss.IndexFlatIP(dim)
        self.faiss.add(self.vectors)

    def __len__(self) -> int:
        return self.vectors.shape[0]

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """queries: (n_queries, dim) -> scores, ids: (n_queries, k), best first."""
        q = _prepare(queries, self.similarity)
        k = min(k, len(self))
        dist, ids = self.faiss.search(q, k)
        return (-dist if self.similarity == "l2" else dist), ids

    def all_scores(self, queries: np.ndarray) -> np.ndarray:
        """(n_queries, n_names) scores against every candidate (used for ranks beyond k)."""
        q = _prepare(queries, self.similarity)
        dots = q @ self.vectors.T  # (n_queries, n_names)
        if self.similarity != "l2":
            return dots
        if getattr(self, "_sq_norms", None) is None:
            self._sq_norms = (self.vectors * self.vectors).sum(1)  # (n_names,), once per index
        return -((q * q).sum(1, keepdims=True) - 2 * dots + self._sq_norms[None, :])


def build_index(model: LoadedModel, candidates: CandidateSet, *, layer: int | None = None, pooling: str = "mean",
                similarity: str = "cosine", batch_size: int = 128, progress: Progress | None = None,
                use_cache: bool = True, fast: bool = False) -> EntityIndex:
    """The index for one (model, layer, pooling, candidate set), from cache when possible."""
    if len(candidates) == 0:
        raise ProbekitError("the candidate set is empty: pick another vocabulary or dataset")
    layer = model.num_layers if layer is None else layer
    key = embedding_key(model, candidates, layer=layer, pooling=pooling, fast=fast) + ":" + similarity
    with _LOCK:
        hit = _INDEX_MEMO.get(key) if use_cache else None
    if hit is not None:
        return hit
    vec = candidate_embeddings(model, candidates, layers=[layer], pooling=pooling, batch_size=batch_size,
                               progress=progress, use_cache=use_cache, fast=fast)[layer]
    index = EntityIndex(vec, similarity=similarity)
    if use_cache:
        with _LOCK:
            _INDEX_MEMO[key] = index
            while len(_INDEX_MEMO) > 4:
                _INDEX_MEMO.popitem(last=False)
    return index
