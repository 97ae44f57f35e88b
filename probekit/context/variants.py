"""Context variants (Yao et al., "Synthetic Context Prompt") and composing prompts with context.

input_0 = the prompt alone; input_n = the first n segments added, then the prompt:

* ``real``: S1…Sn in document order, as the contiguous document span they cover;
* ``knowledge-only``: the entity text of each of those segments, in document order, joined by ``", "``;
* ``knowledge-sorted``: the entity texts in the order added (S1, S2, …);
* ``knowledge-random``: S1 first; then each next segment is *picked at random* among those not yet added
  and inserted at a random position among those already there (seeded by (seed, permutation), several
  permutations per triple);
* ``negative-target`` reads as ``real`` on the re-centred segmentation (:func:`~.segment.negative_target`).

Whitespace in inputs is collapsed. Inputs longer than the model's budget (its tokenizer / position
limit, at most 512, less special tokens and the tokens a probe adds to a query, e.g. mask_average's extra
masks for its longest candidate) lose whole words from the start of the context (the end farthest from
the prompt and [MASK]), with a notice.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..errors import ProbekitError
from ..types import MASK, OBJECT, SUBJECT, Query
from .segment import Mention, Segment, Segmentation, segment  # noqa: F401 - Mention/segment: doctests

VARIANTS = ("real", "knowledge-only", "knowledge-sorted", "knowledge-random", "negative-target")
KNOWLEDGE_VARIANTS = ("knowledge-only", "knowledge-sorted", "knowledge-random")
SEPARATOR = ", "
DEFAULT_MAX_LENGTH = 512


@dataclass(frozen=True)
class ContextInput:
    """input_n: ``context`` (text before the prompt, '' for n = 0) and the segment added at step n."""

    step: int
    context: str
    added: Segment | None
    shown: tuple[int, ...]  # segment orders in the order they appear in the context
    notice: str = ""


def _variant(variant: str) -> tuple[str, bool]:
    if variant not in VARIANTS:
        raise ProbekitError(f"unknown variant {variant!r}; available: {', '.join(VARIANTS)}")
    return ("real", True) if variant == "negative-target" else (variant, False)


def random_order(seg: Segmentation, *, seed: int = 0, permutation: int = 0) -> list[Segment]:
    """The order knowledge-random adds segments in: S1 first, then each next one drawn at random among
    those not yet added (seeded by ``seed`` and ``permutation``).

    >>> doc = "a X b T c Y d"
    >>> ms = [Mention(2, 3, "X", "X"), Mention(6, 7, "T", "T"), Mention(10, 11, "Y", "Y")]
    >>> random_order(segment(doc, ms, 1))[0].order
    1
    """
    first, rest = seg.segments[0], list(seg.segments[1:])
    rng = random.Random(f"{seed}:{permutation}:order")
    out = [first]
    while rest:
        out.append(rest.pop(rng.randrange(len(rest))))
    return out


def build_inputs(seg: Segmentation, *, variant: str = "real", seed: int = 0, permutation: int = 0,
                 sep: str = SEPARATOR) -> list[ContextInput]:
    """input_0 … input_N (N = number of segments) for one variant (``negative-target`` reads as ``real``).

    >>> doc = "a X b T c Y d"
    >>> ms = [Mention(2, 3, "X", "X"), Mention(6, 7, "T", "T"), Mention(10, 11, "Y", "Y")]
    >>> s = segment(doc, ms, 1)
    >>> [i.context for i in build_inputs(s)], [i.context for i in build_inputs(s, variant="knowledge-sorted")]
    (['', 'b T c', 'a X b T c', 'a X b T c Y d'], ['', 'T', 'T, X', 'T, X, Y'])
    """
    variant, _ = _variant(variant)
    order = list(seg.segments)
    if variant == "knowledge-random":
        order = random_order(seg, seed=seed, permutation=permutation)
    out = [ContextInput(0, "", None, ())]
    shown: list[Segment] = []
    rng = random.Random(f"{seed}:{permutation}:position")
    for n, s in enumerate(order, start=1):
        if variant == "knowledge-random" and shown:
            shown.insert(rng.randint(0, len(shown)), s)
        elif variant in ("knowledge-sorted", "knowledge-random"):
            shown.append(s)
        else:
            shown = seg.document_order(n)
        if variant == "real":
            text = seg.document[shown[0].start:shown[-1].end]
        else:
            text = sep.join(x.mention.text for x in shown)
        out.append(ContextInput(n, " ".join(text.split()), s, tuple(x.order for x in shown)))
    return out


def model_limit(model) -> int:
    """Longest input (in tokens, special tokens included) the model takes: tokenizer and position limits, <= 512."""
    tok_limit = getattr(model.tokenizer, "model_max_length", None) or DEFAULT_MAX_LENGTH
    pos_limit = getattr(model.encoder.config, "max_position_embeddings", None) or DEFAULT_MAX_LENGTH
    return int(min(tok_limit if tok_limit < 100_000 else DEFAULT_MAX_LENGTH, pos_limit, DEFAULT_MAX_LENGTH))


def token_budget(model, *, overhead: int = 0, limit: int | None = None) -> int:
    """Tokens that context + prompt (with one mask) may use: ``limit`` (default :func:`model_limit`) less
    the special tokens and the ``overhead`` the probe adds to a query (see :func:`probe_overhead`)."""
    budget = (limit or model_limit(model)) - model.tokenizer.num_special_tokens_to_add(pair=False)
    return budget - max(0, int(overhead))


def probe_overhead(probe, model, candidates, **options) -> int:
    """Tokens ``probe`` adds to a query beyond its one mask: its own ``Probe.input_overhead`` (mask_average: the
    extra masks of its longest candidate; 0 for probes that add none)."""
    return int(probe.input_overhead(model, candidates, **options))


def fit_context(tokenizer, context: str, prompt: str, budget: int) -> tuple[str, str]:
    """Drop words from the start of ``context`` until ``context + ' ' + prompt`` fits ``budget`` tokens.

    Returns (context, notice); the notice is '' when nothing was cut.
    """
    def size(ctx: str) -> int:
        return len(tokenizer((ctx + " " + prompt).strip(), add_special_tokens=False)["input_ids"])

    if not context or size(context) <= budget:
        return context, ""
    words = context.split(" ")
    lo, hi = 1, len(words)  # find the fewest words dropped (lo..hi) so the rest fits
    while lo < hi:
        mid = (lo + hi) // 2
        if size(" ".join(words[mid:])) <= budget:
            hi = mid
        else:
            lo = mid + 1
    kept = " ".join(words[lo:])
    if size(kept) > budget:
        return "", f"the prompt alone fills the {budget}-token budget: no context kept"
    return kept, f"input cut to {budget} tokens: the first {lo} of {len(words)} context words were dropped"



def _neutral(text: str, mask_token: str) -> str:
    """Space out literal placeholders (``[Y]``, ``[MASK]``, the model's mask token) inside context or
    subject text, so that only the prompt's slot becomes a mask. BERT-style tokenizers split brackets
    off anyway, so ``[ Y ]`` reads as ``[Y]`` would as plain text.

    >>> _neutral("[X]Other cyst [Y] [MASK]", "[MASK]")
    '[X]Other cyst [ Y ] [ MASK ]'
    """
    for token in {OBJECT, MASK, mask_token}:
        if token and len(token) > 2 and token in text:
            text = text.replace(token, f"{token[0]} {token[1:-1]} {token[-1]}")
    return text


def compose(query: Query, context: str, mask_token: str = MASK) -> str:
    """The probe template for one input: context, a space, the prompt with the subject filled in and
    ``[Y]`` left at the object slot. Literal ``[X]`` in names stays as is (the composed query gets
    ``[X]`` as its subject, so nothing is substituted twice).

    >>> q = Query("q", "[X]Other cyst", "r", "[X] has [Y] .")
    >>> compose(q, "a, b [Y]")
    'a, b [ Y ] [X]Other cyst has [Y] .'
    """
    if OBJECT not in query.template:
        raise ProbekitError(f"the prompt needs [MASK] (or [Y]) where the answer goes; got {query.template!r}")
    head, _, tail = query.template.partition(OBJECT)
    subject = _neutral(query.subject, mask_token)
    head = _neutral(head.replace(SUBJECT, "\0"), mask_token).replace("\0", subject)
    tail = _neutral(tail.replace(SUBJECT, "\0"), mask_token).replace("\0", subject)
    return " ".join((_neutral(context, mask_token) + " " + head + OBJECT + tail).split())

