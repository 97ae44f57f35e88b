"""Concept-level hits: when candidates carry concept ids (UMLS CUIs), any synonym of a gold concept is a hit.

Two match rules decide which candidates count as a gold answer (:data:`MATCH_RULES`):

- ``string`` (the papers' rule, the default): the candidate spelling the gold name (exact, then case and spacing
  ignored);
- ``concept``: every candidate whose CUI is the gold's CUI (MedLAMA's CSVs give each gold's CUI).

Under ``concept`` a gold's rank is the best rank of its concept's candidates, the same tie rule applied to each
(1 + the candidates scoring strictly higher). acc@k then reads the best gold rank as ever
(:mod:`probekit.metrics.accuracy`), so there is one acc@k for both rules.

>>> rows = rows_by_concept(["C1", "C2", "C1", ""])
>>> concept_gold_ranks([{0: 7, 2: 3}], [[("C1", [0, 2])]])
[[3]]
>>> concept_hit(["C2", "C1"], ["C1"], k=1), concept_hit(["C2", "C1"], ["C1"], k=2)
(False, True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import ProbekitError
from .accuracy import check_k

MATCH_RULES = {
    "string": "a prediction is a hit when it spells a gold name (case and spacing ignored)",
    "concept": "a prediction is a hit when its CUI is a gold's CUI (any synonym of the gold concept)",
}


def check_match(match: str) -> str:
    if match not in MATCH_RULES:
        raise ProbekitError(f"unknown match rule {match!r}; available: {', '.join(MATCH_RULES)}")
    return match


def rows_by_concept(cuis: Sequence[str]) -> dict[str, list[int]]:
    """CUI -> the ids of the candidates carrying it, in id order (candidates without a CUI are left out)."""
    out: dict[str, list[int]] = {}
    for i, cui in enumerate(cuis):
        if cui:
            out.setdefault(cui, []).append(i)
    return out


def concept_gold_ranks(row_ranks: Sequence[Mapping[int, int | None]],
                       golds: Sequence[Sequence[tuple[str, Sequence[int]]]]) -> list[list[int | None]]:
    """Per query, per gold: the best rank among that gold's concept rows (``None`` when none is ranked).

    ``row_ranks[q]`` maps candidate id -> its rank for query q; ``golds[q]`` lists (CUI, row ids) per gold."""
    out = []
    for ranks, gold_rows in zip(row_ranks, golds):
        per = []
        for _cui, ids in gold_rows:
            found = [ranks[i] for i in ids if ranks.get(i) is not None]
            per.append(min(found) if found else None)  # type: ignore[type-var]  # None filtered out above
        out.append(per)
    return out


def concept_hit(predicted_cuis: Sequence[str], gold_cuis: Sequence[str], *, k: int) -> bool:
    """Whether one of the first ``k`` predictions (their CUIs, best first) is a gold concept."""
    k = check_k(k)
    gold = {c for c in gold_cuis if c}
    return any(c in gold for c in list(predicted_cuis)[:k])
