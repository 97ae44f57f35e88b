"""Mask predict (X-FACTR, Jiang et al. 2020): multi-token answers decoded from an MLM head.

MedLAMA §3 (Meng et al. 2022): "given a query, the probing task is formulated as: 1) filling masks in
parallel independently (Independent); 2) filling masks from left to right autoregressively (Order);
3) filling tokens sorted by the maximum confidence greedily (Confidence). After all mask tokens are
replaced with the initial predictions, the predictions can be further refined by iteratively
modifying one token at a time until convergence or until the maximum number of iterations is
reached". The paper runs X-FACTR with beam size 5 and 5 masks; Order+Order is its refinement.

The rules implemented here, for each query and each number of masks n = 1..N (a *row*):

- A hypothesis fills the n slots; each filled slot keeps the log-prob its token had when it was
  last predicted. Its score is the sum of those log-probs. The beam holds at most ``beam`` distinct
  hypotheses, best first; it starts as the all-mask prompt.
- A step runs one forward pass per hypothesis (masked slots shown as the mask token) and expands
  it with the ``beam`` best tokens at the slot(s) it predicts; all expansions are pooled, sorted by
  score (stable: equal scores keep beam order, then token rank), duplicates dropped, best ``beam`` kept.
- ``independent``: one step predicts every slot at once; the beam is the ``beam`` best joint
  fillings by summed log-prob (exact k-best over independent slots; X-FACTR's code instead takes
  the b-th best token of every slot together).
- ``order``: n steps, step j fills slot j (left to right).
- ``confidence``: n steps; each hypothesis is expanded with its ``beam`` best (slot, token) pairs
  over its still-masked slots (the most confident slot first).
- Refinement ``+order`` re-masks slot 1, 2, .., n, 1, .. (one per step) and re-predicts it; it stops
  when a whole left-to-right pass leaves the beam's tokens unchanged. ``+confidence`` re-masks each
  hypothesis's least confident slot and stops when a step leaves the beam unchanged. Both stop
  after ``max_iter`` refinement steps at the latest.
- Special tokens ([CLS], [SEP], [PAD], [MASK], [UNK], ...) are never predicted (their logits are
  set to -inf before the softmax, as X-FACTR's restricted vocabulary does).
- Every final hypothesis of every n is an answer: its text is the tokens decoded by the tokenizer
  (word pieces joined) and its score the length-normalised log-prob sum / n; answers are ranked by
  that score (see :mod:`~probekit.probes.generated` for the hit rule).

This is probekit's reading (``reading="probekit"``, the default). ``reading="xfactr-reference"`` (the
default of the ``medlama-reference`` preset) is X-FACTR's code as MedLAMA ran it, with its own beam rules,
iteration count, unrestricted vocabulary and one answer per query: see
:mod:`~probekit.probes.xfactr_reference` for its rules and the lines of the original they follow.

All rows of a block of queries advance together: each step stacks every active hypothesis of every
row (queries x mask counts x beam) into batched forward passes, where X-FACTR decodes one prompt at a
time; the MLM head runs only at masked positions, and each distinct input only once. The beam rules
themselves are plain Python in :mod:`probekit.probes.xfactr`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..errors import ProbekitError, positive_int
from ..lazy import lazy_module
from ..types import Query, Ranking
from . import xfactr_reference as ref
from .base import Call, Explanation, Option, Probe
from .generated import ranking_from_predictions
from .mlm_topk import mask_topk
from .xfactr import DECODINGS, Hyp, Row, advance, expand, masked_slots, parse_decoding, select

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_module("torch")  # imported on first use (probekit.lazy)

PROMPT_MAX_LENGTH = 128
READINGS: dict[str, int | None] = {"probekit": None, "xfactr-reference": 1}
"""The readings of the decoding rules and the answers each gives per query (None: every hypothesis, ranked)."""
PRESETS: dict[str, dict] = {"medlama-reference": {"reading": "xfactr-reference"}}
"""Named recipes: the option values each one sets (a preset's values replace the options it names)."""
TRACE_TOP = 5  # tokens shown per slot and step in a trace
QUERY_BLOCK = 256  # queries decoded together (all their mask counts and beams share each forward pass)


@dataclass(frozen=True)
class Prediction:
    """One decoded answer: ``score`` is the length-normalised log-prob (sum over slots / n_masks)."""

    text: str
    score: float
    n_masks: int
    tokens: tuple[str, ...]


@dataclass(frozen=True)
class TraceStep:
    """One decoding step of the best hypothesis of a row, for the Probe page.

    ``predicted`` maps a 0-based slot the step predicted to its top tokens (token, probability);
    ``best`` are the best hypothesis's tokens after the step (the mask token where still empty).
    """

    step: int
    phase: str  # "initial" | "refine"
    predicted: dict
    best: tuple[str, ...]
    score: float


@dataclass(frozen=True)
class Decoded:
    """A query's answers (every final hypothesis of every n, in n then beam order) and, on request, traces."""

    predictions: tuple[Prediction, ...]
    traces: dict = field(default_factory=dict)  # n_masks -> tuple[TraceStep, ...]



def _prompts(model, queries: Sequence[Query], n_masks: int, max_length: int, *, reference: bool = False) -> list:
    tok = model.tokenizer
    rows: list = []
    for n in range(1, n_masks + 1):
        texts = [q.text(tok.mask_token, n_masks=n) for q in queries]
        enc = tok(texts, truncation=True, max_length=max_length)["input_ids"]
        for qi, ids in enumerate(enc):
            slots = [p for p, t in enumerate(ids) if t == tok.mask_token_id]
            if len(slots) != n:
                raise ProbekitError(f"query {queries[qi].id!r} is too long to hold {n} mask tokens within "
                                    f"{max_length} tokens; shorten it")
            if reference:  # masked slots hold the mask token's id, as in X-FACTR's tensors
                rows.append(ref.RefRow(query=qi, n=n, ids=list(ids), slots=slots,
                                       beam=[Hyp((tok.mask_token_id,) * n, (0.0,) * n)]))
            else:
                rows.append(Row(query=qi, n=n, ids=list(ids), slots=slots, beam=[Hyp((-1,) * n, (0.0,) * n)]))
    rows.sort(key=lambda r: (r.query, r.n))
    return rows


def decode(model, queries: Sequence[Query], *, decoding: str = "order+order", beam: int = 5, n_masks: int = 5,
           max_iter: int = 10, batch_size: int = 64, max_length: int = PROMPT_MAX_LENGTH, progress=None,
           trace: bool = False, reading: str = "probekit") -> list[Decoded]:
    """Decode every query with 1..``n_masks`` masks (see the module docstring for the rules).

    ``reading="xfactr-reference"`` follows X-FACTR's code as MedLAMA ran it
    (:mod:`~probekit.probes.xfactr_reference`): one prediction per query, ``max_iter`` counting every iteration.
    """
    if reading not in READINGS:
        raise ProbekitError(f"unknown reading {reading!r}; available: {', '.join(READINGS)}")
    if not model.has_mlm:
        raise ProbekitError(f"mask_predict needs a model with an MLM head; {model.id!r} has none "
                            "(use a BERT-family model such as bert-base-uncased)")
    init, refine = parse_decoding(decoding)
    beam = positive_int("beam", beam, maximum=50)
    n_masks = positive_int("n_masks", n_masks, maximum=10)
    max_iter = positive_int("max_iter", max_iter, minimum=0, maximum=1000)
    batch_size = positive_int("batch_size", batch_size)
    reference = reading == "xfactr-reference"
    if reference:
        ref.check(init, refine, max_iter=max_iter, n_masks=n_masks)
    tok = model.tokenizer
    topn = max(beam, TRACE_TOP) if trace else beam
    banned = sorted(set(tok.all_special_ids))
    max_steps = max_iter if reference else n_masks + (max_iter if refine else 0)
    out: list[Decoded] = []
    with torch.inference_mode():
        # Blocks of queries bound the memory (inputs of a step, the memo of seen inputs); answers do not
        # depend on the blocking, every (query, n) row decodes on its own.
        for start in range(0, len(queries), QUERY_BLOCK):
            block = queries[start:start + QUERY_BLOCK]
            rows = _prompts(model, block, n_masks, max_length, reference=reference)
            if trace:
                for r in rows:
                    r.trace = []

            def on_step(step, start=start, block=block):
                if progress:
                    # in query-steps: every query may take up to max_steps steps
                    done = start * max_steps + len(block) * min(step, max_steps)
                    progress(done, len(queries) * max_steps, "decoding")

            if reference:
                ref.run(model, rows, init=init, refine=refine, beam=beam, max_iter=max_iter, topn=topn,
                        batch_size=batch_size, on_step=on_step,
                        on_trace=lambda r, phase, top: r.trace.append(_trace_step(tok, r, phase, top)))
                out += [_reference_decoded(tok, [r for r in rows if r.query == qi]) for qi in range(len(block))]
                continue
            _run(model, rows, init=init, refine=refine, beam=beam, max_iter=max_iter, topn=topn,
                 batch_size=batch_size, banned=banned, on_step=on_step)
            for qi in range(len(block)):
                preds, traces = [], {}
                for r in (r for r in rows if r.query == qi):
                    for h in r.beam:
                        text = tok.decode(list(h.tokens), clean_up_tokenization_spaces=True).strip()
                        preds.append(Prediction(text=text, score=h.score / r.n, n_masks=r.n,
                                                tokens=tuple(tok.convert_ids_to_tokens(list(h.tokens)))))
                    if r.trace is not None:
                        traces[r.n] = tuple(r.trace)
                out.append(Decoded(predictions=tuple(preds), traces=traces))
    return out


def _run(model, rows: list[Row], *, init: str, refine: str | None, beam: int, max_iter: int, topn: int,
         batch_size: int, banned: list[int], on_step) -> None:
    """Advance every row step by step until all are done; each step is one batched pass over all hypotheses."""
    mask_id = model.tokenizer.mask_token_id
    # Each distinct input is run once: hypotheses that differ only in the re-masked slot share one, and
    # refinement passes revisit inputs (a pass that converges re-predicts what the last one saw).
    seen: dict[tuple, list] = {}
    steps = 0
    while active := [r for r in rows if r.phase != "done"]:
        inputs: list = []
        masked: list = []
        owners: list = []
        fresh: dict = {}
        for r in active:
            for h in r.beam:
                slots = masked_slots(r, h, refine)
                x = list(r.ids)
                for j, p in enumerate(r.slots):
                    x[p] = mask_id if j in slots else h.tokens[j]
                key = tuple(x)
                if key not in seen and key not in fresh:
                    fresh[key] = len(inputs)
                    inputs.append(x)
                    masked.append([r.slots[j] for j in slots])
                owners.append((r, h, slots, key))
        results = mask_topk(model, inputs, masked, topn=topn, batch_size=batch_size, banned=banned)
        seen.update((key, results[i]) for key, i in fresh.items())
        pools: dict[int, list[Hyp]] = {}
        first: dict[int, dict] = {}
        for r, h, slots, key in owners:
            top = {j: seen[key][m] for m, j in enumerate(slots)}
            pools.setdefault(id(r), []).extend(expand(r, h, slots, top, init, beam))
            first.setdefault(id(r), top)  # the best hypothesis's forward: what a trace shows
        for r in active:
            phase = r.phase
            advance(r, select(pools[id(r)], beam), refine, max_iter)
            if r.trace is not None:
                r.trace.append(_trace_step(model.tokenizer, r, phase, first[id(r)]))
        steps += 1
        on_step(steps)


def _reference_decoded(tok, rows: list) -> Decoded:
    """X-FACTR's one answer per query (:func:`~probekit.probes.xfactr_reference.best_answer`), every n's trace.

    The answer's text is its tokens decoded as they are: a special token X-FACTR predicted stays in it."""
    row, h = ref.best_answer(rows)
    text = tok.decode(list(h.tokens), clean_up_tokenization_spaces=True).strip()
    pred = Prediction(text=text, score=h.score / row.n, n_masks=row.n,
                      tokens=tuple(tok.convert_ids_to_tokens(list(h.tokens))))
    return Decoded(predictions=(pred,), traces={r.n: tuple(r.trace) for r in rows if r.trace is not None})


def _trace_step(tok, row, phase: str, top: dict) -> TraceStep:
    best = row.beam[0]
    predicted = {j: [(tok.convert_ids_to_tokens(t), math.exp(v)) for v, t in zip(vals[:TRACE_TOP], ids[:TRACE_TOP])]
                 for j, (vals, ids) in top.items()}
    shown = tuple(tok.mask_token if t < 0 else tok.convert_ids_to_tokens(t) for t in best.tokens)
    return TraceStep(step=len(row.trace or ()) + 1, phase=phase, predicted=predicted, best=shown,
                     score=best.score / row.n)


def best_n_masks(decoded: Decoded) -> int:
    """The number of masks of the best-scoring answer (the one a trace view opens on)."""
    return max(decoded.predictions, key=lambda p: p.score).n_masks


def trace_rows(decoded: Decoded, n_masks: int, *, top: int = 3) -> list[dict]:
    """The decoding of ``n_masks`` masks as table rows, one per step of the best hypothesis.

    Column ``slot j`` shows the step's top tokens with their probabilities where the step predicted
    slot j (``'tok 0.42 · tok2 0.13'``), and the token the best hypothesis keeps there otherwise.

    >>> d = Decoded((), {2: (TraceStep(1, "initial", {0: [("a", 0.5), ("b", 0.25)]}, ("a", "[MASK]"), -0.7),)})
    >>> row = trace_rows(d, 2)[0]
    >>> row["slot 1"], row["slot 2"], row["answer so far"]
    ('a 0.50 · b 0.25', '[MASK]', 'a [MASK]')
    """
    if n_masks not in decoded.traces:
        raise ProbekitError(f"no trace for {n_masks} masks; decoded: {', '.join(map(str, sorted(decoded.traces)))}")
    rows = []
    for s in decoded.traces[n_masks]:
        row = {"step": s.step, "phase": s.phase}
        for j in range(n_masks):
            if j in s.predicted:
                row[f"slot {j + 1}"] = " · ".join(f"{t} {p:.2f}" for t, p in s.predicted[j][:top])
            else:
                row[f"slot {j + 1}"] = s.best[j]
        row["answer so far"] = " ".join(s.best)
        row["score"] = round(s.score, 4)
        rows.append(row)
    return rows


def _ranking(model, query, decoded: Decoded, candidates, call: Call, excluded, reading: str) -> Ranking:
    r = ranking_from_predictions(query, [(p.text, p.score) for p in decoded.predictions], candidates, call.k,
                                 model.tokenizer, excluded=excluded)
    return replace(r, depth=READINGS[reading])


class MaskPredictProbe(Probe):
    def resolve(self, options: dict) -> dict:
        """The options a run really uses: the preset's values written over them (stored runs record both)."""
        preset = options.get("preset")
        if preset in (None, ""):
            return dict(options)
        if preset not in PRESETS:
            raise ProbekitError(f"unknown preset {preset!r}; available: {', '.join(PRESETS)}")
        return {**options, **PRESETS[preset]}

    def answers_per_query(self, options: dict) -> int | None:
        """How many answers a run with ``options`` gives per query (None: as many as k asks)."""
        return READINGS.get(self.resolve(self.checked_options(options))["reading"])

    def _rank(self, model, queries, candidates, call: Call, *, preset, reading, **opts) -> list[Ranking]:
        reading = self.resolve({"preset": preset, "reading": reading})["reading"]
        decoded = decode(model, queries, progress=call.progress, reading=reading, **opts)
        return [_ranking(model, q, d, candidates, call, ex, reading)
                for q, d, ex in zip(queries, decoded, call.excluded)]

    def _explain(self, model, query, candidates, call: Call, **opts) -> tuple[Ranking, Explanation | None]:
        """The ranking and its decoding: for every number of masks, each step of the best hypothesis."""
        reading = self.resolve({"preset": opts.pop("preset"), "reading": opts.pop("reading")})["reading"]
        d = decode(model, [query], trace=True, progress=call.progress, reading=reading, **opts)[0]
        return _ranking(model, query, d, candidates, call, call.excluded[0], reading), explanation_of(d)


def explanation_of(decoded: Decoded) -> Explanation:
    """A decoding as an :class:`Explanation`: one table per number of masks (:func:`trace_rows`), the mask
    count of the best answer first."""
    views = {str(n): trace_rows(decoded, n) for n in sorted(decoded.traces)} if decoded.predictions else {}
    return Explanation(
        title="Decoding", views=views, default=str(best_n_masks(decoded)) if views else "", choose="Masks",
        help="the answers of every mask count are ranked together; the best one's is shown first",
        caption="One row per step of the best hypothesis: a slot the step predicted shows its top tokens with "
                "probabilities, the others the token kept so far.")


PROBE = MaskPredictProbe(
    name="mask_predict",
    requires_mlm=True,
    options=(
        Option("decoding", "order+order", DECODINGS, "initial fill (independent | order | confidence), optionally "
               "+ refinement (order | confidence); order+order is MedLAMA's"),
        Option("beam", 5, (), "beam size (MedLAMA: 5)", minimum=1),
        Option("n_masks", 5, (), "answers of 1..N tokens are decoded (MedLAMA: 5)", minimum=1),
        Option("max_iter", 10, (), "probekit reading: refinement steps at most, per number of masks; "
               "xfactr-reference: iterations at most, the initial filling included (X-FACTR's count)",
               advanced=True, minimum=0),
        Option("batch_size", 64, (), "prompts per forward pass", advanced=True, minimum=1),
        Option("max_length", PROMPT_MAX_LENGTH, (), "prompt tokens (with masks and special tokens) at most",
               advanced=True, minimum=1),
        Option("reading", "probekit", tuple(READINGS), "probekit: every hypothesis of every mask count ranked "
               "(acc@k for any k), special tokens banned, beam rules cleaned up; xfactr-reference: X-FACTR's code as "
               "MedLAMA ran it, one answer per query (acc@1 only)"),
        Option("preset", None, (None, *PRESETS), "a paper's recipe; its values replace the options it names. "
               "medlama-reference: reading=xfactr-reference", type=str),
    ),
    description="MLM: decode 1..N masks (X-FACTR: independent/order/confidence + refinement, beam); "
                "rank the decoded strings by length-normalised log-prob.",
)
