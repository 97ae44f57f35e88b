"""Mask-average scoring of multi-token candidates with an MLM head (Kassner et al.).

For every distinct candidate length n, the prompt is run once with n mask tokens; a candidate of
n tokens scores the mean log-softmax of its tokens at those n positions. Forward passes per query
= number of distinct candidate lengths, never one per candidate.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch

from ..encode import _autocast
from ..errors import ProbekitError
from .base import Option, Probe, ranking_from_scores

PROMPT_MAX_LENGTH = 128


def candidate_token_ids(tokenizer, names) -> list[list[int]]:
    """Word-piece ids of each name as it would appear mid-sentence (no special tokens)."""
    prefix = " " if getattr(tokenizer, "add_prefix_space", None) is not None else ""
    return tokenizer([prefix + n for n in names], add_special_tokens=False)["input_ids"]


def _by_length(token_ids: list[list[int]], max_tokens: int) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = defaultdict(list)
    for i, ids in enumerate(token_ids):
        if 0 < len(ids) <= max_tokens:
            groups[len(ids)].append(i)
    return groups


class MaskAverageProbe(Probe):
    def input_overhead(self, model, candidates, *, max_tokens: int = 20, **_) -> int:
        """Tokens this probe adds to a query beyond its one mask: a candidate of n word pieces is scored at n
        masks, so the longest scored candidate adds n - 1 (callers that fit a context use this)."""
        lengths = (len(ids) for ids in candidate_token_ids(model.tokenizer, list(candidates.names)))
        return max((n for n in lengths if n <= int(max_tokens or 20)), default=1) - 1

    def _rank(self, model, queries, candidates, *, k, progress, batch_size, max_tokens, max_length):
        tok, mlm = model.tokenizer, model.mlm
        token_ids = candidate_token_ids(tok, candidates.names)
        groups = _by_length(token_ids, max_tokens)
        if not groups:
            raise ProbekitError("no candidate fits the mask budget; raise max_tokens")
        # scores: (n_queries, n_names); names longer than max_tokens keep -inf (ranked last).
        scores = np.full((len(queries), len(candidates)), -np.inf, dtype=np.float32)
        total, done = len(groups) * len(queries), 0
        with torch.inference_mode():
            for n, members in sorted(groups.items()):
                cand = torch.tensor([token_ids[i] for i in members], device=model.device)  # (n_cand, n)
                for start in range(0, len(queries), batch_size):
                    batch_q = queries[start:start + batch_size]
                    texts = [q.text(tok.mask_token, n_masks=n) for q in batch_q]
                    enc = tok(texts, padding=True, truncation=True, max_length=max_length,
                              return_tensors="pt").to(model.device)
                    with _autocast(model.device):
                        logits = mlm(**enc).logits  # (batch, seq, vocab)
                    mask_pos = enc["input_ids"] == tok.mask_token_id  # (batch, seq)
                    if (mask_pos.sum(1) != n).any():
                        raise ProbekitError(f"a query is too long to hold {n} mask tokens within "
                                            f"{max_length} tokens; shorten it")
                    # only the n mask rows need a softmax over the vocabulary: (batch, n, vocab)
                    logp = logits[mask_pos].float().log_softmax(-1).view(len(batch_q), n, -1)
                    # gather each candidate's token log-prob at each mask position: (batch, n_cand, n)
                    pos = torch.arange(n, device=model.device)
                    per_tok = logp[:, pos[None, :], cand]  # (batch, n_cand, n)
                    scores[start:start + len(batch_q), members] = per_tok.mean(-1).cpu().numpy()
                    done += len(batch_q)
                    if progress:
                        progress(done, total, "scoring")
        return [ranking_from_scores(q, candidates, scores[i], k) for i, q in enumerate(queries)]


PROBE = MaskAverageProbe(
    name="mask_average",
    requires_mlm=True,
    options=(
        Option("batch_size", 32, (), "queries per forward pass", advanced=True),
        Option("max_tokens", 20, (), "longest candidate (in word pieces) that is scored"),
        Option("max_length", PROMPT_MAX_LENGTH, (), "prompt tokens (with masks and special tokens) at most",
               advanced=True),
    ),
    description="MLM: mean log-prob of each candidate's tokens at n masks, one pass per distinct length.",
)
