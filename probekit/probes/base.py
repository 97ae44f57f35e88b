"""The one probe interface and the helpers every probe shares.

The contract between :meth:`Probe.rank` and a probe module is explicit: ``rank`` checks the inputs and
options, turns the options every probe takes (:data:`COMMON_OPTIONS`) into a :class:`Call`, and hands
that to the probe's ``_rank(model, queries, candidates, call, **own_options)``. A probe builds its
rankings with the shared helpers, which take what the call asks for as arguments
(``ranking_from_scores(..., excluded=call.excluded[i])``, ``ranking_from_predictions(..., excluded=...)``);
nothing reaches a probe through a global. :meth:`Probe.rank` then checks every returned ranking against
the call (:func:`check_rankings`), so a probe that forgets an option fails loudly instead of silently.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from ..errors import ProbekitError, positive_int
from ..jobs import Progress
from ..models import LoadedModel
from ..ranking import NOTHING_EXCLUDED, exclusion
from ..types import OBJECT, CandidateSet, Query, Ranking
from .call import Call, Explanation
from .generated import answer_keys


@dataclass(frozen=True)
class Option:
    """One user-facing option of a probe: the CLI flags (:func:`probekit.cli.common.add_probe_args`), the page
    widgets (``pages/_options.py``) and the Grid page's pick entries are generated from these, so a new probe
    brings its own interface.

    ``type`` is the value type (inferred from ``default`` when not given; ``str`` for a ``None`` default).
    ``advanced`` options go under an expander in the UI. ``minimum`` bounds an integer option from below.

    >>> Option("layer", None, type=int).value_type, Option("fast", False).value_type
    (<class 'int'>, <class 'bool'>)
    """

    name: str
    default: object
    choices: tuple = ()
    help: str = ""
    type: builtins.type | None = None
    advanced: bool = False
    minimum: int | None = None

    @property
    def value_type(self) -> builtins.type:
        if self.type is not None:
            return self.type
        return str if self.default is None else type(self.default)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def check(self, value, probe: str) -> object:
        """``value`` when this option accepts it, else a :class:`ProbekitError` naming the option.

        ``None`` is accepted where the default is ``None`` ("unset"); an integer option refuses ``True``
        (a bool is an int to Python, never to a user); ``choices`` are exact.

        >>> Option("batch_size", 32, minimum=1).check(0, "p")
        Traceback (most recent call last):
        ...
        probekit.errors.ProbekitError: option batch_size of probe 'p' must be an integer >= 1, got 0
        >>> Option("fast", False, (False, True)).check(True, "p")
        True
        """
        if self.choices:
            if not any(value is c or (type(value) is type(c) and value == c) for c in self.choices):
                raise ProbekitError(f"option {self.name}={value!r} of probe {probe!r} must be one of "
                                    f"{', '.join(map(str, self.choices))}")
            return value
        if value is None and self.default is None:
            return value
        kind = self.value_type
        if kind is int:
            if not isinstance(value, int) or isinstance(value, bool) or (
                    self.minimum is not None and value < self.minimum):
                bound = f" >= {self.minimum}" if self.minimum is not None else ""
                raise ProbekitError(f"option {self.name} of probe {probe!r} must be an integer{bound}, got {value!r}")
        elif kind is float:
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ProbekitError(f"option {self.name} of probe {probe!r} must be a number, got {value!r}")
        elif kind is bool:
            if not isinstance(value, bool):
                raise ProbekitError(f"option {self.name} of probe {probe!r} must be true or false, got {value!r}")
        elif kind is str and not isinstance(value, str):
            raise ProbekitError(f"option {self.name} of probe {probe!r} must be text, got {value!r}")
        return value


EXCLUDE_SUBJECT = Option(
    "exclude_subject", False, (False, True),
    "drop the query's own subject from its candidates (untuned encoders return it as answer #1); "
    "off = the reference behaviour of the papers")
COMMON_OPTIONS: tuple[Option, ...] = (EXCLUDE_SUBJECT,)
"""Options every probe takes; :meth:`Probe.rank` turns them into the :class:`Call` a probe receives."""


class ProbeContractError(RuntimeError):
    """A probe returned rankings that break the :class:`Probe` contract: a bug in that probe, not user input."""


@dataclass
class Probe:
    """A probing method: ``rank(model, queries, candidates, k=...) -> list[Ranking]``.

    ``options`` are the probe's own :class:`Option`s followed by :data:`COMMON_OPTIONS`. A subclass implements
    ``_rank(model, queries, candidates, call, **own_options)``; it may implement ``_explain`` (one query's ranking
    with an :class:`Explanation`) and ``input_overhead`` (tokens it adds to a query beyond its one mask).
    ``requires_mlm`` / ``requires_seq2seq`` say which models it can probe (:func:`probekit.probes.probes_for`).
    ``default_vocab`` is the candidate vocabulary a command or page uses with this probe when the user chose none
    (:meth:`vocab`); None = the dataset's heads+tails. The runner's hooks are methods with defaults a probe
    overrides: :meth:`resolve` (the options a run really uses; default unchanged) and :meth:`answers_per_query`
    (its rankings' depth; default None, no limit).
    """

    name: str
    requires_mlm: bool
    options: tuple[Option, ...] = field(default_factory=tuple)
    description: str = ""
    requires_seq2seq: bool = False
    default_vocab: str | None = None

    def __post_init__(self):
        own = tuple(o for o in self.options if o.name not in {c.name for c in COMMON_OPTIONS})
        self.options = own + COMMON_OPTIONS

    def vocab(self, chosen: str | None = None, *, has_relation: bool = True) -> str:
        """The candidate vocabulary to rank: ``chosen`` when the user chose one, else :attr:`default_vocab`
        (a ``relation`` default only where the query has a relation: a typed query without one falls back), else
        the dataset's heads+tails. The one rule behind the CLI's ``--vocab`` default and the pages' Candidates
        pickers, so a probe opens on the same candidates everywhere."""
        if chosen:
            return chosen
        default = self.default_vocab
        if default == "relation" and not has_relation:
            default = None
        return default or "heads+tails"

    def checked_options(self, options: dict | None = None) -> dict:
        """Every option of this probe, defaults filled in; unknown names and values an option refuses
        (:meth:`Option.check`) fail with a message (the one check, used by :meth:`rank` and the benchmark runner)."""
        options = dict(options or {})
        known = {o.name: o for o in self.options}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ProbekitError(f"unknown option {unknown[0]!r} for probe {self.name!r}; "
                                f"available: {', '.join(known) or 'none'}")
        return {name: o.check(options.get(name, o.default), self.name) for name, o in known.items()}

    def usable_with(self, model: LoadedModel) -> bool:
        """Whether this probe can probe ``model`` (an MLM head, an encoder-decoder, as it requires). A probe with
        other needs overrides this and :meth:`unusable_reason`."""
        return (model.has_mlm or not self.requires_mlm) and (
            bool(getattr(model, "is_seq2seq", False)) or not self.requires_seq2seq)

    def unusable_reason(self, model: LoadedModel) -> str:
        """The one line :meth:`rank` refuses ``model`` with: what this probe needs and what to use instead
        (starts with ``probe '<name>' needs``)."""
        if self.requires_mlm and not model.has_mlm:
            return (f"probe {self.name!r} needs a model with an MLM head; {model.id!r} has none "
                    "(use 'retrieval', or a BERT-family model such as bert-base-uncased)")
        return (f"probe {self.name!r} needs an encoder-decoder model (BART, T5, SciFive); {model.id!r} is not one "
                "(try facebook/bart-base or t5-small, or another probe)")

    def _call(self, model: LoadedModel, queries: Sequence[Query], candidates: CandidateSet, *, k: int,
              progress: Progress | None, share_layers: Sequence[int], options: dict) -> tuple[Call, dict]:
        check_inputs(model, queries, candidates, k=k)
        if not self.usable_with(model):
            raise ProbekitError(self.unusable_reason(model))
        opts = self.checked_options(options)
        common = {o.name: opts.pop(o.name) for o in COMMON_OPTIONS}
        excluded = tuple(exclusion(q, candidates) if common["exclude_subject"] else NOTHING_EXCLUDED
                         for q in queries)
        return Call(k=k, excluded=excluded, progress=progress,
                    share_layers=tuple(sorted({int(x) for x in share_layers}))), opts

    def rank(self, model: LoadedModel, queries: Sequence[Query], candidates: CandidateSet, *, k: int = 10,
             progress: Progress | None = None, share_layers: Sequence[int] = (), **options) -> list[Ranking]:
        """Check the inputs and options, rank, and check the rankings against the call.

        ``exclude_subject=True`` ranks each query as if its own subject (every spelling of it) were not a
        candidate, for every probe: ranked probes never list those candidates nor count them against a gold,
        open-vocabulary probes drop answers that spell them. ``share_layers``: see :class:`Call`."""
        queries = list(queries)
        call, opts = self._call(model, queries, candidates, k=k, progress=progress, share_layers=share_layers,
                                options=options)
        rankings = self._rank(model, queries, candidates, call, **opts)
        check_rankings(self.name, rankings, queries, call, model.tokenizer)
        return rankings

    def explain(self, model: LoadedModel, query: Query, candidates: CandidateSet, *, k: int = 10,
                progress: Progress | None = None, **options) -> tuple[Ranking, Explanation | None]:
        """One query's ranking (as :meth:`rank` gives it) and, for probes that have one, how it was reached."""
        call, opts = self._call(model, [query], candidates, k=k, progress=progress, share_layers=(), options=options)
        ranking, explanation = self._explain(model, query, candidates, call, **opts)
        check_rankings(self.name, [ranking], [query], call, model.tokenizer)
        return ranking, explanation

    def resolve(self, options: dict) -> dict:
        """The options a run really uses, from :meth:`checked_options`'s: a probe with presets (retrieval,
        mask_predict) writes the preset's values over them, and a stored run records the result (settings keys,
        ``probekit.bench.settings.resolve_options``). Default: the options unchanged (a copy)."""
        return dict(options)

    def answers_per_query(self, options: dict) -> int | None:
        """The most answers this probe gives per query with ``options`` whatever k asks: the ``depth`` of its
        rankings, recorded with a stored run (acc@k for a k above it is not defined). Default: None, no limit (as
        many as k asks)."""
        return None

    def input_overhead(self, model: LoadedModel, candidates: CandidateSet, **options) -> int:
        """Tokens this probe adds to a query beyond its one mask (callers that fit a context into the model's
        input use it); 0 for probes that place one mask."""
        return 0

    # Each probe's ranking: ``_rank(model, queries, candidates, call, **its own options)``, the options as keyword
    # parameters of their own (so the signature says what a probe takes), hence a callable of any signature here.
    _rank: ClassVar[Callable[..., list[Ranking]]]

    def _explain(self, model: LoadedModel, query: Query, candidates: CandidateSet, call: Call,
                 **opts) -> tuple[Ranking, Explanation | None]:
        return self._rank(model, [query], candidates, call, **opts)[0], None


def check_inputs(model: LoadedModel, queries: Sequence[Query], candidates: CandidateSet, *, k: int) -> None:
    """Refuse empty inputs, mask-less templates and nonsensical k with a clear message."""
    positive_int("k", k)
    if len(candidates) == 0:
        raise ProbekitError("the candidate set is empty: pick another vocabulary or dataset")
    if not queries:
        raise ProbekitError("no query given")
    for q in queries:
        if OBJECT not in q.template:
            raise ProbekitError(f"query {q.id!r} has no object slot: write [MASK] (or [Y] in a template) where "
                                f"the answer goes, e.g. 'Metformin might treat [MASK].'; got {q.template!r}")
        if not q.text("").strip(" .[]"):
            raise ProbekitError(f"query {q.id!r} is empty apart from the mask")


def check_rankings(probe: str, rankings: Sequence[Ranking], queries: Sequence[Query], call: Call,
                   tokenizer=None) -> None:
    """The rules every probe's rankings obey, checked after each call (a broken rule is a bug of the probe):
    one ranking per query, in order; at most k listed; a gold rank per gold; nothing :class:`Excluded` listed,
    and an excluded gold has no rank. Generated answers are compared with excluded names by their answer keys."""
    if len(rankings) != len(queries):
        raise ProbeContractError(f"probe {probe!r} returned {len(rankings)} rankings for {len(queries)} queries")
    for r, q, ex in zip(rankings, queries, call.excluded):
        if r.query != q:
            raise ProbeContractError(f"probe {probe!r} returned the ranking of {r.query.id!r} for {q.id!r}")
        if r.k > call.k or len(r.names) != r.k or len(r.scores) != r.k:
            raise ProbeContractError(f"probe {probe!r} listed {r.k} answers for k={call.k} (query {q.id!r})")
        if len(r.gold_ranks) != len(q.golds):
            raise ProbeContractError(f"probe {probe!r} gave {len(r.gold_ranks)} gold ranks for {len(q.golds)} golds")
        if not ex.names and not ex.ids:
            continue
        if r.generated:  # compared by the hit rule's answer keys
            gone: set = set(answer_keys(tokenizer, list(ex.names))) if tokenizer is not None else set()
            listed: list = answer_keys(tokenizer, list(r.names)) if tokenizer is not None else []
        else:
            gone, listed = set(ex.ids), list(r.ids)
        if gone.intersection(listed):
            raise ProbeContractError(f"probe {probe!r} listed an excluded answer for query {q.id!r} "
                                     "(build rankings with call.excluded)")
