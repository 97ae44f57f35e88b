"""One line of explanation per term and per variant (Yao et al.), shared by the page and the CLI help."""

from __future__ import annotations

TERMS = {
    "O_t": "the target object: the gold answer of (S, R, O_t) that the context is centred on (segment S1 holds it).",
    "O_cor": "correct objects: other pool entities that are also true answers of (S, R).",
    "O_incor": "incorrect objects: pool entities (candidates of relation R) that are not true answers.",
    "O_a": "the entity of the segment added at a step; UCM keeps only the steps whose O_a is an O_cor.",
    "RC": "rank change = rank after the step − rank before it; negative means the entity moved up.",
    "UCM_k": "per relation: among steps adding an O_cor, the share where O_t moved up (Understand), stayed (Confuse) "
             "or moved down (Misunderstand).",
    "UCM_m": "the same shares over every step of the whole dataset (model level).",
}

VARIANT_HELP = {
    "real": "the document itself: segments S1…Sn added one by one, each at its place in the text.",
    "knowledge-only": "the same segments with all non-entity text removed, entities in document order.",
    "knowledge-sorted": "only the entities, concatenated in the order added: S1, S2, S3 …",
    "knowledge-random": "S1 first, then a segment picked at random among those not yet added, put at a random "
                        "place (seeded; several permutations).",
    "negative-target": "re-centred on the first incorrect object (O_incor) found; the original O_t becomes an "
                       "ordinary O_cor: a control for copying from the context.",
}
