"""The Dataset type every loader returns, and candidate vocabularies."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ..errors import ProbekitError
from ..types import CandidateSet, Query

VOCABS = ("heads+tails", "tails", "relation")


@dataclass
class Dataset:
    """A set of cloze queries with their templates.

    ``version`` fingerprints the files it was read from, so stored runs say exactly what they used.
    """

    name: str
    queries: list[Query]
    templates: dict[str, str]
    version: str = ""
    source: str = ""
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self._by_id = {q.id: q for q in self.queries}
        self._cands: dict[tuple, CandidateSet] = {}

    def __len__(self) -> int:
        return len(self.queries)

    @property
    def relations(self) -> list[str]:
        return sorted({q.relation for q in self.queries})

    def queries_for(self, relation: str | None) -> list[Query]:
        return [q for q in self.queries if relation in (None, q.relation)]

    def query(self, query_id: str) -> Query:
        try:
            return self._by_id[query_id]
        except KeyError:
            raise ProbekitError(f"no query {query_id!r} in dataset {self.name!r}") from None

    def candidates(self, vocab: str = "heads+tails", relation: str | None = None) -> CandidateSet:
        """Candidate names: ``heads+tails`` of the whole set, all ``tails``, or tails of ``relation``.

        MedLAMA's reference vocabulary is ``heads+tails`` (22,923 names for the full set).
        """
        if vocab not in VOCABS:
            raise ProbekitError(f"unknown vocabulary {vocab!r}; available: {', '.join(VOCABS)}")
        if vocab == "relation" and relation is None:
            raise ProbekitError("vocabulary 'relation' needs a relation")
        key = (vocab, relation if vocab == "relation" else None)
        if key not in self._cands and vocab == "heads+tails" and "vocab_names" in self.meta:
            self._cands[key] = CandidateSet.from_names(self.meta["vocab_names"])
        if key not in self._cands:
            names: list[str] = []
            qs = self.queries_for(relation) if vocab == "relation" else self.queries
            if vocab == "heads+tails":
                names += [q.subject for q in qs]
            for q in qs:
                names += q.golds
            self._cands[key] = CandidateSet.from_names(names)
        return self._cands[key]

    def summary(self) -> dict:
        return {"name": self.name, "version": self.version, "queries": len(self.queries),
                "relations": len(self.relations), "source": self.source}


def fingerprint_files(paths) -> str:
    h = hashlib.sha1()
    for p in sorted(map(str, paths)):
        with open(p, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()[:12]
