"""probes: retrieval against brute force, mask_average against a naive per-candidate loop, probe-specific input
checks and exclude_subject's exact rule on score rows. The rules every probe shares are in test_probe_contract.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from probekit.encode import encode
from probekit.errors import ProbekitError
from probekit.index import TIE_TOLERANCE
from probekit.probes import NOTHING_EXCLUDED, get_probe, ranking_from_scores
from probekit.ranking import exclusion, top_k_and_gold_ranks
from probekit.types import CandidateSet, Query

NAMES = ["pain", "fever", "type 2 diabetes", "myocardial infarction", "stroke", "heart attack",
         "polycystic ovary syndrome", "rickets", "vitamin d deficiency", "insulin", "hypertension", "asthma"]
QUERIES = [
    Query("q1", "metformin", "may_treat", "[X] might treat [Y].", golds=("type 2 diabetes", "not a candidate")),
    Query("q2", "aspirin", "may_prevent", "[X] may prevent [Y] .", golds=("stroke", "heart attack")),
    Query("q3", "", "free", "Vitamin D lack causes [Y].", golds=("rickets",)),
]



@pytest.fixture
def cands():
    return CandidateSet.from_names(NAMES)


# ---------------------------------------------------------------- retrieval
def _brute_scores(model, query, layer, pooling, similarity):
    """Every candidate's score for one query, from separate encode calls and plain numpy."""
    q = encode(model, [query.text(model.mask_token)], layer=layer, pooling=pooling, max_length=50)[0]
    v = encode(model, NAMES, layer=layer, pooling=pooling, max_length=25)
    if similarity == "cosine":
        q, v = q / np.linalg.norm(q), v / np.linalg.norm(v, axis=1, keepdims=True)
    if similarity == "l2":
        return -((v - q) ** 2).sum(1)
    return v @ q


@pytest.mark.parametrize("similarity", ["cosine", "dot", "l2"])
@pytest.mark.parametrize("pooling, layer", [("mean", None), ("cls", 1), ("mean", 0)])
def test_retrieval_equals_brute_force(tiny_encoder, cands, similarity, pooling, layer):
    k = 3
    rankings = get_probe("retrieval").rank(tiny_encoder, QUERIES, cands, k=k, pooling=pooling,
                                           similarity=similarity, layer=layer)
    for q, r in zip(QUERIES, rankings):
        scores = _brute_scores(tiny_encoder, q, 2 if layer is None else layer, pooling, similarity)
        order = np.argsort(-scores, kind="stable")
        # Batched and one-by-one encoding differ by float noise (~1e-6), and a random tiny model's [CLS]
        # vectors are nearly parallel, so near-ties may swap: compare up to that tolerance.
        tol = 1e-4
        assert [NAMES[i] for i in r.ids] == list(r.names) and len(set(r.ids)) == k
        assert scores[list(r.ids)].min() >= scores[order[k - 1]] - tol  # each listed id is a true top-k score
        np.testing.assert_allclose(r.scores, scores[order[:k]], rtol=tol, atol=tol)
        for gold, rank in zip(q.golds, r.gold_ranks):
            if gold not in NAMES:
                assert rank is None
            else:  # rank among ALL candidates, also beyond k
                s = scores[NAMES.index(gold)]
                assert 1 + np.count_nonzero(scores > s + tol) <= rank <= 1 + np.count_nonzero(scores > s - tol)
        assert r.n_candidates == len(NAMES) and r.query is q
    # golds beyond k do occur in this set-up (otherwise the test would not check them)
    assert any(rank is not None and rank > k for r in rankings for rank in r.gold_ranks)


def test_retrieval_k_beyond_candidates_and_progress(tiny_encoder, cands):
    stages = set()
    r = get_probe("retrieval").rank(tiny_encoder, QUERIES[:1], cands, k=50,
                                    progress=lambda d, t, s: stages.add(s))[0]
    assert r.k == len(NAMES) and sorted(r.ids) == list(range(len(NAMES)))
    assert {"encoding candidates", "encoding queries", "ranking"} <= stages


def test_retrieval_uses_model_default_pooling(tiny_encoder, cands):
    a = get_probe("retrieval").rank(tiny_encoder, QUERIES, cands, k=3)
    b = get_probe("retrieval").rank(tiny_encoder, QUERIES, cands, k=3, pooling=tiny_encoder.spec.pooling)
    assert [x.ids for x in a] == [x.ids for x in b]


def test_top_k_ties_and_ranks():
    scores = np.array([0.5, 0.9, 0.9, 0.1, 0.9, 0.3])
    top, ranks = top_k_and_gold_ranks(scores, 2, [4, 2, 0, None, 3])
    assert top.tolist() == [2, 4]  # tied with 1 at the top: golds first, then lower ids
    assert ranks == [1, 1, 4, None, 6]  # 1 + number strictly higher
    top, ranks = top_k_and_gold_ranks(scores, 2, [])
    assert top.tolist() == [1, 2] and ranks == []
    top, ranks = top_k_and_gold_ranks(np.array([-np.inf, 1.0, -np.inf]), 2, [0, 2])
    assert top.tolist() == [1, 0] and ranks == [2, 2]


def test_case_variant_tie_counts_as_hit(cands):
    """'Pain' and 'pain' get one vector from an uncased model: the gold spelling must not lose the tie."""
    c = CandidateSet.from_names(["Pain", "fever", "pain"])
    q = Query("t", "aspirin", "may_treat", "[X] treats [Y].", golds=("pain",))
    r = ranking_from_scores(q, c, np.array([0.8, 0.1, 0.8], dtype=np.float32), 1, excluded=NOTHING_EXCLUDED)
    assert r.names == ("pain",) and r.gold_ranks == (1,) and r.hit(1)


def test_ranking_from_scores_matches_brute_force(cands):
    rng = np.random.default_rng(3)
    for _ in range(20):
        scores = rng.normal(size=len(NAMES)).astype(np.float32)
        r = ranking_from_scores(QUERIES[1], cands, scores, 4, excluded=NOTHING_EXCLUDED)
        order = np.argsort(-scores, kind="stable")
        assert list(r.ids) == list(order[:4])
        assert list(r.gold_ranks) == [int(np.flatnonzero(order == NAMES.index(g))[0]) + 1 for g in QUERIES[1].golds]


# ---------------------------------------------------------------- mask_average
def _naive_mask_average(model, query, names):
    """One forward pass per candidate: the slow reference."""
    tok, out = model.tokenizer, {}
    with torch.no_grad():
        for name in names:
            ids = tok(name, add_special_tokens=False)["input_ids"]
            feats = tok(query.text(tok.mask_token, n_masks=len(ids)), return_tensors="pt")
            logits = model.mlm(**feats).logits[0]  # (seq, vocab)
            pos = (feats["input_ids"][0] == tok.mask_token_id).nonzero().flatten()  # (n,)
            logp = logits[pos].log_softmax(-1)  # (n, vocab)
            out[name] = float(logp[torch.arange(len(ids)), torch.tensor(ids)].mean())
    return out


@pytest.fixture
def count_forwards(tiny_mlm):
    calls = []
    handle = tiny_mlm.mlm.register_forward_hook(lambda mod, args, kwargs, out: calls.append(1), with_kwargs=True)
    yield calls
    handle.remove()


def _distinct_lengths(model, names):
    return len({len(model.tokenizer(n, add_special_tokens=False)["input_ids"]) for n in names} - {0})


def test_mask_average_equals_naive_loop(tiny_mlm, cands, count_forwards):
    lengths = _distinct_lengths(tiny_mlm, NAMES)
    assert lengths >= 3  # the test needs several lengths to mean anything
    rankings = get_probe("mask_average").rank(tiny_mlm, QUERIES, cands, k=len(NAMES))
    assert len(count_forwards) == lengths  # 3 queries fit one batch: one pass per distinct length
    for q, r in zip(QUERIES, rankings):
        naive = _naive_mask_average(tiny_mlm, q, NAMES)
        got = dict(zip(r.names, r.scores))
        assert set(got) == set(NAMES)
        for name in NAMES:
            assert got[name] == pytest.approx(naive[name], abs=1e-5), name
        order = sorted(NAMES, key=lambda n: -naive[n])
        assert [r.gold_ranks[i] for i, g in enumerate(q.golds) if g in NAMES] == \
               [order.index(g) + 1 for g in q.golds if g in NAMES]


def test_mask_average_forwards_per_query(tiny_mlm, cands, count_forwards):
    lengths = _distinct_lengths(tiny_mlm, NAMES)
    get_probe("mask_average").rank(tiny_mlm, QUERIES, cands, k=3, batch_size=1)
    assert len(count_forwards) == lengths * len(QUERIES)  # per query: distinct lengths, never per candidate


LONG = ["chromosome 9p deletion syndrome with acute lymphoblastic leukemia and hypogonadotropic "
        "hypogonadism and 17-alpha-hydroxylase deficiency",  # 20+ word pieces
        "t(8;21)(q22;q22) acute myeloid leukemia with recurrent genetic abnormalities and "
        "cytogenetic heterogeneity"]


def test_mask_average_scores_every_candidate_however_long(tiny_mlm, count_forwards):
    """Kassner et al. (mask average), as probekit states the rule: "for each distinct candidate token length n,
    one forward pass of the prompt with n masks; a candidate's score = mean log-softmax of its tokens at
    those positions" - for every candidate (names over 20 word pieces were never scored)."""
    names = NAMES + LONG
    lengths = [len(tiny_mlm.tokenizer(n, add_special_tokens=False)["input_ids"]) for n in LONG]
    assert min(lengths) > 20 and len(set(lengths)) == 2
    query = Query("q", "x", "r", "[X] is linked to [Y] .", golds=(LONG[0],))
    r = get_probe("mask_average").rank(tiny_mlm, [query], CandidateSet.from_names(names), k=len(names))[0]
    assert len(count_forwards) == _distinct_lengths(tiny_mlm, names)  # one pass per distinct length
    naive = _naive_mask_average(tiny_mlm, query, names)
    got = dict(zip(r.names, r.scores))
    assert set(got) == set(names) and all(np.isfinite(s) for s in r.scores)
    for name in names:
        assert got[name] == pytest.approx(naive[name], abs=1e-5), name
    assert r.gold_ranks == (sorted(names, key=lambda n: -naive[n]).index(LONG[0]) + 1,)


def test_mask_average_refuses_a_prompt_over_the_limit(tiny_mlm):
    with pytest.raises(ProbekitError, match=r"with \d+ mask tokens .* more than 16"):
        get_probe("mask_average").rank(tiny_mlm, QUERIES[:1], CandidateSet.from_names(LONG), k=1, max_length=16)
    assert "max_tokens" not in {o.name for o in get_probe("mask_average").options}


def test_mask_average_needs_mlm(tiny_encoder, cands):
    with pytest.raises(ProbekitError, match="needs a model with an MLM head") as info:
        get_probe("mask_average").rank(tiny_encoder, QUERIES, cands, k=3)
    assert "retrieval" in str(info.value)  # says what to use instead


# ---------------------------------------------------------------- probe-specific input checks
def test_bad_options_and_sets(tiny_mlm, cands):
    retrieval = get_probe("retrieval")
    with pytest.raises(ProbekitError, match="similarity='jaccard'.*must be one of"):
        retrieval.rank(tiny_mlm, QUERIES, cands, similarity="jaccard")
    with pytest.raises(ProbekitError, match="pooling"):
        retrieval.rank(tiny_mlm, QUERIES, cands, pooling="max")
    with pytest.raises(ProbekitError, match="layer.*must be an integer"):
        retrieval.rank(tiny_mlm, QUERIES, cands, layer="top")
    with pytest.raises(ProbekitError, match="layer 7 out of range"):
        retrieval.rank(tiny_mlm, QUERIES, cands, layer=7)
    with pytest.raises(ProbekitError, match="no query given"):
        retrieval.rank(tiny_mlm, [], cands)
    with pytest.raises(ProbekitError, match="candidate set is empty"):
        retrieval.rank(tiny_mlm, QUERIES, CandidateSet.from_names([]))


def test_retrieval_fast_mode_close_to_exact(tiny_encoder, cands):
    exact = get_probe("retrieval").rank(tiny_encoder, QUERIES, cands, k=len(NAMES))
    fast = get_probe("retrieval").rank(tiny_encoder, QUERIES, cands, k=len(NAMES), fast=True)
    for a, b in zip(exact, fast):
        sa, sb = dict(zip(a.names, a.scores)), dict(zip(b.names, b.scores))
        assert max(abs(sa[n] - sb[n]) for n in NAMES) < 0.05
    with pytest.raises(ProbekitError, match="fast='yes'"):
        get_probe("retrieval").rank(tiny_encoder, QUERIES, cands, fast="yes")


# ---------------------------------------------------------------- exclude_subject's exact rule on score rows
SELF = [Query("s1", "Stroke", "may_cause", "[X] may cause [Y].", golds=("stroke", "heart attack")),
        Query("s2", "insulin", "may_treat", "[X] might treat [Y].", golds=("type 2 diabetes",))]
SELF_NAMES = NAMES + ["Stroke", "STROKE"]


def test_exclude_subject_ranks_as_if_the_subject_were_not_a_candidate():
    """ranking_from_scores with a query's exclusion equals ranking the candidate set without the subject's
    spellings (checked on random score rows with exact ties; a gold that is the subject has no rank)."""
    rng = np.random.default_rng(5)
    full = CandidateSet.from_names(SELF_NAMES)
    for q in SELF:
        ex = exclusion(q, full)
        assert {SELF_NAMES[i] for i in ex.ids} == {n for n in SELF_NAMES if n.lower() == q.subject.lower()}
        rest = [i for i in range(len(SELF_NAMES)) if i not in ex.ids]
        without = CandidateSet.from_names([SELF_NAMES[i] for i in rest])
        for _ in range(20):
            scores = rng.integers(0, 5, size=len(SELF_NAMES)).astype(np.float32)  # many exact ties
            on = ranking_from_scores(q, full, scores, len(SELF_NAMES), excluded=ex)
            ref = ranking_from_scores(q, without, scores[rest], len(SELF_NAMES), excluded=NOTHING_EXCLUDED)
            assert on.names == ref.names and on.n_candidates == len(rest)
            for g, a, b in zip(q.golds, on.gold_ranks, ref.gold_ranks):
                assert a == (None if g.lower() == q.subject.lower() else b)


@pytest.mark.parametrize("name", ["retrieval", "mask_average"])
def test_exclude_subject_on_real_scores(tiny_mlm, name):
    """The same rule through a probe: the subject's spellings leave the top-k, the other candidates keep their
    order, and a gold's rank counts the candidates that beat it by the probes' tie rule (1 + the number scoring
    higher; retrieval treats scores within TIE_TOLERANCE of the scale as ties, settled for the gold)."""
    probe = get_probe(name)
    full = CandidateSet.from_names(SELF_NAMES)
    k = len(SELF_NAMES)
    on = probe.rank(tiny_mlm, SELF, full, k=k, exclude_subject=True)
    off = probe.rank(tiny_mlm, SELF, full, k=k)
    assert {"Stroke", "STROKE", "stroke"} <= set(off[0].names)  # by default the subject competes
    for q, r_on, r_off in zip(SELF, on, off):
        subject = {n for n in SELF_NAMES if n.lower() == q.subject.lower()}
        assert not subject & set(r_on.names) and r_on.n_candidates == len(SELF_NAMES) - len(subject)
        assert list(r_on.names) == [n for n in r_off.names if n not in subject]
        score = dict(zip(r_off.names, r_off.scores))
        # retrieval's tolerance is relative to the scores' scale (at most |q||x| <= 1 for cosine): a bound of it
        tol = 4 * TIE_TOLERANCE * max(1.0, max(abs(v) for v in score.values())) if name == "retrieval" else 0.0
        for g, rank in zip(q.golds, r_on.gold_ranks):
            if g.lower() == q.subject.lower():
                assert rank is None  # the gold is the subject itself: not a candidate any more
            else:
                others = [score[n] for n in SELF_NAMES if n not in subject]
                assert 1 + sum(s > score[g] + tol for s in others) <= rank <= 1 + sum(s > score[g] - tol
                                                                                      for s in others)


@pytest.mark.parametrize("name", ["retrieval", "mask_average"])
def test_a_typed_query_leaves_out_the_names_its_text_spells(tiny_mlm, name):
    """A typed query has no separate subject: with exclude subject on, every candidate its text names is left out
    ("Stroke might cause [MASK]." must not answer "Stroke"), other candidates keep their order; a dataset query
    whose subject is given leaves out only that subject, and off leaves everything in."""
    from probekit.types import parse_free_query

    probe = get_probe(name)
    full = CandidateSet.from_names(SELF_NAMES)
    q = parse_free_query("Stroke, or insulin, might cause [MASK].")
    on = probe.rank(tiny_mlm, [q], full, k=len(SELF_NAMES), exclude_subject=True)[0]
    off = probe.rank(tiny_mlm, [q], full, k=len(SELF_NAMES), exclude_subject=False)[0]
    named = {n for n in SELF_NAMES if n.lower() in ("stroke", "insulin")}
    assert named and named <= set(off.names) and not named & set(on.names)
    assert list(on.names) == [n for n in off.names if n not in named]


def test_exclude_subject_is_a_stored_run_setting(tiny_encoder, tiny_dataset):
    from probekit.bench import runs

    base = runs.settings_of(tiny_encoder, tiny_dataset)
    assert runs.settings_key(base) == runs.settings_key(
        runs.settings_of(tiny_encoder, tiny_dataset, options={"exclude_subject": False}))  # old runs still found
    on = runs.settings_of(tiny_encoder, tiny_dataset, options={"exclude_subject": True})
    assert runs.settings_key(on) != runs.settings_key(base)
    run = runs.run_benchmark(tiny_encoder, tiny_dataset, options={"exclude_subject": True}, k=5)
    assert run.meta["options"]["exclude_subject"] is True
    subjects = {q.id: q.subject.lower() for q in tiny_dataset.queries}
    for row in run.frame.itertuples():
        assert subjects[row.query_id] not in [n.lower() for n in row.top_names]
