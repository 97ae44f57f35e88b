"""Accuracy metrics over rankings: pure functions, tested against naive loops.

acc@k of a query is 1 when any gold answer ranks within the top k. *Macro* averages per-relation
accuracies (MedLAMA's headline number); *micro* averages over all queries.

>>> from probekit.types import Query, Ranking
>>> q = Query("a", "s", "r1", "[X] [Y]", golds=("x",))
>>> rs = [Ranking(q, (0,), ("x",), (1.0,), (1,)), Ranking(q, (0,), ("y",), (1.0,), (3,))]
>>> acc_at_k(rs, k=1), acc_at_k(rs, k=5)
(0.5, 1.0)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from ..errors import ProbekitError
from ..types import Ranking

DEFAULT_KS = (1, 5, 10)


def _check(rankings: Sequence[Ranking], k: int) -> None:
    if not isinstance(k, int) or k < 1:
        raise ProbekitError(f"k must be a positive integer, got {k!r}")


def acc_at_k(rankings: Sequence[Ranking], *, k: int, average: str = "macro") -> float:
    """Share of queries with a gold answer in the top ``k``; ``average`` is ``macro`` or ``micro``."""
    _check(rankings, k)
    if average not in ("macro", "micro"):
        raise ProbekitError(f"unknown average {average!r}; available: macro, micro")
    if not rankings:
        return float("nan")
    if average == "micro":
        return sum(r.hit(k) for r in rankings) / len(rankings)
    per = per_relation(rankings, ks=(k,))
    return sum(v[k] for v in per.values()) / len(per)


def per_relation(rankings: Sequence[Ranking], *, ks: Sequence[int] = DEFAULT_KS) -> dict[str, dict[int, float]]:
    """{relation: {k: acc@k}} in relation order of first appearance."""
    for k in ks:
        _check(rankings, k)
    groups: dict[str, list[Ranking]] = defaultdict(list)
    for r in rankings:
        groups[r.query.relation].append(r)
    return {rel: {k: sum(r.hit(k) for r in rs) / len(rs) for k in ks} for rel, rs in groups.items()}


def summary(rankings: Sequence[Ranking], *, ks: Sequence[int] = DEFAULT_KS) -> dict:
    """Per-relation, macro and micro acc@k (as fractions) plus counts: the shape of MedLAMA Table 4."""
    per = per_relation(rankings, ks=ks)
    counts: dict[str, int] = defaultdict(int)
    for r in rankings:
        counts[r.query.relation] += 1
    return {
        "n_queries": len(rankings),
        "relations": {rel: {"n": counts[rel], **{f"acc@{k}": v for k, v in accs.items()}} for rel, accs in per.items()},
        "macro": {f"acc@{k}": acc_at_k(rankings, k=k, average="macro") for k in ks},
        "micro": {f"acc@{k}": acc_at_k(rankings, k=k, average="micro") for k in ks},
    }


# ---------------------------------------------------------------- rank change and UCM (Yao et al., DESIGN §8)
