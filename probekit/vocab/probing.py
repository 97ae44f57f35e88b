"""A built vocabulary as the retrieval probe's candidate space: its stored shards, searched by the sharded index.

The vectors come from the vocabulary's shards for the run's model, layer and pooling; shards not encoded yet are
encoded first (and kept: a later run, or a killed one, reuses them). The top-k comes from the vocabulary's index
(exact, or the approximate kind it was built with, whose measured recall is recorded beside the run); gold ranks
are always exact (:meth:`probekit.vocab.search.ShardedIndex.rank`). With ``match="concept"`` every candidate whose
CUI is a gold's CUI is a gold (:mod:`probekit.metrics.concept`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..encode import POOLINGS
from ..errors import ProbekitError
from ..jobs import Progress
from ..memo import Memo
from ..metrics.concept import check_match, concept_gold_ranks, rows_by_concept
from ..ranking import gold_indices
from ..types import Query, Ranking
from . import shards
from .shards import index_folder
from .store import VocabularyCandidates, record

_INDEXES: Memo[str, object] = Memo(max_entries=2)
_BY_CUI: Memo[str, dict[str, list[int]]] = Memo(max_entries=2)


def vocabulary_index(model, candidates: VocabularyCandidates, *, layer: int, pooling: str, similarity: str,
                     batch_size: int, fast: bool, progress: Progress | None = None):
    """The :class:`ShardedIndex` over the vocabulary's vectors for this model/layer/pooling (encoding any shard
    still missing); the saved index of the vocabulary's build when it matches, else an exact one built here."""
    from .search import ShardedIndex

    if candidates.rows is None:
        raise ProbekitError(f"vocabulary {candidates.vocabulary!r} has no stored rows")
    rec = record(candidates.vocabulary)
    builds = rec.get("builds", {})
    default = builds.get(rec.get("default", ""), {})
    dtype = default.get("dtype", "float32")
    _check_pooling(model, candidates, builds, layer=layer, pooling=pooling, dtype=dtype, fast=fast)
    vectors = shards.encode(model, candidates.rows, layer=layer, pooling=pooling, dtype=dtype,
                            batch_size=batch_size, fast=fast, progress=progress)
    built = rec.get("builds", {}).get(vectors.folder.name, {})
    kind = built.get("index", "exact") if built.get("similarity") == similarity else "exact"
    key = f"{vectors.folder}:{kind}:{similarity}"
    hit = _INDEXES.get(key)
    if hit is not None:
        return hit
    parts = vectors.shards()
    folder = index_folder(vectors, kind, similarity)
    try:
        index = ShardedIndex.load(folder, parts)
    except ProbekitError:
        index = ShardedIndex.build(parts, similarity=similarity, kind=kind, progress=progress)
        index.save(folder)
    _INDEXES.put(key, index)
    return index


def _check_pooling(model, candidates: VocabularyCandidates, builds: dict, *, layer: int, pooling: str, dtype: str,
                   fast: bool) -> None:
    """Refuse a pooling the vocabulary was not built with when it was built with another for this model and layer.

    Why: the vectors of another pooling are other vectors: every name would be encoded again (162 s at 100,000
    names here, hours at millions) and the approximate index built over the stored vectors could not serve them,
    all without a word. The user picks: the vocabulary's pooling, or a second build for this one."""
    rows = candidates.rows
    if rows is None:
        return

    def key(p: str) -> str:
        return shards.vector_key(model, fingerprint=rows.fingerprint, layer=layer, pooling=p, dtype=dtype,
                                 shard_size=rows.shard_size, fast=fast)
    if key(pooling) in builds:
        return
    built = [p for p in POOLINGS if p != pooling and key(p) in builds]
    if built:
        kind = builds[key(built[0])].get("index", "exact")
        raise ProbekitError(f"vocabulary {candidates.vocabulary!r} was built with pooling {built[0]!r}, not "
                            f"{pooling!r}: probe it with pooling {built[0]!r} (its {kind} index), or build it again "
                            f"with --pooling {pooling} (`probekit vocab build {candidates.vocabulary} ... --pooling "
                            f"{pooling}`: every name is encoded again; both builds are kept)")


def _concept_rows(candidates: VocabularyCandidates) -> dict[str, list[int]]:
    table = _BY_CUI.get(candidates.key)
    if table is None:
        table = rows_by_concept(candidates.cuis)
        _BY_CUI.put(candidates.key, table)
    return table


def rank_in_vocabulary(index, queries: Sequence[Query], candidates: VocabularyCandidates, qvec: np.ndarray, *,
                       k: int, excluded, match: str = "string", progress: Progress | None = None) -> list[Ranking]:
    """Rankings of ``queries`` (vectors ``qvec``: (n_queries, dim)) against the vocabulary's index, each without
    its ``excluded`` candidates; gold ranks by ``match`` (``string``: the row spelling the gold; ``concept``: the
    best-ranked row of the gold's CUI)."""
    check_match(match)
    exclude = [list(ex.ids) for ex in excluded]
    if match == "concept":
        if not any(candidates.cuis):
            raise ProbekitError(f"match 'concept' needs a vocabulary with CUIs; {candidates.vocabulary!r} has none "
                                "(build it from MRCONSO.RRF or a CSV with an id column)")
        if not any(q.gold_ids for q in queries):
            raise ProbekitError("match 'concept' needs gold CUIs (MedLAMA's tail_cuis_list); these queries have none")
        table = _concept_rows(candidates)
        groups = []
        for q, ex in zip(queries, excluded):
            gone = set(ex.ids)
            groups.append([(cui, [i for i in table.get(cui, []) if i not in gone]) for cui in
                           (list(q.gold_ids) + [""] * (len(q.golds) - len(q.gold_ids)))[:len(q.golds)]])
        flat: list[list[int | None]] = [[i for _, ids in g for i in ids] for g in groups]
    else:
        flat = [gold_indices(q, candidates, ex) for q, ex in zip(queries, excluded)]
    results = index.rank(qvec, flat, k, exclude=exclude, progress=progress)
    names, n = candidates.names, len(candidates)
    search = index.describe()
    out = []
    for qi, (q, ex, (ids, scores, ranks)) in enumerate(zip(queries, excluded, results)):
        hits = None
        if match == "concept":
            by_row = {int(i): r for i, r in zip(flat[qi], ranks) if i is not None}  # every concept row is an id
            gold_ranks = concept_gold_ranks([by_row], [groups[qi]])[0]
            gold_cuis = {cui for cui, _ in groups[qi] if cui}
            hits = tuple(candidates.cuis[i] in gold_cuis for i in ids)  # any synonym of a gold concept
        else:
            gold_ranks = list(ranks)
        out.append(Ranking(query=q, ids=tuple(ids), names=tuple(names[i] for i in ids), scores=tuple(scores),
                           gold_ranks=tuple(gold_ranks), n_candidates=n - len(ex.ids), search=search, gold_hits=hits))
    return out
