"""Perplexity of prompts: batched pseudo-perplexity vs a naive loop, causal perplexity vs a hand computation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from probekit.errors import ProbekitError
from probekit.probes import mask_logits
from probekit.templates import perplexity as ppl
from probekit.types import Query

TEXTS = ["metformin might be used to treat type 2 diabetes mellitus .",
         "aspirin",
         "the nutrient - sensing mtor pathway regulates longevity",
         "[MASK] is used to treat infections ."]


def test_pseudo_perplexity_batched_equals_a_naive_loop(tiny_mlm):
    """Salazar et al. (cited by Shaier et al. for MLM perplexity): PLL(W) = sum_t log P(w_t | W without w_t),
    masking each token in turn; pseudo-perplexity = exp(-PLL / |W|). The batched version stacks masked
    copies of several prompts into one forward (and pads them); it must give the loop's values."""
    tok, mlm = tiny_mlm.tokenizer, tiny_mlm.mlm
    naive = ppl.pseudo_perplexity_naive(mlm, tok, TEXTS)
    for batch_size in (1, 5, 64):
        batched = ppl.pseudo_perplexity(mlm, tok, TEXTS, batch_size=batch_size)
        np.testing.assert_array_equal(batched.n_tokens, naive.n_tokens)
        np.testing.assert_allclose(batched.nll, naive.nll, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(batched.perplexity, naive.perplexity, rtol=1e-5)
    # special tokens and masks already in the prompt are context, not scored: "aspirin" is one word piece
    assert naive.n_tokens[1] == len(tok("aspirin", add_special_tokens=False)["input_ids"])
    assert naive.n_tokens[3] == len(tok(TEXTS[3], add_special_tokens=False)["input_ids"]) - 1


def test_pseudo_perplexity_by_hand_for_one_prompt(tiny_mlm):
    """exp of the mean negative log-prob of each token with that one token masked, computed by hand."""
    tok, mlm = tiny_mlm.tokenizer, tiny_mlm.mlm
    ids = tok("heart failure")["input_ids"]  # [CLS] heart failure [SEP]
    lps = []
    for p in range(1, len(ids) - 1):
        masked = torch.tensor([ids[:p] + [tok.mask_token_id] + ids[p + 1:]])
        with torch.no_grad():
            logits = mlm(input_ids=masked).logits[0, p]
        lps.append(float(torch.log_softmax(logits, -1)[ids[p]]))
    expected = math.exp(-sum(lps) / len(lps))
    got = ppl.pseudo_perplexity(mlm, tok, ["heart failure", "aspirin"], batch_size=3).perplexity[0]
    assert got == pytest.approx(expected, rel=1e-5)


def test_head_only_at_the_mask_equals_the_full_logits(tiny_mlm):
    """The MLM head (and the last layer) applied only at each copy's masked row give the logits the
    model's own forward gives at that row, over every position, padding included."""
    tok, mlm = tiny_mlm.tokenizer, tiny_mlm.mlm
    assert ppl.logits_path(mlm) == "mask_row"  # the fast path is the one the tiny BERT takes
    ids = tok(TEXTS[:3], padding=True, return_tensors="pt")
    batch, attn = ids["input_ids"].clone(), ids["attention_mask"]  # (3, seq), right-padded
    rows, pos = torch.arange(3), torch.tensor([4, 1, 6])  # one masked position per copy, each a real token
    assert bool(attn[rows, pos].all()) and not bool(attn.all())  # and the batch has padding
    batch[rows, pos] = tok.mask_token_id
    with torch.inference_mode():
        full = mlm(input_ids=batch, attention_mask=attn).logits  # (3, seq, vocab)
        for path in ("full", "head", "mask_row"):
            got = mask_logits.logits_at_mask(mlm, batch, attn, rows, pos, path)  # (3, vocab)
            assert got.shape == (3, tok.vocab_size)
            torch.testing.assert_close(got, full[rows, pos], rtol=1e-5, atol=1e-5)
        # a copy's logits do not depend on its batch neighbours or their padding
        alone = mask_logits.logits_at_mask(mlm, batch[:1, :int(attn[0].sum())], attn[:1, :int(attn[0].sum())],
                                    rows[:1], pos[:1], "mask_row")
        torch.testing.assert_close(alone, full[0, pos[0]][None], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["bert", "roberta"])
@pytest.mark.parametrize("attn_impl", ["sdpa", "eager"])
def test_mask_row_path_on_roberta_and_either_attention(arch, attn_impl):
    """The last-layer-at-the-mask path reuses the model's own layers and mask: check it on RoBERTa (positions
    from the padding index) and on both attention implementations, against the model's full logits."""
    from transformers import BertConfig, BertForMaskedLM, RobertaConfig, RobertaForMaskedLM

    cls, cfg_cls, pad = {"bert": (BertForMaskedLM, BertConfig, 0),
                         "roberta": (RobertaForMaskedLM, RobertaConfig, 1)}[arch]
    torch.manual_seed(0)
    cfg = cfg_cls(vocab_size=100, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64,
                  max_position_embeddings=64, pad_token_id=pad)
    mlm = cls(cfg).eval()
    mlm.set_attn_implementation(attn_impl)
    assert ppl.logits_path(mlm) == "mask_row"
    batch = torch.randint(5, 100, (4, 9))  # (copies, seq)
    attn = torch.ones_like(batch)
    attn[1, 6:] = 0
    attn[3, 4:] = 0
    batch[attn == 0] = pad
    rows, pos = torch.arange(4), torch.tensor([2, 5, 8, 3])
    batch[rows, pos] = 4  # the "mask" token
    with torch.inference_mode():
        full = mlm(input_ids=batch, attention_mask=attn).logits[rows, pos]  # (copies, vocab)
        fast = mask_logits.logits_at_mask(mlm, batch, attn, rows, pos, "mask_row")
    torch.testing.assert_close(fast, full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("path", ["full", "head"])
def test_pseudo_perplexity_same_on_every_logits_path(tiny_mlm, monkeypatch, path):
    """Architectures whose head or last layer cannot be split off take a slower path; same values."""
    tok, mlm = tiny_mlm.tokenizer, tiny_mlm.mlm
    fast = ppl.pseudo_perplexity(mlm, tok, TEXTS, batch_size=7)
    monkeypatch.setattr(ppl, "logits_path", lambda m: path)
    slow = ppl.pseudo_perplexity(mlm, tok, TEXTS, batch_size=7)
    np.testing.assert_array_equal(slow.n_tokens, fast.n_tokens)
    np.testing.assert_allclose(slow.nll, fast.nll, rtol=1e-5)


def test_logits_path_by_architecture(tiny_mlm, monkeypatch):
    mlm = tiny_mlm.mlm
    monkeypatch.setattr(mlm.config, "is_decoder", True)
    assert ppl.logits_path(mlm) == "head"  # a causal BERT: no last-layer shortcut
    monkeypatch.setattr(mask_logits, "_split_head", lambda m: None)
    assert ppl.logits_path(mlm) == "full"


@pytest.fixture(scope="module")
def tiny_gpt(tiny_mlm_dir):
    """A tiny random GPT-2 over the bert-base-uncased vocabulary (no download)."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(tiny_mlm_dir))
    cfg = GPT2Config(vocab_size=tok.vocab_size, n_positions=64, n_embd=32, n_layer=2, n_head=2)
    return GPT2LMHeadModel(cfg).eval(), tok


def test_causal_perplexity_by_hand(tiny_gpt):
    """Perplexity of a causal LM: exp(-1/N sum_t log P(w_t | w_<t)) over every token after the first,
    computed here by running each prefix alone and reading the next token's log-probability."""
    lm, tok = tiny_gpt
    texts = ["metformin treats diabetes", "aspirin prevents heart attacks in adults", "pain"]
    got = ppl.causal_perplexity(lm, tok, texts, batch_size=2)
    for i, text in enumerate(texts):
        ids = tok(text)["input_ids"]  # bert tokenizer: [CLS] ... [SEP], no separate BOS
        lps = []
        for t in range(1, len(ids)):
            with torch.no_grad():
                logits = lm(input_ids=torch.tensor([ids[:t]])).logits[0, -1]
            lps.append(float(torch.log_softmax(logits, -1)[ids[t]]))
        assert got.n_tokens[i] == len(ids) - 1
        assert got.perplexity[i] == pytest.approx(math.exp(-sum(lps) / len(lps)), rel=1e-5)


def test_prompt_text_and_bad_input(tiny_mlm):
    q = Query("q", "Aspirin", "may_prevent", "[X] may help to prevent [Y] .", golds=("stroke",))
    assert ppl.prompt_text(q) == "Aspirin may help to prevent stroke ."
    assert ppl.prompt_text(q, fill="mask", mask_token="<mask>") == "Aspirin may help to prevent <mask> ."
    with pytest.raises(ProbekitError, match="unknown fill 'gol'"):
        ppl.prompt_text(q, fill="gol")
    with pytest.raises(ProbekitError, match="no gold object"):
        ppl.prompt_text(Query("q", "", "r", "[Y] x"))
    with pytest.raises(ProbekitError, match="no text to score"):
        ppl.pseudo_perplexity(tiny_mlm.mlm, tiny_mlm.tokenizer, [])
    with pytest.raises(ProbekitError, match="text 1 is empty"):
        ppl.pseudo_perplexity(tiny_mlm.mlm, tiny_mlm.tokenizer, ["a", " "])
    with pytest.raises(ProbekitError, match="batch_size must be a positive integer"):
        ppl.pseudo_perplexity(tiny_mlm.mlm, tiny_mlm.tokenizer, ["a"], batch_size=0)
