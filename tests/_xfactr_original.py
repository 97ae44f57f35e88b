"""X-FACTR's decoding loop as MedLAMA ran it, re-implemented on tensors from reading the code.

Source read: cambridgeltl/medlama @ 8a314d11c3b8538a7ec522f668b7fbe0394caa9d,
``probers/mask_predict/X-FACTR/probe.py``: ``iter_decode_beam_search`` (lines 902-1183, the same code as
jzbjyb/X-FACTR @ c1938ec7262ebc34ac0b39daff3f446e103e8a87 ``scripts/probe.py`` lines 809-1027) and the
answer selection of ``ProbeIterator.iter`` (lines 659-690). Written here from that reading, step for step
on (1, seq_len) tensors as the original runs with ``--batch_size 1``, so probekit's ``xfactr-reference``
reading (plain Python over batched top-k) is checked against an implementation of a different shape.
The original's lines are quoted where a rule is decided.
"""

from __future__ import annotations

import torch

INIT = {"independent": "all", "order": "left", "confidence": "confidence"}
ITER = {None: "none", "order": "left", "confidence": "confidence"}
MAX_QUERY_LENGTH = 64  # "--max_query_length ... default=64"; prompts are padded to it ("padding='max_length'")


class TieBreaking:
    """``get_tie_breaking(dim)``: "_tie_breaking[dim] = torch.zeros(dim).uniform_(0, 1e-5)", drawn once per
    dim and reused (lines 60-63); seeded here so a test run is repeatable."""

    def __init__(self, seed: int = 0, scale: float = 1e-5):
        self.gen, self.scale, self.cache = torch.Generator().manual_seed(seed), scale, {}

    def __call__(self, dim: int) -> torch.Tensor:
        if dim not in self.cache:
            self.cache[dim] = torch.rand(dim, generator=self.gen, dtype=torch.float64) * self.scale
        return self.cache[dim]


def iter_decode_beam_search(mlm, inp, attention_mask, *, mask_value, max_iter, init_method, iter_method,
                            beam_size, tie_breaking):
    """One prompt (inp: (1, seq_len) with n consecutive masks) -> (out_tensor, out_logprob, iter)."""
    bs, sl = inp.shape
    init_mask = inp.eq(mask_value).long()
    if iter_method == "left":
        # "leftmost_mask = init_mask * torch.cat([init_mask.new_ones((bs, 1)), 1 - init_mask], 1)[:, :-1]"
        leftmost_mask = init_mask * torch.cat([init_mask.new_ones((bs, 1)), 1 - init_mask], 1)[:, :-1]
        number_to_mask = int(init_mask.sum())
        mask_offset, has_modified = 0, False
    out_tensors = inp.unsqueeze(0)  # (beam<=, 1, seq_len)
    out_logprobs = torch.zeros_like(inp, dtype=torch.float64).unsqueeze(0)  # "tokens not considered ... zero"
    it, stop = 0, False
    while True:
        next_t, next_lp = [], []
        for out_tensor, out_logprob in zip(out_tensors, out_logprobs):  # "enumerate over all previous result"
            inp_tensor = out_tensor if it > 0 else inp
            if it > 0:
                if iter_method == "none":
                    if inp_tensor.eq(mask_value).sum() == 0:  # "no mask": "stop = True; break"
                        stop = True
                        break
                elif iter_method == "confidence":
                    has_mask = out_tensor.eq(mask_value).any(-1).unsqueeze(-1).long()
                    # "inp_tensor = out_tensor.scatter(1, out_logprob.min(-1)[1].unsqueeze(-1), mask_value)"
                    remasked = out_tensor.scatter(1, out_logprob.min(-1)[1].unsqueeze(-1), mask_value)
                    inp_tensor = out_tensor * has_mask + remasked * (1 - has_mask)
                elif iter_method == "left":
                    if not bool(out_tensor.eq(mask_value).any()):  # "no mask, should do refinement"
                        if mask_offset >= number_to_mask:
                            mask_offset = 0
                        if mask_offset == 0:  # "restart when starting from the beginning"
                            has_modified = False
                        cur_mask = torch.cat([leftmost_mask.new_zeros((bs, mask_offset)), leftmost_mask], 1)[:, :sl]
                        cur_mask = cur_mask * init_mask
                        inp_tensor = out_tensor * (1 - cur_mask) + mask_value * cur_mask
                        mask_offset += 1  # inside the loop over the beam: once per entry
            mask_mask = inp_tensor.eq(mask_value).long()
            with torch.inference_mode():
                logit = mlm(input_ids=inp_tensor, attention_mask=attention_mask).logits.double()
            # "logit[:, :, restrict_vocab] = float('-inf')" with restrict_vocab = []: nothing banned
            new_lps, new_toks = logit.log_softmax(-1).topk(beam_size, dim=-1)  # (1, seq_len, beam)
            if init_method == "confidence":
                new_lps = (new_lps + mask_mask.unsqueeze(-1).double().log()).view(-1, sl * beam_size)
                new_toks = new_toks.view(-1, sl * beam_size)
            for b in range(beam_size):
                if init_method in ("all", "left"):
                    new_lp, new_tok = new_lps[:, :, b], new_toks[:, :, b]
                    changes = (out_tensor * mask_mask).ne(new_tok * mask_mask)
                    if init_method == "left":  # "only modify the left-most one"
                        changes = changes & torch.cat([changes.new_ones((bs, 1)), ~changes], 1)[:, :-1]
                else:  # "only modify the most confident one"
                    raw_lp, raw_ind = new_lps.max(-1)
                    raw_lp, raw_ind = raw_lp.unsqueeze(-1), raw_ind.unsqueeze(-1)
                    seq_ind = raw_ind // beam_size
                    changes = mask_mask.bool() & torch.zeros_like(mask_mask).scatter(1, seq_ind, 1).bool()
                    new_tok = torch.zeros_like(out_tensor).scatter(1, seq_ind, new_toks.gather(1, raw_ind))
                    new_lp = torch.zeros_like(out_logprob).scatter(1, seq_ind, raw_lp)
                    changes = (out_tensor * changes.long()).ne(new_tok * changes.long())
                    new_lps = new_lps.scatter(1, raw_ind, float("-inf"))  # "max for the next max in beam search"
                changes = changes.long()
                # "only modify tokens that have changes": an unchanged token keeps its old log-prob
                next_t.append(out_tensor * (1 - changes) + new_tok * changes)
                next_lp.append(out_logprob * (1 - changes.double()) + new_lp * changes.double())
        if stop:
            break
        next_t, next_lp = torch.stack(next_t, 0), torch.stack(next_lp, 0)
        next_lp = next_lp + tie_breaking(next_lp.size(0)).view(-1, 1, 1)  # "tie breaking"
        # "dedup": an entry equal to an earlier one is a duplicate
        n_all = next_t.size(0)
        inv = torch.unique(next_t[:, 0, :], dim=0, return_inverse=True)[1]
        not_dup = (inv.unsqueeze(-1).ne(inv.unsqueeze(0))
                   | (torch.arange(n_all).unsqueeze(-1) <= torch.arange(n_all).unsqueeze(0))).all(-1)
        beam_score = (next_lp * init_mask.unsqueeze(0).double()
                      + not_dup.view(-1, 1, 1).double().log()).sum(-1)  # (n_all, 1)
        top = beam_score.topk(beam_size, dim=0)[1].view(-1, bs, 1).repeat(1, 1, sl)
        next_lp, next_t = torch.gather(next_lp, 0, top), torch.gather(next_t, 0, top)
        # "stop condition for other type of iter": the ordered beam
        if next_t.size(0) == out_tensors.size(0) and bool(next_t.eq(out_tensors).all()):
            if iter_method != "left":
                stop = True
        elif iter_method == "left":
            has_modified = True
        if iter_method == "left" and not has_modified and mask_offset == number_to_mask:
            stop = True
        out_tensors, out_logprobs = next_t, next_lp
        it += 1
        if max_iter and it >= max_iter:  # "max_iter can be zero"
            stop = True
        if stop:
            break
    return out_tensors[0], out_logprobs[0], it


def original_rows(model, query, *, decoding, beam, n, max_iter, tie_breaking):
    """The final (tokens at the mask slots, their log-probs) of one prompt with ``n`` masks."""
    tok = model.tokenizer
    init, _, refine = decoding.partition("+")
    enc = tok([query.text(tok.mask_token, n_masks=n)], padding="max_length", max_length=MAX_QUERY_LENGTH,
              truncation=True, return_tensors="pt")
    ids, att = enc["input_ids"], enc["attention_mask"]
    mask_ind = ids.eq(tok.mask_token_id)
    out, lp, _ = iter_decode_beam_search(model.mlm, ids, att, mask_value=tok.mask_token_id, max_iter=max_iter,
                                         init_method=INIT[init], iter_method=ITER[refine or None],
                                         beam_size=beam, tie_breaking=tie_breaking)
    return out[0][mask_ind[0]].tolist(), lp[0][mask_ind[0]].tolist()
