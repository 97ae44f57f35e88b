"""Context variance (Yao et al.; DESIGN §8): pool entities in a document, segments around the target,
the context variants, and the runner that ranks the pool at [MASK] after each added segment.

Segmentation rules (what the tests pin down):

* **Matching.** Pool names are found case-insensitively at word boundaries (a name's inner spaces match
  any run of whitespace). Every occurrence counts. Overlaps are settled *longest match first*
  ("nasal obstruction" wins over "obstruction"); equal lengths: the leftmost wins. Pool names that are
  the same after :func:`~probekit.types.normalize_name` count as one entity (first spelling kept).
* **Anchor.** O_t's first occurrence (``occurrence`` picks another). O_t missing: :class:`ProbekitError`.
* **Boundaries.** With mentions m_0 … m_{K-1} in document order and the anchor m_a, the document is cut
  into K segments, one mention each, together covering every character: S1 = [end of m_{a-1}, start of
  m_{a+1}) (document start / end where there is no neighbour); a left segment i < a = [end of m_{i-1},
  end of m_i); a right segment i > a = [start of m_i, start of m_{i+1}). So each segment runs from its
  entity away from O_t to just before the next pool entity, and the text between two neighbouring
  entities belongs to the one nearer O_t.
* **Order.** S2 is on the ``first_side`` (default ``left``: the entity just before O_t), S3 on the other
  side, and so on alternately; once one side has no entity left, the rest come from the other side.
  A document with no pool entity besides O_t gives S1 = the whole document and no further step.
* **Repeats.** An entity occurring twice gives two segments (two steps whose O_a is the same entity);
  a further occurrence of O_t is an ordinary segment whose O_a has role ``target`` (never in UCM).
* **Roles.** O_t = ``target``; O_cor (``cor``) = the other true objects of (S, R); O_incor (``incor``) = the
  rest of the pool. **Negative target**: re-centre on the first O_incor in segment order; it becomes the
  target and the original O_t an ordinary O_cor.

Inputs: input_0 = the prompt alone; input_n = S1…Sn in document order (for ``real`` the contiguous
document span they cover), a space, then the prompt. ``knowledge-only`` keeps only the entity text of
each segment, in document order, joined by ``", "``; ``knowledge-sorted`` joins them in the order
added (S1, S2, …); ``knowledge-random`` starts from S1 and inserts each next one at a seeded random
position among those already there (so a later one may land before S1; earlier ones keep their
order; several seeded permutations). Whitespace in inputs is collapsed. Inputs longer than the model's
budget (its tokenizer / position limit, at most 512, less special tokens and, for mask_average, the
extra masks of the longest candidate) lose whole words from the start of the context (the end
farthest from the prompt and [MASK]), with a notice.

Ranks and ties: a pool entity's rank is 1 + the number of pool entities scoring strictly higher (the
retrieval probe keeps faiss's order inside its top k), so tied scores share a rank and an unchanged
rank gives RC = 0 (Confuse). RC rows and UCM come from :func:`probekit.metrics.rank_changes` and
:func:`probekit.metrics.ucm`. Dataset mode builds knowledge-only documents from the KB: see
:func:`kb_context` for the layout.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import config, metrics
from ..errors import ProbekitError
from ..types import MASK, OBJECT, SUBJECT, CandidateSet, Query, normalize_name

VARIANTS = ("real", "knowledge-only", "knowledge-sorted", "knowledge-random", "negative-target")
KNOWLEDGE_VARIANTS = ("knowledge-only", "knowledge-sorted", "knowledge-random")
SIDES = ("left", "right")
SEPARATOR = ", "
MAX_DOCUMENT_CHARS = 200_000
DEFAULT_MAX_LENGTH = 512
ACC_KS = (1, 5, 10)

Progress = Callable[[int, int, str], None]


# ---------------------------------------------------------------- matching
@dataclass(frozen=True)
class Mention:
    """One occurrence of a pool entity: ``name`` is the pool spelling, ``text`` the document's."""

    start: int
    end: int
    name: str
    text: str


def unique_names(names: Iterable[str]) -> list[str]:
    """Pool names deduplicated by :func:`normalize_name` (first spelling and order kept).

    >>> unique_names(["Pain", "pain ", "fever", "", "Fever"])
    ['Pain', 'fever']
    """
    seen: dict[str, str] = {}
    for n in names:
        n = " ".join(str(n).split())
        key = normalize_name(n)
        if key and key not in seen:
            seen[key] = n
    return list(seen.values())


def _pattern(name: str) -> re.Pattern:
    words = normalize_name(name).split()
    return re.compile(r"(?<!\w)" + r"\s+".join(map(re.escape, words)) + r"(?!\w)", re.IGNORECASE)


def match_entities(document: str, names: Iterable[str]) -> list[Mention]:
    """Every occurrence of the pool ``names`` in ``document``, in document order, without overlaps.

    Case-insensitive, at word boundaries, longest match first (ties: leftmost first).

    >>> [(m.start, m.text) for m in match_entities("Nasal obstruction, then obstruction.",
    ...                                            ["obstruction", "nasal obstruction"])]
    [(0, 'Nasal obstruction'), (24, 'obstruction')]
    """
    folded = " ".join(document.lower().split())
    found: list[tuple[int, int, int, str]] = []
    for order, name in enumerate(unique_names(names)):
        if normalize_name(name) not in folded:  # cheap filter before the regex
            continue
        for m in _pattern(name).finditer(document):
            found.append((m.start(), m.end(), order, name))
    found.sort(key=lambda t: (-(t[1] - t[0]), t[0], t[2]))
    taken = bytearray(len(document))
    kept: list[Mention] = []
    for start, end, _, name in found:
        if any(taken[start:end]):
            continue
        taken[start:end] = b"\x01" * (end - start)
        kept.append(Mention(start, end, name, document[start:end]))
    return sorted(kept, key=lambda m: m.start)


# ---------------------------------------------------------------- segmentation
@dataclass(frozen=True)
class Segment:
    """S_order: a span of the document holding exactly one pool entity (``mention``)."""

    order: int
    start: int
    end: int
    mention: Mention
    side: str  # anchor | left | right
    text: str

    @property
    def entity(self) -> str:
        return self.mention.name


@dataclass(frozen=True)
class Segmentation:
    """A document cut around the target: ``segments`` in the order they are added (S1 first)."""

    document: str
    target: str
    anchor: Mention
    segments: tuple[Segment, ...]
    mentions: tuple[Mention, ...]
    first_side: str = "left"

    def __len__(self) -> int:
        return len(self.segments)

    def document_order(self, n: int) -> list[Segment]:
        """S1..Sn sorted by their position in the document."""
        return sorted(self.segments[:n], key=lambda s: s.start)

    def to_dict(self) -> dict:
        return {"target": self.target, "first_side": self.first_side,
                "segments": [{"order": s.order, "start": s.start, "end": s.end, "side": s.side,
                              "entity": s.entity, "text": s.text} for s in self.segments]}


def segment(document: str, mentions: Sequence[Mention], anchor: int, *, first_side: str = "left") -> Segmentation:
    """Cut ``document`` around ``mentions[anchor]`` (mentions in document order, not overlapping).

    >>> doc = "a X b T c Y d"
    >>> ms = [Mention(2, 3, "X", "X"), Mention(6, 7, "T", "T"), Mention(10, 11, "Y", "Y")]
    >>> [(s.order, s.side, s.text) for s in segment(doc, ms, 1).segments]
    [(1, 'anchor', ' b T c '), (2, 'left', 'a X'), (3, 'right', 'Y d')]
    """
    if first_side not in SIDES:
        raise ProbekitError(f"unknown side {first_side!r}; available: {', '.join(SIDES)}")
    ms = list(mentions)
    if not 0 <= anchor < len(ms):
        raise ProbekitError(f"anchor {anchor} out of range: {len(ms)} mentions")
    for a, b in zip(ms, ms[1:]):
        if b.start < a.end:
            raise ProbekitError("mentions must be in document order and must not overlap")
    k, n = len(ms), len(document)
    spans = {anchor: (ms[anchor - 1].end if anchor > 0 else 0, ms[anchor + 1].start if anchor + 1 < k else n)}
    for i in range(anchor):
        spans[i] = (ms[i - 1].end if i > 0 else 0, ms[i].end)
    for i in range(anchor + 1, k):
        spans[i] = (ms[i].start, ms[i + 1].start if i + 1 < k else n)
    order, sides = [anchor], ["anchor"]
    left, right, turn = anchor - 1, anchor + 1, first_side
    while left >= 0 or right < k:
        side = turn if (left >= 0 if turn == "left" else right < k) else ("right" if turn == "left" else "left")
        if side == "left":
            order.append(left)
            left -= 1
        else:
            order.append(right)
            right += 1
        sides.append(side)
        turn = "right" if side == "left" else "left"
    segs = tuple(Segment(j + 1, spans[i][0], spans[i][1], ms[i], side, document[spans[i][0]:spans[i][1]])
                 for j, (i, side) in enumerate(zip(order, sides)))
    return Segmentation(document, ms[anchor].name, ms[anchor], segs, tuple(ms), first_side)


def check_document(document: str) -> str:
    """Refuse empty or huge documents with a clear message."""
    if not isinstance(document, str) or not document.strip():
        raise ProbekitError("the document is empty: paste or upload a text that mentions the target")
    if len(document) > MAX_DOCUMENT_CHARS:
        raise ProbekitError(f"the document is too long ({len(document):,} characters; at most "
                            f"{MAX_DOCUMENT_CHARS:,}): keep the part around the target")
    return document


def segment_document(document: str, target: str, pool: Iterable[str], *, first_side: str = "left",
                     occurrence: int = 0) -> Segmentation:
    """Match the pool (plus ``target``) in ``document`` and cut it around O_t's ``occurrence``-th mention."""
    check_document(document)
    if not normalize_name(target):
        raise ProbekitError("no target entity O_t given")
    mentions = match_entities(document, [target, *pool])
    tkey = normalize_name(target)
    hits = [i for i, m in enumerate(mentions) if normalize_name(m.name) == tkey]
    if not hits:
        inside = [m.text for m in mentions if tkey in normalize_name(m.text)]
        extra = f" (it only occurs inside the longer entity {inside[0]!r})" if inside else ""
        raise ProbekitError(f"the target {target!r} does not occur in the document{extra}; matching is "
                            "case-insensitive at word boundaries")
    if not 0 <= occurrence < len(hits):
        raise ProbekitError(f"the target occurs {len(hits)} time(s); occurrence {occurrence} does not exist")
    return segment(document, mentions, hits[occurrence], first_side=first_side)


def role_of(name: str, target: str, golds: Iterable[str]) -> str:
    """``target`` (O_t), ``cor`` (another true object) or ``incor`` (any other pool entity)."""
    key = normalize_name(name)
    if key == normalize_name(target):
        return "target"
    return "cor" if key in {normalize_name(g) for g in golds} else "incor"


def negative_target(seg: Segmentation, golds: Iterable[str]) -> Segmentation:
    """Re-centre on the first O_incor in segment order (the original O_t becomes an ordinary O_cor)."""
    golds = [*golds, seg.target]
    for s in seg.segments:
        if role_of(s.entity, seg.target, golds) == "incor":
            anchor = seg.mentions.index(s.mention)
            return segment(seg.document, seg.mentions, anchor, first_side=seg.first_side)
    raise ProbekitError("negative-target needs an incorrect pool entity (O_incor) in the document; "
                        "every pool entity found is a true object")


# ---------------------------------------------------------------- inputs
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
    segs = seg.segments
    out = [ContextInput(0, "", None, ())]
    shown: list[Segment] = []
    rng = random.Random(f"{seed}:{permutation}")
    for n, s in enumerate(segs, start=1):
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


def token_budget(model, *, probe: str = "retrieval", pool: Sequence[str] = (), max_tokens: int = 20,
                 limit: int | None = None) -> int:
    """Tokens that context + prompt (with one mask) may use: ``limit`` (default :func:`model_limit`) less
    the special tokens and, for mask_average, room for the longest candidate's extra masks."""
    tok = model.tokenizer
    budget = (limit or model_limit(model)) - tok.num_special_tokens_to_add(pair=False)
    if probe == "mask_average" and pool:
        from ..probes.mask_average import candidate_token_ids

        longest = max((len(ids) for ids in candidate_token_ids(tok, list(pool)) if len(ids) <= max_tokens), default=1)
        budget -= longest - 1
    return budget


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


# ---------------------------------------------------------------- ranking
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


def rank_inputs(model, probe, jobs: Sequence[tuple[Query, str, Sequence[str]]], pool: CandidateSet, *,
                k: int = 10, budget: int | None = None, progress: Progress | None = None,
                **probe_options) -> list[dict]:
    """Rank the pool at [MASK] for each job (query, context, tracked entities) in one probe call.

    Returns per job ``{"ranks": {entity: rank}, "top": [names], "input": text, "notice": str}``; a
    rank counts the candidates scoring strictly higher, plus one.
    """
    if not jobs:
        return []
    opts = {name: v for name, v in probe_options.items() if v is not None}
    limit = min(int(opts.get("max_length") or DEFAULT_MAX_LENGTH), model_limit(model))
    opts["max_length"] = limit
    if budget is None:
        budget = token_budget(model, probe=probe.name, pool=pool.names, max_tokens=int(opts.get("max_tokens") or 20),
                              limit=limit)
    mask = model.mask_token
    # identical inputs of one query (e.g. input_0 of the target and negative runs) are ranked once
    unique: dict[tuple, int] = {}
    where, tracked_of, firsts = [], [], []
    for i, (q, ctx, tracked) in enumerate(jobs):
        key = (q.id, q.template, q.subject, ctx)
        if key not in unique:
            unique[key] = len(unique)
            tracked_of.append([])
            firsts.append(i)
        u = unique[key]
        where.append(u)
        tracked_of[u] += [t for t in tracked if t not in tracked_of[u]]
    texts = [compose(jobs[i][0], jobs[i][1], mask).replace(OBJECT, mask) for i in firsts]
    lengths = model.tokenizer(texts, add_special_tokens=False)["input_ids"]
    queries, notices = [], []
    for u, (i, ids) in enumerate(zip(firsts, lengths)):
        q, ctx, _ = jobs[i]
        notice = ""
        if len(ids) > budget:
            prompt = compose(q, "", mask).replace(OBJECT, mask)
            ctx, notice = fit_context(model.tokenizer, _neutral(ctx, mask), prompt, budget)
        queries.append(Query(id=f"{q.id}#{u}", subject=SUBJECT, relation=q.relation, template=compose(q, ctx, mask),
                             golds=tuple(tracked_of[u]), subject_id=q.subject_id))
        notices.append(notice)
    rankings = probe.rank(model, queries, pool, k=k, progress=progress, **opts)
    out = [{"ranks": {g: r for g, r in zip(rk.query.golds, rk.gold_ranks) if r is not None},
            "top": list(rk.names), "input": rk.query.text(model.mask_token), "notice": nt}
           for rk, nt in zip(rankings, notices)]
    return [out[u] for u in where]


# ---------------------------------------------------------------- one triple
@dataclass
class ContextRun:
    """One context sequence (one variant, one permutation): inputs, per-step ranks and RC rows."""

    variant: str
    permutation: int
    segmentation: Segmentation
    inputs: list[ContextInput]
    results: list[dict]
    rows: list[dict]

    def to_dict(self) -> dict:
        steps = []
        for row, inp, res in zip(self.rows, self.inputs, self.results):
            steps.append({**row, "input": res["input"], "segment": inp.added.order if inp.added else None,
                          "shown": list(inp.shown), "top": res["top"], "notice": res["notice"]})
        return {"variant": self.variant, "permutation": self.permutation, "target": self.segmentation.target,
                "steps": steps}


@dataclass
class ContextResult:
    """All runs for one triple, with the settings that produced them."""

    query: Query
    target: str
    golds: tuple[str, ...]
    variant: str
    negative: bool
    pool_size: int
    probe: str
    segmentation: Segmentation
    runs: list[ContextRun]
    seconds: float = 0.0
    settings: dict = field(default_factory=dict)

    @property
    def rows(self) -> list[dict]:
        """RC rows of every run, each tagged with its permutation."""
        return [{**r, "permutation": run.permutation} for run in self.runs for r in run.rows]

    @property
    def notices(self) -> list[str]:
        return sorted({res["notice"] for run in self.runs for res in run.results if res["notice"]})

    def ucm(self) -> dict:
        return metrics.ucm(self.rows)

    def to_dict(self) -> dict:
        return {"query": self.query.text(), "subject": self.query.subject, "relation": self.query.relation,
                "target": self.target, "golds": list(self.golds), "variant": self.variant,
                "negative": self.negative, "probe": self.probe, "pool_size": self.pool_size,
                "segmentation": self.segmentation.to_dict(), "ucm": self.ucm(), "notices": self.notices,
                "seconds": round(self.seconds, 3), "settings": self.settings,
                "runs": [r.to_dict() for r in self.runs]}


def pool_candidates(pool: Iterable[str], *extra: Iterable[str]) -> CandidateSet:
    """The pool as a candidate set, deduplicated by normalised name, with ``extra`` names added."""
    names = unique_names([*pool, *(n for e in extra for n in e)])
    if not names:
        raise ProbekitError("the entity pool is empty: give a pool file or a dataset relation")
    return CandidateSet.from_names(names)


def run_context(model, query: Query, *, target: str, pool: Iterable[str], document: str | None = None,
                segmentation: Segmentation | None = None, variant: str = "real", negative: bool = False,
                probe: str = "retrieval", seed: int = 0, permutations: int = 1, first_side: str = "left",
                occurrence: int = 0, k: int = 10, progress: Progress | None = None,
                **probe_options) -> ContextResult:
    """Rank the pool at [MASK] for input_0..input_N of one triple (S, R, O_t) and compute RC rows.

    ``query`` gives the subject, prompt (template with ``[X]``/``[Y]`` or text with ``[Y]``) and golds:
    O_cor = golds other than O_t. ``negative`` (or variant ``negative-target``) re-centres on the first
    O_incor. ``knowledge-random`` runs ``permutations`` seeded orders; other variants run once.
    """
    from ..probes import get_probe

    started = time.perf_counter()
    base, neg = _variant(variant)
    negative = negative or neg
    if not isinstance(permutations, int) or permutations < 1:
        raise ProbekitError(f"permutations must be a positive integer, got {permutations!r}")
    p = get_probe(probe)
    golds = tuple(unique_names([*query.golds, target]))
    cands = pool_candidates(pool, golds)
    if segmentation is None:
        if document is None:
            raise ProbekitError("give a document (or a segmentation)")
        segmentation = segment_document(document, target, cands.names, first_side=first_side, occurrence=occurrence)
    seg = negative_target(segmentation, golds) if negative else segmentation
    correct = [g for g in golds if normalize_name(g) != normalize_name(seg.target)]
    tracked = unique_names([seg.target, *correct, *(s.entity for s in seg.segments)])
    n_perm = permutations if base == "knowledge-random" else 1
    all_inputs = [build_inputs(seg, variant=base, seed=seed, permutation=i) for i in range(n_perm)]
    jobs = [(query, inp.context, tracked) for inputs in all_inputs for inp in inputs]
    results = rank_inputs(model, p, jobs, cands, k=k, progress=progress, **probe_options)
    runs, pos = [], 0
    for i, inputs in enumerate(all_inputs):
        res = results[pos:pos + len(inputs)]
        pos += len(inputs)
        rows = metrics.rank_changes([r["ranks"] for r in res], [None] + [x.added.entity for x in inputs[1:]],
                                    target=seg.target, correct=correct)
        runs.append(ContextRun(base, i, seg, inputs, res, rows))
    return ContextResult(query=query, target=seg.target, golds=golds, variant=base, negative=negative,
                         pool_size=len(cands), probe=p.name, segmentation=seg, runs=runs,
                         seconds=time.perf_counter() - started,
                         settings={"seed": seed, "permutations": n_perm, "first_side": first_side,
                                   "occurrence": occurrence, **{k_: v for k_, v in probe_options.items()
                                                                if v is not None}})


# ---------------------------------------------------------------- corpus search
def corpus_files(root: str | Path | None = None) -> list[Path]:
    """The elicit corpora (one sentence a line) under ``root`` (default: ``config.corpora_dir()``)."""
    root = Path(root) if root else config.corpora_dir()
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_file() and not p.name.startswith("."))


def search_sentences(subject: str, target: str, *, files: Sequence[str | Path] | None = None,
                     texts: Iterable[str] | None = None, limit: int = 20) -> list[str]:
    """Sentences (lines) that mention both ``subject`` and ``target`` (word boundaries, any case)."""
    if not normalize_name(subject) or not normalize_name(target):
        raise ProbekitError("give both a subject and a target to search for")
    s_pat, t_pat = _pattern(subject), _pattern(target)
    s_key, t_key = normalize_name(subject), normalize_name(target)
    out: list[str] = []

    def scan(lines: Iterable[str]) -> bool:
        for line in lines:
            low = line.lower()
            if s_key in low and t_key in low and s_pat.search(line) and t_pat.search(line):
                out.append(" ".join(line.split()))
                if len(out) >= limit:
                    return True
        return False

    if texts is not None and scan(texts):
        return out
    for f in files if files is not None else corpus_files():
        with open(f, encoding="utf-8", errors="replace") as fh:
            if scan(fh):
                break
    return out


# ---------------------------------------------------------------- dataset mode (knowledge-only KB contexts)
def kb_context(query: Query, pool: Sequence[str], *, seed: int = 0, n_incor: int | None = None,
               sep: str = SEPARATOR) -> tuple[Segmentation, tuple[str, ...]]:
    """A knowledge-only document for a query with >= 2 golds, built from the KB.

    Layout: O_t = the query's first gold; O_cor = its other golds; O_incor = ``n_incor`` (default: as
    many as O_cor) names drawn from ``pool`` that are not golds. O_cor and O_incor are shuffled together
    and O_t is put in the middle (index len // 2), names joined by ``", "``; segments are cut around O_t
    as for any document (S2 left of O_t, S3 right, …). Seeded per (seed, query id).
    """
    golds = tuple(unique_names(query.golds))
    if len(golds) < 2:
        raise ProbekitError(f"query {query.id!r} has fewer than 2 gold answers")
    gkeys = {normalize_name(g) for g in golds}
    rng = random.Random(f"{seed}:{query.id}")
    others = [n for n in unique_names(pool) if normalize_name(n) not in gkeys]
    want = len(golds) - 1 if n_incor is None else n_incor
    incor = rng.sample(others, min(want, len(others)))
    items = list(golds[1:]) + incor
    rng.shuffle(items)
    items.insert(len(items) // 2, golds[0])
    mentions, pos = [], 0
    for i, name in enumerate(items):
        if i:
            pos += len(sep)
        mentions.append(Mention(pos, pos + len(name), name, name))
        pos += len(name)
    document = sep.join(items)
    return segment(document, mentions, len(items) // 2), golds


@dataclass
class DatasetContextResult:
    """Dataset mode: RC rows of every triple (target and, optionally, negative-target) and the summary."""

    rows: list[dict]
    summary: dict
    settings: dict
    seconds: float

    def to_dict(self, *, with_rows: bool = False) -> dict:
        out = {"settings": self.settings, "seconds": round(self.seconds, 2), **self.summary}
        if with_rows:
            out["rows"] = self.rows
        return out


def _acc(rows: list[dict], ks: Sequence[int]) -> dict:
    """acc@k without context (step 0) and with the full context (last step), macro over relations and micro.

    In dataset mode the target and negative-target runs of a triple share both of these inputs (the
    prompt alone; the whole knowledge-only context in document order), so their acc@k agree by
    construction: the modes differ only in the order segments arrive, which is what UCM measures.
    """
    first, last = {}, {}
    for r in rows:
        key = (r["query_id"], r.get("permutation", 0))
        if r["step"] == 0:
            first[key] = r
        if key not in last or r["step"] > last[key]["step"]:
            last[key] = r
    out = {}
    for label, chosen in (("none", first), ("full", last)):
        by_rel: dict[str, list] = {}
        for r in chosen.values():
            by_rel.setdefault(r["relation"], []).append(r["best_gold_rank"])
        per = {rel: {k: sum(1 for x in v if x is not None and x <= k) / len(v) for k in ks}
               for rel, v in by_rel.items()}
        allr = [x for v in by_rel.values() for x in v]
        out[label] = {
            "relations": {rel: {f"acc@{k}": a[k] for k in ks} for rel, a in per.items()},
            "macro": {f"acc@{k}": (sum(a[k] for a in per.values()) / len(per) if per else float("nan")) for k in ks},
            "micro": {f"acc@{k}": (sum(1 for x in allr if x is not None and x <= k) / len(allr) if allr
                                   else float("nan")) for k in ks},
        }
    return out


def summarize(rows: list[dict], *, ks: Sequence[int] = ACC_KS) -> dict:
    """UCM_k per relation, UCM_m (micro and macro) and acc@k without / with context, per mode."""
    out = {}
    for mode in ("target", "negative"):
        rs = [r for r in rows if r["mode"] == mode]
        if not rs:
            continue
        out[mode] = {"n_triples": len({r["query_id"] for r in rs}), "ucm_k": metrics.ucm_k(rs),
                     "ucm_m": metrics.ucm_m(rs), "ucm_m_macro": metrics.ucm_m(rs, average="macro"),
                     "acc": _acc(rs, ks)}
    return out


def sample_queries(dataset, *, relations: Sequence[str] | None = None, limit: int | None = None,
                   seed: int = 0) -> list[Query]:
    """Queries with >= 2 distinct golds; ``limit`` keeps a seeded sample of that many per relation."""
    rels = relations or dataset.relations
    unknown = [r for r in rels if r not in dataset.relations]
    if unknown:
        from ..errors import UnknownNameError

        raise UnknownNameError("relation", unknown[0], dataset.relations)
    out = []
    for rel in rels:
        qs = [q for q in dataset.queries_for(rel) if len(unique_names(q.golds)) >= 2]
        if limit is not None and len(qs) > limit:
            keep = set(random.Random(f"{seed}:{rel}").sample(range(len(qs)), limit))
            qs = [q for i, q in enumerate(qs) if i in keep]
        out += qs
    return out


def run_dataset(model, dataset, *, probe: str = "retrieval", relations: Sequence[str] | None = None,
                limit: int | None = None, seed: int = 0, n_incor: int | None = None, negative: bool = True,
                variant: str = "knowledge-only", k: int = 10, progress: Progress | None = None,
                **probe_options) -> DatasetContextResult:
    """Dataset mode: KB contexts (:func:`kb_context`) for every query with >= 2 golds, ranked against
    the tails of the query's relation; target (and negative-target) RC rows, UCM and acc@k."""
    from ..probes import get_probe

    if variant not in KNOWLEDGE_VARIANTS:
        raise ProbekitError(f"dataset mode builds knowledge contexts; variant must be one of "
                            f"{', '.join(KNOWLEDGE_VARIANTS)}")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ProbekitError(f"limit must be a positive integer, got {limit!r}")
    started = time.perf_counter()
    p = get_probe(probe)
    queries = sample_queries(dataset, relations=relations, limit=limit, seed=seed)
    if not queries:
        raise ProbekitError("no query with at least 2 gold answers in this selection")
    by_rel: dict[str, list[Query]] = {}
    for q in queries:
        by_rel.setdefault(q.relation, []).append(q)
    modes = ("target", "negative") if negative else ("target",)
    rows: list[dict] = []
    done = 0
    for rel, qs in by_rel.items():
        pool = pool_candidates(dataset.candidates("relation", rel).names)
        plans = []  # (query, mode, segmentation, golds, inputs)
        for q in qs:
            seg, golds = kb_context(q, pool.names, seed=seed, n_incor=n_incor)
            for mode in modes:
                try:
                    s = negative_target(seg, golds) if mode == "negative" else seg
                except ProbekitError:
                    continue  # no O_incor drawn (tiny pools): no negative run for this triple
                plans.append((q, mode, s, golds, build_inputs(s, variant=variant, seed=seed)))
        jobs = [(q, inp.context, unique_names([s.target, *golds, *(x.entity for x in s.segments)]))
                for q, _, s, golds, inputs in plans for inp in inputs]

        def report(d, t, stage, _rel=rel, _base=done, _n=len(qs)):
            progress(_base + int(_n * min(d, t) / max(t, 1)), len(queries), f"{_rel}: {stage}")

        results = rank_inputs(model, p, jobs, pool, k=k, progress=report if progress else None, **probe_options)
        pos = 0
        for q, mode, s, golds, inputs in plans:
            res = results[pos:pos + len(inputs)]
            pos += len(inputs)
            correct = [g for g in golds if normalize_name(g) != normalize_name(s.target)]
            steps = metrics.rank_changes([r["ranks"] for r in res], [None] + [x.added.entity for x in inputs[1:]],
                                         target=s.target, correct=correct)
            for row, r in zip(steps, res):
                ranks = [r["ranks"].get(g) for g in golds]
                rows.append({"mode": mode, "query_id": q.id, "relation": rel, "subject": q.subject,
                             "target": s.target, "permutation": 0, **row,
                             "best_gold_rank": min((x for x in ranks if x is not None), default=None),
                             "notice": r["notice"]})
        done += len(qs)
        if progress:
            progress(done, len(queries), rel)
    seconds = time.perf_counter() - started
    settings = {"model": model.id, "probe": p.name, "dataset": dataset.name, "dataset_version": dataset.version,
                "relations": list(by_rel), "limit": limit, "seed": seed, "n_incor": n_incor, "variant": variant,
                "negative": negative, "n_queries": len(queries),
                "options": {k_: v for k_, v in probe_options.items() if v is not None}}
    return DatasetContextResult(rows=rows, summary=summarize(rows), settings=settings, seconds=seconds)


# ---------------------------------------------------------------- views (plain data for pages and reports)
def document_pieces(seg: Segmentation, golds: Iterable[str]) -> list[dict]:
    """The document as consecutive pieces for highlighting: ``{"text", "role", "segment"}`` where role is
    ``target`` / ``cor`` / ``incor`` for a pool entity and None for other text; ``segment`` = its S-number.

    >>> s = segment("a X b T", [Mention(2, 3, "X", "X"), Mention(6, 7, "T", "T")], 1)
    >>> [(p["text"], p["role"], p["segment"]) for p in document_pieces(s, ["T"])]
    [('a ', None, 2), ('X', 'incor', 2), (' b ', None, 1), ('T', 'target', 1)]
    """
    golds = list(golds)
    out = []
    for s in sorted(seg.segments, key=lambda x: x.start):
        m = s.mention
        for text, role in ((seg.document[s.start:m.start], None),
                           (seg.document[m.start:m.end], role_of(m.name, seg.target, golds)),
                           (seg.document[m.end:s.end], None)):
            if text:
                out.append({"text": text, "role": role, "segment": s.order})
    return out


def summary_frames(summary: dict):
    """(UCM table: mode, relation, U, C, M, n with ``UCM_m`` rows; acc table: mode, context, acc@k (macro))."""
    import pandas as pd

    ucm_rows, acc_rows = [], []
    for mode, summ in summary.items():
        for rel, u in [*summ["ucm_k"].items(), ("UCM_m", summ["ucm_m"])]:
            ucm_rows.append({"mode": mode, "relation": rel, **u})
        for label, acc in summ["acc"].items():
            acc_rows.append({"mode": mode, "context": label, **acc["macro"]})
    return pd.DataFrame(ucm_rows), pd.DataFrame(acc_rows)
