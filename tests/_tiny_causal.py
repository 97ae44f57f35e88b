"""Tiny random decoder-only LMs with toy tokenizers, built offline (no downloads) for the likelihood probe.

- :func:`save_tiny_gpt2`: a 2-layer, 32-dim GPT2LMHeadModel over a byte-level BPE trained here (any text
  tokenises, byte by byte at worst); like GPT-2's own tokenizer it adds no BOS itself.
- :func:`save_tiny_llama`: a 2-layer, 32-dim LlamaForCausalLM (rotary positions, RMSNorm, grouped KV heads)
  whose tokenizer adds ``<s>`` itself, as Llama's does.
- :func:`save_tiny_mistral`: the Llama recipe as a MistralForCausalLM with a sliding attention window shorter than
  a statement (Mistral-7B's is 4,096 tokens), so each token sees only the last few: a cached prefix must be
  masked by the same window as the whole statement.

Weights are drawn with a large ``initializer_range`` so that next-token distributions are peaked and depend on
the context (near-uniform logits would make every candidate nearly tie). Each writes a folder that
``probekit.models.load`` reads like any local model.
"""

from __future__ import annotations

from pathlib import Path

from _tiny_seq2seq import CORPUS, WORDS

BOS, EOS, PAD = "<|endoftext|>", "<|endoftext|>", "<|endoftext|>"


def _bpe(specials: list[str]):
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS + [" ".join(WORDS)] * 3, vocab_size=400, min_frequency=1,
                            special_tokens=specials, show_progress=False)
    return bpe


CONTEXT = 256
"""Positions of the tiny models (and their tokenizers' model_max_length)."""


def gpt2_tokenizer():
    from transformers import PreTrainedTokenizerFast

    bpe = _bpe([BOS])
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token=BOS, eos_token=EOS,
                                   unk_token=BOS, model_max_length=CONTEXT)


def save_tiny_gpt2(path: Path, *, seed: int = 0, n_positions: int = CONTEXT, n_embd: int = 32,
                   n_layer: int = 2) -> Path:
    """A 2-layer, 32-dim GPT2LMHeadModel over :func:`gpt2_tokenizer` (context ``n_positions`` tokens; the
    benchmark builds wider and deeper ones)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    path = Path(path)
    tok = gpt2_tokenizer()
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=len(tok), n_embd=n_embd, n_layer=n_layer, n_head=2, n_positions=n_positions,
                     bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, initializer_range=0.3)
    GPT2LMHeadModel(cfg).eval().save_pretrained(path)
    tok.save_pretrained(path)
    return path


def llama_tokenizer():
    """Byte-level BPE that adds ``<s>`` before every text (Llama's habit)."""
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    bpe = _bpe(["<s>", "</s>", "<unk>"])
    bos = bpe.token_to_id("<s>")
    bpe._tokenizer.post_processor = TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", bos)])
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", model_max_length=CONTEXT)


def save_tiny_llama(path: Path, *, seed: int = 0) -> Path:
    """A 2-layer, 32-dim LlamaForCausalLM (4 query heads, 2 KV heads) over :func:`llama_tokenizer`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    path = Path(path)
    tok = llama_tokenizer()
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=CONTEXT,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, initializer_range=0.3,
                      tie_word_embeddings=False)
    LlamaForCausalLM(cfg).eval().save_pretrained(path)
    tok.save_pretrained(path)
    return path


def save_tiny_mistral(path: Path, *, seed: int = 0, sliding_window: int = 6) -> Path:
    """A 2-layer, 32-dim MistralForCausalLM over :func:`llama_tokenizer` whose tokens attend to the last
    ``sliding_window`` positions only."""
    import torch
    from transformers import MistralConfig, MistralForCausalLM

    path = Path(path)
    tok = llama_tokenizer()
    torch.manual_seed(seed)
    cfg = MistralConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=CONTEXT,
                        sliding_window=sliding_window, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                        initializer_range=0.3, tie_word_embeddings=False)
    MistralForCausalLM(cfg).eval().save_pretrained(path)
    tok.save_pretrained(path)
    return path
