"""The one embedding cache: entity names and queries alike, keyed by everything that produced them.

``embeddings(model, texts, layers=..., pooling=..., max_length=..., fast=...)`` returns one
(n_texts, dim) float32 array per layer, from (1) a bounded in-process memo, (2) an ``.npy`` file under
``cache/embeddings`` or (3) one encoding pass for all missing layers. The key covers the model (source
and revision), layer, pooling, length limit, precision (:func:`probekit.encode.precision`: CUDA
autocast, CPU int8 and fp32 vectors differ slightly and must never be mixed), the encoder version and
the exact texts in order. Files are written atomically (temporary file, then rename), so a killed run
leaves no half file; an unreadable or misshapen file is rebuilt.

The memo holds at most :data:`MEMO_BYTES`; an array larger than that is not memoised (the disk cache
still has it). Callers that keep the vectors elsewhere (the entity index keeps them inside faiss) pass
``memo=False`` so no second copy stays in memory.

``share_layers=[2, 4, 6]`` makes a pass that encodes any layer also pool and store the other listed
layers that are not cached yet: one forward pass yields every layer's hidden states, so a grid over
layers (or a layer-wise run split into cells) pays for one pass instead of one per layer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from . import atomic, config
from .encode import ENCODER_VERSION, encode_layers, precision
from .jobs import Progress
from .memo import Memo

MEMO_BYTES = 512 * 2**20
"""In-process memo budget (bytes of float32 vectors)."""

_MEMO: Memo[str, np.ndarray] = Memo(max_bytes=lambda: MEMO_BYTES, sizeof=lambda v: v.nbytes, admit_oversize=False)


def texts_key(texts: Sequence[str]) -> str:
    """Fingerprint of a list of texts (order matters); equals :attr:`CandidateSet.key` for its names.

    >>> texts_key(["a", "b"]) == texts_key(["a", "b"]) != texts_key(["b", "a"])
    True
    """
    return hashlib.sha1(json.dumps([str(t) for t in texts]).encode()).hexdigest()[:16]


def embedding_key(model, *, texts: str, layer: int, pooling: str, max_length: int, fast: bool = False) -> str:
    """The cache key of one layer's vectors for the texts fingerprinted by ``texts`` (:func:`texts_key`)."""
    parts = {"model": model.source, "rev": model.revision, "layer": int(layer), "pooling": pooling,
             "max_length": int(max_length), "texts": texts, "enc": ENCODER_VERSION,
             "precision": precision(model, fast)}
    return hashlib.sha1(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def folder() -> Path:
    return config.cache_dir() / "embeddings"


def clear_memo() -> None:
    """Forget in-process vectors (the disk cache stays): what a restarted process would see."""
    _MEMO.clear()


def _memo_get(key: str) -> np.ndarray | None:
    return _MEMO.get(key)


def _memo_put(key: str, vec: np.ndarray) -> None:
    _MEMO.put(key, vec)  # a vector larger than the whole budget is not memoised (the disk cache has it)


def _load(path: Path, shape: tuple[int, int]) -> np.ndarray | None:
    try:
        vec = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None  # unreadable: rebuilt by the caller
    return vec if vec.shape == shape and vec.dtype == np.float32 else None


def save_npy(vec: np.ndarray, path: Path) -> None:
    """Write ``vec`` to ``path`` atomically: a temporary file in the same folder, then a rename."""
    atomic.write(path, lambda fh: np.save(fh, vec, allow_pickle=False))


def embeddings(model, texts: Sequence[str], *, layers: Sequence[int], pooling: str, max_length: int,
               fast: bool = False, batch_size: int = 128, progress: Progress | None = None,
               use_cache: bool = True, memo: bool = True, key: str | None = None,
               share_layers: Sequence[int] = ()) -> dict[int, np.ndarray]:
    """{layer: (n_texts, dim) float32}: from the memo, the disk cache, or ONE encoding pass of the missing layers.

    ``key`` is the texts' fingerprint when the caller has it (a :class:`CandidateSet`'s ``key``);
    ``use_cache=False`` neither reads nor writes the cache; ``memo=False`` skips the in-process memo.
    ``share_layers``: layers a pass that runs anyway also computes and writes to the disk cache (not returned).
    """
    texts = [str(t) for t in texts]
    tkey = key or texts_key(texts)
    shape = (len(texts), model.hidden_size)
    out: dict[int, np.ndarray] = {}
    missing: list[int] = []
    for layer in layers:
        vec = None
        if use_cache:
            k = embedding_key(model, texts=tkey, layer=layer, pooling=pooling, max_length=max_length, fast=fast)
            vec = _memo_get(k) if memo else None
            if vec is None and (folder() / f"{k}.npy").exists():
                vec = _load(folder() / f"{k}.npy", shape)
                if vec is not None and memo:
                    _memo_put(k, vec)
        if vec is None:
            missing.append(layer)
        else:
            out[layer] = vec
    if missing:
        # siblings: other layers of the current grid, computed in the same pass and only written to disk
        def cached(layer: int) -> bool:
            k = embedding_key(model, texts=tkey, layer=layer, pooling=pooling, max_length=max_length, fast=fast)
            return (folder() / f"{k}.npy").exists()

        siblings = [x for x in sorted({int(x) for x in share_layers})
                    if use_cache and x not in layers and 0 <= x <= model.num_layers and not cached(x)]
        vecs = encode_layers(model, texts, layers=missing + siblings, pooling=pooling, batch_size=batch_size,
                             max_length=max_length, progress=progress, fast=fast)  # (n_pass_layers, n_texts, dim)
        for layer, vec in zip(missing + siblings, vecs):
            if layer in missing:
                out[layer] = vec
            if use_cache:
                k = embedding_key(model, texts=tkey, layer=layer, pooling=pooling, max_length=max_length, fast=fast)
                save_npy(vec, folder() / f"{k}.npy")
                if memo and layer in missing:
                    _memo_put(k, vec)
    return {layer: out[layer] for layer in layers}
