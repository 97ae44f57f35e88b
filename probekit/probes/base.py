"""The one probe interface and the helpers every probe shares."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np

from ..errors import ProbekitError
from ..models import LoadedModel
from ..types import OBJECT, CandidateSet, Query, Ranking, normalize_name

Progress = Callable[[int, int, str], None]
"""progress(done, total, stage): probes report each stage (encoding, search, scoring)."""


@dataclass(frozen=True)
class Option:
    """One user-facing option of a probe: the CLI flags (:func:`probekit.cli.common.add_probe_args`) and
    the page widgets (``pages/_ui.py``'s ``probe_option_widgets``) are generated from these, so a new probe
    brings its own interface.

    ``type`` is the value type (inferred from ``default`` when not given; ``str`` for a ``None`` default).
    ``advanced`` options go under an expander in the UI.

    >>> Option("layer", None, type=int).value_type, Option("fast", False).value_type
    (<class 'int'>, <class 'bool'>)
    """

    name: str
    default: object
    choices: tuple = ()
    help: str = ""
    type: type | None = None
    advanced: bool = False

    @property
    def value_type(self) -> type:
        if self.type is not None:
            return self.type
        return str if self.default is None else type(self.default)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


EXCLUDE_SUBJECT = Option(
    "exclude_subject", False, (False, True),
    "drop the query's own subject from its candidates (untuned encoders return it as answer #1); "
    "off = the reference behaviour of the papers")
COMMON_OPTIONS: tuple[Option, ...] = (EXCLUDE_SUBJECT,)
"""Options every probe takes; :meth:`Probe.rank` applies them itself, so a probe module never sees them."""

_EXCLUDE_SUBJECT: ContextVar[bool] = ContextVar("probekit_exclude_subject", default=False)


@dataclass
class Probe:
    """A probing method: ``rank(model, queries, candidates, k=...) -> list[Ranking]``.

    ``options`` are the probe's own :class:`Option`s followed by :data:`COMMON_OPTIONS`.
    """

    name: str
    requires_mlm: bool
    options: tuple[Option, ...] = field(default_factory=tuple)
    description: str = ""

    def __post_init__(self):
        own = tuple(o for o in self.options if o.name not in {c.name for c in COMMON_OPTIONS})
        self.options = own + COMMON_OPTIONS

    def checked_options(self, options: dict | None = None) -> dict:
        """Every option of this probe, defaults filled in; unknown names and values outside an option's
        choices are refused with a message (the one check, used by :meth:`rank` and the benchmark runner)."""
        options = dict(options or {})
        known = {o.name: o for o in self.options}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ProbekitError(f"unknown option {unknown[0]!r} for probe {self.name!r}; "
                                f"available: {', '.join(known) or 'none'}")
        opts = {name: options.get(name, o.default) for name, o in known.items()}
        for name, o in known.items():
            if o.choices and opts[name] not in o.choices:
                raise ProbekitError(f"option {name}={opts[name]!r} of probe {self.name!r} must be one of "
                                    f"{', '.join(map(str, o.choices))}")
        return opts

    def rank(self, model: LoadedModel, queries: Sequence[Query], candidates: CandidateSet, *, k: int = 10,
             progress: Progress | None = None, **options) -> list[Ranking]:
        """Check the inputs and options, then rank. ``exclude_subject=True`` ranks each query as if its own
        subject (every spelling of it) were not a candidate; probes honour it through :func:`excluded_ids`
        (used by :func:`ranking_from_scores` and :func:`gold_indices`)."""
        check_inputs(model, queries, candidates, k=k)
        if self.requires_mlm and not model.has_mlm:
            raise ProbekitError(f"probe {self.name!r} needs a model with an MLM head; {model.id!r} has none "
                                "(use 'retrieval', or a BERT-family model such as bert-base-uncased)")
        opts = self.checked_options(options)
        common = {o.name: opts.pop(o.name) for o in COMMON_OPTIONS}
        token = _EXCLUDE_SUBJECT.set(bool(common["exclude_subject"]))
        try:
            return self._rank(model, list(queries), candidates, k=k, progress=progress, **opts)
        finally:
            _EXCLUDE_SUBJECT.reset(token)

    def _rank(self, model, queries, candidates, *, k, progress, **opts) -> list[Ranking]:  # pragma: no cover
        raise NotImplementedError


def check_inputs(model: LoadedModel, queries: Sequence[Query], candidates: CandidateSet, *, k: int) -> None:
    """Refuse empty inputs, mask-less templates and nonsensical k with a clear message."""
    if not isinstance(k, int) or k < 1:
        raise ProbekitError(f"k must be a positive integer, got {k!r}")
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


_BY_NORM: dict[str, dict[str, list[int]]] = {}


def _ids_by_norm(candidates: CandidateSet) -> dict[str, list[int]]:
    table = _BY_NORM.get(candidates.key)
    if table is None:
        table = {}
        for i, n in enumerate(candidates.names):
            table.setdefault(normalize_name(n), []).append(i)
        if len(_BY_NORM) > 16:
            _BY_NORM.clear()
        _BY_NORM[candidates.key] = table
    return table


def subject_ids(query: Query, candidates: CandidateSet) -> list[int]:
    """Ids of every candidate spelling the query's subject (case and spacing ignored).

    >>> c = CandidateSet.from_names(["Pain", "fever", "pain"])
    >>> subject_ids(Query("q", "pain", "r", "[X] [Y]"), c)
    [0, 2]
    >>> subject_ids(Query("free", "", "free", "Pain, not fever, might cause [Y]."), c)  # typed: names in the text
    [0, 1, 2]
    """
    table = _ids_by_norm(candidates)
    if query.subject.strip():
        return list(table.get(normalize_name(query.subject), []))
    if query.id != FREE_ID:
        return []
    # a typed query without [X] names its subject in its text: every candidate the text spells out is left out
    # ("Aspirin might prevent [MASK]." must not answer "Aspirin")
    words = [w.strip(_PUNCT) for w in query.template.replace(OBJECT, " ").split()]
    words = [w for w in words if w]
    found: list[int] = []
    for n in range(1, min(_MAX_NAME_WORDS, len(words)) + 1):
        for i in range(len(words) - n + 1):
            found += table.get(normalize_name(" ".join(words[i:i + n])), [])
    return sorted(set(found))


FREE_ID = "free"
"""Query id of a typed query (:func:`probekit.types.parse_free_query`)."""
_PUNCT = ".,;:!?()[]{}\"'"
_MAX_NAME_WORDS = 8


def excluded_ids(query: Query, candidates: CandidateSet) -> list[int]:
    """Candidates treated as absent for ``query`` in the current :meth:`Probe.rank` call
    (the subject's spellings when ``exclude_subject`` is on, else none)."""
    return subject_ids(query, candidates) if _EXCLUDE_SUBJECT.get() else []


def gold_indices(query: Query, candidates: CandidateSet) -> list[int | None]:
    """Candidate id of each gold (``None``: not a candidate, or excluded in this call)."""
    ex = set(excluded_ids(query, candidates))
    out = []
    for g in query.golds:
        i = candidates.index_of(g)
        out.append(None if i in ex else i)
    return out


def top_k_and_gold_ranks(scores: np.ndarray, k: int, golds: Sequence[int | None],
                         exclude: Sequence[int] = ()) -> tuple[np.ndarray, list]:
    """Top-k ids (best first) and 1-based gold ranks from one row of scores over all candidates.

    Ties favour the gold: a gold's rank is 1 + the number of candidates scoring strictly higher, and
    among equal scores the top-k lists golds first, then lower ids. Exact ties are common: an uncased
    model gives case variants of a name (MedLAMA's vocabulary keeps them) the same vector, and which
    spelling wins must not decide whether a query counts as a hit. ``None`` golds (not candidates)
    stay ``None``.

    >>> top, ranks = top_k_and_gold_ranks(np.array([0.1, 0.9, 0.5, 0.9, 0.2]), 2, [3, 4, None])
    >>> top.tolist(), ranks
    ([3, 1], [1, 4, None])

    ``exclude`` ids are treated as absent: never listed, never counted against a gold.
    """
    if len(exclude):  # rank the other candidates, then map their positions back to ids
        gone = set(int(e) for e in exclude)
        keep = np.setdiff1d(np.arange(scores.shape[0]), list(gone))
        sub = [None if g is None or g in gone else int(np.searchsorted(keep, g)) for g in golds]
        sub_top, ranks = top_k_and_gold_ranks(scores[keep], k, sub)
        return keep[sub_top], ranks
    n = scores.shape[0]
    k = min(k, n)
    if k < n:
        kth = np.partition(scores, n - k)[n - k]  # the k-th best score
        cand = np.flatnonzero(scores >= kth)  # everything tied with it competes for the last places
    else:
        cand = np.arange(n)
    gold_set = [g for g in golds if g is not None]
    not_gold = ~np.isin(cand, gold_set)
    top = cand[np.lexsort((cand, not_gold, -scores[cand]))][:k]
    ranks = [None if g is None else int(np.count_nonzero(scores > scores[g])) + 1 for g in golds]
    return top, ranks


def ranking_from_scores(query: Query, candidates: CandidateSet, scores: np.ndarray, k: int) -> Ranking:
    """Top-k and gold ranks (see :func:`top_k_and_gold_ranks`) from one row of scores over all candidates."""
    ex = excluded_ids(query, candidates)
    top, gold_ranks = top_k_and_gold_ranks(scores, k, gold_indices(query, candidates), ex)
    return Ranking(query=query, ids=tuple(int(i) for i in top), names=tuple(candidates.names[i] for i in top),
                   scores=tuple(float(scores[i]) for i in top), gold_ranks=tuple(gold_ranks),
                   n_candidates=len(candidates) - len(ex))
