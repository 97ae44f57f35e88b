"""mask_predict's ``xfactr-reference`` reading: X-FACTR's decoding loop as MedLAMA ran it, in plain Python.

Source read: cambridgeltl/medlama @ 8a314d1 ``probers/mask_predict/X-FACTR/probe.py`` (its port of
jzbjyb/X-FACTR @ c1938ec ``scripts/probe.py``; ``iter_decode_beam_search`` is the same code in both,
lines 902-1183 of the port, 809-1027 of the original). probekit's own reading
(:mod:`~probekit.probes.xfactr`) cleans four of its rules up; this reading keeps them all:

(a) ``+order`` refinement re-masks slot ``mask_offset`` and advances it *once per beam entry*, inside
    the loop over the beam (``for out_tensor, out_logprob in zip(out_tensors, out_logprobs): ...
    mask_offset += 1``, port lines 957-1017): with beam 5 and 2 masks the entries of one iteration
    re-mask slots 1, 2, 1, 2, 1.
(b) Duplicate fillings keep the *first* expansion in pool order, not the best-scoring one
    (``not_dup = inv.unsqueeze(-1).ne(inv.unsqueeze(0)) | (arange(abs).unsqueeze(-1) <= arange(abs)
    .unsqueeze(0))``, lines 1125-1141); a duplicate scores -inf.
(c) A re-predicted token that does not change keeps its old log-prob (``changes = (out_tensor *
    mask_mask).ne(new_out_tensor * mask_mask)``; ``_out_logprob = out_logprob * (1 - changes) +
    new_out_logprob * changes``, lines 1047, 1082-1088). A predicted ``[MASK]`` at a masked slot is no
    change either: the slot stays masked.
(d) The stop test compares the ordered beam (``next_out_tensors.eq(out_tensors).all()``, line 1157),
    not the set. ``+order`` stops when it is unchanged, ``mask_offset == number_to_mask`` and nothing
    changed since the entry that last restarted at slot 1 (``has_modified``, lines 1009-1010, 1162-1167);
    other refinements (and none) stop when it is unchanged.

Also as the original: ``max_iter`` counts *every* iteration, the initial filling included (``iter += 1;
if max_iter and iter >= max_iter: stop``, lines 1174-1176; MedLAMA's port defaults to 10, lines
1256-1260; jzbjyb's to 1); no token is banned (``self.restrict_vocab = []`` unless
``--use_restrict_vocab``, line 332; ``logit[:, :, []] = -inf`` changes nothing); ``order`` fills the
leftmost *changed* masked slot (``changes & cat([ones, ~changes])[:, :-1]``, line 1053); ``confidence``
takes the b-th best (slot, token) pair over the masked slots (lines 1057-1078); ``independent`` the
b-th best token of every masked slot together; ``+confidence`` re-masks the least confident slot;
without refinement the loop stops at the first entry with no mask left (lines 962-966). One answer per
query: for each number of masks the first beam entry, scored sum of log-probs / n, and the best n
(``lp, best_num_mask = avg_log.max(0)``, line 669); the first n wins a tie.

Deliberate differences, each below any score gap on real models: the original adds a random tie-break
``uniform(0, 1e-5)`` per pool position to the stored log-probs (``get_tie_breaking``, lines 60-63,
1121-1123), so its scores drift by up to 1e-5 per iteration and exact ties go to a random but fixed
position; here ties go to the earlier pool position and scores carry no noise. ``+confidence`` takes
the least confident *slot* (the original's argmin runs over the whole sequence, where non-mask
positions hold log-prob 0 plus noise: it differs only when every slot has probability exactly 1). The
original pads prompts to 64 tokens; here batches are padded to their longest prompt (attention masks
padding out: float rounding only). ``max_iter=0`` ("no limit" in the original) is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ProbekitError
from .mlm_topk import mask_topk
from .xfactr import Hyp


@dataclass
class RefRow:
    """The decoding state of one (query, n) pair under the original's rules.

    ``beam`` holds :class:`Hyp` whose masked slots hold the mask token's id (as the original's tensors do).
    """

    query: int
    n: int
    ids: list[int]  # prompt token ids with n mask tokens
    slots: list[int]  # positions of the n masks in ids (consecutive)
    beam: list[Hyp]
    iters: int = 0
    offset: int = 0  # mask_offset
    modified: bool = False  # has_modified
    done: bool = False
    trace: list | None = None
    phase: str = "initial"  # what the last step did, for traces


def check(init: str, refine: str | None, *, max_iter: int, n_masks: int) -> None:
    """The original's own checks on its arguments (``probe.py`` lines 1308-1309)."""
    if max_iter == 0:
        raise ProbekitError("the xfactr-reference reading needs max_iter >= 1 (X-FACTR's 0, no limit at all, is "
                            "not offered)")
    if (init != "independent" or refine) and max_iter < n_masks:
        raise ProbekitError(f"the xfactr-reference reading counts every iteration: max_iter={max_iter} cannot fill "
                            f"{n_masks} masks one at a time (X-FACTR asserts max_iter >= num_mask)")


def plan(row: RefRow, refine: str | None, mask_id: int) -> list[list[int]] | None:
    """The slots each beam entry shows masked this iteration, advancing ``mask_offset`` per entry (rule a).

    None when the loop stops before predicting: without refinement, at the first entry with no mask left.
    """
    out = []
    for h in row.beam:
        masked = [j for j, t in enumerate(h.tokens) if t == mask_id]
        if masked:
            out.append(masked)  # still filling: the entry is its own input
        elif refine is None:
            return None
        elif refine == "order":
            if row.offset >= row.n:
                row.offset = 0
            if row.offset == 0:  # restart when starting from the beginning
                row.modified = False
            out.append([row.offset])
            row.offset += 1
        else:  # confidence: the least confident slot, first on ties
            out.append([min(range(row.n), key=lambda j: h.logps[j])])
    return out


def expand(h: Hyp, masked: list[int], top: dict, init: str, beam: int, mask_id: int) -> list[Hyp]:
    """The ``beam`` expansions of one entry, in the original's order b = 0..beam-1 (rules of lines 1042-1088).

    ``top[slot] = (log-probs, token ids)``, best first. Only slots whose token changes are written (rule c).
    """
    out = []
    ranked = sorted(((top[j][0][r], j, r) for j in masked for r in range(beam)), key=lambda p: -p[0])
    for b in range(beam):
        if init == "confidence":  # the b-th best (slot, token) pair; ties: lower slot, then lower rank
            _, j, r = ranked[b]
            new = {j: (top[j][1][r], top[j][0][r])}
        else:
            new = {j: (top[j][1][b], top[j][0][b]) for j in masked}
        changed = {j for j, (t, _) in new.items() if t != h.tokens[j]}
        if init == "order":  # keep a change only where the position before it did not change
            changed = {j for j in changed if j - 1 not in changed}
        tokens, logps = list(h.tokens), list(h.logps)
        for j in changed:
            tokens[j], logps[j] = new[j]
        out.append(Hyp(tuple(tokens), tuple(logps)))
    return out


def select(pool: list[Hyp], beam: int) -> list[Hyp]:
    """The ``beam`` best of the pool, duplicates after their first occurrence scored -inf (rule b).

    >>> pool = [Hyp((1, 2), (-1.0, -1.0)), Hyp((3, 2), (-0.5, -1.0)), Hyp((1, 2), (-0.1, -0.2))]
    >>> [(h.tokens, h.score) for h in select(pool, 2)]
    [((3, 2), -1.5), ((1, 2), -2.0)]
    """
    seen: set = set()
    scored = []
    for h in pool:
        scored.append(float("-inf") if h.tokens in seen else h.score)
        seen.add(h.tokens)
    order = sorted(range(len(pool)), key=lambda i: -scored[i])  # stable: earlier pool position first
    return [pool[i] for i in order[:beam]]


def advance(row: RefRow, new_beam: list[Hyp], refine: str | None, max_iter: int) -> None:
    """Install the new beam and apply the stop rules (d) and the iteration count."""
    same = [h.tokens for h in new_beam] == [h.tokens for h in row.beam]  # the ordered beam
    if same:
        if refine != "order":
            row.done = True
    elif refine == "order":
        row.modified = True
    if refine == "order" and not row.modified and row.offset == row.n:
        row.done = True
    row.beam = new_beam
    row.iters += 1
    if row.iters >= max_iter:
        row.done = True


def best_answer(rows: list[RefRow]) -> tuple[RefRow, Hyp]:
    """One answer per query: each n's first beam entry, the best by sum of log-probs / n (first n on ties)."""
    best = max(rows, key=lambda r: (r.beam[0].score / r.n, -r.n))
    return best, best.beam[0]


def run(model, rows: list[RefRow], *, init: str, refine: str | None, beam: int, max_iter: int, topn: int,
        batch_size: int, on_step, on_trace=None) -> None:
    """Advance every row iteration by iteration, each iteration one batched pass over every active entry.

    No token is banned (X-FACTR's ``restrict_vocab=[]``). Each distinct input runs once (entries of one row
    often share an input). ``on_trace(row, phase, top)`` records the row's first entry's forward.
    """
    mask_id = model.tokenizer.mask_token_id
    seen: dict[tuple, list] = {}
    steps = 0
    while active := [r for r in rows if not r.done]:
        owners: list = []
        inputs: list = []
        masked_pos: list = []
        fresh: dict = {}
        for r in active:
            masks = plan(r, refine, mask_id)
            if masks is None:
                r.done = True  # stopped before predicting: the beam stays
                continue
            r.phase = "initial" if any(t == mask_id for t in r.beam[0].tokens) else "refine"
            for h, m in zip(r.beam, masks):
                x = list(r.ids)
                for j, p in enumerate(r.slots):
                    x[p] = mask_id if j in m else h.tokens[j]
                key = tuple(x)
                if key not in seen and key not in fresh:
                    fresh[key] = len(inputs)
                    inputs.append(x)
                    masked_pos.append([r.slots[j] for j in m])
                owners.append((r, h, m, key))
        if not owners:
            break
        results = mask_topk(model, inputs, masked_pos, topn=topn, batch_size=batch_size, banned=[])
        seen.update((key, results[i]) for key, i in fresh.items())
        pools: dict[int, list[Hyp]] = {}
        first: dict[int, dict] = {}
        for r, h, m, key in owners:
            top = {j: seen[key][i] for i, j in enumerate(m)}
            pools.setdefault(id(r), []).extend(expand(h, m, top, init, beam, mask_id))
            first.setdefault(id(r), top)
        for r in active:
            if id(r) in pools:
                advance(r, select(pools[id(r)], beam), refine, max_iter)
                if on_trace is not None and r.trace is not None:
                    on_trace(r, r.phase, first[id(r)])
        steps += 1
        on_step(steps)
