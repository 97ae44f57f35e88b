"""One query through every probe the loaded model supports, and where the probes agree on its answer.

A reader comparing probing methods on one fact wants each method's own answer, not one method's answer under
another method's settings: every registered probe usable with the model (:meth:`Probe.usable_with`) runs its own
:meth:`Probe.explain` on its own candidate vocabulary (:meth:`Probe.vocab`: the likelihood probe ranks the
relation's answers, the others the dataset's heads+tails, unless the caller names one vocabulary for all). The
probes the model cannot serve are named with the reason each gives (:meth:`Probe.unusable_reason`), never dropped
in silence. Only the one loaded model is probed: a second model would double the memory a page holds.

Answers are compared across probes by the hit rule's answer key (:func:`~probekit.probes.generated.answer_keys`:
lower case, whitespace collapsed, in the model's own tokenisation), so mask_predict's generated ``heart - attack``
and retrieval's candidate "Heart-Attack" count as one answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..errors import ProbekitError, positive_int
from ..jobs import Progress
from ..models import LoadedModel
from ..types import CandidateSet, Query, Ranking
from .base import COMMON_OPTIONS, Probe, check_inputs
from .call import Explanation
from .generated import answer_keys

Candidates = CandidateSet | Callable[[str], CandidateSet]
"""One candidate set for every probe, or a loader ``vocabulary name -> CandidateSet`` that lets each probe rank
its own vocabulary (:meth:`Probe.vocab`); a loader is called once per distinct name."""


@dataclass(frozen=True)
class ProbeRun:
    """One probe's answer to the query: its ranking and explanation (as its own :meth:`Probe.explain` gives them),
    the vocabulary it ranked and how many candidates that held, and the wall-clock seconds it took."""

    probe: str
    ranking: Ranking
    explanation: Explanation | None
    vocab: str
    n_candidates: int
    seconds: float

    @property
    def gold_rank(self) -> int | None:
        """The best rank of any gold answer (None: no gold is a candidate, or none was generated)."""
        return self.ranking.best_gold_rank


@dataclass(frozen=True)
class Skipped:
    """A registered probe the model cannot serve, with the one line its :meth:`Probe.unusable_reason` gives."""

    probe: str
    reason: str


@dataclass(frozen=True)
class Agreement:
    """Where the probes' top-k lists agree.

    ``top1``: each #1 answer (as the first probe listing it spells it) -> the probes that put it first, most
    probes first. ``only_some``: each answer in some probe's top-k but not in every one's -> {probe: its rank
    there}, best-ranked answers first; an answer every probe lists is agreement and is left out. ``gold_ranks``:
    probe -> the best rank of a gold answer (None where it has none).
    """

    top1: dict[str, tuple[str, ...]]
    only_some: dict[str, dict[str, int]]
    gold_ranks: dict[str, int | None]

    @property
    def unanimous(self) -> bool:
        """Every probe put the same answer first."""
        return len(self.top1) <= 1


@dataclass(frozen=True)
class EveryProbe:
    """The result of :func:`every_probe`: one :class:`ProbeRun` per usable probe (registry order), one
    :class:`Skipped` per other probe, and their :class:`Agreement`."""

    query: Query
    k: int
    runs: tuple[ProbeRun, ...]
    skipped: tuple[Skipped, ...]
    agreement: Agreement

    def run(self, probe: str) -> ProbeRun:
        """The run of ``probe`` (a ProbekitError naming the probes that ran when it did not)."""
        for r in self.runs:
            if r.probe == probe:
                return r
        raise ProbekitError(f"probe {probe!r} did not run; ran: {', '.join(r.probe for r in self.runs) or 'none'}")


def agreement(runs: tuple[ProbeRun, ...] | list[ProbeRun], tokenizer) -> Agreement:
    """The :class:`Agreement` of ``runs``, answers compared by their answer keys in ``tokenizer``."""
    spelling: dict[str, str] = {}  # answer key -> the first spelling met, in run order then rank order
    ranks: dict[str, dict[str, int]] = {}  # answer key -> {probe: rank}
    for run in runs:
        for rank, (name, key) in enumerate(zip(run.ranking.names, answer_keys(tokenizer, run.ranking.names)), 1):
            spelling.setdefault(key, name)
            ranks.setdefault(key, {}).setdefault(run.probe, rank)
    top1: dict[str, list[str]] = {}
    for run in runs:
        if run.ranking.names:
            first = answer_keys(tokenizer, run.ranking.names[:1])[0]
            top1.setdefault(spelling[first], []).append(run.probe)
    everyone = {run.probe for run in runs}
    partial = [key for key, where in ranks.items() if set(where) != everyone]
    partial.sort(key=lambda key: (min(ranks[key].values()), -len(ranks[key]), spelling[key].casefold()))
    return Agreement(top1={a: tuple(p) for a, p in sorted(top1.items(), key=lambda item: -len(item[1]))},
                     only_some={spelling[key]: dict(ranks[key]) for key in partial},
                     gold_ranks={run.probe: run.gold_rank for run in runs})


def _candidates_for(candidates: Candidates) -> Callable[[str], tuple[CandidateSet, str]]:
    """``vocabulary name -> (candidate set, name shown)``, each distinct name loaded once."""
    if isinstance(candidates, CandidateSet):
        return lambda name: (candidates, "given")
    if not callable(candidates):
        raise ProbekitError(f"candidates must be a CandidateSet or a vocabulary loader, got "
                            f"{type(candidates).__name__}")
    loaded: dict[str, CandidateSet] = {}

    def load(name: str) -> tuple[CandidateSet, str]:
        if name not in loaded:
            loaded[name] = candidates(name)
        return loaded[name], name

    return load


def _staged(progress: Progress | None, probe: str, i: int, n: int) -> Progress | None:
    """``progress`` with each stage prefixed by the probe and its place, so one bar says which probe is working."""
    if progress is None:
        return None
    report = progress

    def staged(done: int, total: int, stage: str = "") -> None:
        report(done, total, f"{probe} ({i}/{n}): {stage or 'ranking'}")

    return staged


def every_probe(model: LoadedModel, query: Query, candidates: Candidates, *, k: int = 10, vocab: str | None = None,
                has_relation: bool = True, options: Mapping[str, Mapping] | None = None,
                common: Mapping[str, object] | None = None, progress: Progress | None = None) -> EveryProbe:
    """Run every registered probe usable with ``model`` on ``query``, each through its own :meth:`Probe.explain`.

    ``candidates``: one set for all, or a loader of vocabularies by name; with a loader each probe ranks ``vocab``
    when given, else its own (:meth:`Probe.vocab`, ``has_relation`` False for a typed query without a relation).
    ``options``: probe name -> that probe's own options (the others keep their defaults); ``common``: values of
    the options every probe takes (:data:`COMMON_OPTIONS`, e.g. ``exclude_subject``), applied to each probe.
    ``progress(done, total, stage)`` sees each probe's stages, named by the probe.
    Inputs are checked before any probe runs: an empty candidate set, a query without a mask, a bad k, an unknown
    probe or common option each give one :class:`ProbekitError`.
    """
    from . import PROBES, get_probe

    positive_int("k", k)
    options = dict(options or {})
    for name in options:
        get_probe(name)  # an unknown probe: the registry's "did you mean" line
    common = dict(common or {})
    known = {o.name for o in COMMON_OPTIONS}
    if unknown := sorted(set(common) - known):
        raise ProbekitError(f"unknown common option {unknown[0]!r}; available: {', '.join(sorted(known))}")
    usable: list[Probe] = [p for p in PROBES.values() if p.usable_with(model)]
    skipped = tuple(Skipped(p.name, p.unusable_reason(model)) for p in PROBES.values() if not p.usable_with(model))
    if not usable:
        raise ProbekitError(f"no registered probe can probe {model.id!r}: "
                            + "; ".join(s.reason for s in skipped))
    load = _candidates_for(candidates)
    planned = [(p, *load(p.vocab(vocab, has_relation=has_relation))) for p in usable]
    for _, cands, _ in planned:  # one clear line before minutes of work, not after the first probe
        check_inputs(model, [query], cands, k=k)
    runs = []
    for i, (p, cands, vocab_name) in enumerate(planned, 1):
        start = time.perf_counter()
        ranking, explanation = p.explain(model, query, cands, k=k, progress=_staged(progress, p.name, i, len(planned)),
                                         **{**common, **options.get(p.name, {})})
        runs.append(ProbeRun(probe=p.name, ranking=ranking, explanation=explanation, vocab=vocab_name,
                             n_candidates=len(cands), seconds=time.perf_counter() - start))
    return EveryProbe(query=query, k=k, runs=tuple(runs), skipped=skipped,
                      agreement=agreement(runs, model.tokenizer))


__all__ = ["Agreement", "Candidates", "EveryProbe", "ProbeRun", "Skipped", "agreement", "every_probe"]
