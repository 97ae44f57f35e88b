"""mask_predict's ``xfactr-reference`` reading against X-FACTR's decoding loop as MedLAMA ran it.

The original (cambridgeltl/medlama @ 8a314d1, probers/mask_predict/X-FACTR/probe.py, lines 902-1183) is
re-implemented on tensors in ``_xfactr_original.py`` from reading it; the rules probekit's own reading
cleans up and this reading keeps are quoted in the tests below.
"""

from __future__ import annotations

import pytest
import torch
from _tiny_seq2seq import save_toy_bert
from _xfactr_original import TieBreaking, original_rows

from probekit import metrics, models
from probekit.errors import ProbekitError
from probekit.probes import get_probe
from probekit.probes import mask_predict as mp
from probekit.probes import xfactr_reference as ref
from probekit.probes.xfactr import Hyp
from probekit.types import CandidateSet, Query

QUERIES = [
    Query("q1", "metformin", "may_treat", "[X] might treat [Y].", golds=("type 2 diabetes", "pain")),
    Query("q2", "aspirin", "may_prevent", "[X] may prevent [Y] .", golds=("stroke", "heart attack")),
    Query("q3", "", "free", "vitamin d lack causes [Y].", golds=("rickets",)),
    Query("q4", "warfarin", "may_prevent", "the drug [X] is used for the [Y] of high blood pressure.",
          golds=("therapy",)),
]
CANDS = CandidateSet.from_names(["pain", "stroke", "type 2 diabetes", "rickets", "fever"])
MAX_ITER = 10  # MedLAMA's port: "--max_iter ... default=10"
NOISE = 1e-5  # the original's tie-break noise per iteration and slot ("uniform_(0, 1e-5)")


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The toy BERT (peaked, context-dependent outputs) in float64: padded and unpadded passes agree far below
    any score gap, so only the rules can make the two implementations differ."""
    m = models.load(str(save_toy_bert(tmp_path_factory.mktemp("toy_bert_xf"))), device="cpu")
    m.mlm.to(torch.float64)
    return m


def reference_rows(model, query, *, decoding, beam, n_masks, max_iter):
    rows = mp._prompts(model, [query], n_masks, mp.PROMPT_MAX_LENGTH, reference=True)
    init, refine = mp.parse_decoding(decoding)
    ref.run(model, rows, init=init, refine=refine, beam=beam, max_iter=max_iter, topn=beam, batch_size=7,
            on_step=lambda step: None)
    return {r.n: r for r in rows}


@pytest.mark.parametrize("decoding", mp.DECODINGS)
def test_equals_the_original_loop(toy, decoding):
    """All 9 decodings, every query, 1..5 masks.

    Each (query, n): the first beam entry equals the original's (tokens exactly; log-probs within the
    original's tie-break noise, at most 1e-5 per iteration). The probe's one answer for num_mask = 1..5:
    "avg_log = (logprob * mask_ind).sum(-1) / mask_len; lp, best_num_mask = avg_log.max(0)". Where two mask
    counts tie (within that noise), the original's random tie-break picks one; this reading the first.
    """
    noise = TieBreaking()
    answers = {num: mp.decode(toy, QUERIES, decoding=decoding, beam=5, n_masks=num, max_iter=MAX_ITER,
                              reading="xfactr-reference") for num in range(1, 6)}
    bound = NOISE * MAX_ITER
    for qi, q in enumerate(QUERIES):
        rows = reference_rows(toy, q, decoding=decoding, beam=5, n_masks=5, max_iter=MAX_ITER)
        original = {n: original_rows(toy, q, decoding=decoding, beam=5, n=n, max_iter=MAX_ITER, tie_breaking=noise)
                    for n in range(1, 6)}
        for n, (tokens, logps) in original.items():
            best = rows[n].beam[0]
            assert list(best.tokens) == tokens, (q.id, n)
            assert list(best.logps) == pytest.approx(logps, abs=bound), (q.id, n)
        for num, decoded in answers.items():
            avg = {n: sum(original[n][1]) / n for n in range(1, num + 1)}
            (pred,) = decoded[qi].predictions
            top = max(avg.values())
            tied = [n for n, v in avg.items() if v >= top - 2 * bound]
            assert pred.n_masks == tied[0] and pred.score == pytest.approx(top, abs=2 * bound), (q.id, num)
            assert pred.tokens == tuple(toy.tokenizer.convert_ids_to_tokens(original[pred.n_masks][0]))
            if len(tied) == 1:  # no tie: the original's own pick
                assert original_answer_pick(avg) == pred.n_masks


def original_answer_pick(avg: dict) -> int:
    """The original's pick: "avg_log.max(0)" on its (noisy) averages."""
    return int(torch.tensor(list(avg.values()), dtype=torch.float64).max(0)[1]) + 1


def test_the_readings_differ_on_this_model(toy):
    """The four rules matter here: probekit's reading gives other answers for some (query, decoding)."""
    differ = 0
    for decoding in mp.DECODINGS:
        a = mp.decode(toy, QUERIES, decoding=decoding, reading="xfactr-reference")
        b = mp.decode(toy, QUERIES, decoding=decoding)
        for x, y in zip(a, b):
            best = max(y.predictions, key=lambda p: p.score)
            differ += x.predictions[0].tokens != best.tokens
    assert differ > 0


# ---------------------------------------------------------------- the rules, one by one
def test_rule_a_order_refinement_advances_per_beam_entry():
    """(a) "if mask_offset >= number_to_mask: mask_offset = 0 / if mask_offset == 0: has_modified = False /
    ... mask_offset += 1" runs inside "for out_tensor, out_logprob in zip(out_tensors, out_logprobs)"."""
    row = ref.RefRow(query=0, n=2, ids=[], slots=[1, 2], beam=[Hyp((5, 6), (-1.0, -1.0))] * 5)
    assert ref.plan(row, "order", mask_id=4) == [[0], [1], [0], [1], [0]]
    assert row.offset == 1


def test_rule_b_duplicates_keep_the_first_expansion():
    """(b) "not_dup = inv.unsqueeze(-1).ne(inv.unsqueeze(0)) | (arange.unsqueeze(-1) <= arange.unsqueeze(0))":
    a filling equal to an earlier one in the pool is dropped, even when it scores better."""
    pool = [Hyp((1, 2), (-2.0, -2.0)), Hyp((3, 3), (-1.0, -1.0)), Hyp((1, 2), (-0.1, -0.1))]
    assert [h.score for h in ref.select(pool, 2)] == [-2.0, -4.0]


def test_rule_c_an_unchanged_token_keeps_its_log_prob():
    """(c) "changes = (out_tensor * mask_mask).ne(new_out_tensor * mask_mask)"; "_out_logprob = out_logprob *
    (1 - changes) + new_out_logprob * changes"."""
    h = Hyp((7, 8), (-3.0, -0.5))
    top = {0: ([-0.2, -1.0], [7, 9])}
    out = ref.expand(h, [0], top, "order", beam=2, mask_id=4)
    assert out[0] == Hyp((7, 8), (-3.0, -0.5))  # token 7 again: the old -3.0 stays
    assert out[1] == Hyp((9, 8), (-1.0, -0.5))


def test_rule_d_the_stop_test_compares_the_ordered_beam():
    """(d) "if next_out_tensors.size(0) == out_tensors.size(0) and next_out_tensors.eq(out_tensors).all():
    stop": the same hypotheses in another order are a change."""
    a, b = Hyp((1,), (-1.0,)), Hyp((2,), (-1.5,))
    row = ref.RefRow(query=0, n=1, ids=[], slots=[1], beam=[a, b])
    ref.advance(row, [b, a], "confidence", max_iter=10)
    assert not row.done
    ref.advance(row, [b, a], "confidence", max_iter=10)
    assert row.done


def test_max_iter_counts_every_iteration(toy):
    """"iter += 1; if max_iter and iter >= max_iter: stop": the initial filling's iterations count too (with
    5 masks filled left to right and max_iter=5 no refinement runs), and max_iter < n_masks is refused as the
    original asserts "max_iter >= num_mask"."""
    rows = reference_rows(toy, QUERIES[0], decoding="order+order", beam=3, n_masks=5, max_iter=5)
    assert rows[5].iters == 5 and rows[1].iters <= 5
    with pytest.raises(ProbekitError, match="max_iter"):
        mp.decode(toy, QUERIES[:1], decoding="order+order", n_masks=5, max_iter=4, reading="xfactr-reference")


def test_no_token_is_banned(toy, monkeypatch):
    """"self.restrict_vocab = []" unless --use_restrict_vocab: special tokens stay predictable."""
    from probekit.probes import xfactr_reference

    seen = []
    real = xfactr_reference.mask_topk
    monkeypatch.setattr(xfactr_reference, "mask_topk", lambda *a, **kw: seen.append(kw["banned"]) or real(*a, **kw))
    mp.decode(toy, QUERIES[:1], decoding="order", n_masks=2, reading="xfactr-reference")
    assert seen and all(b == [] for b in seen)


# ---------------------------------------------------------------- the probe: options, preset, acc@1 only
def test_the_preset_makes_it_the_default(toy):
    probe = get_probe("mask_predict")
    assert probe.resolve({"preset": "medlama-reference", "reading": "probekit"})["reading"] == "xfactr-reference"
    plain = probe.rank(toy, QUERIES, CANDS, k=10, reading="xfactr-reference")
    preset = probe.rank(toy, QUERIES, CANDS, k=10, preset="medlama-reference")
    assert [r.names for r in plain] == [r.names for r in preset]
    assert all(len(r.names) <= 1 and r.depth == 1 for r in preset)
    assert probe.answers_per_query({"preset": "medlama-reference"}) == 1 and probe.answers_per_query({}) is None


def test_acc_at_k_above_one_is_not_claimed(toy):
    """MedLAMA Table 3 prints "-" for X-FACTR's acc@10: one answer per query has no acc@5 or acc@10."""
    rankings = get_probe("mask_predict").rank(toy, QUERIES, CANDS, k=10, reading="xfactr-reference")
    s = metrics.summary(rankings)
    assert s["macro"]["acc@1"] == s["macro"]["acc@1"]  # a number
    assert all(s[avg][f"acc@{k}"] != s[avg][f"acc@{k}"] for avg in ("macro", "micro") for k in (5, 10))  # NaN
    probekit = get_probe("mask_predict").rank(toy, QUERIES, CANDS, k=10)
    assert metrics.summary(probekit)["macro"]["acc@10"] == metrics.summary(probekit)["macro"]["acc@10"]


def test_trace_of_the_reference_reading(toy):
    ranking, explanation = get_probe("mask_predict").explain(toy, QUERIES[0], CANDS, k=5, n_masks=3,
                                                             reading="xfactr-reference")
    assert set(explanation.views) == {"1", "2", "3"}
    assert all(row["answer so far"] for view in explanation.views.values() for row in view)


def test_runs_stored_before_the_reading_keep_their_keys(toy, tiny_dataset):
    """The new options at their defaults stay out of a run's settings key (stored runs are still found); the
    reference reading is a different run."""
    from probekit.bench.settings import settings_of

    plain = settings_of(toy, tiny_dataset, probe="mask_predict")["options"]
    assert "reading" not in plain and "preset" not in plain
    ref_opts = settings_of(toy, tiny_dataset, probe="mask_predict", options={"preset": "medlama-reference"})["options"]
    assert ref_opts["reading"] == "xfactr-reference" and ref_opts["preset"] == "medlama-reference"
    assert "preset" in settings_of(toy, tiny_dataset, probe="retrieval")["options"]
