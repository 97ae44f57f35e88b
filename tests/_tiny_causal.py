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


def save_tiny_gpt2_gguf(folder: Path, out: Path) -> Path:
    """The tiny GPT-2 saved in ``folder`` (:func:`save_tiny_gpt2`) written as a GGUF file for llama.cpp, in float32:
    the same weights, and its byte-level BPE (vocabulary in id order, merges) as a ``gpt2`` tokenizer with the
    ``gpt-2`` pre-tokenizer (the ByteLevel split the toy tokenizer uses), adding no BOS itself as GPT-2's does not.

    The tensor names and layout are llama.cpp's for its ``gpt2`` architecture (gguf-py's ``MODEL_ARCH.GPT2``
    tensor list); GPT-2's Conv1D weights are stored (in, out) and llama.cpp wants (out, in), so they are
    transposed. Needs the ``gguf`` package (requirements-engines.txt)."""
    import json

    import gguf
    import numpy as np
    from transformers import GPT2LMHeadModel

    folder, out = Path(folder), Path(out)
    model = GPT2LMHeadModel.from_pretrained(folder).eval()
    cfg = model.config
    state = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    tok = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = tok["model"]["vocab"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    special = {t["id"] for t in tok["added_tokens"] if t.get("special")}
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    assert [vocab[t] for t in tokens] == list(range(len(tokens))) and len(tokens) == cfg.vocab_size
    writer = gguf.GGUFWriter(str(out), "gpt2")
    writer.add_name("tiny-gpt2")
    writer.add_context_length(cfg.n_positions)
    writer.add_embedding_length(cfg.n_embd)
    writer.add_feed_forward_length(cfg.n_inner or 4 * cfg.n_embd)
    writer.add_block_count(cfg.n_layer)
    writer.add_head_count(cfg.n_head)
    writer.add_layer_norm_eps(cfg.layer_norm_epsilon)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL
                            for i in range(len(tokens))])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(cfg.bos_token_id)
    writer.add_eos_token_id(cfg.eos_token_id)
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)
    names = {"wte.weight": "token_embd.weight", "wpe.weight": "position_embd.weight",
             "ln_f.weight": "output_norm.weight", "ln_f.bias": "output_norm.bias"}
    per_block = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm",
                 "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
    for name, value in state.items():
        if name.endswith((".attn.bias", ".attn.masked_bias")) or name == "lm_head.weight":
            continue
        short = name.removeprefix("transformer.")
        if short in names:
            target = names[short]
        else:
            _, block, rest = short.split(".", 2)
            part, kind = rest.rsplit(".", 1)
            target = f"blk.{block}.{per_block[part]}.{kind}"
            if kind == "weight" and part not in ("ln_1", "ln_2"):
                value = value.T
        writer.add_tensor(target, np.ascontiguousarray(value, dtype=np.float32))
    writer.add_tensor("output.weight", np.ascontiguousarray(state["lm_head.weight"], dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def skip_without_engine() -> None:
    """Skip the calling test module (call it at module level) unless llama-cpp-python, its server extra and gguf
    are installed (``pip install -r requirements-engines.txt``; ``make test-heavy`` does, compiling llama.cpp)."""
    import pytest

    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed: pip install -r "
                                            "requirements-engines.txt (make test-heavy does; it compiles llama.cpp)")
    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python's server extra is not installed: pip "
                                                       "install -r requirements-engines.txt")
    pytest.importorskip("gguf", reason="the gguf package is not installed: pip install -r requirements-engines.txt")


def free_port() -> int:
    """A port nothing listens on now, on 127.0.0.1."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc) -> None:
    """Terminate a server process, killing it when it has not exited within 10 s."""
    proc.terminate()
    try:
        proc.wait(10)
    except Exception:  # noqa: BLE001 - still running: killed
        proc.kill()


def serve_gguf(path: Path, *, alias: str, threads: int = 1, timeout: float = 120.0, port: int | None = None,
               api_key: str | None = None):
    """Start llama-cpp-python's OpenAI-compatible server on 127.0.0.1 (``port``, else a free one) serving the GGUF
    file ``path`` as ``alias`` (asking for ``api_key`` when given), and return ``(process, base URL)`` once its
    ``/v1/models`` answers; the caller terminates the process. Every token's logits are kept (``--logits_all``),
    which its echo of prompt log-probs needs; the KV cache is float32 (``--type_k/--type_v 0``, GGML_TYPE_F32;
    llama.cpp's default is float16)."""
    import json
    import subprocess
    import sys
    import time
    import urllib.request

    if port is None:
        port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--model_alias", alias,
                             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "512", "--n_threads",
                             str(threads), "--n_threads_batch", str(threads), "--logits_all", "true",
                             "--type_k", "0", "--type_v", "0", "--verbose", "false",
                             *(["--api_key", api_key] if api_key else [])],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/v1"
    ask = urllib.request.Request(url + "/models", headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}: "
                               f"{(proc.stderr.read() if proc.stderr else b'').decode()[-2000:]}")
        try:
            with urllib.request.urlopen(ask, timeout=2) as r:
                if json.loads(r.read()).get("data"):
                    return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"llama_cpp.server did not answer on {url} within {timeout:g} s")
