"""The forward passes of mask_predict: top-k (log-prob, token) at the masked positions of many inputs.

Both readings of mask_predict (:mod:`~probekit.probes.xfactr`, :mod:`~probekit.probes.xfactr_reference`)
decode through :func:`mask_topk`: inputs batched by length (least padding), the MLM head run only where
a mask is, results in input order. Padding changes nothing but float rounding (attention masks it out).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_module

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_module("torch")  # imported on first use (probekit.lazy)

HEAD_ATTRS = ("cls", "lm_head")  # MLM heads applied to masked positions only (BERT, RoBERTa families)


def mask_logits(mlm, ids: torch.Tensor, att: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """Logits at the masked positions ``(rows, cols)`` only: (n_masked, vocab).

    The encoder runs on the whole batch, the MLM head only where a mask is: its vocabulary projection
    at every position costs as much as a small BERT's encoder (MiniLM: 30,522 x 384 per token).
    Heads other than BERT's ``cls`` / RoBERTa's ``lm_head`` get the plain full forward.
    """
    head = next((getattr(mlm, a) for a in HEAD_ATTRS if isinstance(getattr(mlm, a, None), torch.nn.Module)), None)
    if head is None:
        return mlm(input_ids=ids, attention_mask=att).logits[rows, cols]
    hidden = mlm.base_model(input_ids=ids, attention_mask=att).last_hidden_state  # (batch, seq, dim)
    return head(hidden[rows, cols])  # (n_masked, vocab)


def mask_topk(model, inputs: list[list[int]], masked: list[list[int]], *, topn: int, batch_size: int,
              banned: list[int]) -> list[list[tuple[list[float], list[int]]]]:
    """Top-``topn`` (log-probs, token ids) at each masked position of each input, in batches.

    ``banned`` token ids get logit -inf before the softmax (probekit's reading bans special tokens;
    X-FACTR as MedLAMA ran it bans none). Inputs are batched by length, results come back in input order.
    """
    tok, mlm, dev = model.tokenizer, model.mlm, model.device
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    order = sorted(range(len(inputs)), key=lambda i: len(inputs[i]))
    out: list = [None] * len(inputs)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        chunk, where = [inputs[i] for i in idx], [masked[i] for i in idx]
        width = max(len(x) for x in chunk)
        ids = torch.full((len(chunk), width), pad, dtype=torch.long)  # (batch, seq)
        att = torch.zeros((len(chunk), width), dtype=torch.long)
        for i, x in enumerate(chunk):
            ids[i, :len(x)] = torch.tensor(x)
            att[i, :len(x)] = 1
        rows = torch.tensor([i for i, pos in enumerate(where) for _ in pos])
        cols = torch.tensor([p for pos in where for p in pos])
        sel = mask_logits(mlm, ids.to(dev), att.to(dev), rows.to(dev), cols.to(dev))  # (n_masked, vocab)
        if sel.dtype in (torch.float16, torch.bfloat16):
            sel = sel.float()
        if banned:
            sel[:, banned] = float("-inf")
        top_vals, top_toks = sel.log_softmax(-1).topk(topn, dim=-1)  # (n_masked, topn)
        vals, toks = top_vals.tolist(), top_toks.tolist()
        m = 0
        for i, pos in zip(idx, where):
            out[i] = [(vals[m + j], toks[m + j]) for j in range(len(pos))]
            m += len(pos)
    return out
