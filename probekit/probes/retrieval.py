"""Retrieval probing (Contrastive-Probe's probing step): nearest entity names to the masked query.

The query (``[Y]`` -> mask token) and every candidate name are encoded by the same encoder at
layer L with cls or mean pooling; both come from the one embedding cache (:mod:`probekit.cache`), so a
repeated run only redoes the search. Candidates are ranked by an exact faiss search
(:meth:`probekit.index.EntityIndex.rank`: top-k from faiss, gold ranks by counting the candidates that
beat each gold).
"""

from __future__ import annotations

from .. import cache
from ..encode import POOLINGS
from ..errors import ProbekitError
from ..index import SIMILARITIES, build_index
from ..types import Ranking
from .base import Option, Probe, excluded_ids, gold_indices

QUERY_MAX_LENGTH = 50
QUERY_CACHE_MIN = 2
"""Query sets at least this large have their embeddings cached."""


def _stage(progress, name):
    return None if progress is None else (lambda d, t: progress(d, t, name))


class RetrievalProbe(Probe):
    def _rank(self, model, queries, candidates, *, k, progress, pooling, similarity, layer, batch_size, max_length,
              fast):
        pooling = pooling or model.spec.pooling
        try:
            layer = model.num_layers if layer in (None, -1, "") else int(layer)
        except (TypeError, ValueError):
            raise ProbekitError(f"layer must be an integer 0..{model.num_layers}, got {layer!r}") from None
        index = build_index(model, candidates, layer=layer, pooling=pooling, similarity=similarity,
                            batch_size=batch_size, progress=_stage(progress, "encoding candidates"), fast=fast)
        texts = [q.text(model.mask_token) for q in queries]
        # Query sets (benchmarks, sweeps) go through the cache; a single live query is encoded afresh
        # (as fast as a cache lookup, and one-off files would pile up in the cache).
        qvec = cache.embeddings(model, texts, layers=[layer], pooling=pooling, max_length=max_length, fast=fast,
                                batch_size=batch_size, progress=_stage(progress, "encoding queries"),
                                use_cache=len(texts) >= QUERY_CACHE_MIN)[layer]
        return rank_with_index(index, queries, candidates, qvec, k=k, progress=_stage(progress, "ranking"))


def rank_with_index(index, queries, candidates, qvec, *, k: int, progress=None) -> list[Ranking]:
    """Rankings of ``queries`` (vectors ``qvec``: (n_queries, dim)) against a built index of ``candidates``,
    honouring the current call's exclusions (``exclude_subject``)."""
    exclude = [excluded_ids(q, candidates) for q in queries]
    golds = [gold_indices(q, candidates) for q in queries]
    names, n = candidates.names, len(candidates)
    out: list[Ranking] = []
    for q, ex, (ids, scores, ranks) in zip(queries, exclude,
                                           index.rank(qvec, golds, k, exclude=exclude, progress=progress)):
        out.append(Ranking(query=q, ids=tuple(ids), names=tuple(names[i] for i in ids), scores=tuple(scores),
                           gold_ranks=tuple(ranks), n_candidates=n - len(ex)))
    return out


PROBE = RetrievalProbe(
    name="retrieval",
    requires_mlm=False,
    options=(
        Option("pooling", None, (None,) + POOLINGS, "cls (reference) or mean; None = the model's default"),
        Option("similarity", "cosine", SIMILARITIES, "cosine (default), l2 (reference code), dot"),
        Option("layer", None, (), "hidden_states[L]; None = last layer", type=int),
        Option("batch_size", 128, (), "encoding batch size", advanced=True),
        Option("max_length", QUERY_MAX_LENGTH, (), "query tokens kept; longer queries are cut at the end",
               advanced=True),
        Option("fast", False, (False, True), "int8 weights on CPU: about 3x faster encoding, scores differ "
               "slightly (acc@10 -0.2 points on MedLAMA); CUDA always uses autocast"),
    ),
    description="Encode the masked query and all entity names; rank names by similarity (any encoder).",
)
