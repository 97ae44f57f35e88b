"""Concept-level hits (match=concept) against a naive loop over the full score matrix."""

from __future__ import annotations

import numpy as np
import pytest

from probekit.errors import ProbekitError
from probekit.index import EntityIndex
from probekit.metrics import acc_at_k
from probekit.metrics.concept import check_match, concept_hit
from probekit.ranking import NOTHING_EXCLUDED, exclusion
from probekit.types import Query
from probekit.vocab.probing import rank_in_vocabulary
from probekit.vocab.store import VocabularyCandidates


def _setup(seed=0, n=300, n_cui=60, n_q=25, dim=16):
    rng = np.random.default_rng(seed)
    vec = rng.standard_normal((n, dim)).astype(np.float32)  # (n, dim)
    cuis = tuple(f"C{rng.integers(n_cui):07d}" for _ in range(n))
    names = tuple(f"name {i}" for i in range(n))
    cands = VocabularyCandidates(names=names, key=f"test-{seed}", vocabulary="t", cuis=cuis)
    queries = []
    for j in range(n_q):
        g = rng.choice(n, size=2, replace=False)
        queries.append(Query(id=f"q{j}", subject=names[int(rng.integers(n))], relation=f"r{j % 3}",
                             template="[X] is [Y].", golds=tuple(names[i] for i in g),
                             gold_ids=tuple(cuis[i] for i in g)))
    qvec = rng.standard_normal((n_q, dim)).astype(np.float32)  # (n_q, dim)
    return vec, cands, queries, qvec


def _naive_scores(vec, qvec):
    v = vec / np.linalg.norm(vec, axis=1, keepdims=True)
    q = qvec / np.linalg.norm(qvec, axis=1, keepdims=True)
    return q @ v.T  # (n_q, n)


@pytest.mark.parametrize("exclude", [False, True])
def test_concept_ranks_and_hits_equal_a_naive_loop(exclude):
    """Rule: a gold concept's rank = 1 + candidates scoring strictly above its best-scoring synonym; acc@k =
    any of the top-k candidates carries a gold CUI."""
    vec, cands, queries, qvec = _setup()
    excluded = [exclusion(q, cands) if exclude else NOTHING_EXCLUDED for q in queries]
    got = rank_in_vocabulary(EntityIndex(vec), queries, cands, qvec, k=10, excluded=excluded, match="concept")
    scores = _naive_scores(vec, qvec)
    for r, q, ex, row in zip(got, queries, excluded, scores):
        keep = [i for i in range(len(row)) if i not in set(ex.ids)]
        for cui, rank in zip(q.gold_ids, r.gold_ranks):
            syn = [i for i in keep if cands.cuis[i] == cui]
            best = max(row[i] for i in syn)
            assert rank == 1 + sum(1 for i in keep if row[i] > best)
        order = sorted(keep, key=lambda i: -row[i])
        for k in (1, 5, 10):
            assert r.hit(k) == concept_hit([cands.cuis[i] for i in order], q.gold_ids, k=k)
    # the one acc@k reads the concept ranks
    naive = np.mean([concept_hit([cands.cuis[i] for i in np.argsort(-row)], q.gold_ids, k=10)
                     for q, row in zip(queries, scores)]) if not exclude else None
    if naive is not None:
        assert acc_at_k(got, k=10, average="micro") == pytest.approx(naive)


def test_concept_is_never_worse_than_string():
    vec, cands, queries, qvec = _setup(seed=1)
    ex = [NOTHING_EXCLUDED] * len(queries)
    by_string = rank_in_vocabulary(EntityIndex(vec), queries, cands, qvec, k=10, excluded=ex, match="string")
    by_concept = rank_in_vocabulary(EntityIndex(vec), queries, cands, qvec, k=10, excluded=ex, match="concept")
    for s, c in zip(by_string, by_concept):
        assert all(cr <= sr for sr, cr in zip(s.gold_ranks, c.gold_ranks))
    assert sum(c.hit(10) for c in by_concept) > sum(s.hit(10) for s in by_string)


def test_concept_needs_cuis_on_both_sides():
    vec, cands, queries, qvec = _setup()
    bare = VocabularyCandidates(names=cands.names, key="bare", vocabulary="bare", cuis=("",) * len(cands))
    ex = [NOTHING_EXCLUDED] * len(queries)
    with pytest.raises(ProbekitError, match="needs a vocabulary with CUIs"):
        rank_in_vocabulary(EntityIndex(vec), queries, bare, qvec, k=5, excluded=ex, match="concept")
    no_ids = [Query(q.id, q.subject, q.relation, q.template, golds=q.golds) for q in queries]
    with pytest.raises(ProbekitError, match="needs gold CUIs"):
        rank_in_vocabulary(EntityIndex(vec), no_ids, cands, qvec, k=5, excluded=ex, match="concept")
    with pytest.raises(ProbekitError, match="unknown match rule 'cui'; available: string, concept"):
        check_match("cui")
