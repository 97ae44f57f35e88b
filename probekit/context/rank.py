"""Ranking the pool at [MASK] after each added segment, with any probe, through ``probe.rank``.

Every input becomes one :class:`~probekit.types.Query` whose template is context + prompt; the pool is the
candidate set and the tracked entities (O_t, O_cor, each O_a) are its golds, so a probe's gold ranks are
the entity ranks. A rank is 1 + the number of pool entities scoring strictly higher
(:func:`probekit.probes.base.top_k_and_gold_ranks`), so tied scores share a rank and an unchanged rank
gives RC = 0 (Confuse). RC rows and UCM come from :func:`probekit.metrics.rank_changes` and
:func:`probekit.metrics.ucm`.

Probe-specific needs go through the probe: the tokens it adds to a query (``input_overhead``, see
:func:`~.variants.probe_overhead`) and its ``max_length`` option when it has one.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .. import metrics
from ..errors import ProbekitError, positive_int
from ..jobs import Progress
from ..types import OBJECT, SUBJECT, CandidateSet, Query, normalize_name
from .segment import Segmentation, negative_target, segment_document, unique_names
from .variants import (
    DEFAULT_MAX_LENGTH,
    ContextInput,
    _neutral,
    _variant,
    build_inputs,
    compose,
    fit_context,
    model_limit,
    probe_overhead,
    token_budget,
)


def rank_inputs(model, probe, jobs: Sequence[tuple[Query, str, Sequence[str]]], pool: CandidateSet, *,
                k: int = 10, budget: int | None = None, progress: Progress | None = None,
                **probe_options) -> list[dict]:
    """Rank the pool at [MASK] for each job (query, context, tracked entities) in one probe call.

    Returns per job ``{"ranks": {entity: rank}, "top": [names], "input": text, "notice": str, "cut": (words
    dropped, context words, budget) or None}``; a rank counts the candidates scoring strictly higher, plus one.
    """
    if not jobs:
        return []
    opts = {name: v for name, v in probe_options.items() if v is not None}
    limit = min(int(opts.get("max_length") or DEFAULT_MAX_LENGTH), model_limit(model))
    if any(o.name == "max_length" for o in probe.options):
        opts["max_length"] = limit  # room for the context: the probe's own default is sized for a bare prompt
    if budget is None:
        budget = token_budget(model, overhead=probe_overhead(probe, model, pool, **opts), limit=limit)
    mask = model.mask_token
    # identical inputs of one query (e.g. input_0 of the target and negative runs) are ranked once
    unique: dict[tuple, int] = {}
    where: list[int] = []  # job -> its unique input
    tracked_of: list[list[str]] = []  # unique input -> the names tracked for it
    firsts: list[int] = []  # unique input -> its first job
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
    queries, notices, cuts = [], [], []
    for u, (i, ids) in enumerate(zip(firsts, lengths)):
        q, ctx, _ = jobs[i]
        notice, cut = "", None
        if len(ids) > budget:
            prompt = compose(q, "", mask).replace(OBJECT, mask)
            words = len(ctx.split())
            ctx, notice = fit_context(model.tokenizer, _neutral(ctx, mask), prompt, budget)
            cut = (words - len(ctx.split()), words, budget)
        queries.append(Query(id=f"{q.id}#{u}", subject=SUBJECT, relation=q.relation, template=compose(q, ctx, mask),
                             golds=tuple(tracked_of[u]), subject_id=q.subject_id))
        notices.append(notice)
        cuts.append(cut)
    rankings = probe.rank(model, queries, pool, k=k, progress=progress, **opts)
    out = [{"ranks": {g: r for g, r in zip(rk.query.golds, rk.gold_ranks) if r is not None},
            "top": list(rk.names), "input": rk.query.text(model.mask_token), "notice": nt, "cut": cut}
           for rk, nt, cut in zip(rankings, notices, cuts)]
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
        """At most one line for the whole result (not one per input): see :func:`truncation_summary`."""
        line = truncation_summary([res for run in self.runs for res in run.results])
        return [line] if line else []

    def ucm(self) -> dict:
        return metrics.ucm(self.rows)

    def ucm_text(self) -> str:
        """UCM as a sentence (the page and the CLI)."""
        return ucm_sentence(self.ucm())

    def to_dict(self) -> dict:
        return {"query": self.query.text(), "subject": self.query.subject, "relation": self.query.relation,
                "target": self.target, "golds": list(self.golds), "variant": self.variant,
                "negative": self.negative, "probe": self.probe, "pool_size": self.pool_size,
                "segmentation": self.segmentation.to_dict(), "ucm": self.ucm(), "notices": self.notices,
                "seconds": round(self.seconds, 3), "settings": self.settings,
                "runs": [r.to_dict() for r in self.runs]}


def truncation_summary(results: Sequence[dict]) -> str:
    """One line for every input cut to the token budget ('' when none was), instead of one per input.

    >>> truncation_summary([{"cut": None}, {"cut": (10, 40, 510)}, {"cut": (1_200, 1_230, 510)}])
    'Two of 3 inputs were cut to 510 tokens: words dropped from the start of the context (up to 1,200 of 1,230).'
    """
    cuts = [r["cut"] for r in results if r.get("cut")]
    if not cuts:
        return ""
    n = len(cuts)
    count = _NUMBERS[n] if n < len(_NUMBERS) else f"{n:,}"
    dropped, words, budget = max(cuts)
    return (f"{count} of {len(results):,} input{'s' if len(results) != 1 else ''} {'were' if n != 1 else 'was'} "
            f"cut to {budget} tokens: words dropped from the start of the context (up to {dropped:,} of {words:,}).")


_NUMBERS = ("No", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten")


def ucm_sentence(u: dict) -> str:
    """UCM shares as a sentence; with no kept step, say why it is undefined.

    >>> ucm_sentence({"U": 0.5, "C": 0.25, "M": 0.25, "n": 4})
    'Over 4 steps that added a correct object (O_cor): Understand 50 %, Confuse 25 %, Misunderstand 25 %.'
    >>> ucm_sentence({"U": float("nan"), "C": float("nan"), "M": float("nan"), "n": 0})
    'No correct object (O_cor) was added, so UCM is undefined for this context.'
    """
    if not u.get("n"):
        return "No correct object (O_cor) was added, so UCM is undefined for this context."
    steps = f"{u['n']} step{'s' if u['n'] != 1 else ''}"
    return (f"Over {steps} that added a correct object (O_cor): Understand {100 * u['U']:.0f} %, "
            f"Confuse {100 * u['C']:.0f} %, Misunderstand {100 * u['M']:.0f} %.")


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
    positive_int("permutations", permutations)
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
        added = [None if x.added is None else x.added.entity for x in inputs]  # None for input_0 only
        rows = metrics.rank_changes([r["ranks"] for r in res], added,
                                    target=seg.target, correct=correct)
        runs.append(ContextRun(base, i, seg, inputs, res, rows))
    return ContextResult(query=query, target=seg.target, golds=golds, variant=base, negative=negative,
                         pool_size=len(cands), probe=p.name, segmentation=seg, runs=runs,
                         seconds=time.perf_counter() - started,
                         settings={"seed": seed, "permutations": n_perm, "first_side": first_side,
                                   "occurrence": occurrence, **{k_: v for k_, v in probe_options.items()
                                                                if v is not None}})


