"""Likelihood probing (BEAR, Wiland, Ploner & Akbik 2024): rank a query's candidates by the log-likelihood the
model gives the statement with each candidate filled in, for any LM with an LM head.

BEAR's rule: fill the template with the subject and each answer option, score every filled-in statement with the
model's own likelihood (causal LMs: the chain rule; masked LMs: the pseudo-log-likelihood; here also
encoder-decoders: the decoder's likelihood of the statement given the masked query), and rank the options by
that score. Models of every kind are then compared on one scale. The kernels and what exactly is scored are in
:mod:`~probekit.probes.likelihood_scoring`.

Options:

- ``reduction``: ``sum`` (BEAR's default) or ``mean`` of the scored tokens' log-probs;
- ``span``: ``statement`` (every token, BEAR's default) or ``answer`` (only the answer's tokens, in the context
  of the whole statement);
- ``capitalize``: upper-case the filled-in statement's first character (lm-pub-quiz does; off by default, the
  statement as the template and names spell it);
- ``pll`` (masked LMs): ``original`` (each token masked alone; the default) or ``within_word_l2r`` (the rest
  of its word masked too; lm-pub-quiz's default), see :mod:`~probekit.probes.likelihood_scoring`;
- ``preset``: a named recipe whose values replace the options it names (:data:`PRESETS`); a run stores both;
- the candidate space is the one the caller gives: with ``--vocab relation`` the relation's answer set (BEAR's
  multiple choice; the CLI's default for this probe, ``default_vocab``), or any vocabulary probekit offers;
- ``first_stage`` / ``first_stage_model`` / ``top_n`` (retrieve-then-rerank): ``first_stage='retrieval'`` ranks
  the whole candidate set with another model (by default the embedded encoder) and only its top N are scored
  here, so a vocabulary of 22,923 names costs N statements per query. Gold ranks are exact within the scored
  set; a gold the first stage did not keep ranks N + 1 (the first place after the scored set: acc@k is exact
  for k <= N) and every unscored candidate scores -inf. The first stage's model is the probed model's companion
  (``LoadedModel.companion``): released with it when its holder switches model.

A statement longer than the model's context is refused with its length; out-of-memory becomes a message.

A served model (``openai:URL#NAME``, :mod:`probekit.backends`) is scored by its engine: the same statements,
tokenised by the same rule, each token's log-prob read from the server's echo of the statement; the options and the
``Ranking`` are the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ProbekitError, UnknownNameError
from ..lazy import lazy_module
from ..ranking import ranking_from_scores
from ..types import OBJECT, SUBJECT, CandidateSet, Query, Ranking
from .base import Call, Option, Probe
from .call import Explanation
from .likelihood_scoring import (
    PLLS,
    SPANS,
    causal_logprobs_many,
    context_limit,
    encode,
    reduce,
    seq2seq_logprobs,
)
from .pll import mlm_logprobs
from .retrieval import PROBE as RETRIEVAL

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_module("torch")  # imported on first use (probekit.lazy)

REDUCTIONS = ("sum", "mean")
PRESETS: dict[str, dict] = {
    "lm-pub-quiz": {"reduction": "sum", "span": "statement", "capitalize": True, "pll": "within_word_l2r"},
}
"""Named recipes: the option values each one sets.

``lm-pub-quiz``: the defaults of BEAR's reference package ``lm-pub-quiz`` (read in its 0.3.3 source,
``lm_pub_quiz/evaluators/``), so its rankings and scores are reproduced:

- reduction ``sum`` of the token log-probs: ``base.py:40`` ``default_reduction = "sum"`` (``mean`` is
  ``sum(x) / len(x)``, ``pll_evaluators.py:336-337``);
- the whole statement is scored, for causal and masked models alike: ``pll_evaluators.py:49``
  ``conditional_score=False`` (with True, a causal LM scores from the answer's first token to the end,
  ``pll_evaluators.py:451-457``, and a masked LM only the answer's tokens, ``pll_evaluators.py:375-386``; neither
  is a probekit span);
- special tokens are never scored: the scoring mask is not ``special_tokens_mask`` (``scoring_mixins.py:17``,
  ``pll_evaluators.py:389``);
- the statement's first character upper-cased: ``templating_util.py:12`` ``capitalize=True``, applied to the
  whole filled-in text by ``text[0].upper() + text[1:]`` (``templating_util.py:25-29, 99-100``);
- masked LMs' PLL ``within_word_l2r``: ``scoring_mixins.py:35`` ``pll_metric="within_word_l2r"``; each scored
  token's copy also masks the later scored tokens of its word until the first of another word
  (``scoring_mixins.py:155-175``, word ids from the fast tokenizer);
- causal LMs start with BOS: ``pll_evaluators.py:50`` ``ensure_bos_token_added=True``: the tokenizer is asked to add
  it, and if the first token is still not BOS the BOS text is put before every statement and it is marked special
  (``pll_evaluators.py:409-441``); probekit always does the same (a BOS id the tokenizer does not add is put first,
  never scored); the first token is only context (``scoring_mixins.py:256-257``, logits shifted by one);
- templates are filled by one left-to-right pass replacing every ``[X]`` by the subject and every ``[Y]`` by the
  answer (``templating_util.py:31-97``), as :func:`statement` does.
"""
FIRST_STAGE_MODEL = "default"
FIRST_STAGES = {"retrieval": RETRIEVAL}
"""Probes that may pick the candidates likelihood re-ranks (ranked probes that need no LM head)."""


def statement(query: Query, answer: str, *, capitalize: bool = False) -> tuple[str, tuple[int, int]]:
    """The statement with ``answer`` in the object slot and the subject in its own, and the answer's character span;
    ``capitalize`` upper-cases its first character (lm-pub-quiz's default).

    >>> statement(Query("q", "Metformin", "may_treat", "[X] might treat [Y]."), "diabetes")
    ('Metformin might treat diabetes.', (22, 30))
    >>> statement(Query("q", "x", "r", "[Y] is treated by [X]."), "diabetes", capitalize=True)
    ('Diabetes is treated by x.', (0, 8))
    """
    before, _, after = query.template.partition(OBJECT)
    before = before.replace(SUBJECT, query.subject)
    after = after.replace(OBJECT, answer).replace(SUBJECT, query.subject)
    text, a, b = before + answer + after, len(before), len(before) + len(answer)
    if capitalize and text:
        first = text[0].upper()  # may be longer than one character ("ß" -> "SS"): the span moves with it
        shift = len(first) - 1
        text = first + text[1:]
        a, b = (a + shift if a else 0), b + shift
    return text, (a, b)


def apply_preset(options: dict) -> dict:
    """``options`` with its ``preset``'s values written over them (a copy; unchanged without a preset).

    >>> apply_preset({"preset": "lm-pub-quiz", "reduction": "mean", "batch_size": 8})["reduction"]
    'sum'
    >>> apply_preset({"reduction": "mean"})
    {'reduction': 'mean'}
    """
    preset = options.get("preset")
    if preset in (None, ""):
        return dict(options)
    if preset not in PRESETS:
        raise UnknownNameError("preset", str(preset), list(PRESETS))
    return {**options, **PRESETS[preset]}


def _kind(model) -> str:
    return "causal" if getattr(model, "is_causal", False) else "seq2seq" if getattr(
        model, "is_seq2seq", False) else "masked"


def token_logprobs(model, query: Query, names, *, span: str, batch_size: int, capitalize: bool = False,
                   pll: str = "original") -> list[np.ndarray]:
    """Per-token log-probs of each statement (NaN where not scored), refusing a statement longer than the model's
    context with its length."""
    return token_logprobs_many(model, [(query, names)], span=span, batch_size=batch_size, capitalize=capitalize,
                               pll=pll)[0]


def _served(model):
    """The scoring backend of a served model (:mod:`probekit.backends`), None for a model loaded in process."""
    return getattr(model, "backend", None)


def _encode_checked(model, cases, span: str, capitalize: bool) -> list[list]:
    """Every case's statements tokenised (one tokenizer call for all), refusing one longer than the context."""
    limit = model.context if _served(model) is not None else context_limit(model)
    filled = [[statement(q, n, capitalize=capitalize) for n in names] for q, names in cases]
    flat = encode(model, [t for f in filled for t, _ in f], [s for f in filled for _, s in f], span)
    out, at = [], 0
    for (query, names), f in zip(cases, filled):
        encoded = flat[at:at + len(f)]
        at += len(f)
        out.append(encoded)
        if not encoded:
            continue
        longest = max(range(len(encoded)), key=lambda i: len(encoded[i].ids))
        if len(encoded[longest].ids) > limit:
            raise ProbekitError(f"query {query.id!r} with the answer {names[longest]!r} is "
                                f"{len(encoded[longest].ids)} tokens long, more than the model's context of "
                                f"{limit}; shorten the query or leave such names out of the candidates")
    return out


def token_logprobs_many(model, cases, *, span: str, batch_size: int, capitalize: bool = False,
                        pll: str = "original",
                        progress: Callable[[int], None] | None = None) -> list[list[np.ndarray]]:
    """:func:`token_logprobs` for several ``(query, names)`` cases; a causal LM scores them together
    (several queries per forward pass), the other kinds query by query, a served model statement by statement
    through its engine (``progress(statements done)`` as they come back). ``pll`` counts for masked LMs only."""
    if pll not in PLLS:
        raise UnknownNameError("pll", str(pll), list(PLLS))
    encoded = _encode_checked(model, cases, span, capitalize)
    if _served(model) is not None:
        return _served_logprobs(model, cases, encoded, capitalize=capitalize, progress=progress)
    kind = _kind(model)
    try:
        with torch.inference_mode():
            if kind == "causal":
                return causal_logprobs_many(model.causal, encoded, batch_size=batch_size)
            if kind == "masked":
                return [mlm_logprobs(model.mlm, model.tokenizer, e, batch_size=batch_size, pll=pll) if e else []
                        for e in encoded]
            return [seq2seq_logprobs(model.seq2seq, model.tokenizer, q.text(model.mask_token), e,
                                     batch_size=batch_size) if e else [] for (q, _), e in zip(cases, encoded)]
    except torch.OutOfMemoryError:
        ids = ", ".join(repr(q.id) for q, _ in cases[:3]) + (", ..." if len(cases) > 3 else "")
        raise ProbekitError(f"out of memory scoring {len(cases)} quer{'y' if len(cases) == 1 else 'ies'} ({ids}; "
                            f"{sum(len(n) for _, n in cases)} candidates, batch_size {batch_size}) on "
                            f"{model.device}: lower batch_size, or use first_stage with a smaller top_n") from None


def _served_logprobs(model, cases, encoded, *, capitalize: bool, progress=None) -> list[list[np.ndarray]]:
    """Each statement's log-probs from the engine serving ``model``, on the tokens the tokenizer gave (the server
    must agree on their number), NaN where not scored."""
    texts = [statement(q, n, capitalize=capitalize)[0] for q, names in cases for n in names]
    flat = [e for enc in encoded for e in enc]
    values = model.token_logprobs(texts, [e.ids for e in flat], progress=progress)
    rows = [np.where(np.asarray(e.scored), np.asarray(v, dtype=np.float64), np.nan) for e, v in zip(flat, values)]
    out, at = [], 0
    for enc in encoded:
        out.append(rows[at:at + len(enc)])
        at += len(enc)
    return out


def _served_progress(progress, served, done: int, total: int, n_queries: int) -> Callable[[int], None]:
    """``progress`` told of each statement an engine scored in a chunk of ``n_queries`` queries, with its speed so
    far (the one Progress; queries count as done only when their chunk is)."""
    def report(n: int) -> None:
        speed = served.speed()
        progress(done, total, f"scoring · {n:,} statements of the next {n_queries} queries · {speed:,.0f} tokens/s")
    return report


CHUNK_BATCHES = 16
"""Queries are scored together up to about this many batches of statements (memory: one chunk's token log-probs
and, for a causal LM, its queries' prefix KV caches at a time)."""


def _chunks(kept: list[list[int]], size: int) -> list[list[int]]:
    """Consecutive query indices, cut where the chunk's statements reach ``size`` (a query is never split).

    >>> _chunks([[1, 2], [3], [4, 5, 6], []], 3)
    [[0, 1], [2], [3]]
    """
    out: list[list[int]] = []
    cur: list[int] = []
    n = 0
    for j, ids in enumerate(kept):
        cur.append(j)
        n += len(ids)
        if n >= size:
            out.append(cur)
            cur, n = [], 0
    if cur:
        out.append(cur)
    return out


def first_stage_ids(model, queries, candidates: CandidateSet, call: Call, *, first_stage: str,
                    first_stage_model: str | None, top_n: int) -> list[list[int]]:
    """For each query, the ids of the first stage's top ``top_n`` candidates (its exclusions honoured). The first
    stage's model is ``model``'s companion (:meth:`probekit.models.LoadedModel.companion`): held by the model
    being probed and released with it, never by this module."""
    probe = FIRST_STAGES[first_stage]
    stage_model = model.companion(first_stage_model or FIRST_STAGE_MODEL)
    exclude = any(ex.ids or ex.names for ex in call.excluded)
    n = min(top_n, len(candidates))
    rankings = probe.rank(stage_model, queries, candidates, k=n, exclude_subject=exclude)
    return [[i for i in r.ids if i >= 0] for r in rankings]


class LikelihoodProbe(Probe):
    def usable_with(self, model) -> bool:
        """Any model with an LM head: causal, masked or encoder-decoder."""
        return bool(getattr(model, "is_causal", False) or model.has_mlm or getattr(model, "is_seq2seq", False))

    def unusable_reason(self, model) -> str:
        return (f"probe {self.name!r} needs a model with a language-model head (causal, masked or "
                f"encoder-decoder); {model.id!r} has none: an encoder, it supports 'retrieval' (or rerank its "
                "top candidates: first_stage='retrieval' with first_stage_model set to it, on an LM)")

    def resolve(self, options: dict) -> dict:
        """The options a run really uses: the preset's values written over them (stored runs record both)."""
        return apply_preset(options)

    def _run(self, model, queries, candidates, call: Call, *, reduction, span, batch_size, first_stage,
             first_stage_model, top_n, capitalize=False, pll="original", preset=None):
        """For each query: its scores over all candidates (-inf where not scored) and each scored candidate's
        token log-probs. Queries go to the model in chunks of about ``CHUNK_BATCHES`` batches of statements (a
        causal LM fills its batches across the queries of a chunk)."""
        o = apply_preset(dict(reduction=reduction, span=span, capitalize=capitalize, pll=pll, preset=preset))
        reduction, span, capitalize, pll = o["reduction"], o["span"], o["capitalize"], o["pll"]
        if first_stage:
            kept = first_stage_ids(model, queries, candidates, call, first_stage=first_stage,
                                   first_stage_model=first_stage_model, top_n=top_n)
        else:
            ex_all = [set(ex.ids) for ex in call.excluded]
            kept = [[i for i in range(len(candidates)) if i not in ex] for ex in ex_all]
        done = 0
        served = _served(model)
        for chunk in _chunks(kept, CHUNK_BATCHES * batch_size):
            cases = [(queries[j], [candidates.names[i] for i in kept[j]]) for j in chunk]
            report = _served_progress(call.progress, served, done, len(queries), len(chunk)) \
                if served is not None and call.progress else None
            per_query = token_logprobs_many(model, cases, span=span, batch_size=batch_size, capitalize=capitalize,
                                            pll=pll, progress=report)
            for j, per_token in zip(chunk, per_query):
                scores = np.full(len(candidates), -np.inf, dtype=np.float64)
                for i, lp in zip(kept[j], per_token):
                    scores[i] = reduce(lp, reduction)
                yield queries[j], scores, dict(zip(kept[j], per_token))
            done += len(chunk)
            if call.progress:
                speed = f" · {served.speed():,.0f} tokens/s" if served is not None else ""
                call.progress(done, len(queries), "scoring" + speed)

    def _rank(self, model, queries, candidates, call: Call, *, reduction, span, batch_size, first_stage,
              first_stage_model, top_n, capitalize, pll, preset) -> list[Ranking]:
        run = self._run(model, queries, candidates, call, reduction=reduction, span=span, batch_size=batch_size,
                        first_stage=first_stage, first_stage_model=first_stage_model, top_n=top_n,
                        capitalize=capitalize, pll=pll, preset=preset)
        return [ranking_from_scores(q, candidates, scores, call.k, excluded=ex)
                for (q, scores, _), ex in zip(run, call.excluded)]

    def _explain(self, model, query, candidates, call: Call, **opts) -> tuple[Ranking, Explanation | None]:
        (_, scores, per_token), = self._run(model, [query], candidates, call, **opts)
        ranking = ranking_from_scores(query, candidates, scores, call.k, excluded=call.excluded[0])
        opts = apply_preset(opts)
        tok = model.tokenizer
        views: dict[str, list[dict]] = {}
        for cid, name in zip(ranking.ids, ranking.names):
            lp = per_token[cid]
            text, where = statement(query, name, capitalize=opts["capitalize"])
            ids = encode(model, [text], [where], opts["span"])[0].ids
            views[name] = [{"token": tok.convert_ids_to_tokens(t), "log-prob": None if np.isnan(v) else float(v),
                            "scored": not np.isnan(v)} for t, v in zip(ids, lp)]
        if not views:
            return ranking, None
        return ranking, Explanation(
            title="Per-token log-probabilities", views=views, default=ranking.names[0], choose="candidate",
            help="Each token's log-probability in the statement with this candidate filled in; the candidate's "
                 f"score is their {opts['reduction']} over the scored tokens.",
            caption=f"{_kind(model)} LM{' served by ' + model.backend.where if _served(model) else ''}, "
                    f"span '{opts['span']}', reduction '{opts['reduction']}'"
                    + (f", pll '{opts['pll']}'" if _kind(model) == "masked" else "")
                    + (", first letter capitalised" if opts["capitalize"] else "")
                    + (f", preset '{opts['preset']}'" if opts["preset"] else ""))


PROBE = LikelihoodProbe(
    name="likelihood",
    requires_mlm=False,
    options=(
        Option("reduction", "sum", REDUCTIONS, "sum (BEAR) or mean of the scored tokens' log-probabilities"),
        Option("span", "statement", SPANS, "score the whole statement (BEAR) or only the answer's tokens"),
        Option("capitalize", False, (False, True), "upper-case the statement's first character (lm-pub-quiz "
               "does); off = the statement as the template and names spell it"),
        Option("pll", "original", PLLS, "masked LMs' pseudo-log-likelihood: original (each token masked alone) "
               "or within_word_l2r (the rest of its word masked too; lm-pub-quiz's default)"),
        Option("preset", None, (None, *PRESETS), "a reference's recipe; its values replace the options it names. "
               "lm-pub-quiz: BEAR's package's defaults (sum over the whole statement, first letter capitalised, "
               "within_word_l2r PLL)", type=str),
        Option("batch_size", 64, (), "statements (masked LMs: masked copies) per forward pass", advanced=True,
               minimum=1),
        Option("first_stage", None, (None, *FIRST_STAGES), "retrieve-then-rerank: this probe picks the top_n "
               "candidates, likelihood re-ranks them; None = score every candidate", type=str, advanced=True),
        Option("first_stage_model", None, (), "the first stage's model; None = the embedded encoder 'default'",
               type=str, advanced=True),
        Option("top_n", 100, (), "candidates the first stage keeps; a gold it drops ranks top_n + 1",
               advanced=True, minimum=1),
    ),
    description="Any LM (causal, masked, seq2seq): rank candidates by the log-likelihood of the filled-in "
                "statement (BEAR).",
    default_vocab="relation",
)
