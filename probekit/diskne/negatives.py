"""Negative diseases: the n most similar diseases of the set, by the probed encoder's own name embeddings.

The paper (§3.2) picks, among "the diseases that occur in the hypothesis of other positive examples",
the n = 10 most similar to X by cui2vec that are "not descendants or ancestors of X in SNOMED CT".
Neither cui2vec nor SNOMED CT ships with probekit, so the license-free path approximates both:

* similarity = cosine of the probed encoder's mean-pooled name embeddings (each model gets its own
  hardest negatives, which makes the set model-dependent: the run stores the lists it used);
* "ancestor or descendant" ~ one name containing the other as whole words ("diabetes mellitus" vs
  "type 2 diabetes mellitus"), plus any shared synonym. This is a lexical proxy, not a hierarchy.

When the set carries given negatives (a ``disease, negative_disease`` CSV or the annotation file's
own negative rows) those are used as they are.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import ProbekitError
from ..types import normalize_name
from .data import DisKnESet
from .splits import mentions


def related(a_names: Sequence[str], b_names: Sequence[str]) -> bool:
    """The lexical ancestor/descendant proxy: a shared name, or one name inside the other as whole words.

    >>> related(["diabetes mellitus"], ["Type 2 diabetes mellitus"]), related(["stroke"], ["heat stroke"])
    (True, True)
    >>> related(["asthma"], ["pneumonia"])
    False
    """
    for a in a_names:
        for b in b_names:
            if normalize_name(a) == normalize_name(b) or mentions(a, [b]) or mentions(b, [a]):
                return True
    return False


def nearest(ds: DisKnESet, vectors: np.ndarray, *, n: int = 10) -> dict[str, list[str]]:
    """For each disease of ``ds`` (in ``sorted(ds.diseases)`` order, one row of ``vectors`` each), its
    ``n`` most similar other diseases, skipping itself and lexically related ones.

    Ties are broken by disease id so the lists are deterministic.
    """
    ids = sorted(ds.diseases)
    if vectors.shape[0] != len(ids):
        raise ProbekitError(f"expected {len(ids)} name vectors, got {vectors.shape[0]}")
    if n < 1:
        raise ProbekitError(f"the number of negatives must be at least 1, got {n}")
    unit = vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)  # (diseases, dim)
    sims = unit @ unit.T  # (diseases, diseases)
    out: dict[str, list[str]] = {}
    for i, x in enumerate(ids):
        order = sorted(range(len(ids)), key=lambda j: (-round(float(sims[i, j]), 6), ids[j]))
        picked: list[str] = []
        for j in order:
            y = ids[j]
            if y == x or related(ds.diseases[x].names, ds.diseases[y].names):
                continue
            picked.append(y)
            if len(picked) == n:
                break
        out[x] = picked
    return out


def negatives_key(ds: DisKnESet, model_key: str, n: int) -> str:
    return hashlib.sha1(json.dumps([ds.version, model_key, n]).encode()).hexdigest()[:16]


def for_model(ds: DisKnESet, model, *, n: int = 10, encode: Callable | None = None) -> dict[str, list[str]]:
    """The set's given negatives, else the ``n`` nearest by ``model``'s name embeddings.

    ``model`` is a :class:`~probekit.models.LoadedModel`; ``encode(model, texts) -> (n_texts, dim)``
    defaults to :func:`probekit.encode.encode` with mean pooling on the last layer.
    """
    if ds.negatives:
        return {d: [y for y in ys if y in ds.diseases and y != d][:n] for d, ys in ds.negatives.items()}
    if encode is None:
        from ..encode import encode as _encode

        def encode(m, texts):
            return _encode(m, texts, pooling="mean", max_length=25)
    names = [ds.diseases[d].name for d in sorted(ds.diseases)]
    return nearest(ds, np.asarray(encode(model, names), dtype=np.float32), n=n)
