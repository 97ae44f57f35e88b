"""Token log-likelihoods of filled-in statements, for every kind of LM (the scoring kernels of the likelihood probe).

A statement is tokenised once, whole (so its tokens are the ones a one-statement-at-a-time scorer sees), and
each kind of model gives each *scored* token a log-probability:

- causal LM (chain rule): token t gets log P(w_t | w_<t). A BOS token the tokenizer does not add itself is put
  first (GPT-2), so the first word is scored too; the first token is never a target. All candidates of a query
  share the tokens of the statement before the answer: that prefix is run once, its keys and values (the KV
  cache) are kept, and only the continuations run, length-sorted and padded at the right (a causal model's
  tokens never see the padding after them). Prefixes and continuations of several queries share each forward
  pass (prefixes left-padded, with explicit positions; each continuation after its own query's cached prefix),
  so short queries do not cost two forward passes each. A model with sliding-window attention (Mistral) keeps
  only its window's keys in the cache, so a query with a statement longer than the window is scored whole.
- masked LM (pseudo-log-likelihood, Salazar et al. 2020): with the ``original`` PLL token t gets
  log P(w_t | W with w_t masked); with ``within_word_l2r`` (Kauf & Ivanova 2023, the default of BEAR's
  ``lm-pub-quiz``) the scored tokens after t in the same word (the tokenizer's word ids) are masked too, so a word
  split into pieces is read left to right and no piece is predicted from the pieces after it. Special tokens are
  context. The masked copies of all statements are stacked, length-sorted, and run through
  :func:`probekit.probes.mask_logits.logits_at_mask` (only each copy's target row goes through the MLM head, and
  for BERT-style encoders through the last layer); :mod:`probekit.probes.pll` does it.
- encoder-decoder: the encoder reads the query with the model's mask in the answer's place (once per query),
  the decoder is teacher-forced on the statement; token t of the statement gets log P(w_t | w_<t, encoder).

Which tokens are scored: ``statement`` = every token above; ``answer`` = those whose characters overlap the
answer's (a byte-level BPE token " diabetes" carries the space before the word). Special tokens are never
scored. The result per statement is an array of per-token log-probs with NaN at unscored positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ProbekitError
from ..lazy import inference_mode, lazy_module

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_module("torch")  # imported on first use (probekit.lazy)


def _dynamic_cache(config):
    """An empty key/value cache for ``config``'s model. transformers is imported here, not with the module: every
    command line imports this module (its probe's options are CLI flags), and importing transformers costs ~0.7 s
    that a command scoring no statement (a warm retrieval ``bench``) would pay for nothing."""
    from transformers import DynamicCache

    return DynamicCache(config=config)


SPANS = ("statement", "answer")
PLLS = ("original", "within_word_l2r")
"""Masked LMs' pseudo-log-likelihoods (module docstring): which tokens each scored token's copy masks."""


@dataclass(frozen=True)
class Encoded:
    """One tokenised statement: ``ids`` (with the special tokens the model reads), ``scored``, True at the
    positions whose token counts, and ``words``, each position's word index from the tokenizer (None for special
    tokens; empty where the tokenizer gives none): ``within_word_l2r`` needs them."""

    ids: tuple[int, ...]
    scored: tuple[bool, ...]
    words: tuple[int | None, ...] = ()


def context_limit(model) -> int:
    """The longest input (tokens) the model takes: its position table, or the tokenizer's limit when smaller."""
    net = model.causal if model.is_causal else model.seq2seq if model.is_seq2seq else model.mlm
    cfg = net.config
    limit = None
    for name in ("n_positions", "max_position_embeddings"):
        value = getattr(cfg, name, None)
        if isinstance(value, int) and value > 0:
            limit = value
            break
    tok_limit = getattr(model.tokenizer, "model_max_length", None)
    if isinstance(tok_limit, int) and 0 < tok_limit < 10**9 and (limit is None or tok_limit < limit):
        limit = tok_limit
    return limit or 512


def _bos_to_add(model) -> int | None:
    """The BOS id a causal LM's statements start with when its tokenizer does not add it itself."""
    bos = getattr(model.tokenizer, "bos_token_id", None)
    return bos if model.is_causal else None


def encode(model, texts: Sequence[str], spans: Sequence[tuple[int, int]], span: str) -> list[Encoded]:
    """Tokenise ``texts`` (each with its answer's character span) and mark the scored tokens (module docstring)."""
    if span not in SPANS:
        raise ProbekitError(f"unknown span {span!r}; available: {', '.join(SPANS)}")
    tok = model.tokenizer
    enc = tok(list(texts), add_special_tokens=True, return_offsets_mapping=True, return_special_tokens_mask=True)
    bos = _bos_to_add(model)
    out = []
    for n, (ids, offsets, special, (a, b)) in enumerate(zip(enc["input_ids"], enc["offset_mapping"],
                                                           enc["special_tokens_mask"], spans)):
        ids, offsets, special = list(ids), list(offsets), list(special)
        words: list[int | None] = list(enc.word_ids(n)) if enc.is_fast else []
        if bos is not None and (not ids or ids[0] != bos):
            ids, offsets, special = [bos] + ids, [(0, 0)] + offsets, [1] + special
            words = [None, *words] if words else []
        scored = [not s and (span == "statement" or (e > a and s0 < b and e > s0))
                  for (s0, e), s in zip(offsets, special)]
        if model.is_causal and scored:
            scored[0] = False  # nothing predicts the first token
        out.append(Encoded(tuple(ids), tuple(scored), tuple(words)))
    return out


def _nan_rows(encoded: Sequence[Encoded]) -> list[np.ndarray]:
    return [np.full(len(e.ids), np.nan, dtype=np.float64) for e in encoded]


def _target_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log-softmax of ``logits`` (..., vocab) at ``targets`` (...), in float32, without the full log-softmax."""
    logits = logits.float()
    return logits.gather(-1, targets[..., None])[..., 0] - logits.logsumexp(-1)


# ---------------------------------------------------------------- causal LMs
def common_prefix(rows: Sequence[Sequence[int]]) -> int:
    """Length of the token prefix all ``rows`` share, leaving every row at least one token after it.

    >>> common_prefix([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]])
    2
    >>> common_prefix([[1, 2], [1, 2]])
    1
    """
    first, n = rows[0], min(len(r) for r in rows) - 1
    p = 0
    while p < n and all(r[p] == first[p] for r in rows):
        p += 1
    return p


def attention_window(lm) -> int | None:
    """The sliding attention window of a causal LM (each token attends to the last ``window`` positions, itself
    included), or None when every layer attends to the whole context. A config may name a window its layers do not
    use (Qwen2 without ``use_sliding_window``): ``layer_types``, where present, says which layers slide."""
    cfg = lm.config
    window = getattr(cfg, "sliding_window", None)
    if not isinstance(window, int) or window <= 0:
        return None
    layer_types = getattr(cfg, "layer_types", None)
    if layer_types is not None and "sliding_attention" not in layer_types:
        return None
    return window


@inference_mode
def causal_logprobs(lm, encoded: Sequence[Encoded], *, batch_size: int) -> list[np.ndarray]:
    """Per-token log-probs of one query's statements (NaN where not scored): :func:`causal_logprobs_many` for
    one query."""
    return causal_logprobs_many(lm, [encoded], batch_size=batch_size)[0]


def _whole_statements(lm, encoded: Sequence[Encoded], batch_size: int, dev) -> list[np.ndarray]:
    """Statements sharing no token (no BOS): each scored whole in length-sorted right-padded batches, the first
    token not a target."""
    out = _nan_rows(encoded)
    rows = [list(e.ids) for e in encoded]
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    for start in range(0, len(order), batch_size):
        members = order[start:start + batch_size]
        width = max(len(rows[i]) for i in members)
        batch = torch.zeros((len(members), width), dtype=torch.long)  # (b, width), right-padded
        real = torch.zeros((len(members), width), dtype=torch.long)
        for r, i in enumerate(members):
            batch[r, :len(rows[i])] = torch.tensor(rows[i])
            real[r, :len(rows[i])] = 1
        batch, real = batch.to(dev), real.to(dev)
        logits = lm(input_ids=batch, attention_mask=real).logits  # (b, width, vocab)
        lp = _target_logprobs(logits[:, :-1], batch[:, 1:]).double().cpu().numpy()  # (b, width - 1)
        for r, i in enumerate(members):
            scored = np.asarray(encoded[i].scored[1:])
            out[i][1:] = np.where(scored, lp[r, :len(rows[i]) - 1], np.nan)
    return out


@inference_mode
def causal_logprobs_many(lm, groups: Sequence[Sequence[Encoded]], *, batch_size: int) -> list[list[np.ndarray]]:
    """Per-token log-probs of several queries' statements (``groups``: one list per query; NaN where not
    scored), ``batch_size`` rows per forward across queries.

    Each query's statements share a token prefix (:func:`common_prefix`). First every query's prefix runs once,
    ``batch_size`` prefixes per forward, left-padded with explicit ``position_ids`` (a prefix's positions start
    at 0 whatever its padding); its keys and values (the KV cache) and the log-probs its last row predicts are
    kept. Then the continuations of all queries, length-sorted together, run in right-padded batches, each row
    after its own query's cached prefix (gathered from the kept keys and values), the attention mask covering
    the prefix and the continuation and not the padding. Queries with no shared prefix are scored whole, and so
    are those with a statement longer than a sliding attention window (:func:`attention_window`): its cache keeps
    only the window's last keys, so a continuation could not see the prefix it needs.
    Measured on the tests' tiny GPT-2 (demo set, relation answers, 1 thread), this was faster than scoring whole
    statements of many queries in one padded batch, which also runs ~2.8x the tokens.
    """
    if not groups:
        return []
    dev = next(lm.parameters()).device
    out = [_nan_rows(g) for g in groups]
    rows = [[list(e.ids) for e in g] for g in groups]
    window = attention_window(lm)
    pre = [common_prefix(r) if r and (window is None or max(map(len, r)) <= window) else 0 for r in rows]
    for q, g in enumerate(groups):
        if g and pre[q] == 0:
            out[q] = _whole_statements(lm, g, batch_size, dev)
    shared = sorted((q for q in range(len(groups)) if rows[q] and pre[q] > 0), key=lambda q: pre[q])
    if not shared:
        return out
    # 1. every query's prefix once, batch_size prefixes per forward, left-padded with explicit positions; keep
    #    each one's keys and values (left-padded to the longest prefix) and the log-probs its last row predicts
    width_p = max(pre[q] for q in shared)
    slot = {q: r for r, q in enumerate(shared)}
    keys: list[torch.Tensor] = []  # per layer (queries, heads, width_p, head_dim)
    values: list[torch.Tensor] = []
    last = torch.empty(0)  # (queries, vocab): log-softmax of each prefix's last row
    for start in range(0, len(shared), batch_size):
        qs = shared[start:start + batch_size]
        w = max(pre[q] for q in qs)
        p_ids = np.zeros((len(qs), w), dtype=np.int64)  # (queries, w): prefixes, left-padded
        p_mask = np.zeros((len(qs), w), dtype=np.int64)
        for r, q in enumerate(qs):
            p_ids[r, w - pre[q]:] = rows[q][0][:pre[q]]
            p_mask[r, w - pre[q]:] = 1
        p_pos = np.maximum(p_mask.cumsum(1) - 1, 0)
        res = lm(input_ids=torch.from_numpy(p_ids).to(dev), attention_mask=torch.from_numpy(p_mask).to(dev),
                 position_ids=torch.from_numpy(p_pos).to(dev), use_cache=True)
        p_logits = res.logits  # (queries, w, vocab)
        for r, q in enumerate(qs):
            p, off = pre[q], w - pre[q]
            if p > 1:  # logits at prefix position t predict token t + 1
                target = torch.from_numpy(p_ids[r, off + 1:]).to(dev)
                lp = _target_logprobs(p_logits[r, off:-1], target).double().cpu().numpy()  # (p-1,)
                for i, e in enumerate(groups[q]):
                    out[q][i][1:p] = np.where(np.asarray(e.scored[1:p]), lp, np.nan)
        row_last = p_logits[:, -1].float()
        row_last = row_last - row_last.logsumexp(-1, keepdim=True)  # (queries, vocab)
        if start == 0:
            n_layers = len(res.past_key_values.layers)
            for layer in res.past_key_values.layers:
                shape = (len(shared), layer.keys.shape[1], width_p, layer.keys.shape[3])
                keys.append(layer.keys.new_zeros(shape))
                values.append(layer.values.new_zeros((*shape[:3], layer.values.shape[3])))
            last = row_last.new_empty((len(shared), row_last.shape[-1]))
        last[start:start + len(qs)] = row_last
        for li in range(n_layers):
            layer = res.past_key_values.layers[li]
            keys[li][start:start + len(qs), :, width_p - w:] = layer.keys
            values[li][start:start + len(qs), :, width_p - w:] = layer.values
        del res, p_logits
    # 2. all continuations, length-sorted across queries, each row after its own query's cached prefix
    items = sorted(((q, i) for q in shared for i in range(len(rows[q]))),
                   key=lambda c: len(rows[c[0]][c[1]]) - pre[c[0]])
    for start in range(0, len(items), batch_size):
        members = items[start:start + batch_size]
        sel = torch.tensor([slot[q] for q, _ in members], device=dev)
        past = _dynamic_cache(lm.config)
        for li in range(len(keys)):
            # a model sharded across GPUs (device_map="auto") keeps each layer's cache on that layer's GPU
            past.update(keys[li][sel.to(keys[li].device)], values[li][sel.to(values[li].device)], li)
        width = max(len(rows[q][i]) - pre[q] for q, i in members)
        batch_np = np.zeros((len(members), width), dtype=np.int64)  # (b, width): continuations, right-padded
        pos = np.zeros((len(members), width), dtype=np.int64)
        attn = np.zeros((len(members), width_p + width), dtype=np.int64)
        lengths = np.zeros(len(members), dtype=np.int64)
        for r, (q, i) in enumerate(members):
            cont = rows[q][i][pre[q]:]
            n = lengths[r] = len(cont)
            batch_np[r, :n] = cont
            pos[r, :n] = np.arange(pre[q], pre[q] + n)
            attn[r, width_p - pre[q]:width_p + n] = 1
        batch = torch.from_numpy(batch_np).to(dev)
        logits = lm(input_ids=batch, attention_mask=torch.from_numpy(attn).to(dev),
                    position_ids=torch.from_numpy(pos).to(dev), past_key_values=past,
                    use_cache=True).logits  # (b, width, vocab)
        # the prefix's last row predicts continuation token 0; logits[:, j] predicts token j + 1 (real ones only)
        lp_t = torch.zeros((len(members), width), dtype=torch.float32, device=dev)
        lp_t[:, 0] = last[sel].gather(1, batch[:, :1])[:, 0]
        if width > 1:
            nxt = torch.from_numpy(np.arange(1, width)[None, :] < lengths[:, None]).to(dev)  # (b, width - 1)
            lp_t[:, 1:][nxt] = _target_logprobs(logits[:, :-1][nxt], batch[:, 1:][nxt])
        lp_b = lp_t.double().cpu().numpy()  # (b, width)
        for r, (q, i) in enumerate(members):
            p, n = pre[q], lengths[r]
            out[q][i][p:] = np.where(np.asarray(groups[q][i].scored[p:]), lp_b[r, :n], np.nan)
    return out


# ---------------------------------------------------------------- encoder-decoders
@inference_mode
def seq2seq_logprobs(s2s, tokenizer, prompt: str, encoded: Sequence[Encoded], *, batch_size: int) -> list[np.ndarray]:
    """Per-token decoder log-probs of one query's statements given the encoder's reading of ``prompt`` (the query
    with the model's mask), the encoder run once for all of them."""
    dev = next(s2s.parameters()).device
    out = _nan_rows(encoded)
    enc = tokenizer([prompt], return_tensors="pt").to(dev)
    hidden = s2s.get_encoder()(**enc).last_hidden_state  # (1, prompt_len, d)
    start_id = s2s.config.decoder_start_token_id
    pad = tokenizer.pad_token_id or 0
    rows = [list(e.ids) for e in encoded]
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    for s in range(0, len(order), batch_size):
        members = order[s:s + batch_size]
        width = max(len(rows[i]) for i in members)
        labels = torch.full((len(members), width), pad, dtype=torch.long)  # (b, width)
        for r, i in enumerate(members):
            labels[r, :len(rows[i])] = torch.tensor(rows[i])
        dec_in = torch.cat([torch.full((len(members), 1), start_id, dtype=torch.long), labels[:, :-1]], 1)
        labels, dec_in = labels.to(dev), dec_in.to(dev)
        b = len(members)
        logits = s2s(encoder_outputs=(hidden.expand(b, -1, -1),), attention_mask=enc["attention_mask"].expand(b, -1),
                     decoder_input_ids=dec_in).logits  # (b, width, vocab)
        lp = _target_logprobs(logits, labels).double().cpu().numpy()  # (b, width)
        for r, i in enumerate(members):
            out[i] = np.where(np.asarray(encoded[i].scored), lp[r, :len(rows[i])], np.nan)
    return out


def reduce(token_logprobs: np.ndarray, reduction: str) -> float:
    """A statement's score from its per-token log-probs: their ``sum`` or ``mean`` over scored tokens
    (-inf when no token is scored: such a candidate ranks last).

    >>> reduce(np.array([np.nan, -1.0, -3.0]), "sum"), reduce(np.array([np.nan, -1.0, -3.0]), "mean")
    (-4.0, -2.0)
    """
    vals = token_logprobs[~np.isnan(token_logprobs)]
    if vals.size == 0:
        return float("-inf")
    return float(vals.sum() if reduction == "sum" else vals.mean())
