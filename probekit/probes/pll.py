"""Pseudo-log-likelihoods of masked LMs: one masked copy of a statement per scored token (Salazar et al. 2020's
``original`` PLL, or ``within_word_l2r``, Kauf & Ivanova 2023, lm-pub-quiz's default, which also hides the rest of
the token's word), the likelihood probe's scorer for encoders with an MLM head (the rule in full:
:mod:`probekit.probes.likelihood_scoring`'s docstring). The statements and their scored positions come from
:func:`probekit.probes.likelihood_scoring.encode`, as for the other model kinds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ProbekitError
from ..lazy import inference_mode, lazy_module
from .likelihood_scoring import PLLS, Encoded, _nan_rows, _target_logprobs
from .mask_logits import logits_at_mask, logits_path

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_module("torch")  # imported on first use (probekit.lazy)


def masked_with(e: Encoded, pll: str) -> list[tuple[int, tuple[int, ...]]]:
    """Each scored position of ``e`` with the other positions its copy masks: none for the ``original`` PLL; for
    ``within_word_l2r`` the scored positions right after it that continue its word (lm-pub-quiz's rule: walk the
    later scored tokens and stop at the first of another word).

    >>> e = Encoded((101, 7, 8, 9, 102), (False, True, True, True, False), (None, 0, 0, 1, None))
    >>> masked_with(e, "original"), masked_with(e, "within_word_l2r")
    ([(1, ()), (2, ()), (3, ())], [(1, (2,)), (2, ()), (3, ())])
    """
    if pll not in PLLS:
        raise ProbekitError(f"unknown pll {pll!r}; available: {', '.join(PLLS)}")
    where = [p for p, s in enumerate(e.scored) if s]
    if pll == "original":
        return [(p, ()) for p in where]
    if len(e.words) != len(e.ids):
        raise ProbekitError("pll 'within_word_l2r' needs the tokenizer's word ids (a fast tokenizer); this model's "
                            "tokenizer gives none: use pll 'original'")
    out = []
    for j, p in enumerate(where):
        word, more = e.words[p], []
        if word is not None:
            for q in where[j + 1:]:
                if e.words[q] != word:
                    break
                more.append(q)
        out.append((p, tuple(more)))
    return out


@inference_mode
def mlm_logprobs(mlm, tokenizer, encoded: Sequence[Encoded], *, batch_size: int, pll: str = "original",
                 progress: Callable[[int, int], None] | None = None) -> list[np.ndarray]:
    """Per-token pseudo-log-likelihoods: one masked copy per scored token (masking what ``pll`` says,
    :func:`masked_with`), copies of all statements stacked, shortest first, ``batch_size`` copies per forward
    (:mod:`probekit.probes.likelihood_scoring`'s docstring)."""
    out = _nan_rows(encoded)
    mask_id = tokenizer.mask_token_id
    pad_id = tokenizer.pad_token_id or 0
    copies = sorted(((i, pos, more) for i, e in enumerate(encoded) for pos, more in masked_with(e, pll)),
                    key=lambda c: len(encoded[c[0]].ids))
    path = logits_path(mlm)
    dev = next(mlm.parameters()).device
    for start in range(0, len(copies), batch_size):
        chunk = copies[start:start + batch_size]
        width = max(len(encoded[i].ids) for i, _, _ in chunk)
        batch = torch.full((len(chunk), width), pad_id, dtype=torch.long)  # (copies, width)
        attn = torch.zeros((len(chunk), width), dtype=torch.long)
        for r, (i, _, more) in enumerate(chunk):
            ids = encoded[i].ids
            batch[r, :len(ids)] = torch.tensor(ids)
            attn[r, :len(ids)] = 1
            batch[r, list(more)] = mask_id  # within_word_l2r: the rest of the word is hidden too
        rows = torch.arange(len(chunk))
        pos = torch.tensor([p for _, p, _ in chunk])
        target = torch.tensor([encoded[i].ids[p] for i, p, _ in chunk])
        batch[rows, pos] = mask_id
        batch, attn, rows, pos, target = (t.to(dev) for t in (batch, attn, rows, pos, target))
        lp = _target_logprobs(logits_at_mask(mlm, batch, attn, rows, pos, path), target).double().cpu().numpy()
        for (i, p, _), v in zip(chunk, lp):
            out[i][p] = v
        if progress:
            progress(min(start + batch_size, len(copies)), len(copies))
    return out
