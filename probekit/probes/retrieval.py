"""Retrieval probing (Contrastive-Probe's probing step): nearest entity names to the masked query.

The query (``[Y]`` -> mask token) and every candidate name are encoded by the same encoder at
layer L with cls or mean pooling; candidates are ranked by exact search over all of them (the same
scores as a faiss Flat index, see :class:`~probekit.index.EntityIndex`).

Presets name a paper's whole recipe (option ``preset``). ``medlama-reference`` is MedLAMA's probing step
(``run_retrieval_prediction.py``, Meng et al. 2022): [CLS] of ``hidden_states[layer]``, L2 distance on the
raw (unnormalised) vectors, queries cut at 50 tokens and names at 25 (probekit always cuts names at
:data:`~probekit.index.NAME_MAX_LENGTH` = 25), fp16 on GPU. Precedence: a preset's values replace the
options it names (``pooling``, ``similarity``, ``max_length``) whatever they were set to; the others
(``layer``, ``batch_size``, ``fast``) still apply. probekit's own defaults are the model's pooling and cosine.
"""

from __future__ import annotations

from ..encode import POOLINGS, encode
from ..errors import ProbekitError
from ..index import SIMILARITIES, build_index
from ..types import Ranking
from .base import Option, Probe, gold_indices, top_k_and_gold_ranks

QUERY_MAX_LENGTH = 50
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
    def resolve(self, options: dict) -> dict:
        """The options a run really uses: the preset applied (stored runs record both the preset and the
        values it set)."""
        return apply_preset(options)

    def _rank(self, model, queries, candidates, *, k, progress, pooling, similarity, layer, batch_size, max_length,
              fast, preset):
        o = self.resolve(dict(pooling=pooling, similarity=similarity, max_length=max_length, preset=preset))
        pooling, similarity, max_length = o["pooling"], o["similarity"], o["max_length"]
        pooling = pooling or model.spec.pooling
        try:
            layer = model.num_layers if layer in (None, -1, "") else int(layer)
        except (TypeError, ValueError):
            raise ProbekitError(f"layer must be an integer 0..{model.num_layers}, got {layer!r}") from None

        def stage(name):
            return None if progress is None else (lambda d, t: progress(d, t, name))

        index = build_index(model, candidates, layer=layer, pooling=pooling, similarity=similarity,
                            batch_size=batch_size, progress=stage("encoding candidates"), fast=fast)
        texts = [q.text(model.mask_token) for q in queries]
        qvec = encode(model, texts, layer=layer, pooling=pooling, batch_size=batch_size,
                      max_length=max_length, fast=fast, progress=stage("encoding queries"))  # (n_queries, dim)
        # Gold ranks beyond k need every candidate's score anyway, so one exact matrix product per
        # chunk gives both the top-k and the ranks (no separate faiss search: half the work, and a
        # single live query is then as fast as encoding it plus a bare faiss search).
        out: list[Ranking] = []
        chunk = 256
        for start in range(0, len(queries), chunk):
            sims = index.all_scores(qvec[start:start + chunk])  # (chunk, n_names)
            for j, q in enumerate(queries[start:start + chunk]):
                top, ranks = top_k_and_gold_ranks(sims[j], k, gold_indices(q, candidates))
                out.append(Ranking(query=q, ids=tuple(int(i) for i in top),
                                   names=tuple(candidates.names[i] for i in top),
                                   scores=tuple(float(sims[j, i]) for i in top),
                                   gold_ranks=tuple(ranks), n_candidates=len(candidates)))
            if progress:
                progress(min(start + chunk, len(queries)), len(queries), "ranking")
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
        Option("preset", None, (None, *PRESETS), "a paper's recipe; its values replace pooling, similarity and "
               "max_length. medlama-reference: [CLS], L2 on raw vectors, queries 50 / names 25 tokens (MedLAMA's "
               "probing code)", type=str),
    ),
    description="Encode the masked query and all entity names; rank names by similarity (any encoder).",
)
