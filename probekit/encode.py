"""Batched text encoding: length-sorted batches under ``torch.inference_mode()``.

Sorting by token length before batching keeps padding (and wasted compute) small, as
sentence-transformers does; results are returned in the caller's order.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Sequence

import numpy as np
import torch

from .errors import ProbekitError
from .models import LoadedModel

POOLINGS = ("cls", "mean")
ENCODER_VERSION = "1"
"""Bump when encoding changes numerically, so cached embeddings are rebuilt."""

Progress = Callable[[int, int], None]


def _autocast(device: torch.device, fast: bool):
    """fp16/bf16 autocast on CUDA; on CPU only in ``fast`` mode (bf16)."""
    if device.type == "cuda":
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.autocast("cuda", dtype=dtype)
    if fast:
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """hidden: (batch, seq, dim), attention_mask: (batch, seq) -> (batch, dim)."""
    if pooling == "cls":
        return hidden[:, 0]
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (batch, seq, 1)
    summed = (hidden * mask).sum(dim=1)  # (batch, dim)
    return summed / mask.sum(dim=1).clamp(min=1e-9)


def _is_oom(err: BaseException) -> bool:
    return isinstance(err, torch.cuda.OutOfMemoryError) or "out of memory" in str(err).lower()


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
    ``None`` means the last layer only. On CUDA out-of-memory the batch is halved and retried.
    """
    n_layers = model.num_layers
    layers = [n_layers] if layers is None else [int(x) for x in layers]
    bad = [x for x in layers if not 0 <= x <= n_layers]
    if bad:
        raise ProbekitError(f"layer {bad[0]} out of range: {model.id} has layers 0..{n_layers}")
    if pooling not in POOLINGS:
        raise ProbekitError(f"unknown pooling {pooling!r}; available: {', '.join(POOLINGS)}")
    if batch_size < 1:
        raise ProbekitError("batch_size must be at least 1")
    texts = [str(t) for t in texts]
    out = np.zeros((len(layers), len(texts), model.hidden_size), dtype=np.float32)
    if not texts:
        return out
    tok = model.tokenizer
    # Token lengths without padding, to sort; one cheap tokenizer call for all texts.
    lengths = [len(ids) for ids in tok(texts, truncation=True, max_length=max_length)["input_ids"]]
    order = np.argsort(-np.asarray(lengths), kind="stable")
    want_hidden = layers != [n_layers]
    done, start, bs = 0, 0, batch_size
    with torch.inference_mode():
        while start < len(texts):
            idx = order[start:start + bs]
            batch = tok([texts[i] for i in idx], padding=True, truncation=True, max_length=max_length,
                        return_tensors="pt").to(model.device)
            try:
                with _autocast(model.device, fast):
                    res = model.encoder(**batch, output_hidden_states=want_hidden)
            except RuntimeError as err:
                if _is_oom(err) and bs > 1:
                    torch.cuda.empty_cache()
                    bs = max(1, bs // 2)
                    warnings.warn(f"out of memory: retrying with batch size {bs}", stacklevel=2)
                    continue
                raise
            hs = res.hidden_states if want_hidden else (None,) * n_layers + (res.last_hidden_state,)
            for li, layer in enumerate(layers):
                pooled = _pool(hs[layer].float(), batch["attention_mask"], pooling)  # (batch, dim)
                out[li, idx] = pooled.cpu().numpy()
            start += len(idx)
            done += len(idx)
            if progress:
                progress(done, len(texts))
    return out


def encode(model: LoadedModel, texts: Sequence[str], *, layer: int | None = None, **options) -> np.ndarray:
    """Encode ``texts`` at one layer: (n_texts, dim) float32. Options as :func:`encode_layers`."""
    return encode_layers(model, texts, layers=None if layer is None else [layer], **options)[0]
