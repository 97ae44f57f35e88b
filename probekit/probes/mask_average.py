"""Mask-average scoring of multi-token candidates with an MLM head (Kassner et al.).

For every distinct candidate length n, the prompt is run once with n mask tokens; a candidate of
n tokens scores the mean log-softmax of its tokens at those n positions. Forward passes per query
= number of distinct candidate lengths, never one per candidate. Every candidate is scored, however
many word pieces it has (MedLAMA has tail names of 60+ pieces): a long name only adds its length's
forward pass. Only a name that tokenises to nothing, or whose prompt would not fit the model's input,
cannot be scored (the latter is refused with a message).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from ..encode import _autocast
from ..errors import ProbekitError
from ..lazy import lazy_module
from ..ranking import ranking_from_scores
from .base import Call, Option, Probe

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_module("torch")  # imported on first use (probekit.lazy)


def candidate_token_ids(tokenizer, names) -> list[list[int]]:
    """Word-piece ids of each name as it would appear mid-sentence (no special tokens)."""
    prefix = " " if getattr(tokenizer, "add_prefix_space", None) is not None else ""
    return tokenizer([prefix + n for n in names], add_special_tokens=False)["input_ids"]


def _by_length(token_ids: list[list[int]]) -> dict[int, list[int]]:
    """Candidate positions grouped by word-piece count (every length: one forward pass each).

    >>> dict(_by_length([[5, 6], [7], [], [8, 9], list(range(30))]))
    {2: [0, 3], 1: [1], 30: [4]}
    """
    groups: dict[int, list[int]] = defaultdict(list)
    for i, ids in enumerate(token_ids):
        if ids:
            groups[len(ids)].append(i)
    return groups


def input_limit(model) -> int:
    """The longest input (tokens, with special tokens) the model takes: its position table, or the
    tokenizer's limit when that is smaller (RoBERTa's table has 2 extra rows)."""
    limit = int(getattr(model.encoder.config, "max_position_embeddings", 512) or 512)
    tok_limit = getattr(model.tokenizer, "model_max_length", None)
    if isinstance(tok_limit, int) and 0 < tok_limit < limit:
        limit = tok_limit
    return limit


class MaskAverageProbe(Probe):
    def input_overhead(self, model, candidates, **options) -> int:
        """Tokens this probe adds to a query beyond its one mask: a candidate of n word pieces is scored at n
        masks (every candidate is scored), so the longest one adds n - 1 (callers that fit a context use this)."""
        lengths = (len(ids) for ids in candidate_token_ids(model.tokenizer, list(candidates.names)))
        return max(lengths, default=1) - 1

    def _rank(self, model, queries, candidates, call: Call, *, batch_size, max_length):
        tok, mlm, progress = model.tokenizer, model.mlm, call.progress
        limit = input_limit(model) if max_length is None else max_length
        token_ids = candidate_token_ids(tok, candidates.names)
        groups = _by_length(token_ids)
        if not groups:
            raise ProbekitError("no candidate name gives any word piece with this tokenizer")
        # scores: (n_queries, n_names); only names with no word piece keep -inf (ranked last).
        scores = np.full((len(queries), len(candidates)), -np.inf, dtype=np.float32)
        total, done = len(groups) * len(queries), 0
        with torch.inference_mode():
            for n, members in sorted(groups.items()):
                cand = torch.tensor([token_ids[i] for i in members], device=model.device)  # (n_cand, n)
                for start in range(0, len(queries), batch_size):
                    batch_q = queries[start:start + batch_size]
                    texts = [q.text(tok.mask_token, n_masks=n) for q in batch_q]
                    enc = tok(texts, padding=True, return_tensors="pt")
                    if enc["input_ids"].shape[1] > limit:
                        longest = int(enc["attention_mask"].sum(1).argmax())
                        raise ProbekitError(
                            f"query {batch_q[longest].id!r} with {n} mask tokens (for a candidate of {n} word "
                            f"pieces, e.g. {candidates.names[members[0]]!r}) needs "
                            f"{int(enc['attention_mask'].sum(1).max())} tokens, more than {limit}; "
                            "shorten the query or leave such names out of the candidates")
                    enc = enc.to(model.device)
                    with _autocast(model.device):
                        logits = mlm(**enc).logits  # (batch, seq, vocab)
                    mask_pos = enc["input_ids"] == tok.mask_token_id  # (batch, seq)
                    if (mask_pos.sum(1) != n).any():
                        raise ProbekitError(f"a query holds a mask token of its own; cannot place {n} masks")
                    # only the n mask rows need a softmax over the vocabulary: (batch, n, vocab)
                    logp = logits[mask_pos].float().log_softmax(-1).view(len(batch_q), n, -1)
                    # gather each candidate's token log-prob at each mask position: (batch, n_cand, n)
                    pos = torch.arange(n, device=model.device)
                    per_tok = logp[:, pos[None, :], cand]  # (batch, n_cand, n)
                    scores[start:start + len(batch_q), members] = per_tok.mean(-1).cpu().numpy()
                    done += len(batch_q)
                    if progress:
                        progress(done, total, "scoring")
        return [ranking_from_scores(q, candidates, scores[i], call.k, excluded=ex)
                for i, (q, ex) in enumerate(zip(queries, call.excluded))]


PROBE = MaskAverageProbe(
    name="mask_average",
    requires_mlm=True,
    options=(
        Option("batch_size", 32, (), "queries per forward pass", advanced=True, minimum=1),
        Option("max_length", None, (), "prompt tokens (with masks and special tokens) at most; None = the "
               "model's input limit (every candidate is scored, however long)", type=int, advanced=True, minimum=1),
    ),
    description="MLM: mean log-prob of each candidate's tokens at n masks, one pass per distinct length; "
                "every candidate is scored.",
)
