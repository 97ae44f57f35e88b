"""The X-FACTR decoding rules of mask_predict, in plain Python (no tensors).

A :class:`Row` is one (query, number of masks) being decoded; its beam holds :class:`Hyp` hypotheses.
:mod:`probekit.probes.mask_predict` runs the forward passes (batched over every row) and calls these
rules with each hypothesis's top tokens; the rules themselves are stated in that module's docstring.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ProbekitError

INITIAL = ("independent", "order", "confidence")
DECODINGS = INITIAL + tuple(f"{a}+{b}" for a in INITIAL for b in ("order", "confidence"))


@dataclass
class Hyp:
    """A filling of the slots; its score is the sum of the log-probs its tokens had when last predicted."""

    tokens: tuple[int, ...]  # one id per slot, -1 = still masked
    logps: tuple[float, ...]  # 0.0 where masked

    @property
    def score(self) -> float:
        return sum(self.logps)

    def fill(self, slot: int, token: int, logp: float) -> Hyp:
        return Hyp(self.tokens[:slot] + (token,) + self.tokens[slot + 1:],
                   self.logps[:slot] + (logp,) + self.logps[slot + 1:])


@dataclass
class Row:
    """The decoding state of one (query, n) pair."""

    query: int
    n: int
    ids: list[int]  # prompt token ids with n mask tokens
    slots: list[int]  # positions of the n masks in ids
    beam: list[Hyp]
    phase: str = "initial"  # -> "refine" -> "done"
    refine_steps: int = 0
    refine_pos: int = 0
    pass_changed: bool = False
    trace: list | None = None


def parse_decoding(decoding: str) -> tuple[str, str | None]:
    """``'order+order'`` -> ``('order', 'order')``; ``'independent'`` -> ``('independent', None)``."""
    if decoding not in DECODINGS:
        raise ProbekitError(f"unknown decoding {decoding!r}; available: {', '.join(DECODINGS)}")
    init, _, refine = decoding.partition("+")
    return init, refine or None


def select(pool: list[Hyp], beam: int) -> list[Hyp]:
    """Best ``beam`` distinct hypotheses; stable, so equal scores keep their pool order.

    >>> pool = [Hyp((1, 2), (-1.0, -1.0)), Hyp((3, 2), (-0.5, -1.0)), Hyp((1, 2), (-0.1, -0.2)),
    ...         Hyp((4, 4), (-1.5, 0.0))]
    >>> [h.tokens for h in select(pool, 2)], [h.tokens for h in select(pool, 5)]
    ([(1, 2), (3, 2)], [(1, 2), (3, 2), (4, 4)])
    """
    out, seen = [], set()
    for h in sorted(pool, key=lambda h: -h.score):
        if h.tokens not in seen:
            seen.add(h.tokens)
            out.append(h)
            if len(out) == beam:
                break
    return out


def masked_slots(row: Row, hyp: Hyp, refine: str | None) -> list[int]:
    """The slots a step shows as masks for ``hyp`` (and predicts)."""
    if row.phase == "initial":
        return [j for j, t in enumerate(hyp.tokens) if t < 0]
    if refine == "order":
        return [row.refine_pos]
    return [min(range(row.n), key=lambda j: hyp.logps[j])]  # least confident, first on ties


def expand(row: Row, hyp: Hyp, slots: list[int], top: dict, init: str, beam: int) -> list[Hyp]:
    """Expansions of one hypothesis from its forward pass; ``top[slot] = (logps, token ids)`` best first."""
    if row.phase == "refine" or init == "order":
        j = slots[0] if row.phase == "refine" else min(slots)
        vals, ids = top[j]
        return [hyp.fill(j, ids[b], vals[b]) for b in range(beam)]
    if init == "confidence":
        pairs = [(top[j][0][b], j, b) for j in slots for b in range(beam)]
        best = sorted(pairs, key=lambda p: -p[0])[:beam]  # stable: slot order, then token rank
        return [hyp.fill(j, top[j][1][b], v) for v, j, b in best]
    # independent: exact k-best joint fillings, one slot at a time (the sum is separable)
    partial = [hyp]
    for j in slots:
        vals, ids = top[j]
        partial = sorted([h.fill(j, ids[b], vals[b]) for h in partial for b in range(beam)],
                         key=lambda h: -h.score)[:beam]
    return partial


def advance(row: Row, new_beam: list[Hyp], refine: str | None, max_iter: int) -> None:
    """Install the new beam and apply the phase and stopping rules."""
    if row.phase == "initial":
        row.beam = new_beam
        if all(t >= 0 for t in new_beam[0].tokens):
            row.phase = "refine" if refine and max_iter > 0 else "done"
        return
    changed = {h.tokens for h in new_beam} != {h.tokens for h in row.beam}
    row.beam = new_beam
    row.refine_steps += 1
    if refine == "order":
        row.pass_changed |= changed
        row.refine_pos += 1
        if row.refine_pos == row.n:
            if not row.pass_changed:
                row.phase = "done"  # a whole left-to-right pass changed nothing
            row.refine_pos, row.pass_changed = 0, False
    elif not changed:
        row.phase = "done"
    if row.refine_steps >= max_iter:
        row.phase = "done"
