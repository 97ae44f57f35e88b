"""The shared vocabulary of probekit: queries, candidate sets and rankings.

Every probe returns a list of :class:`Ranking`, one per :class:`Query`, so metrics, UCM, plots,
the store and the annotation pages work with any probe.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from .errors import ProbekitError

SUBJECT, OBJECT = "[X]", "[Y]"
MASK = "[MASK]"
MAX_K = 1000
"""The most answers per query a run keeps (top-k): a grid and every command's ``--k`` refuse more, saying so."""


HARD_IN_FULL = "hard-in-full"
"""The label of a full-set run's hard queries: they were ranked among the FULL set's vocabulary (22,923
names on MedLAMA), a different experiment from the hard set's own (17,532 names, MedLAMA Table 4 "Hard")."""
SUBSETS = {
    "full": "all queries of the dataset, among its vocabulary",
    "hard": "the hard set, among its own files' vocabulary (MedLAMA: 17,532 names)",
    HARD_IN_FULL: "the hard queries of a full-set run, among the full set's vocabulary (a different experiment "
                  "from the paper's hard set)",
}
"""Every label for which queries met which candidates, with what it means (tables, exports, charts)."""


def normalize_name(name: str) -> str:
    """The key under which entity names are matched: lower-cased, whitespace collapsed.

    >>> normalize_name("  Heart   Failure ")
    'heart failure'
    """
    return " ".join(str(name).lower().split())


@dataclass(frozen=True)
class Query:
    """One cloze query: a subject, a relation, a template and its gold objects.

    ``template`` holds ``[X]`` for the subject and ``[Y]`` for the object slot; a free query typed
    with ``[MASK]`` is stored with ``[MASK]`` replaced by ``[Y]`` and no ``[X]``.

    >>> q = Query(id="q1", subject="Metformin", relation="may_treat", template="[X] might treat [Y].",
    ...           golds=("type 2 diabetes",))
    >>> q.text("[MASK]")
    'Metformin might treat [MASK].'
    """

    id: str
    subject: str
    relation: str
    template: str
    golds: tuple[str, ...] = ()
    gold_ids: tuple[str, ...] = ()
    subject_id: str = ""

    def text(self, mask_token: str = MASK, *, n_masks: int = 1) -> str:
        """The prompt with the subject filled in and ``[Y]`` as ``n_masks`` mask tokens."""
        masks = " ".join([mask_token] * n_masks)
        # Fill the object slot first: some UMLS names contain a literal "[X]" or "[Y]".
        return self.template.replace(OBJECT, masks).replace(SUBJECT, self.subject)


@dataclass(frozen=True)
class CandidateSet:
    """The entity names a probe ranks; ``key`` fingerprints the set for caches.

    Names are deduplicated by exact spelling (MedLAMA's reference vocabulary keeps case variants:
    22,923 names for the full set); lookups fall back to :func:`normalize_name`.

    >>> c = CandidateSet.from_names(["b", "a", "b", "B"])
    >>> c.names, c.index_of("a"), c.index_of("B"), c.index_of(" A ")
    (('b', 'a', 'B'), 1, 2, 1)
    """

    names: tuple[str, ...]
    key: str
    _pos: dict[str, int] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        # Position of each exact spelling (first wins), then of each normalised one not already taken.
        pos: dict[str, int] = {}
        for i, n in enumerate(self.names):
            pos.setdefault(n, i)
        for i, n in enumerate(self.names):
            pos.setdefault(normalize_name(n), i)
        object.__setattr__(self, "_pos", pos)

    @classmethod
    def from_names(cls, names) -> CandidateSet:
        """Deduplicate by :func:`normalize_name`, keep first spelling and order."""
        seen: set[str] = set()
        out: list[str] = []
        for n in names:
            n = str(n).strip()
            if n and n not in seen:
                seen.add(n)
                out.append(n)
        key = hashlib.sha1(json.dumps(out).encode()).hexdigest()[:16]
        return cls(tuple(out), key)

    def __len__(self) -> int:
        return len(self.names)

    def index_of(self, name: str) -> int | None:
        """Position of ``name`` (exact spelling first, then normalised), or None."""
        name = str(name).strip()
        pos = self._pos.get(name)
        return pos if pos is not None else self._pos.get(normalize_name(name))


@dataclass(frozen=True)
class Ranking:
    """A probe's answer for one query.

    ``ids``/``names``/``scores`` are the top-k candidates, best first; ``gold_ranks`` gives the
    1-based rank of each gold answer (aligned with ``query.golds``) among *all* candidates,
    even beyond k, or ``None`` when that gold is not among the candidates.

    ``generated=True`` marks an open-vocabulary probe (mask_predict, generative) whose answers are
    strings the model produced, not picks from the candidate set: ``names`` are the predicted
    strings, best first; ``ids`` the index of the candidate with the same normalised name, or -1;
    ``gold_ranks`` a gold's 1-based position among *all* distinct predictions (also beyond k), or
    ``None`` when it was not generated; ``n_candidates`` the number of distinct predictions. Metrics
    (:meth:`hit`, :attr:`best_gold_rank`) read both kinds alike.

    ``depth`` is the most answers the method gives per query whatever k asks, where it has such a limit
    (X-FACTR's code gives one: its acc@5 and acc@10 are not numbers it reports, and the metrics give NaN
    for any k above ``depth``); None = no limit.

    ``search`` says how the top-k was found when it was not by scoring every candidate: an approximate index,
    with its parameters and its recall@k measured against exact search (gold ranks stay exact either way); a run
    records it (:meth:`probekit.vocab.search.ShardedIndex.describe`). None = every candidate scored.

    ``gold_hits`` flags each top-k answer that the probe counted as gold under its own matching rule, where that
    rule is not the name's spelling: under ``match="concept"`` any synonym of a gold's CUI is gold. None = the
    spelling rule (:meth:`is_gold`). Read the flags with :meth:`gold_flags`.
    """

    query: Query
    ids: tuple[int, ...]
    names: tuple[str, ...]
    scores: tuple[float, ...]
    gold_ranks: tuple[int | None, ...]
    n_candidates: int = 0
    generated: bool = False
    depth: int | None = None
    search: str | None = None
    gold_hits: tuple[bool, ...] | None = None

    @property
    def k(self) -> int:
        return len(self.ids)

    @property
    def best_gold_rank(self) -> int | None:
        """Rank of the best-ranked gold answer (None when no gold is a candidate)."""
        ranks = [r for r in self.gold_ranks if r is not None]
        return min(ranks) if ranks else None

    def hit(self, k: int) -> bool:
        """True when a gold answer is within the top ``k``."""
        r = self.best_gold_rank
        return r is not None and r <= k

    def is_gold(self, name: str) -> bool:
        if self.generated and name in self.names:  # matched in the model's tokenisation (gold_ranks)
            return self.names.index(name) + 1 in self.gold_ranks
        gold = {normalize_name(g) for g in self.query.golds}
        return normalize_name(name) in gold

    def gold_flags(self) -> tuple[bool, ...]:
        """For each top-k answer, best first: is it a gold answer (by the probe's rule: :attr:`gold_hits` when
        set, else :meth:`is_gold`)."""
        if self.gold_hits is not None:
            return tuple(self.gold_hits)
        return tuple(self.is_gold(n) for n in self.names)

    def to_dict(self) -> dict:
        q = self.query
        return {
            "query_id": q.id,
            "relation": q.relation,
            "subject": q.subject,
            "query": q.text(),
            "golds": list(q.golds),
            "gold_ranks": list(self.gold_ranks),
            "top": [
                {"rank": i + 1, "name": n, "score": float(s), "gold": g}
                for i, (n, s, g) in enumerate(zip(self.names, self.scores, self.gold_flags()))
            ],
        }


MAX_QUERY_CHARS = 1000
"""A typed query's length at most. Checked here, not by the query box: a box with a limit drops a longer paste
whole, leaving it empty with no word why."""


def parse_free_query(text: str, *, subject: str = "", relation: str = "free", golds=()) -> Query:
    """A typed query: text with ``[MASK]``, or a template with ``[Y]`` (and ``[X]`` filled by ``subject``).

    >>> parse_free_query("Metformin might treat [MASK].").template
    'Metformin might treat [Y].'
    """
    text = " ".join(str(text or "").split())
    if not text:
        raise ProbekitError("the query is empty: type e.g. 'Metformin might treat [MASK].'")
    if len(text) > MAX_QUERY_CHARS:
        raise ProbekitError(f"the query is too long ({len(text):,} characters; at most {MAX_QUERY_CHARS:,})")
    tpl = text.replace(MASK, OBJECT).replace("<mask>", OBJECT)
    if tpl.count(OBJECT) != 1:
        raise ProbekitError("the query needs exactly one [MASK] (or [Y]) where the answer goes, "
                            f"e.g. 'Metformin might treat [MASK].'; got {text!r}")
    if SUBJECT in tpl and not subject.strip():
        raise ProbekitError("the template has [X] but no subject was given")
    return Query(id="free", subject=subject.strip(), relation=relation, template=tpl, golds=tuple(golds))
