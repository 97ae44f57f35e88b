"""mask_predict (X-FACTR) against a plain one-prompt-at-a-time loop of the same rules, on a toy BERT.

MedLAMA §3: "given a query, the probing task is formulated as: 1) filling masks in parallel
independently (Independent); 2) filling masks from left to right autoregressively (Order); 3) filling
tokens sorted by the maximum confidence greedily (Confidence). After all mask tokens are replaced with
the initial predictions, the predictions can be further refined by iteratively modifying one token at
a time until convergence or until the maximum number of iterations is reached."
"""

from __future__ import annotations

import pytest
import torch
from _naive_mask_predict import naive_decode, naive_ranking
from _tiny_seq2seq import save_toy_bert

from probekit import metrics, models
from probekit.errors import ProbekitError
from probekit.probes import NOTHING_EXCLUDED, get_probe, probes_for
from probekit.probes.generated import answer_keys, ranking_from_predictions
from probekit.probes.mask_predict import DECODINGS, best_n_masks, decode, trace_rows
from probekit.types import CandidateSet, Query, normalize_name

QUERIES = [
    Query("q1", "metformin", "may_treat", "[X] might treat [Y].", golds=("type 2 diabetes", "pain")),
    Query("q2", "aspirin", "may_prevent", "[X] may prevent [Y] .", golds=("stroke", "heart attack")),
    Query("q3", "", "free", "vitamin d lack causes [Y].", golds=("rickets",)),
    Query("q4", "warfarin", "may_prevent", "the drug [X] is used for the [Y] of high blood pressure.",
          golds=("therapy",)),
]
CANDS = CandidateSet.from_names(["pain", "stroke", "type 2 diabetes", "rickets", "cause cause", "fever"])



@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The toy BERT in float64, so batched and one-by-one forward passes agree far below any score gap (its own
    copy: the float64 weights must not reach other tests through the model cache)."""
    m = models.load(str(save_toy_bert(tmp_path_factory.mktemp("toy_bert64"))), device="cpu")
    m.mlm.to(torch.float64)
    return m


# ---------------------------------------------------------------- decoding orders vs the naive loop
@pytest.mark.parametrize("decoding", DECODINGS)
def test_decoding_equals_naive_loop(toy, decoding):
    """Every initial order and refinement, batched over 4 queries x 3 mask counts, against the plain loop."""
    opts = dict(decoding=decoding, beam=3, n_masks=3, max_iter=6)
    rankings = get_probe("mask_predict").rank(toy, QUERIES, CANDS, k=100, batch_size=7, **opts)
    for q, r in zip(QUERIES, rankings):
        names, scores = naive_ranking(toy, q, **opts)
        assert list(r.names) == names
        assert r.scores == pytest.approx(scores, abs=1e-9)
        assert r.generated and r.n_candidates == len(names)
        keys = [normalize_name(n) for n in names]
        assert list(r.gold_ranks) == [keys.index(g) + 1 if g in keys else None for g in q.golds]


def test_orders_really_differ(toy):
    """On the toy model the initial orders and refinement give different answers (the tests above mean something)."""
    probe = get_probe("mask_predict")
    tops = {d: [r.names for r in probe.rank(toy, QUERIES, CANDS, k=10, decoding=d, beam=3, n_masks=3)]
            for d in ("independent", "order", "confidence", "order+order")}
    assert len({tuple(map(tuple, v)) for v in tops.values()}) == 4


def test_batching_equals_one_at_a_time(toy, monkeypatch):
    """All queries in one batch (any batch size, any query block) == each query decoded alone."""
    from probekit.probes import mask_predict

    probe = get_probe("mask_predict")
    together = probe.rank(toy, QUERIES, CANDS, k=20, batch_size=5)
    monkeypatch.setattr(mask_predict, "QUERY_BLOCK", 3)
    blocked = probe.rank(toy, QUERIES, CANDS, k=20, batch_size=64)
    assert [r.names for r in blocked] == [r.names for r in together]
    for q, r in zip(QUERIES, together):
        alone = probe.rank(toy, [q], CANDS, k=20, batch_size=1)[0]
        assert r.names == alone.names and r.gold_ranks == alone.gold_ranks and r.ids == alone.ids
        assert r.scores == pytest.approx(alone.scores, abs=1e-9)


def test_forward_passes_are_batched(toy):
    """One forward per decoding step of the slowest row (plus chunks), never one per hypothesis."""
    calls = []
    handle = toy.encoder.register_forward_hook(lambda *a: calls.append(1))
    try:
        decode(toy, QUERIES, decoding="order", beam=3, n_masks=3, batch_size=1000)
    finally:
        handle.remove()
    assert len(calls) == 3  # order fills one slot per step: 3 steps for n = 3, every query and n at once


# ---------------------------------------------------------------- refinement and beam
def test_refinement_converges_and_is_capped(toy):
    """Refinement "until convergence or until the maximum number of iterations is reached": +order stops
    after a whole left-to-right pass that leaves the beam's hypotheses unchanged, +confidence after one
    unchanged step, both after max_iter refinement steps at the latest."""
    probe = get_probe("mask_predict")
    cap = 40
    d = decode(toy, QUERIES, decoding="order+order", beam=1, n_masks=4, max_iter=cap, trace=True)
    converged_after_change = capped = 0
    for item in d:
        for n, steps in item.traces.items():
            refine = [s for s in steps if s.phase == "refine"]
            assert len([s for s in steps if s.phase == "initial"]) == n
            if len(refine) == cap:
                capped += 1
                continue
            assert len(refine) % n == 0 and len(refine) >= n  # it stops at the end of a pass
            assert all(s.best == refine[-1].best for s in refine[-n:])  # beam 1: the last pass changed nothing
            converged_after_change += steps[n - 1].best != refine[-1].best
    assert converged_after_change  # refinement changed an answer, then converged
    assert capped < sum(len(it.traces) for it in d)
    # once converged, more iterations change nothing
    q = QUERIES[2:3]
    a = probe.rank(toy, q, CANDS, k=50, decoding="order+order", beam=1, n_masks=3, max_iter=cap)
    b = probe.rank(toy, q, CANDS, k=50, decoding="order+order", beam=1, n_masks=3, max_iter=10 * cap)
    assert a[0].names == b[0].names
    for item in decode(toy, QUERIES, decoding="confidence+confidence", beam=3, n_masks=4, max_iter=cap, trace=True):
        assert all(1 <= sum(s.phase == "refine" for s in st) < cap for st in item.traces.values())
    capped = decode(toy, QUERIES, decoding="order+order", beam=3, n_masks=4, max_iter=1, trace=True)
    assert all(sum(s.phase == "refine" for s in steps) == 1 for it in capped for steps in it.traces.values())
    none = decode(toy, QUERIES, decoding="order+order", beam=3, n_masks=4, max_iter=0)
    plain = decode(toy, QUERIES, decoding="order", beam=3, n_masks=4)
    assert [p.predictions for p in none] == [p.predictions for p in plain]


def test_beam_ordering(toy):
    """Each n's final beam is distinct and best first; beam 1 is greedy; a ranking is sorted by score."""
    for decoding in ("independent", "confidence+order"):
        for beam in (1, 4):
            for item in decode(toy, QUERIES, decoding=decoding, beam=beam, n_masks=3):
                for n in (1, 2, 3):
                    hyps = [p for p in item.predictions if p.n_masks == n]
                    assert 1 <= len(hyps) <= beam
                    assert [p.score for p in hyps] == sorted((p.score for p in hyps), reverse=True)
                    assert len({p.tokens for p in hyps}) == len(hyps)
    r = get_probe("mask_predict").rank(toy, QUERIES, CANDS, k=100, beam=4, n_masks=3)
    for x in r:
        assert list(x.scores) == sorted(x.scores, reverse=True) and x.n_candidates <= 12
        assert all(s <= 0 for s in x.scores)  # mean log-probs
    greedy = decode(toy, QUERIES[:1], decoding="order", beam=1, n_masks=3)[0]
    assert [p.text for p in greedy.predictions] == \
           [naive_ranking_text for naive_ranking_text in
            (toy.tokenizer.decode(list(h[0])).strip()
             for n in (1, 2, 3) for h in naive_decode(toy, QUERIES[0], n, "order", 1, 0))]


def test_independent_is_exact_k_best(toy):
    """Independent + beam: the beam best joint fillings by summed log-prob (checked against all beam^n products)."""
    for q in QUERIES:
        got = [p for p in decode(toy, [q], decoding="independent", beam=5, n_masks=4)[0].predictions if p.n_masks == 4]
        want = naive_decode(toy, q, 4, "independent", 5, 0)
        assert [p.score for p in got] == pytest.approx([sum(h[1]) / 4 for h in want], abs=1e-12)


def test_trace_shows_each_slot_per_step(toy):
    r, e = get_probe("mask_predict").explain(toy, QUERIES[0], CANDS, k=5, decoding="confidence+order",
                                             beam=2, n_masks=3)
    d = decode(toy, [QUERIES[0]], trace=True, decoding="confidence+order", beam=2, n_masks=3)[0]
    assert r.names and r.generated and set(d.traces) == {1, 2, 3}
    # the explanation the pages show is this decoding's trace, one table per number of masks
    assert e.views == {str(n): trace_rows(d, n) for n in (1, 2, 3)} and e.default == str(best_n_masks(d))
    steps = d.traces[3]
    assert [s.phase for s in steps[:3]] == ["initial"] * 3 and steps[3].phase == "refine"
    # confidence sees every still-masked slot and fills the most confident one; order refinement one slot a step
    assert [len(s.predicted) for s in steps[:3]] == [3, 2, 1] and all(len(s.predicted) == 1 for s in steps[3:])
    assert [s.best.count(toy.tokenizer.mask_token) for s in steps[:3]] == [2, 1, 0]
    assert [sorted(s.predicted) for s in steps[3:6]] == [[0], [1], [2]]
    for s in steps:
        for probs in s.predicted.values():
            ps = [p for _, p in probs]
            assert len(probs) == 5 and ps == sorted(ps, reverse=True) and 0 < sum(ps) <= 1
    assert steps[0].best.count(toy.tokenizer.mask_token) == 2 and toy.tokenizer.mask_token not in steps[2].best
    indep = decode(toy, [QUERIES[0]], trace=True, decoding="independent", n_masks=3)[0]
    assert len(indep.traces[3]) == 1 and set(indep.traces[3][0].predicted) == {0, 1, 2}
    with pytest.raises(ProbekitError, match="unknown option 'colour'"):
        get_probe("mask_predict").explain(toy, QUERIES[0], CANDS, colour="red")


# ---------------------------------------------------------------- answers, hits and metrics
def test_answer_keys_join_word_pieces(toy, tiny_mlm):
    """Normalisation: lower case, collapse whitespace, join word pieces (in the model's own tokenisation)."""
    assert answer_keys(toy.tokenizer, ["  Heart   ATTACK ", "statins", "type 2 diabetes"]) == \
           ["heart attack", "statins", "type 2 diabetes"]
    tok = tiny_mlm.tokenizer
    pieces = tok.convert_tokens_to_ids(["met", "##form", "##in"])
    assert tok.decode(pieces) == "metformin"
    assert answer_keys(tok, ["Heart-Attack", tok.decode(tok.convert_tokens_to_ids(["heart", "-", "attack"]))]) == \
           ["heart - attack"] * 2


def test_ranking_from_predictions_hit_rule(toy):
    q = Query("h", "aspirin", "may_prevent", "[X] prevents [Y].", golds=("Heart Attack", "stroke", "rickets"))
    preds = [("pain", -1.0), ("heart  attack", -0.5), ("HEART ATTACK", -0.2), ("", 0.0), ("stroke", -3.0)]
    r = ranking_from_predictions(q, preds, CANDS, 2, toy.tokenizer, excluded=NOTHING_EXCLUDED)
    assert r.names == ("HEART ATTACK", "pain")  # sorted, merged by key (the best spelling kept), empty dropped
    assert r.scores == (-0.2, -1.0) and r.ids == (-1, CANDS.index_of("pain"))
    assert r.gold_ranks == (1, 3, None) and r.n_candidates == 3  # stroke beyond k still ranked; rickets not generated
    assert r.hit(1) and r.best_gold_rank == 1
    assert metrics.acc_at_k([r], k=1) == 1.0


def test_metrics_on_generated_rankings(toy):
    rankings = get_probe("mask_predict").rank(toy, QUERIES, CANDS, k=10, beam=3, n_masks=3)
    for k in (1, 10):
        want = sum(any(rk is not None and rk <= k for rk in r.gold_ranks) for r in rankings) / len(rankings)
        assert metrics.acc_at_k(rankings, k=k, average="micro") == pytest.approx(want)


# ---------------------------------------------------------------- errors and registry
def test_needs_mlm(tiny_encoder):
    with pytest.raises(ProbekitError, match="needs a model with an MLM head"):
        get_probe("mask_predict").rank(tiny_encoder, QUERIES, CANDS, k=3)
    with pytest.raises(ProbekitError, match="MLM head"):
        decode(tiny_encoder, QUERIES)
    assert "mask_predict" not in probes_for(tiny_encoder)


def test_listed_for_mlm_models(toy):
    assert "mask_predict" in probes_for(toy)


@pytest.mark.parametrize("options, match", [
    ({"decoding": "sideways"}, "decoding='sideways'.*must be one of"),
    ({"beam": 0}, "beam.*must be an integer"),
    ({"beam": 2.5}, "beam.*must be an integer"),
    ({"n_masks": 11}, "n_masks must be an integer from 1 to 10"),
    ({"max_iter": -1}, "max_iter.*must be an integer"),
    ({"batch_size": 0}, "batch_size.*must be an integer"),
    ({"max_length": 8}, "too long to hold"),
])
def test_bad_options(toy, options, match):
    with pytest.raises(ProbekitError, match=match):
        get_probe("mask_predict").rank(toy, QUERIES, CANDS, k=3, **options)


def test_progress_is_reported(toy):
    seen = []
    get_probe("mask_predict").rank(toy, QUERIES[:1], CANDS, k=3, n_masks=2, progress=lambda d, t, s: seen.append(
        (d, t, s)))
    assert seen and all(s == "decoding" and 0 < d <= t for d, t, s in seen)


def test_trace_rows_table(toy):
    """The Probe page's decoding table: one row per step, one column per slot, top tokens where predicted."""
    from probekit.probes.mask_predict import best_n_masks, trace_rows

    d = decode(toy, [QUERIES[1]], trace=True, decoding="order+order", beam=2, n_masks=3)[0]
    assert best_n_masks(d) == max(d.predictions, key=lambda p: p.score).n_masks
    rows = trace_rows(d, 3, top=2)
    assert len(rows) == len(d.traces[3]) and list(rows[0])[:5] == ["step", "phase", "slot 1", "slot 2", "slot 3"]
    mask = toy.tokenizer.mask_token
    # every masked slot of the step's input shows its top tokens; order fills slot 1, then 2, then 3
    assert all(rows[0][f"slot {j}"].count("·") == 1 for j in (1, 2, 3))
    assert [r["answer so far"].count(mask) for r in rows[:3]] == [2, 1, 0]
    assert rows[1]["slot 1"] == rows[1]["answer so far"].split()[0]  # a kept token, no probabilities
    assert rows[3]["phase"] == "refine" and rows[3]["slot 1"].count("·") == 1 and "·" not in rows[3]["slot 2"]
    with pytest.raises(ProbekitError, match="no trace for 4 masks"):
        trace_rows(d, 4)


def test_full_forward_fallback_gives_the_same_answers(toy, monkeypatch):
    """Heads other than BERT's cls / RoBERTa's lm_head take the plain full forward: same answers."""
    from probekit.probes import mlm_topk

    fast = get_probe("mask_predict").rank(toy, QUERIES, CANDS, k=20, beam=2, n_masks=3)
    monkeypatch.setattr(mlm_topk, "HEAD_ATTRS", ())
    plain = get_probe("mask_predict").rank(toy, QUERIES, CANDS, k=20, beam=2, n_masks=3)
    for a, b in zip(fast, plain):
        assert a.names == b.names and a.scores == pytest.approx(b.scores, abs=1e-9)


def test_is_gold_uses_the_tokenizer_match(tiny_mlm):
    """The gold marker of a generated ranking agrees with gold_ranks (matched in the model's tokenisation)."""
    q = Query("m", "aspirin", "may_prevent", "[X] prevents [Y].", golds=("Heart-Attack",))
    r = ranking_from_predictions(q, [("heart - attack", -0.1), ("stroke", -0.3)], CANDS, 2, tiny_mlm.tokenizer,
                                 excluded=NOTHING_EXCLUDED)
    assert r.gold_ranks == (1,) and r.is_gold("heart - attack") and not r.is_gold("stroke")
    assert [t["gold"] for t in r.to_dict()["top"]] == [True, False]
