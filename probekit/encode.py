"""Batched text encoding: length-sorted batches under ``torch.inference_mode()``.

Sorting by token length before batching keeps padding (and wasted compute) small, as
sentence-transformers does; results are returned in the caller's order.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .errors import ProbekitError, positive_int
from .jobs import Progress
from .lazy import lazy_module
from .models import LoadedModel

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_module("torch")  # imported on first use (probekit.lazy)

POOLINGS = ("cls", "mean")
ENCODER_VERSION = "1"
"""Bump when encoding changes numerically, so cached embeddings are rebuilt."""



def precision(model: LoadedModel, fast: bool = False) -> str:
    """How vectors are computed: ``amp`` (CUDA autocast), ``int8`` (CPU fast mode) or ``fp32``.

    Part of every embedding cache key and of a run's settings: vectors of different precisions
    differ slightly and must never be mixed.
    """
    if model.device.type == "cuda":
        return "amp"
    return "int8" if fast else "fp32"


def _autocast(device: torch.device):
    """fp16/bf16 autocast on CUDA (whatever ``fast`` says); none on CPU, where fast mode means int8 weights."""
    if device.type == "cuda":
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.autocast("cuda", dtype=dtype)
    return contextlib.nullcontext()


def _int8_encoder(model: LoadedModel) -> torch.nn.Module:
    """The CPU fast-mode encoder: a copy with int8 dynamically quantised Linear layers, made once per model.

    Why int8 and not bf16 autocast: measured on MedLAMA (22,923 names + 19,000 queries, MiniLM, 2 cores)
    int8 with per-channel weight scales encodes about 3x faster than fp32 and moves acc@10 by -0.19
    points on any x86 CPU, while bf16 autocast depends on the hardware: 2x faster on a CPU with
    AVX512-BF16, 4x *slower* on one without (benchmarks/encode.py --fast). Per-channel scales keep
    the accuracy loss under half of per-tensor ones (-0.46 points). The copy lives on the model
    (``meta``), so releasing the model releases it too.
    """
    cached = model.meta.get("_int8_encoder")
    if cached is not None:
        return cached
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao dynamic quantisation is deprecated in favour of torchao
        on_cpu = copy.deepcopy(model.encoder).to("cpu")  # type: ignore[arg-type]  # mypy reads transformers' @wraps'd .to without its self
        quantised = quantize_dynamic(on_cpu.eval(),
                                     {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8)
    model.meta["_int8_encoder"] = quantised
    return quantised


def _pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """hidden: (batch, seq, dim), attention_mask: (batch, seq) -> (batch, dim)."""
    if pooling == "cls":
        return hidden[:, 0]
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (batch, seq, 1)
    summed = (hidden * mask).sum(dim=1)  # (batch, dim)
    return summed / mask.sum(dim=1).clamp(min=1e-9)


def _is_oom(err: BaseException) -> bool:
    """CUDA out-of-memory, or the CPU allocator giving up."""
    if isinstance(err, torch.cuda.OutOfMemoryError):
        return True
    msg = str(err).lower()
    return "out of memory" in msg or "can't allocate memory" in msg


def _free_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _pad_batch(enc: dict, idx, tokenizer, device: torch.device) -> dict[str, torch.Tensor]:
    """Pad the pre-tokenised rows ``idx`` into tensors: each (batch, longest row in batch).

    Tokenising once for the whole list (instead of once to sort and again per batch) and padding
    here with numpy keeps the tokenizer off the hot path. On CUDA the width is rounded up to a
    multiple of 8.
    """
    pads = {"input_ids": tokenizer.pad_token_id or 0, "attention_mask": 0,
            "token_type_ids": getattr(tokenizer, "pad_token_type_id", 0) or 0}
    rows = [enc["input_ids"][i] for i in idx]
    width = max(len(r) for r in rows)
    if str(device).startswith("cuda"):
        width = -(-width // 8) * 8  # few distinct shapes on CUDA: less per-shape kernel planning
    left = getattr(tokenizer, "padding_side", "right") == "left"
    out = {}
    for name, pad in pads.items():
        if name not in enc:
            continue
        arr = np.full((len(rows), width), pad, dtype=np.int64)  # (batch, width)
        for j, i in enumerate(idx):
            row = enc[name][i]
            if left:
                arr[j, width - len(row):] = row
            else:
                arr[j, :len(row)] = row
        out[name] = torch.from_numpy(arr).to(device)
    return out


def _run_encoder(encoder, feats: dict, want_hidden: bool):
    """One forward pass; a separate function so tests can count or fail calls."""
    return encoder(**feats, output_hidden_states=want_hidden)


def encode_layers(
    model: LoadedModel,
    texts: Sequence[str],
    *,
    layers: Sequence[int] | None = None,
    pooling: str = "mean",
    batch_size: int = 64,
    max_length: int = 50,
    fast: bool = False,
    progress: Progress | None = None,
) -> np.ndarray:
    """Encode ``texts`` once and pool several layers: returns (n_layers, n_texts, dim) float32.

    Layer ``L`` is ``hidden_states[L]``: 0 is the embedding output, ``num_layers`` the last layer.
    ``None`` means the last layer only. On out-of-memory the batch is halved and retried; if even
    one text does not fit on the GPU, the rest of the call runs on CPU (with a warning) and the
    model goes back to the GPU afterwards.
    """
    if model.encoder is None:
        raise ProbekitError(f"model {model.id!r} was released; load it again")
    n_layers = model.num_layers
    try:
        layers = [n_layers] if layers is None else [int(x) for x in layers]
    except (TypeError, ValueError):
        raise ProbekitError(f"layers must be integers 0..{n_layers}, got {layers!r}") from None
    bad = [x for x in layers if not 0 <= x <= n_layers]
    if bad:
        raise ProbekitError(f"layer {bad[0]} out of range: {model.id} has layers 0..{n_layers}")
    if not layers:
        raise ProbekitError("no layer given")
    if pooling not in POOLINGS:
        raise ProbekitError(f"unknown pooling {pooling!r}; available: {', '.join(POOLINGS)}")
    positive_int("batch_size", batch_size)
    positive_int("max_length", max_length, minimum=2)
    if isinstance(texts, str):
        raise ProbekitError("texts must be a list of strings, not one string")
    texts = [str(t) for t in texts]
    out = np.zeros((len(layers), len(texts), model.hidden_size), dtype=np.float32)
    if not texts:
        return out
    tok = model.tokenizer
    # Tokenise once (no padding): lengths to sort by, and the ids that batches are padded from.
    enc = tok(texts, truncation=True, max_length=max_length)
    lengths = np.fromiter((len(ids) for ids in enc["input_ids"]), dtype=np.int64, count=len(texts))
    order = np.argsort(-lengths, kind="stable")  # longest first: an OOM shows up on the first batch
    want_hidden = layers != [n_layers]
    device, moved = model.device, False
    encoder = _int8_encoder(model) if (fast and device.type == "cpu") else model.encoder
    done, start, bs = 0, 0, batch_size
    try:
        with torch.inference_mode():
            while start < len(texts):
                idx = order[start:start + bs]
                feats = _pad_batch(enc, idx, tok, device)  # each (batch, width)
                try:
                    with _autocast(device):
                        res = _run_encoder(encoder, feats, want_hidden)
                except RuntimeError as err:
                    if not _is_oom(err):
                        raise
                    del feats
                    _free_memory(device)
                    if bs > 1:
                        bs = max(1, bs // 2)
                        warnings.warn(f"out of memory: retrying with batch size {bs}", stacklevel=2)
                        continue
                    if device.type == "cuda":
                        warnings.warn("out of GPU memory even at batch size 1: encoding the rest on CPU",
                                      stacklevel=2)
                        model.encoder.to("cpu")  # type: ignore[arg-type]  # mypy reads transformers' @wraps'd .to without its self
                        device, moved, bs = torch.device("cpu"), True, batch_size
                        _free_memory(model.device)
                        continue
                    raise ProbekitError("out of memory even with batch size 1: shorten the texts, lower "
                                        "max_length or free memory") from None
                hs = res.hidden_states if want_hidden else (None,) * n_layers + (res.last_hidden_state,)
                for li, layer in enumerate(layers):
                    pooled = _pool(hs[layer].float(), feats["attention_mask"], pooling)  # (batch, dim)
                    out[li, idx] = pooled.cpu().numpy()
                start += len(idx)
                done += len(idx)
                if progress:
                    progress(done, len(texts), "encoding")
    finally:
        if moved:
            _restore_device(model)
    return out


def _restore_device(model: LoadedModel) -> None:
    """Put the encoder back on the model's GPU after a CPU fallback; stay on CPU if that fails."""
    try:
        model.encoder.to(model.device)  # type: ignore[arg-type]  # mypy reads transformers' @wraps'd .to without its self
    except RuntimeError as err:
        if not _is_oom(err):
            raise
        root = model.mlm if model.mlm is not None else model.encoder
        root.to("cpu")  # type: ignore[arg-type]  # mypy reads transformers' @wraps'd .to without its self
        model.device = torch.device("cpu")
        warnings.warn("the model does not fit on the GPU any more: it stays on CPU", stacklevel=3)


def encode(model: LoadedModel, texts: Sequence[str], *, layer: int | None = None, **options) -> np.ndarray:
    """Encode ``texts`` at one layer: (n_texts, dim) float32. Options as :func:`encode_layers`."""
    return encode_layers(model, texts, layers=None if layer is None else [layer], **options)[0]
