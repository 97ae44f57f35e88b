"""The Dataset type every loader returns, and candidate vocabularies."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ..errors import ProbekitError, UnknownNameError, positive_int
from ..types import HARD_IN_FULL, SUBSETS, CandidateSet, Query

__all__ = ["HARD_IN_FULL", "SUBSETS", "VOCABS", "Dataset", "available_vocabs", "check_vocab"]

VOCABS = ("heads+tails", "tails", "relation")


@dataclass
class Dataset:
    """A set of cloze queries with their templates.

    ``version`` fingerprints the files it was read from, so stored runs say exactly what they used.

    The candidate vocabularies come from the set as loaded (its *vocabulary source*): MedLAMA's full set
    ranks among the heads and tails of its 19 ``*_1000.csv`` files, the hard set among those of its 19
    ``*_hard.csv`` files. :meth:`filter` picks fewer queries (one relation, a sample) and keeps that source,
    so running fewer queries never changes the candidates (MedLAMA ranks every query among its whole set's
    heads and tails); only the ``relation`` vocabulary narrows them, by choice.
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
        self._vocab_queries: list[Query] = self.queries  # what the vocabularies are built from

    @property
    def filtered(self) -> bool:
        """True when this is a subset of a loaded set (its vocabularies are the whole set's)."""
        return self._vocab_queries is not self.queries

    def filter(self, *, relations=None, query_ids=None, sample: int | None = None, seed: int = 0) -> Dataset:
        """Fewer queries, the same candidates: the queries of ``relations``, then of ``query_ids``, then a
        seeded random ``sample`` of what is left (in dataset order). Every vocabulary (``heads+tails``,
        ``tails``, and each relation's tails) stays the whole set's.

        >>> from probekit.types import Query
        >>> qs = [Query(id=f"q{i}", subject=s, relation=r, template="[X] r [Y] .", golds=(g,))
        ...       for i, (s, r, g) in enumerate([("a", "r1", "b"), ("c", "r2", "d")])]
        >>> ds = Dataset("toy", qs, {"r1": "[X] r [Y] .", "r2": "[X] r [Y] ."})
        >>> one = ds.filter(relations=["r1"])
        >>> len(one), one.relations, one.candidates().names == ds.candidates().names
        (1, ['r1'], True)
        """

        queries = self.queries
        if relations is not None:
            relations = [relations] if isinstance(relations, str) else list(relations)
            unknown = [r for r in relations if r not in self.relations]
            if unknown:
                raise UnknownNameError("relation", unknown[0], self.relations)
            queries = [q for q in queries if q.relation in relations]
        if query_ids is not None:
            for i in query_ids:
                self.query(i)  # unknown ids fail with a message
            wanted = set(query_ids)
            queries = [q for q in queries if q.id in wanted]
        if sample is not None:
            sample = positive_int("sample", sample)
            if sample < len(queries):
                import random

                keep = set(random.Random(seed).sample(range(len(queries)), sample))
                queries = [q for i, q in enumerate(queries) if i in keep]
        if not queries:
            raise ProbekitError(f"no query of dataset {self.name!r} is left after filtering")
        used = {q.relation for q in queries}
        out = Dataset(name=self.name, queries=queries, templates={r: t for r, t in self.templates.items() if r in used},
                      version=self.version, source=self.source, meta=dict(self.meta))
        out._vocab_queries, out._cands = self._vocab_queries, self._cands  # the whole set's vocabularies
        return out

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
        """Candidate names: ``heads+tails`` of the whole set, all ``tails``, or tails of ``relation``,
        always from the set as loaded (not from a :meth:`filter`'s subset); or a vocabulary built with
        ``probekit vocab build`` (refused when its source changed since).

        MedLAMA's reference vocabulary is ``heads+tails`` of the probed set's own files: 22,923 names for
        the full set, 17,532 for the hard set (``run_retrieval_prediction.py --prob_hard``).
        """
        if vocab not in VOCABS:
            check_vocab(vocab)
            built: tuple[str, str | None] = (vocab, None)
            if built not in self._cands:
                from ..vocab.store import open_vocabulary

                self._cands[built] = open_vocabulary(vocab).candidates()
            return self._cands[built]
        if vocab == "relation" and relation is None:
            raise ProbekitError("vocabulary 'relation' needs a relation")
        key = (vocab, relation if vocab == "relation" else None)
        if key not in self._cands and vocab == "heads+tails" and "vocab_names" in self.meta:
            # a set that names its own vocabulary (template-free: the objects, never the subjects)
            self._cands[key] = CandidateSet.from_names(self.meta["vocab_names"])
        if key not in self._cands:
            names: list[str] = []
            source = self._vocab_queries
            qs = [q for q in source if q.relation == relation] if vocab == "relation" else source
            if vocab == "heads+tails":
                names += [q.subject for q in qs]
            for q in qs:
                names += q.golds
            self._cands[key] = CandidateSet.from_names(names)
        return self._cands[key]

    def summary(self) -> dict:
        """What a report needs to say which queries ran against which candidates: ``vocab_queries`` is the
        number of queries the vocabularies come from (``queries`` when nothing was filtered out)."""
        return {"name": self.name, "version": self.version, "queries": len(self.queries),
                "relations": len(self.relations), "source": self.source,
                "vocab_queries": len(self._vocab_queries)}


def available_vocabs() -> list[str]:
    """Every candidate vocabulary a run may name: the dataset's own (:data:`VOCABS`), then the vocabularies built
    on this machine (``probekit vocab build``)."""
    from ..vocab.store import names

    return [*VOCABS, *names()]


def check_vocab(vocab: str) -> str:
    """``vocab`` when a run may use it, else one line naming the close ones and what exists."""
    if vocab in VOCABS:
        return vocab
    available = available_vocabs()
    if vocab not in available:
        raise UnknownNameError("vocabulary", str(vocab), available)
    return vocab


def vocab_fingerprint(vocab: str) -> str | None:
    """The source fingerprint of a built vocabulary (stored runs record it: a rebuilt one is another run); None
    for a dataset's own vocabulary."""
    if vocab in VOCABS:
        return None
    from ..vocab.store import record

    return str(record(vocab)["fingerprint"])


def fingerprint_files(paths, *, salt: str = "") -> str:
    """A short hash of the files' bytes; ``salt`` marks a change in how they are read (stored runs keyed
    by the old version are then not reused)."""
    h = hashlib.sha1(salt.encode())
    for p in sorted(map(str, paths)):
        with open(p, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()[:12]
