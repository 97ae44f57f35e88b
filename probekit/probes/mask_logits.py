"""A masked LM's logits at one masked row per copy, without the (seq x vocab) product at every other row: the
fast path of pseudo-perplexity (Salazar et al. 2020) and of the likelihood probe's MLM scoring alike.

Three paths give the same values up to float rounding (:func:`logits_path` picks the fastest the architecture
allows); each copy ``c`` of a batch is masked at ``batch[c, pos[c]]`` and only that row's logits are computed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ProbekitError
from ..lazy import lazy_module

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_module("torch")  # imported on first use (probekit.lazy)


def _split_head(mlm) -> tuple[Any, torch.nn.Module] | None:
    """(encoder, MLM head) for architectures whose head maps hidden states row by row, else None.

    The encoder is the model's base (``BertModel``, ``RobertaModel``); :func:`logits_at_mask` uses its
    ``embeddings``, ``encoder.layer`` and ``config`` by name.

    Applying the head only at the one masked row of each copy skips a (seq × vocab) product per copy.
    """
    mtype = getattr(mlm.config, "model_type", "")
    base = getattr(mlm, getattr(mlm, "base_model_prefix", ""), None)
    if base is None:
        return None
    if mtype == "bert" and hasattr(mlm, "cls"):
        return base, mlm.cls
    if mtype in ("roberta", "xlm-roberta", "camembert") and hasattr(mlm, "lm_head"):
        return base, mlm.lm_head
    return None


def _post_ln_layers(base) -> list[torch.nn.Module] | None:
    """The encoder layers of a BERT-style (post-LayerNorm, absolute positions, encoder-only) model, else None.

    For these the last layer can be run at the masked row alone (see :func:`_last_layer_at_rows`).
    """
    cfg = base.config
    if getattr(cfg, "is_decoder", False) or getattr(cfg, "add_cross_attention", False):
        return None
    if getattr(cfg, "position_embedding_type", "absolute") != "absolute":
        return None
    layers = list(getattr(getattr(base, "encoder", None), "layer", None) or [])
    if not layers or not hasattr(base, "embeddings"):
        return None
    last = layers[-1]
    sa = getattr(getattr(last, "attention", None), "self", None)
    parts = (sa, getattr(last.attention, "output", None) if sa is not None else None,
             getattr(last, "intermediate", None), getattr(last, "output", None))
    needed = ("query", "key", "value", "num_attention_heads", "attention_head_size")
    if any(p is None for p in parts) or not all(hasattr(sa, a) for a in needed):
        return None
    return layers


def logits_path(mlm) -> str:
    """How :func:`probekit.templates.perplexity.pseudo_perplexity` and the likelihood probe get each copy's logits
    at its masked position, fastest first.

    - ``"mask_row"``: the encoder up to its last layer on every row; the last layer (attention query,
      feed-forward) and the MLM head only at the masked row (keys and values still from every row);
    - ``"head"``: the whole encoder on every row, the MLM head only at the masked row;
    - ``"full"``: the model's own forward (logits at every position), then the masked row.

    All three give the same values up to float rounding (tested); the row-wise parts of a layer
    (projections, feed-forward, LayerNorm) and of the head do not mix rows, so computing them at one
    row is computing that row.
    """
    split = _split_head(mlm)
    if split is None:
        return "full"
    try:
        from transformers.masking_utils import create_bidirectional_mask  # noqa: F401
    except ImportError:
        return "head"
    return "mask_row" if _post_ln_layers(split[0]) is not None else "head"


def _last_layer_at_rows(layer, hidden: torch.Tensor, keep: torch.Tensor, rows: torch.Tensor,
                        pos: torch.Tensor) -> torch.Tensor:
    """A BERT layer's output at row ``pos[c]`` of each copy ``c`` only: (copies, hidden).

    ``hidden`` (copies, seq, hidden) is the layer's input, ``keep`` (copies, seq) is True at real tokens.
    The masked row attends over every row (keys and values from all of them), so only its query, the
    attention output, the feed-forward and the LayerNorms shrink from ``seq`` rows to one.
    """
    sa = layer.attention.self
    copies, seq, _ = hidden.shape
    heads, head_dim = sa.num_attention_heads, sa.attention_head_size
    x = hidden[rows, pos]  # (copies, hidden): the input at each copy's masked row
    q = sa.query(x).view(copies, heads, 1, head_dim)  # (copies, heads, 1, head_dim)
    k = sa.key(hidden).view(copies, seq, heads, head_dim).transpose(1, 2)  # (copies, heads, seq, head_dim)
    v = sa.value(hidden).view(copies, seq, heads, head_dim).transpose(1, 2)  # (copies, heads, seq, head_dim)
    ctx = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=keep[:, None, None, :], scale=getattr(sa, "scaling", head_dim ** -0.5))
    ctx = ctx.reshape(copies, heads * head_dim)  # (copies, hidden): heads concatenated
    attended = layer.attention.output(ctx, x)  # (copies, hidden): dense, residual, LayerNorm
    return layer.output(layer.intermediate(attended), attended)  # (copies, hidden): feed-forward, residual, LN


def logits_at_mask(mlm, batch: torch.Tensor, attn: torch.Tensor, rows: torch.Tensor, pos: torch.Tensor,
                    path: str) -> torch.Tensor:
    """Logits at each copy's masked position: (copies, vocab). ``batch``/``attn`` (copies, seq), ``rows``/``pos``
    (copies,): copy ``c`` is masked at ``batch[c, pos[c]]``; ``path`` as in :func:`logits_path`."""
    if path == "full":
        return mlm(input_ids=batch, attention_mask=attn).logits[rows, pos]  # (copies, vocab)
    split = _split_head(mlm)
    if split is None:
        raise ProbekitError(f"logits path {path!r} needs a BERT- or RoBERTa-style MLM head; use 'full'")
    base, head = split
    if path == "head":
        hidden = base(input_ids=batch, attention_mask=attn)[0]  # (copies, seq, hidden)
        return head(hidden[rows, pos])  # (copies, vocab): the head at the masked row only
    if path != "mask_row":
        raise ProbekitError(f"unknown logits path {path!r}")
    from transformers.masking_utils import create_bidirectional_mask

    layers = _post_ln_layers(base)
    if layers is None:
        raise ProbekitError("logits path 'mask_row' needs a post-LayerNorm BERT-style encoder; use 'head'")
    hidden = base.embeddings(input_ids=batch)  # (copies, seq, hidden)
    mask = create_bidirectional_mask(config=base.config, inputs_embeds=hidden, attention_mask=attn)  # as HF builds it
    for layer in layers[:-1]:
        out = layer(hidden, mask)
        hidden = out[0] if isinstance(out, tuple) else out  # (copies, seq, hidden)
    at_mask = _last_layer_at_rows(layers[-1], hidden, attn.bool(), rows, pos)  # (copies, hidden)
    return head(at_mask)  # (copies, vocab)
