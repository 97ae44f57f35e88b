"""Lookups on a mention index: real contexts for a fact, sentences for an entity type, coverage of a dataset.

Yao et al. retrieve "documents including both subject S and target object O_t"; :func:`contexts_for` returns
exactly those, or a smaller unit of them (a paragraph, a sentence, or a window of N sentences around an O_t
mention) that still mentions both. Every :class:`Context` carries its text, where it sits in its document and
the spans of S and O_t inside it, so the Context page can segment around O_t without searching again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from ..errors import ProbekitError
from .index import CorpusIndex

UNITS = ("document", "paragraph", "sentence", "window")
MAX_LIMIT = 100_000


@dataclass(frozen=True)
class Context:
    """A stretch of one document mentioning S and O_t; spans are (start, end) offsets into ``text``."""

    text: str
    unit: str
    doc_id: int
    file: str
    key: str
    start: int  # offset of ``text`` in the document
    end: int
    subject_spans: tuple[tuple[int, int], ...]
    target_spans: tuple[tuple[int, int], ...]

    def to_dict(self) -> dict:
        return asdict(self)


def _check(unit: str, window: int, limit: int) -> None:
    if unit not in UNITS:
        raise ProbekitError(f"unknown context unit {unit!r}; available: {', '.join(UNITS)}")
    if not isinstance(window, int) or window < 0:
        raise ProbekitError("window must be a whole number of sentences >= 0")
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ProbekitError(f"limit must be between 1 and {MAX_LIMIT:,}")


def documents_for(index: CorpusIndex, subject: str, target: str, *, limit: int = 1000) -> list[int]:
    """Ids of the documents mentioning both ``subject`` and ``target`` (in corpus order)."""
    s = index.require_entity(subject, "subject")
    o = index.require_entity(target, "target")
    rows = index.sql("SELECT doc_id FROM m WHERE entity_id = ? INTERSECT SELECT doc_id FROM m WHERE entity_id = ? "
                     "ORDER BY doc_id LIMIT ?", [s, o, limit])
    return [r[0] for r in rows]


def _in(ids: Iterable[int]) -> str:
    return ",".join(str(int(i)) for i in ids)


def contexts_for(index: CorpusIndex, subject: str, target: str, *, unit: str = "document", window: int = 1,
                 limit: int = 20) -> list[Context]:
    """Real contexts mentioning both ``subject`` (S) and ``target`` (O_t), at most ``limit``, in corpus order.

    ``unit``: ``document`` (the paper's unit), ``paragraph`` (blank-line separated), ``sentence``, or ``window``
    (``window`` sentences either side of each O_t mention, kept when S is inside). Names are matched like the
    index (case-insensitive); both must be among the names the index was built with.
    """
    _check(unit, window, limit)
    s = index.require_entity(subject, "subject")
    o = index.require_entity(target, "target")
    docs = documents_for(index, subject, target, limit=limit if unit == "document" else MAX_LIMIT)
    out: list[Context] = []
    for i in range(0, len(docs), 256):
        chunk = docs[i:i + 256]
        out += _contexts(index, chunk, s, o, unit, 0 if unit == "sentence" else window, limit - len(out))
        if len(out) >= limit:
            break
    return out[:limit]


def _contexts(index, docs, s, o, unit, window, limit) -> list[Context]:
    ids = _in(docs)
    texts = {d: (f, k, t) for d, f, k, t in index.sql(
        f"SELECT doc_id, file, key, text FROM documents WHERE doc_id IN ({ids})")}
    mentions: dict[int, list] = {d: [] for d in docs}
    for d, sent, e, a, b in index.sql(f"SELECT doc_id, sent, entity_id, start, \"end\" FROM m WHERE doc_id IN ({ids})"
                                      f" AND entity_id IN ({s}, {o}) ORDER BY doc_id, start"):
        mentions[d].append((sent, e, a, b))
    sents: dict[int, list] = {d: [] for d in docs}
    if unit != "document":
        for d, _sent, para, a, b in index.sql(f"SELECT doc_id, sent, para, start, \"end\" FROM sentences "
                                             f"WHERE doc_id IN ({ids}) ORDER BY doc_id, sent"):
            sents[d].append((para, a, b))
    out: list[Context] = []
    for d in docs:
        file, key, text = texts[d]
        ms = mentions[d]
        for lo, hi in _spans(unit, window, ms, sents[d], s, o, len(text)):
            inside = [(e, a - lo, b - lo) for _, e, a, b in ms if a >= lo and b <= hi]
            out.append(Context(text[lo:hi], unit, d, file, key, lo, hi,
                               tuple((a, b) for e, a, b in inside if e == s),
                               tuple((a, b) for e, a, b in inside if e == o)))
            if len(out) >= limit:
                return out
    return out


def _spans(unit, window, ms, sents, s, o, n) -> list[tuple[int, int]]:
    """(start, end) in the document of each context of ``unit`` holding both entities."""
    if unit == "document":
        return [(0, n)]
    if unit == "paragraph":
        paras: dict[int, set] = {}
        for sent, e, _, _ in ms:
            paras.setdefault(sents[sent][0], set()).add(e)
        out = []
        for p in sorted(paras):
            if {s, o} <= paras[p]:
                members = [(a, b) for para, a, b in sents if para == p]
                out.append((members[0][0], members[-1][1]))
        return out
    spans, seen = [], set()
    s_sents = {sent for sent, e, _, _ in ms if e == s}
    for sent, e, _, _ in ms:
        if e != o:
            continue
        first, last = max(0, sent - window), min(len(sents) - 1, sent + window)
        if (first, last) in seen or not any(first <= x <= last for x in s_sents):
            continue
        seen.add((first, last))
        spans.append((sents[first][1], sents[last][2]))
    return spans


def sentences_mentioning(index: CorpusIndex, *, entity: str | None = None, relation: str | None = None,
                         role: str | None = None, limit: int = 100) -> list[dict]:
    """Sentences mentioning one entity, or any entity with a role (e.g. every tail of a relation).

    ``relation`` / ``role`` come from the dataset the index was built from (``head``/``tail``) or the ``type``
    column of an uploaded list. Rows: doc_id, sent, entity, start, end (offsets in the sentence) and text.
    """
    if entity is None and relation is None and role is None:
        raise ProbekitError("give an entity, a relation or a role")
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ProbekitError(f"limit must be between 1 and {MAX_LIMIT:,}")
    where: list[str] = []
    params: list[int | str] = []
    if entity is not None:
        where.append("m.entity_id = ?")
        params.append(index.require_entity(entity))
    if relation is not None or role is not None:
        cond: list[str] = []
        rp: list[str] = []
        if relation is not None:
            cond.append("relation = ?")
            rp.append(relation)
        if role is not None:
            cond.append("role = ?")
            rp.append(role)
        where.append(f"m.entity_id IN (SELECT entity_id FROM roles WHERE {' AND '.join(cond)})")
        params += rp
    rows = index.sql(
        "WITH hits AS (SELECT m.doc_id, m.sent, m.entity_id, m.start, m.\"end\" FROM m "
        f"WHERE {' AND '.join(where)} ORDER BY m.doc_id, m.start LIMIT ?) "
        "SELECT h.doc_id, h.sent, h.entity_id, h.start - s.start, h.\"end\" - s.start, "
        "substring(d.text, s.start + 1, s.\"end\" - s.start) FROM hits h "
        "JOIN sentences s ON s.doc_id = h.doc_id AND s.sent = h.sent "
        "JOIN documents d ON d.doc_id = h.doc_id ORDER BY h.doc_id, h.start", [*params, limit])
    return [{"doc_id": d, "sent": sent, "entity": index.names[e], "start": a, "end": b, "text": t}
            for d, sent, e, a, b, t in rows]


def _triples(triples) -> list[tuple[str, str, str]]:
    out = []
    for t in triples:
        if hasattr(t, "golds"):  # a Query: one fact per gold object
            out += [(t.subject, t.relation, g) for g in t.golds]
        else:
            s, r, o = t
            out.append((str(s), str(r), str(o)))
    return out


def coverage(index: CorpusIndex, triples, *, unit: str = "document") -> dict:
    """How many facts have at least one real context (a ``document`` or ``sentence`` mentioning S and O_t).

    ``triples``: (subject, relation, object) tuples or :class:`~probekit.types.Query` objects (one fact per
    gold). Facts whose names the index does not know count as uncovered (``unknown_names``); so do facts whose
    subject and object are the same name (``same_name``: any mention would "contain both", which is no context).
    ``covered`` lists the facts with a context, as given (input order): the triples a dataset mode can run on.
    """
    import pandas as pd

    if unit not in ("document", "sentence"):
        raise ProbekitError("coverage is counted per document or per sentence")
    facts = _triples(triples)
    if not facts:
        raise ProbekitError("no facts to count")
    frame = pd.DataFrame([(index.entity_id(s), r, index.entity_id(o)) for s, r, o in facts],
                         columns=["s", "relation", "o"])
    known = frame.dropna().astype({"s": "int64", "o": "int64"}).drop_duplicates()
    by_rel_total = frame.groupby("relation").size()
    join = "AND b.sent = a.sent" if unit == "sentence" else ""
    cols = "doc_id, sent, entity_id" if unit == "sentence" else "doc_id, entity_id"
    with index._lock:
        cur = index._cursor()
        cur.register("facts_in", known)
        covered = cur.execute(
            f"SELECT DISTINCT f.s, f.relation, f.o FROM facts_in f "
            f"JOIN (SELECT DISTINCT {cols} FROM m) a ON a.entity_id = f.s "
            f"JOIN (SELECT DISTINCT {cols} FROM m) b ON b.doc_id = a.doc_id {join} AND b.entity_id = f.o").df()
    frame_keys = frame.dropna().astype({"s": "int64", "o": "int64"}).reset_index(names="pos")
    same = frame_keys["s"] == frame_keys["o"]
    hit = frame_keys[~same].merge(covered, on=["s", "relation", "o"], how="inner").sort_values("pos")
    by_rel_hit = hit.groupby("relation").size()
    per_rel = {r: {"facts": int(n), "with_context": int(by_rel_hit.get(r, 0))} for r, n in by_rel_total.items()}
    return {"unit": unit, "facts": len(frame), "unknown_names": int(frame[["s", "o"]].isna().any(axis=1).sum()),
            "same_name": int(same.sum()), "with_context": len(hit), "share": round(len(hit) / len(frame), 6),
            "by_relation": per_rel, "covered": [facts[i] for i in hit["pos"]]}
