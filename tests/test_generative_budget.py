"""generative's budget and prompt, as MedLAMA's prober (cambridgeltl/medlama @ 8a314d1, probers/generative_probe).

main.py line 56: "outputs = model.generate(token_id_tensor, num_beams=10, num_return_sequences=10,
max_length=src_len+80)"; dataclass.py line 39: "human_prompt = item_list[1].strip('.').strip()".
"""

from __future__ import annotations

import pytest
from _tiny_seq2seq import save_scripted_bart

from probekit import models
from probekit.probes import get_probe
from probekit.probes.generative import generate, prompt_of
from probekit.types import CandidateSet, Query

PREFIX = ("metformin is a drug that in many chronic kidney disease and liver disease studies of adults with high "
          "blood pressure and acute infection might treat")
GOLD = "type 2 diabetes"
QUERY = Query("q", "metformin", "may_treat", PREFIX.replace("metformin", "[X]", 1) + " [Y] .", golds=(GOLD,))
CANDS = CandidateSet.from_names([GOLD, "pain"])


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """A BART that rewrites the prompt's sentence with the gold in place of the mask (its decoder writes that
    sentence whatever the input, as BART's denoising answer would read)."""
    return models.load(str(save_scripted_bart(tmp_path_factory.mktemp("scripted_bart"), f"{PREFIX} {GOLD}")),
                       device="cpu")


def test_a_long_bart_answer_is_found(scripted):
    """BART rewrites the whole sentence: the answer comes after the prompt's prefix, here more than 24 tokens.
    The reference's budget (prompt length + 80) finds it; the old fixed 24 new tokens cannot."""
    tok = scripted.tokenizer
    needed = len(tok(f"{PREFIX} {GOLD}", add_special_tokens=False)["input_ids"]) + 2  # <s> ... </s>
    assert needed > 24
    found = get_probe("generative").rank(scripted, [QUERY], CANDS, k=3)[0]
    assert found.names[0] == GOLD and found.gold_ranks == (1,)
    cut = get_probe("generative").rank(scripted, [QUERY], CANDS, k=3, max_new_tokens=24)[0]
    assert cut.gold_ranks == (None,)


def test_the_budget_is_relative_to_the_prompt(scripted, monkeypatch):
    """"max_length=src_len+80": the decoder sequence may hold the prompt's token count + 80."""
    seen = []
    real = scripted.seq2seq.generate

    def spy(**kw):
        seen.append((kw["input_ids"].shape[1], kw.get("max_length"), kw.get("max_new_tokens")))
        return real(**kw)

    monkeypatch.setattr(scripted.seq2seq, "generate", spy)
    generate(scripted, [QUERY], beam=2)
    generate(scripted, [QUERY], beam=2, max_new_tokens=7)
    src_len = len(scripted.tokenizer(prompt_of(QUERY, scripted.mask_token))["input_ids"])
    assert seen == [(src_len, src_len + 80, None), (src_len, None, 7)]


def test_the_final_period_is_stripped_unless_kept(scripted, monkeypatch):
    """"human_prompt = item_list[1].strip('.').strip()": the template's final " ." is not in the prompt."""
    assert prompt_of(QUERY, "<mask>").endswith("might treat <mask>")
    assert prompt_of(QUERY, "<mask>", keep_period=True).endswith("might treat <mask> .")
    q = Query("q", "aspirin", "r", "[X] may prevent [Y].")
    assert prompt_of(q, "<mask>") == "aspirin may prevent <mask>"
    kept = generate(scripted, [QUERY], beam=2, keep_period=True)[0]
    assert kept[0][0] == GOLD  # the suffix " ." is not in the output: the answer reads the same


def test_batches_group_prompts_of_one_length(scripted, monkeypatch):
    """Prompts are batched by token count, so a batch's budget is each of its prompts' own; answers come back
    in query order."""
    short = Query("s", "aspirin", "may_treat", "[X] might treat [Y] .", golds=("pain",))
    seen = []
    real = scripted.seq2seq.generate
    monkeypatch.setattr(scripted.seq2seq, "generate",
                        lambda **kw: seen.append(kw["input_ids"].shape) or real(**kw))
    out = generate(scripted, [QUERY, short, QUERY], beam=2, batch_size=2)
    assert [s[0] for s in seen] == [1, 2]  # the short prompt alone, then the two long ones
    assert out[0] == out[2] and len(out) == 3
