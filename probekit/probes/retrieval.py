"""Retrieval probing (Contrastive-Probe's probing step): nearest entity names to the masked query.

The query (``[Y]`` -> mask token) and every candidate name are encoded by the same encoder at
layer L with cls or mean pooling; both come from the one embedding cache (:mod:`probekit.cache`), so a
repeated run only redoes the search. Candidates are ranked by an exact faiss search
(:meth:`probekit.index.EntityIndex.rank`: one pass of scores gives the top-k and the gold ranks, by counting
the candidates that beat each gold).

The candidates may be a built vocabulary (:class:`probekit.vocab.store.VocabularyCandidates`: UMLS strings, a
site's terminology): its stored shards are then searched through the sharded index (:mod:`probekit.vocab.probing`),
and option ``match`` picks the hit rule: ``string`` (the gold's spelling, the papers' rule) or ``concept`` (any
candidate with a gold's CUI, for vocabularies that carry CUIs; :mod:`probekit.metrics.concept`).

Presets name a paper's whole recipe (option ``preset``). ``medlama-reference`` is MedLAMA's probing step
(``run_retrieval_prediction.py``, Meng et al. 2022): [CLS] of ``hidden_states[layer]``, L2 distance on the
raw (unnormalised) vectors, queries cut at 50 tokens and names at 25 (probekit always cuts names at
:data:`~probekit.index.NAME_MAX_LENGTH` = 25), fp16 on GPU. Precedence: a preset's values replace the
options it names (``pooling``, ``similarity``, ``max_length``) whatever they were set to; the others
(``layer``, ``batch_size``, ``fast``) still apply. probekit's own defaults are the model's pooling and cosine.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import cache
from ..encode import POOLINGS
from ..errors import ProbekitError
from ..index import SIMILARITIES, build_index
from ..jobs import Progress
from ..metrics.concept import MATCH_RULES
from ..ranking import Excluded, gold_indices
from ..types import Ranking
from .base import Call, Option, Probe

QUERY_MAX_LENGTH = 50
QUERY_CACHE_MIN = 2
"""Query sets at least this large have their embeddings cached."""


def _stage(progress: Progress | None, name: str) -> Progress | None:
    """``progress`` reporting every step under the stage ``name``."""
    if progress is None:
        return None
    report = progress

    def staged(done: int, total: int, _stage: str = "") -> None:
        report(done, total, name)

    return staged


PRESETS: dict[str, dict] = {
    "medlama-reference": {"pooling": "cls", "similarity": "l2", "max_length": QUERY_MAX_LENGTH},
}
"""Named recipes: the option values each one sets (see the module docstring for precedence)."""
PRESET_GPU_DTYPE = {"medlama-reference": "float16"}
"""The half precision each preset's reference used on GPU (MedLAMA's code runs the encoder in fp16)."""


def apply_preset(options: dict) -> dict:
    """``options`` with its ``preset``'s values written over them (a copy; unchanged without a preset).

    >>> apply_preset({"preset": "medlama-reference", "pooling": "mean", "similarity": "cosine", "layer": 3})
    {'preset': 'medlama-reference', 'pooling': 'cls', 'similarity': 'l2', 'layer': 3, 'max_length': 50}
    >>> apply_preset({"pooling": "mean"})
    {'pooling': 'mean'}
    """
    preset = options.get("preset")
    if preset in (None, ""):
        return dict(options)
    if preset not in PRESETS:
        raise ProbekitError(f"unknown preset {preset!r}; available: {', '.join(PRESETS)}")
    return {**options, **PRESETS[preset]}


class RetrievalProbe(Probe):
    def usable_with(self, model) -> bool:
        """Any encoder (an encoder-decoder's encoder too); not a decoder-only LM, whose prompts have no mask."""
        return not getattr(model, "is_causal", False)

    def unusable_reason(self, model) -> str:
        return (f"probe {self.name!r} needs an encoder with a mask token (BERT-like, or an encoder-decoder); "
                f"{model.id!r} is a decoder-only LM: use the 'likelihood' probe")

    def resolve(self, options: dict) -> dict:
        """The options a run really uses: the preset applied (stored runs record both the preset and the
        values it set)."""
        return apply_preset(options)

    def _rank(self, model, queries, candidates, call: Call, *, pooling, similarity, layer, batch_size, max_length,
              fast, preset, match):
        o = self.resolve(dict(pooling=pooling, similarity=similarity, max_length=max_length, preset=preset))
        pooling, similarity, max_length = o["pooling"], o["similarity"], o["max_length"]
        pooling = pooling or model.spec.pooling
        layer = model.num_layers if layer in (None, -1) else layer
        progress = call.progress
        from ..vocab.store import VocabularyCandidates

        in_vocab = isinstance(candidates, VocabularyCandidates)
        if match != "string" and not in_vocab:
            raise ProbekitError(f"match {match!r} needs a built vocabulary with CUIs (--vocab NAME, see "
                                "`probekit vocab list`); the dataset's own names carry none")
        if in_vocab:
            from ..vocab.probing import vocabulary_index

            index = vocabulary_index(model, candidates, layer=layer, pooling=pooling, similarity=similarity,
                                     batch_size=batch_size, fast=fast,
                                     progress=_stage(progress, "encoding vocabulary shards"))
        else:
            index = build_index(model, candidates, layer=layer, pooling=pooling, similarity=similarity,
                                batch_size=batch_size, progress=_stage(progress, "encoding candidates"), fast=fast,
                                share_layers=call.share_layers)
        texts = [q.text(model.mask_token) for q in queries]
        # Query sets (benchmarks, sweeps) go through the cache; a single live query is encoded afresh
        # (as fast as a cache lookup, and one-off files would pile up in the cache).
        use_cache = len(texts) >= QUERY_CACHE_MIN
        qvec = cache.embeddings(model, texts, layers=[layer], pooling=pooling, max_length=max_length, fast=fast,
                                batch_size=batch_size, progress=_stage(progress, "encoding queries"),
                                use_cache=use_cache, share_layers=call.share_layers if use_cache else ())[layer]
        if in_vocab:
            from ..vocab.probing import rank_in_vocabulary

            return rank_in_vocabulary(index, queries, candidates, qvec, k=call.k, excluded=call.excluded, match=match,
                                      progress=_stage(progress, "ranking"))
        return rank_with_index(index, queries, candidates, qvec, k=call.k, excluded=call.excluded,
                               progress=_stage(progress, "ranking"))


def rank_with_index(index, queries, candidates, qvec, *, k: int, excluded: Sequence[Excluded],
                    progress=None) -> list[Ranking]:
    """Rankings of ``queries`` (vectors ``qvec``: (n_queries, dim)) against a built index of ``candidates``,
    each ranked without its ``excluded`` candidates (one :class:`Excluded` per query)."""
    golds = [gold_indices(q, candidates, ex) for q, ex in zip(queries, excluded)]
    exclude = [list(ex.ids) for ex in excluded]
    names, n = candidates.names, len(candidates)
    out: list[Ranking] = []
    for q, ex, (ids, scores, ranks) in zip(queries, excluded,
                                           index.rank(qvec, golds, k, exclude=exclude, progress=progress)):
        out.append(Ranking(query=q, ids=tuple(ids), names=tuple(names[i] for i in ids), scores=tuple(scores),
                           gold_ranks=tuple(ranks), n_candidates=n - len(ex.ids)))
    return out


PROBE = RetrievalProbe(
    name="retrieval",
    requires_mlm=False,
    options=(
        Option("pooling", None, (None,) + POOLINGS, "cls (reference) or mean; None = the model's default"),
        Option("similarity", "cosine", SIMILARITIES, "cosine (default), l2 (reference code), dot"),
        Option("layer", None, (), "hidden_states[L]; None (or -1) = last layer", type=int),
        Option("batch_size", 128, (), "encoding batch size", advanced=True, minimum=1),
        Option("max_length", QUERY_MAX_LENGTH, (), "query tokens kept (with [CLS] and [SEP]); longer queries "
               "are cut at the end", advanced=True, minimum=2),
        Option("fast", False, (False, True), "int8 weights on CPU: about 3x faster encoding, scores differ "
               "slightly (acc@10 -0.2 points on MedLAMA); CUDA always uses autocast"),
        Option("preset", None, (None, *PRESETS), "a paper's recipe; its values replace pooling, similarity and "
               "max_length. medlama-reference: [CLS], L2 on raw vectors, queries 50 / names 25 tokens (MedLAMA's "
               "probing code)", type=str),
        Option("match", "string", tuple(MATCH_RULES), "hit rule: string (the gold's spelling) or concept (any "
               "candidate with a gold's CUI; needs a built vocabulary with CUIs)"),
    ),
    description="Encode the masked query and all entity names; rank names by similarity (any encoder).",
)
