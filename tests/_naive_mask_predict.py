"""The plain reference of mask_predict: one prompt, one hypothesis, one forward pass at a time.

Written separately from probekit.probes.mask_predict (which batches every query, mask count and
hypothesis into shared forward passes) from the rules in its module docstring; the tests and
benchmarks/mask_predict.py check that both give identical outputs.
"""

from __future__ import annotations

import itertools

import torch

from probekit.types import normalize_name


def naive_decode(model, query, n, decoding, beam, max_iter):
    """One prompt, one hypothesis, one forward pass at a time; returns the final beam [(tokens, logps)]."""
    tok, mlm = model.tokenizer, model.mlm
    init, _, refine = decoding.partition("+")
    ids = tok(query.text(tok.mask_token, n_masks=n))["input_ids"]
    slots = [i for i, t in enumerate(ids) if t == tok.mask_token_id]
    special = set(tok.all_special_ids)

    def predict(tokens, masked):
        """For each masked slot: the `beam` best (log-prob, token), special tokens excluded."""
        x = list(ids)
        for j, pos in enumerate(slots):
            x[pos] = tok.mask_token_id if j in masked else tokens[j]
        with torch.inference_mode():
            logits = mlm(input_ids=torch.tensor([x])).logits[0]
        out = {}
        for j in masked:
            row = logits[slots[j]].clone()
            row[sorted(special)] = float("-inf")
            logp = row.log_softmax(-1).tolist()
            best = sorted(range(len(logp)), key=lambda t: -logp[t])[:beam]
            out[j] = [(logp[t], t) for t in best]
        return out

    def put(h, j, t, v):
        return (h[0][:j] + (t,) + h[0][j + 1:], h[1][:j] + (v,) + h[1][j + 1:])

    def score(h):
        return sum(h[1])

    def keep_best(pool):
        out = []
        for h in sorted(pool, key=lambda h: -score(h)):
            if h[0] not in [o[0] for o in out]:
                out.append(h)
        return out[:beam]

    hyps = [((None,) * n, (0.0,) * n)]
    if init == "independent":
        pred = predict(hyps[0][0], set(range(n)))
        joint = [(tuple(t for _, t in c), tuple(v for v, _ in c)) for c in itertools.product(*pred.values())]
        hyps = sorted(joint, key=lambda h: -score(h))[:beam]  # every joint filling, best sums first
    else:
        for _ in range(n):
            pool = []
            for h in hyps:
                masked = [j for j in range(n) if h[0][j] is None]
                pred = predict(h[0], masked)
                if init == "order":
                    choices = [(v, masked[0], t) for v, t in pred[masked[0]]]
                else:
                    choices = sorted([(v, j, t) for j in masked for v, t in pred[j]], key=lambda c: -c[0])[:beam]
                pool += [put(h, j, t, v) for v, j, t in choices]
            hyps = keep_best(pool)
    steps, pos, pass_changed = 0, 0, False
    while refine and steps < max_iter:
        pool = []
        for h in hyps:
            j = pos if refine == "order" else min(range(n), key=lambda s: h[1][s])
            pool += [put(h, j, t, v) for v, t in predict(h[0], [j])[j]]
        new = keep_best(pool)
        changed = {h[0] for h in new} != {h[0] for h in hyps}  # the beam holds other hypotheses
        hyps, steps = new, steps + 1
        if refine == "order":
            pass_changed, pos = pass_changed or changed, pos + 1
            if pos == n:
                if not pass_changed:
                    break
                pos, pass_changed = 0, False
        elif not changed:
            break
    return hyps


def naive_ranking(model, query, decoding, beam, n_masks, max_iter):
    """Every final hypothesis of every n, scored sum/n, sorted (stable), merged by normalised text."""
    tok = model.tokenizer
    preds = []
    for n in range(1, n_masks + 1):
        for tokens, logps in naive_decode(model, query, n, decoding, beam, max_iter):
            preds.append((tok.decode(list(tokens)).strip(), sum(logps) / n))
    preds.sort(key=lambda p: -p[1])
    names, scores = [], []
    for text, s in preds:
        if normalize_name(text) not in map(normalize_name, names):
            names.append(text)
            scores.append(s)
    return names, scores


