"""Ranking one query over a candidate set from a row of scores: which candidates a query is ranked without
(its subject's spellings), where its golds sit, and the top-k with the tie rule every probe shares.

A shared part below the probes, the million-name vocabularies and the metrics alike, so that each of them can
build a :class:`~probekit.types.Ranking` the same way without importing the others."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .memo import Memo
from .types import OBJECT, CandidateSet, Query, Ranking, normalize_name


@dataclass(frozen=True)
class Excluded:
    """What one query is ranked without: candidate ``ids`` treated as absent (never listed, never counted against a
    gold) and the ``names`` they stand for, which open-vocabulary probes drop from their generated answers.

    With ``exclude_subject`` the names are the query's subject and every candidate spelling it (for a typed
    query without ``[X]``: every candidate its text names)."""

    ids: tuple[int, ...] = ()
    names: tuple[str, ...] = ()


NOTHING_EXCLUDED = Excluded()
"""The exclusion of a call without ``exclude_subject``."""


_BY_NORM: Memo[str, dict[str, list[int]]] = Memo(max_entries=17)


def _ids_by_norm(candidates: CandidateSet) -> dict[str, list[int]]:
    table = _BY_NORM.get(candidates.key)
    if table is None:
        table = {}
        for i, n in enumerate(candidates.names):
            table.setdefault(normalize_name(n), []).append(i)
        _BY_NORM.put(candidates.key, table)
    return table


def subject_ids(query: Query, candidates: CandidateSet) -> list[int]:
    """Ids of every candidate spelling the query's subject (case and spacing ignored).

    >>> c = CandidateSet.from_names(["Pain", "fever", "pain"])
    >>> subject_ids(Query("q", "pain", "r", "[X] [Y]"), c)
    [0, 2]
    >>> subject_ids(Query("free", "", "free", "Pain, not fever, might cause [Y]."), c)  # typed: names in the text
    [0, 1, 2]
    """
    table = _ids_by_norm(candidates)
    if query.subject.strip():
        return list(table.get(normalize_name(query.subject), []))
    if query.id != FREE_ID:
        return []
    # a typed query without [X] names its subject in its text: every candidate the text spells out is left out
    # ("Aspirin might prevent [MASK]." must not answer "Aspirin")
    words = [w.strip(_PUNCT) for w in query.template.replace(OBJECT, " ").split()]
    words = [w for w in words if w]
    found: list[int] = []
    for n in range(1, min(_MAX_NAME_WORDS, len(words)) + 1):
        for i in range(len(words) - n + 1):
            found += table.get(normalize_name(" ".join(words[i:i + n])), [])
    return sorted(set(found))


FREE_ID = "free"
"""Query id of a typed query (:func:`probekit.types.parse_free_query`)."""
_PUNCT = ".,;:!?()[]{}\"'"
_MAX_NAME_WORDS = 8


def exclusion(query: Query, candidates: CandidateSet) -> Excluded:
    """What ``exclude_subject`` leaves out of ``query``'s ranking: the candidates spelling its subject
    (:func:`subject_ids`) and, as names, the subject itself and those spellings.

    >>> c = CandidateSet.from_names(["Pain", "fever", "pain"])
    >>> exclusion(Query("q", "pain", "r", "[X] [Y]"), c)
    Excluded(ids=(0, 2), names=('pain', 'Pain'))
    """
    ids = tuple(subject_ids(query, candidates))
    names = ([query.subject] if query.subject.strip() else []) + [candidates.names[i] for i in ids]
    return Excluded(ids=ids, names=tuple(dict.fromkeys(names)))


def gold_indices(query: Query, candidates: CandidateSet, excluded: Excluded) -> list[int | None]:
    """Candidate id of each gold (``None``: not a candidate, or excluded)."""
    ex = set(excluded.ids)
    out = []
    for g in query.golds:
        i = candidates.index_of(g)
        out.append(None if i in ex else i)
    return out


def top_k_and_gold_ranks(scores: np.ndarray, k: int, golds: Sequence[int | None],
                         exclude: Sequence[int] = ()) -> tuple[np.ndarray, list]:
    """Top-k ids (best first) and 1-based gold ranks from one row of scores over all candidates.

    Ties favour the gold: a gold's rank is 1 + the number of candidates scoring strictly higher, and
    among equal scores the top-k lists golds first, then lower ids. Exact ties are common: an uncased
    model gives case variants of a name (MedLAMA's vocabulary keeps them) the same vector, and which
    spelling wins must not decide whether a query counts as a hit. ``None`` golds (not candidates)
    stay ``None``.

    >>> top, ranks = top_k_and_gold_ranks(np.array([0.1, 0.9, 0.5, 0.9, 0.2]), 2, [3, 4, None])
    >>> top.tolist(), ranks
    ([3, 1], [1, 4, None])

    ``exclude`` ids are treated as absent: never listed, never counted against a gold.
    """
    if len(exclude):  # rank the other candidates, then map their positions back to ids
        gone = set(int(e) for e in exclude)
        keep = np.setdiff1d(np.arange(scores.shape[0]), list(gone))
        sub = [None if g is None or g in gone else int(np.searchsorted(keep, g)) for g in golds]
        sub_top, ranks = top_k_and_gold_ranks(scores[keep], k, sub)
        return keep[sub_top], ranks
    n = scores.shape[0]
    k = min(k, n)
    if k < n:
        kth = np.partition(scores, n - k)[n - k]  # the k-th best score
        cand = np.flatnonzero(scores >= kth)  # everything tied with it competes for the last places
    else:
        cand = np.arange(n)
    gold_set = [g for g in golds if g is not None]
    not_gold = ~np.isin(cand, gold_set)
    top = cand[np.lexsort((cand, not_gold, -scores[cand]))][:k]
    ranks = [None if g is None else int(np.count_nonzero(scores > scores[g])) + 1 for g in golds]
    return top, ranks


def ranking_from_scores(query: Query, candidates: CandidateSet, scores: np.ndarray, k: int, *,
                        excluded: Excluded) -> Ranking:
    """Top-k and gold ranks (see :func:`top_k_and_gold_ranks`) from one row of scores over all candidates,
    ranked without the ``excluded`` candidates (a probe passes ``call.excluded[i]``)."""
    top, gold_ranks = top_k_and_gold_ranks(scores, k, gold_indices(query, candidates, excluded), excluded.ids)
    return Ranking(query=query, ids=tuple(int(i) for i in top), names=tuple(candidates.names[i] for i in top),
                   scores=tuple(float(scores[i]) for i in top), gold_ranks=tuple(gold_ranks),
                   n_candidates=len(candidates) - len(excluded.ids))
