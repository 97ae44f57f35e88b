"""generative (BART / T5 / SciFive) on tiny random seq2seq models: batching, beams, answer parsing, model kinds.

MedLAMA §3: "we utilize the cloze-style query with a single [MASK] token as the model input. The model
then predicts the answer entities that correspond to the [MASK] token in an autoregressive manner."
"the cloze query with a single mask in the model's own syntax (<mask> for BART, <extra_id_0>
for T5); output: beam search (size = k), answers parsed from the generated text (T5: the span after
<extra_id_0>)".
"""

from __future__ import annotations

import socket

import pytest
import torch
from _tiny_seq2seq import t5_tokenizer

from probekit import models
from probekit.errors import ModelLoadError, ProbekitError
from probekit.probes import PROBES, get_probe, probes_for
from probekit.probes.generative import bart_answer, generate, t5_answer
from probekit.types import CandidateSet, Query, normalize_name

QUERIES = [
    Query("q1", "metformin", "may_treat", "[X] might treat [Y].", golds=("type 2 diabetes",)),
    Query("q2", "aspirin", "may_prevent", "[X] may prevent [Y] in adults with a high blood pressure.",
          golds=("stroke",)),
    Query("q3", "", "free", "[Y] is caused by vitamin d lack.", golds=("rickets",)),
]
CANDS = CandidateSet.from_names(["pain", "stroke", "type 2 diabetes", "rickets"])
S2S = ["bart", "t5"]



@pytest.fixture(scope="module")
def s2s_dirs(tiny_bart_dir, tiny_t5_dir):
    return {"bart": tiny_bart_dir, "t5": tiny_t5_dir}


@pytest.fixture(scope="module")
def s2s(s2s_dirs):
    """Both tiny models in float64 (batched and single generation then agree far below any beam-score gap)."""
    out = {}
    for name, path in s2s_dirs.items():
        m = models.load(str(path), device="cpu")
        m.seq2seq.to(torch.float64)
        out[name] = m
    return out


def naive_ranking(model, query, *, beam, max_new_tokens):
    """One query per generate call; answers parsed, sorted by beam score, merged by normalised text."""
    tok = model.tokenizer
    # the template's final " ." stripped as MedLAMA's prober does: "human_prompt = item_list[1].strip('.').strip()"
    prompt = Query(query.id, query.subject, query.relation, query.template.strip(".").strip()).text(model.mask_token)
    with torch.inference_mode():
        gen = model.seq2seq.generate(**tok([prompt], return_tensors="pt"), num_beams=beam, num_return_sequences=beam,
                                     do_sample=False, max_new_tokens=max_new_tokens, early_stopping=True,
                                     length_penalty=1.0, output_scores=True, return_dict_in_generate=True)
    answers = []
    for ids, score in zip(gen.sequences.tolist(), gen.sequences_scores.tolist()):
        if model.tokenizer.mask_token is None:
            answer = t5_answer(tok, ids)
        else:
            answer = bart_answer(tok.decode(ids, skip_special_tokens=True), prompt, model.mask_token)
        answers.append((answer, score))
    answers.sort(key=lambda a: -a[1])
    names, scores = [], []
    for a, s in answers:
        if a.strip() and normalize_name(a) not in map(normalize_name, names):
            names.append(a.strip())
            scores.append(s)
    return names, scores


# ---------------------------------------------------------------- batching and beams
@pytest.mark.parametrize("kind", S2S)
def test_batched_equals_one_at_a_time(s2s, kind):
    m = s2s[kind]
    rankings = get_probe("generative").rank(m, QUERIES, CANDS, k=4, batch_size=2, max_new_tokens=12)
    for q, r in zip(QUERIES, rankings):
        names, scores = naive_ranking(m, q, beam=4, max_new_tokens=12)
        assert list(r.names) == names and r.generated and r.n_candidates == len(names)
        assert r.scores == pytest.approx(scores, abs=1e-9)
    assert any(r.names for r in rankings)  # something was generated at all


@pytest.mark.parametrize("kind", S2S)
def test_beams_best_first_and_size(s2s, kind):
    m = s2s[kind]
    for beams in generate(m, QUERIES, beam=5, max_new_tokens=10):
        assert len(beams) == 5
        scores = [s for _, s, _ in beams]
        assert scores == sorted(scores, reverse=True) and all(s <= 0 for s in scores)
        assert len({t for _, _, t in beams}) == 5  # distinct sequences
    r = get_probe("generative").rank(m, QUERIES[:1], CANDS, k=3, max_new_tokens=10)[0]
    assert r.n_candidates <= 3  # beam = k by default
    r = get_probe("generative").rank(m, QUERIES[:1], CANDS, k=2, beam=6, max_new_tokens=10)[0]
    assert r.k <= 2 and r.n_candidates <= 6


@pytest.mark.parametrize("kind", S2S)
def test_gold_rank_is_position_among_answers(s2s, kind):
    """A gold that was generated gets its position among the merged answers; others are 'not generated'."""
    m = s2s[kind]
    names, _ = naive_ranking(m, QUERIES[0], beam=6, max_new_tokens=10)
    assert len(names) >= 2
    q = Query("g", "metformin", "may_treat", "[X] might treat [Y].", golds=(names[1].upper(), "no such answer"))
    r = get_probe("generative").rank(m, [q], CANDS, k=1, beam=6, max_new_tokens=10)[0]
    assert r.gold_ranks == (2, None) and not r.hit(1) and r.best_gold_rank == 2


# ---------------------------------------------------------------- answer parsing
def test_t5_answer_is_span_after_first_sentinel():
    tok = t5_tokenizer()
    ids = tok.convert_tokens_to_ids
    enc = tok("type 2 diabetes", add_special_tokens=False)["input_ids"]
    pad, eos, s0, s1 = tok.pad_token_id, tok.eos_token_id, ids("<extra_id_0>"), ids("<extra_id_1>")
    stroke = tok("stroke", add_special_tokens=False)["input_ids"]
    assert t5_answer(tok, [pad, s0, *enc, s1, *stroke, eos]) == "type 2 diabetes"
    assert t5_answer(tok, [pad, s0, *enc, eos, pad, pad]) == "type 2 diabetes"
    assert t5_answer(tok, [pad, s0, *enc]) == "type 2 diabetes"  # cut at max_new_tokens
    assert t5_answer(tok, [pad, *stroke, s1, *enc, eos]) == "stroke"  # no <extra_id_0>: text before a sentinel
    assert t5_answer(tok, [pad, s0, s1, *enc, eos]) == ""  # an empty span
    assert t5_answer(tok, [pad, *stroke, s0, *enc, eos]) == "type 2 diabetes"


@pytest.mark.parametrize("output, prompt, want", [
    ("Metformin might treat type 2 diabetes.", "Metformin might treat <mask>.", "type 2 diabetes"),
    ("metformin might treat   Type 2 Diabetes .", "Metformin might treat <mask> .", "Type 2 Diabetes"),
    ("Rickets is caused by vitamin D lack.", "<mask> is caused by vitamin D lack.", "Rickets"),
    ("Aspirin may prevent stroke in adults and children", "Aspirin may prevent <mask> in adults.", "stroke"),
    ("Aspirin may prevent stroke in adults. In adults.", "Aspirin may prevent <mask> in adults.",
     "stroke in adults."),  # ambiguous: the closing suffix wins
    ("Something else entirely", "Aspirin may prevent <mask> in adults.", "Something else entirely"),
    ("Aspirin may prevent.", "Aspirin may prevent <mask>.", ""),
])
def test_bart_answer_is_what_replaced_the_mask(output, prompt, want):
    assert bart_answer(output, prompt, "<mask>") == want


# ---------------------------------------------------------------- model kinds and loading
def test_models_load_seq2seq(s2s, s2s_dirs):
    bart, t5 = s2s["bart"], s2s["t5"]
    assert bart.is_seq2seq and t5.is_seq2seq and not bart.has_mlm and not t5.has_mlm
    assert bart.mask_token == "<mask>" and t5.mask_token == "<extra_id_0>"
    assert QUERIES[0].text(t5.mask_token) == "metformin might treat <extra_id_0>."
    assert t5.describe()["seq2seq"] and t5.num_layers == 1 and t5.hidden_size == 32
    with pytest.raises(ModelLoadError, match="encoder-decoder.*generative"):
        models.load(str(s2s_dirs["t5"]), device="cpu", mlm=True)


def test_registry_has_the_papers_generative_models():
    ids = ["facebook/bart-base", "t5-small", "t5-base", "razent/SciFive-base-Pubmed_PMC",
           "razent/SciFive-large-Pubmed_PMC"]
    for mid in ids:
        spec = models.REGISTRY[mid]
        assert spec.seq2seq and not spec.has_mlm and spec.label and spec.family
    assert set(ids) <= {mid for mid, _ in models.available_models()}


def test_registry_seq2seq_model_offline_says_what_was_tried(monkeypatch):
    """Loaded like every other model: the local cache only when offline, with the usual message."""
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: (_ for _ in ()).throw(OSError("no network")))
    monkeypatch.setenv("HF_HOME", "/nonexistent-hf-home")
    with pytest.raises(ModelLoadError) as info:
        models.load("razent/SciFive-base-Pubmed_PMC")
    msg = str(info.value)
    assert "razent/SciFive-base-Pubmed_PMC" in msg and "local Hugging Face cache" in msg and "offline" in msg


def test_needs_seq2seq(tiny_mlm, tiny_encoder, s2s):
    for m in (tiny_mlm, tiny_encoder):
        with pytest.raises(ProbekitError, match="needs an encoder-decoder model") as info:
            get_probe("generative").rank(m, QUERIES, CANDS, k=3)
        assert "bart-base" in str(info.value)
        assert "generative" not in probes_for(m)
    for m in s2s.values():
        # an encoder-decoder has no MLM head: every probe but the MLM ones (its encoder serves retrieval)
        assert probes_for(m) == [n for n, p in PROBES.items() if not p.requires_mlm] and "generative" in probes_for(m)
        with pytest.raises(ProbekitError, match="MLM head"):
            get_probe("mask_predict").rank(m, QUERIES, CANDS, k=3)
        r = get_probe("retrieval").rank(m, QUERIES, CANDS, k=2)  # the encoder serves retrieval
        assert all(x.k == 2 and not x.generated for x in r)


@pytest.mark.parametrize("options, match", [
    ({"beam": 0}, "beam.*must be an integer"),
    ({"beam": 2.5}, "beam.*must be an integer"),
    ({"max_new_tokens": 0}, "max_new_tokens.*must be an integer"),
    ({"batch_size": 0}, "batch_size.*must be an integer"),
    ({"max_length": 4}, "too long"),
    ({"colour": "red"}, "unknown option 'colour'"),
])
def test_bad_options(s2s, options, match):
    with pytest.raises(ProbekitError, match=match):
        get_probe("generative").rank(s2s["t5"], QUERIES, CANDS, k=3, **options)


def test_progress(s2s):
    seen = []
    get_probe("generative").rank(s2s["bart"], QUERIES, CANDS, k=2, batch_size=2, max_new_tokens=4,
                                 progress=lambda d, t, s: seen.append((d, t, s)))
    # one report per batch (prompts of one token count share a batch, at most 2 of them), rising to 3 of 3
    done = [d for d, _, _ in seen]
    assert done == sorted(done) and done[-1] == 3 and all(t == 3 and s == "generating" for _, t, s in seen)
    assert all(b - a <= 2 for a, b in zip([0, *done], done))
