"""Tiny random models with toy vocabularies, built offline (no downloads) for the open-vocabulary probes.

- :func:`save_toy_bert`: a BertForMaskedLM over ~100 word-level tokens (plus a few ``##`` pieces).
  Weights are drawn with a large ``initializer_range`` so the MLM head's distributions are peaked
  and depend on the context: decoding orders then really differ (with near-uniform logits, as in
  conftest's tiny BERT over 30k tokens, every order would pick the same tokens).
- :func:`save_tiny_bart`: a BartForConditionalGeneration with a byte-level BPE trained here on a toy corpus.
- :func:`save_tiny_t5`: a T5ForConditionalGeneration with a unigram vocabulary and sentinels ``<extra_id_N>``.

Each writes a folder that ``probekit.models.load`` reads like any local model.
"""

from __future__ import annotations

import json
from pathlib import Path

WORDS = ("metformin aspirin insulin warfarin statin ibuprofen vitamin d might may can treat treats prevent "
         "prevents cause causes pain fever type 1 2 diabetes stroke heart attack failure disease syndrome ovary "
         "polycystic myocardial infarction rickets asthma hypertension the of a and in is by with for lack "
         "deficiency acute chronic kidney liver lung cancer blood pressure high low infection bacterial viral drug "
         "therapy , . -").split()
PIECES = ("##s", "##in", "##ol", "##ia", "##itis")
CORPUS = [
    "metformin might treat type 2 diabetes.", "aspirin may prevent stroke.", "aspirin may prevent heart attack.",
    "insulin can treat type 1 diabetes.", "vitamin d lack causes rickets.", "warfarin may prevent stroke.",
    "ibuprofen treats pain and fever.", "statin may prevent myocardial infarction.", "polycystic ovary syndrome.",
    "chronic kidney disease causes high blood pressure.", "bacterial infection causes fever.",
]


def save_toy_bert(path: Path, *, seed: int = 0, init_range: float = 0.6) -> Path:
    """A 2-layer, 32-dim BertForMaskedLM over :data:`WORDS`, saved with its tokenizer."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizer

    path = Path(path)
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *PIECES]
    tok = BertTokenizer(vocab={t: i for i, t in enumerate(tokens)})
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=len(tokens), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128, initializer_range=init_range)
    BertForMaskedLM(cfg).eval().save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _bart_tokenizer():
    from tokenizers import AddedToken, ByteLevelBPETokenizer
    from transformers import BartTokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS + [" ".join(WORDS)] * 3, vocab_size=400, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"], show_progress=False)
    merges = json.loads(bpe._tokenizer.to_str())["model"]["merges"]
    return BartTokenizer(vocab=bpe.get_vocab(), merges=[tuple(m) for m in merges],
                         mask_token=AddedToken("<mask>", lstrip=True, rstrip=False))


def save_tiny_bart(path: Path, *, seed: int = 0) -> Path:
    """A 1+1-layer, 32-dim BartForConditionalGeneration over a byte-level BPE trained on :data:`CORPUS`."""
    import torch
    from transformers import BartConfig, BartForConditionalGeneration

    path = Path(path)
    tok = _bart_tokenizer()
    torch.manual_seed(seed)
    cfg = BartConfig(vocab_size=len(tok), d_model=32, encoder_layers=1, decoder_layers=1,
                     encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                     max_position_embeddings=128, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                     eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.eos_token_id,
                     forced_bos_token_id=tok.bos_token_id, init_std=0.3)
    BartForConditionalGeneration(cfg).eval().save_pretrained(path)
    tok.save_pretrained(path)
    return path


def t5_tokenizer(extra_ids: int = 10):
    """A unigram tokenizer: one piece per toy word, single characters as a fallback, ``<extra_id_N>`` sentinels."""
    from transformers import T5Tokenizer

    chars = sorted(set("".join(WORDS)) | set("abcdefghijklmnopqrstuvwxyz0123456789"))
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -3.0)]
    vocab += [("▁" + w, -2.0) for w in WORDS] + [(c, -6.0) for c in chars if ("▁" + c, -2.0) not in vocab]
    return T5Tokenizer(vocab=vocab, extra_ids=extra_ids)


def save_tiny_t5(path: Path, *, seed: int = 0) -> Path:
    """A 1+1-layer, 32-dim T5ForConditionalGeneration over :func:`t5_tokenizer`'s vocabulary."""
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    path = Path(path)
    tok = t5_tokenizer()
    torch.manual_seed(seed)
    cfg = T5Config(vocab_size=len(tok), d_model=32, d_kv=16, d_ff=64, num_layers=1, num_decoder_layers=1,
                   num_heads=2, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                   decoder_start_token_id=tok.pad_token_id, initializer_factor=3.0)
    T5ForConditionalGeneration(cfg).eval().save_pretrained(path)
    tok.save_pretrained(path)
    return path


def save_scripted_bart(path: Path, sentence: str, *, d_model: int = 128) -> Path:
    """A BartForConditionalGeneration (the tiny BART's tokenizer) whose decoder writes ``sentence`` whatever
    its input: every decoder sublayer adds zero, token embeddings are zero, so the hidden state at position
    p is the layer-normed one-hot position embedding e_p, and the (untied) LM head maps e_p to the token
    that follows at p. Greedy and beam search then produce ``<s> sentence </s>`` (the first beam by far)."""
    import torch
    from transformers import BartConfig, BartForConditionalGeneration

    path = Path(path)
    tok = _bart_tokenizer()
    target = [tok.eos_token_id, tok.bos_token_id, *tok(sentence, add_special_tokens=False)["input_ids"],
              tok.eos_token_id]  # decoder start, forced <s>, the sentence, </s>
    if len(target) + 2 > d_model:
        raise ValueError(f"sentence too long for d_model={d_model}")
    cfg = BartConfig(vocab_size=len(tok), d_model=d_model, encoder_layers=1, decoder_layers=1,
                     encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                     max_position_embeddings=d_model - 2, pad_token_id=tok.pad_token_id,
                     bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                     decoder_start_token_id=tok.eos_token_id, forced_bos_token_id=tok.bos_token_id,
                     tie_word_embeddings=False, no_repeat_ngram_size=0)
    model = BartForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        model.model.shared.weight.zero_()
        dec = model.model.decoder
        for layer in dec.layers:
            for lin in (layer.self_attn.out_proj, layer.encoder_attn.out_proj, layer.fc2):
                lin.weight.zero_()
                lin.bias.zero_()
        dec.embed_positions.weight.copy_(torch.eye(d_model))  # row p + 2 (BART's offset) is position p
        model.final_logits_bias.zero_()
        head = torch.zeros(len(tok), d_model)
        for p in range(len(target) - 1):
            e = torch.zeros(d_model)
            e[p + 2] = 1.0
            head[target[p + 1]] += 10.0 * (e - e.mean()) / e.std(unbiased=False)
        model.lm_head.weight.copy_(head)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path
