"""Expert annotation sessions stored in DuckDB: blind 1–5 ratings of a probe's top-k answers.

An organiser creates a *session* from any probe's rankings (:func:`from_rankings`), from a fresh probe of a
seeded sample of dataset queries (:func:`from_probe`) or from a stored benchmark run (:func:`from_run`).
Each query's top-k answers become *items*, shown in an order shuffled once per session (seeded). Experts
join under their name and rate items 1..5 with the MedLAMA rubric (:data:`RUBRIC`), skip or undo.

Storage (component ``annotations``, DESIGN §9/§12): ratings are an append-only log of events (``rate``,
``skip``, ``undo``); an edit is a new ``rate`` that supersedes the annotator's previous one, an undo is an
event that supersedes (cancels) the annotator's last effective event, and the view ``annotation_current``
holds each (item, annotator)'s latest effective event. Nothing is ever updated or deleted, so concurrent
annotators never conflict on a row (DuckDB 2.0 rejects concurrent updates of one row). Each write is one
short transaction on its own cursor, with parameterised SQL only; a rating acknowledged to the caller is
committed, so killing the server loses nothing acknowledged.

An annotator only ever gets their own ratings back (:func:`query_view`, :func:`my_ratings`); in blind
sessions the gold marks, ranks and model scores are not even returned. Organiser-side reads
(:func:`ratings_frame`, :func:`stats`, exports) see everything.
"""

from __future__ import annotations

import json
import random
import re
import secrets
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from ..errors import ProbekitError
from ..metrics import agreement
from ..store import component_store
from ..store.export import safe_target, table_bytes, write_table
from ..types import Query, Ranking

COMPONENT = "annotations"

RUBRIC = {
    5: "Perfectly answers the query.",
    4: "Similar to the gold (correct) answer; could somehow be the answer.",
    3: "Related to the query but not correct.",
    2: "Same domain, or a slight relation to the query.",
    1: "Completely unrelated.",
}
"""MedLAMA's 1–5 expert rubric (Meng et al. 2022, §5.3)."""

GUIDELINES = (
    "Each query is a cloze statement about a biomedical subject with the object left out. Rate every answer "
    "the model proposed for the blank with the rubric, judging the statement it makes as a whole: would a "
    "domain expert accept it? Judge from your own knowledge; do not look answers up in UMLS. Answers are shown "
    "in random order. Skip an answer you cannot judge; undo takes back your last rating or skip."
)
EXPORT_FORMATS = ("csv", "parquet", "jsonl")
EXPORT_TABLES = ("ratings", "events", "items")
MAX_NAME = 60
_NAME_RE = re.compile(r"^[\w .@'-]+$")
_MAX_ELAPSED_MS = 24 * 3600 * 1000
_MAX_GAP_MS = 10 * 60 * 1000
_RETRIES = 8


def _store():
    return component_store(COMPONENT)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


# ---------------------------------------------------------------- memo of immutable rows
# Sessions, queries and items never change once created, so they are read once per process and store.
_MEMO: dict[tuple, dict] = {}
_MEMO_LOCK = threading.Lock()
_ASSIGN_LOCK = threading.Lock()


def _load(session_id) -> dict:
    """The session's metadata, queries and items (memoised), or a ProbekitError naming the session."""
    if not isinstance(session_id, str) or not session_id.strip():
        raise ProbekitError("give a session id (see `python -m probekit annotations list`)")
    session_id = session_id.strip()
    store = _store()
    key = (store.path, session_id)
    with _MEMO_LOCK:
        hit = _MEMO.get(key)
    if hit is not None:
        return hit
    cols = ["session_id", "name", "organiser", "created_at", "source", "source_run", "model", "model_revision",
            "dataset", "dataset_version", "probe", "probe_options", "vocab", "relations", "n_queries", "k", "blind",
            "raters_per_item", "seed"]
    rows = store.fetch(f"SELECT {', '.join(cols)} FROM annotation_sessions WHERE session_id = ?", [session_id])
    if not rows:
        raise ProbekitError(f"no annotation session {session_id!r} (see `python -m probekit annotations list`)")
    meta = dict(zip(cols, rows[0]))
    meta["probe_options"] = json.loads(meta["probe_options"] or "{}")
    meta["relations"] = json.loads(meta["relations"] or "[]")
    queries = store.fetch_df("SELECT * FROM annotation_queries WHERE session_id = ? ORDER BY query_index",
                             [session_id])
    queries["golds"] = [json.loads(g) for g in queries["golds"]]
    items = store.fetch_df("SELECT * FROM annotation_items WHERE session_id = ? ORDER BY query_index, display_order",
                           [session_id])
    by_query: dict[int, list[dict]] = defaultdict(list)
    for row in items.to_dict(orient="records"):
        by_query[int(row["query_index"])].append(row)
    entry = {"meta": meta, "queries": queries, "items": items, "by_query": dict(by_query),
             "item_query": dict(zip(items["item_id"], items["query_index"].astype(int)))}
    with _MEMO_LOCK:
        _MEMO[key] = entry
    return entry


def get_session(session_id: str) -> dict:
    """A session's settings (name, organiser, source, model, dataset, k, blind, raters per item, seed…)."""
    return dict(_load(session_id)["meta"])


def list_sessions() -> pd.DataFrame:
    """Stored sessions, newest first, with their counts of queries, answers, annotators and ratings."""
    return _store().fetch_df("""
        SELECT s.session_id, s.name, s.organiser, s.created_at, s.source, s.model, s.dataset, s.probe, s.k,
               s.blind, s.raters_per_item, s.n_queries,
               (SELECT count(*) FROM annotation_items i WHERE i.session_id = s.session_id) AS answers,
               (SELECT count(*) FROM annotation_annotators a WHERE a.session_id = s.session_id) AS annotators,
               (SELECT count(*) FROM annotation_current c WHERE c.session_id = s.session_id AND c.kind = 'rate')
                   AS ratings
        FROM annotation_sessions s ORDER BY s.created_at DESC, s.session_id""")


# ---------------------------------------------------------------- creating sessions
def _check_text(value, what: str, *, required: bool = True, limit: int = 200) -> str:
    value = " ".join(str(value or "").split())
    if required and not value:
        raise ProbekitError(f"give the {what}")
    if len(value) > limit:
        raise ProbekitError(f"the {what} is too long ({len(value)} characters; at most {limit})")
    return value


def _check_int(value, what: str, *, low: int, high: int | None = None, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low or (
            high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"≥ {low}"
        raise ProbekitError(f"{what} must be a whole number {bound}, got {value!r}")
    return int(value)


def sample(items: Sequence, *, n: int, seed: int = 0, relation: Callable = lambda x: x.relation) -> list:
    """A seeded sample of ``n`` queries (or rankings) spread evenly over relations.

    Each relation's entries are shuffled with the seed, then taken round-robin over the relations (in a
    seeded order) until ``n`` are chosen, so a 15-query session over 3 relations gets 5 of each.

    >>> from probekit.types import Query
    >>> qs = [Query(f"q{i}", "s", "ab"[i % 2], "[X] [Y]") for i in range(10)]
    >>> picked = sample(qs, n=4, seed=1)
    >>> sorted(q.relation for q in picked), picked == sample(qs, n=4, seed=1)
    (['a', 'a', 'b', 'b'], True)
    """
    n = _check_int(n, "the number of queries", low=1)
    seed = _check_int(seed, "the seed", low=0)
    groups: dict[str, list] = defaultdict(list)
    for x in items:
        groups[relation(x)].append(x)
    rng = random.Random(seed)
    rels = sorted(groups)
    for rel in rels:
        rng.shuffle(groups[rel])
    rng.shuffle(rels)
    picked: list = []
    depth = 0
    while len(picked) < n and any(depth < len(groups[r]) for r in rels):
        for rel in rels:
            if depth < len(groups[rel]) and len(picked) < n:
                picked.append(groups[rel][depth])
        depth += 1
    return picked


def _session_id() -> str:
    return f"s-{secrets.token_hex(4)}"


def from_rankings(rankings: Sequence[Ranking], *, name: str, organiser: str = "", k: int = 10, blind: bool = True,
                  raters_per_item: int | None = None, seed: int = 0, source: str = "rankings",
                  source_run: str | None = None, model: str | None = None, model_revision: str | None = None,
                  dataset: str | None = None, dataset_version: str | None = None, probe: str | None = None,
                  probe_options: dict | None = None, vocab: str | None = None) -> str:
    """Create a session from any probe's rankings (in the given query order); returns the session id.

    The top ``k`` answers of each ranking become items; their display order is shuffled per query with
    ``seed``. ``raters_per_item`` None means every annotator rates every query; a number n hands each query
    to the first n annotators who reach it. Everything is written in one transaction.
    """
    name = _check_text(name, "session name")
    organiser = _check_text(organiser, "organiser name", required=False, limit=MAX_NAME)
    k = _check_int(k, "k", low=1, high=100)
    raters_per_item = _check_int(raters_per_item or None, "raters per item", low=1, high=100, allow_none=True)
    seed = _check_int(seed, "the seed", low=0)
    rankings = list(rankings or [])
    if not rankings:
        raise ProbekitError("no queries to annotate: the sample is empty")
    if not all(isinstance(r, Ranking) for r in rankings):
        raise ProbekitError("from_rankings needs probekit Ranking objects (from a probe or a stored run)")
    if any(len(r.names) == 0 for r in rankings):
        raise ProbekitError("a ranking has no answers")
    sid = _session_id()
    rng = np.random.default_rng(seed)
    qrows, irows = [], []
    for qi, r in enumerate(rankings):
        q = r.query
        qrows.append((sid, qi, q.id, q.relation, q.subject, q.template, q.text(), json.dumps(list(q.golds)),
                      r.best_gold_rank, int(r.n_candidates) if r.n_candidates else None))
        top = min(k, len(r.names))
        order = rng.permutation(top)  # order[pos] = rank index shown at display position pos
        for pos, idx in enumerate(order):
            idx = int(idx)
            irows.append((f"{sid}:{qi}:{pos}", sid, qi, pos, idx + 1, r.names[idx], int(r.ids[idx]),
                          float(r.scores[idx]), r.is_gold(r.names[idx])))
    relations = sorted({r.query.relation for r in rankings})
    store = _store()
    with store.transaction() as cur:
        cur.execute("INSERT INTO annotation_sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [sid, name, organiser, _now(), source, source_run, model, model_revision, dataset,
                     dataset_version, probe, json.dumps(probe_options or {}, sort_keys=True, default=str), vocab,
                     json.dumps(relations), len(rankings), k, bool(blind), raters_per_item, seed])
        cur.executemany("INSERT INTO annotation_queries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", qrows)
        cur.executemany("INSERT INTO annotation_items VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", irows)
    return sid


def from_probe(model, dataset, *, name: str, relations: Sequence[str] | None = None, n_queries: int = 15,
               k: int = 10, probe="retrieval", options: dict | None = None, vocab: str = "heads+tails", seed: int = 0,
               progress=None, **session) -> str:
    """Probe a seeded sample of ``dataset``'s queries with ``model`` and make a session of the top-k answers."""
    from ..probes import get_probe

    probe = get_probe(probe) if isinstance(probe, str) else probe
    relations = list(relations or [])
    unknown = [r for r in relations if r not in dataset.relations]
    if unknown:
        raise ProbekitError(f"unknown relation {unknown[0]!r} in {dataset.name}; available: "
                            f"{', '.join(dataset.relations)}")
    pool = [q for q in dataset.queries if not relations or q.relation in relations]
    queries: list[Query] = sample(pool, n=n_queries, seed=seed)
    if not queries:
        raise ProbekitError("no queries to annotate in the chosen relations")
    k = _check_int(k, "k", low=1, high=100)
    groups: dict[str | None, list[Query]] = defaultdict(list)
    for q in queries:
        groups[q.relation if vocab == "relation" else None].append(q)
    by_id: dict[str, Ranking] = {}
    for rel, qs in groups.items():
        for r in probe.rank(model, qs, dataset.candidates(vocab, rel), k=k, progress=progress, **(options or {})):
            by_id[r.query.id] = r
    return from_rankings([by_id[q.id] for q in queries], name=name, k=k, seed=seed, source="probe",
                         model=model.id, model_revision=getattr(model, "revision", None), dataset=dataset.name,
                         dataset_version=dataset.version, probe=probe.name, probe_options=options, vocab=vocab,
                         **session)


def from_run(run_id: str, *, name: str, relations: Sequence[str] | None = None, n_queries: int = 15, k: int = 10,
             seed: int = 0, **session) -> str:
    """A session over a seeded sample of a stored benchmark run's queries (no probing needed)."""
    from ..bench import runs

    run = runs.load_run(run_id)
    meta = run.meta
    k = _check_int(k, "k", low=1, high=100)
    if meta.get("k") and k > int(meta["k"]):
        raise ProbekitError(f"run {meta['run_id']} kept only the top {meta['k']} answers; choose k ≤ {meta['k']}")
    rankings = run.rankings()
    have = sorted({r.query.relation for r in rankings})
    unknown = [r for r in (relations or []) if r not in have]
    if unknown:
        raise ProbekitError(f"run {meta['run_id']} has no relation {unknown[0]!r}; available: {', '.join(have)}")
    pool = [r for r in rankings if not relations or r.query.relation in relations]
    picked = sample(pool, n=n_queries, seed=seed, relation=lambda r: r.query.relation)
    return from_rankings(picked, name=name, k=k, seed=seed, source="run", source_run=meta["run_id"],
                         model=meta.get("model"), model_revision=meta.get("model_revision"),
                         dataset=meta.get("dataset"), dataset_version=meta.get("dataset_version"),
                         probe=meta.get("probe"), probe_options=meta.get("options"), vocab=meta.get("vocab"),
                         **session)


# ---------------------------------------------------------------- annotators
def annotator_key(name) -> str:
    """The identity of an annotator within a session: the name, trimmed, spaces collapsed, lower-cased.

    >>> annotator_key("  Dr  Alice ")
    'dr alice'
    """
    if not isinstance(name, str):
        raise ProbekitError("the annotator name must be text")
    clean = " ".join(name.split())
    if not clean:
        raise ProbekitError("enter your name to start annotating")
    if len(clean) > MAX_NAME or not _NAME_RE.match(clean):
        raise ProbekitError(f"use a plain name (letters, digits, spaces, . _ - @ '; at most {MAX_NAME} characters); "
                            f"got {name[:80]!r}")
    return clean.lower()


def join(session_id: str, name: str) -> str:
    """Register ``name`` in the session (idempotent); returns the annotator key used by the other calls."""
    entry = _load(session_id)
    key = annotator_key(name)
    sid = entry["meta"]["session_id"]
    store = _store()
    if store.fetch("SELECT 1 FROM annotation_annotators WHERE session_id = ? AND annotator = ?", [sid, key]):
        return key
    try:
        with store.transaction() as cur:
            cur.execute("INSERT INTO annotation_annotators VALUES (?, ?, ?, ?)",
                        [sid, key, " ".join(name.split()), _now()])
    except duckdb.ConstraintException:  # joined at the same moment from another tab
        pass
    return key


def annotators(session_id: str) -> list[str]:
    sid = _load(session_id)["meta"]["session_id"]
    return [r[0] for r in _store().fetch("SELECT annotator FROM annotation_annotators WHERE session_id = ? "
                                         "ORDER BY joined_at, annotator", [sid])]


_MEMBERS: set[tuple] = set()


def _member(cur, sid: str, annotator) -> str:
    key = annotator_key(annotator)
    known = (_store().path, sid, key)  # annotators are never removed: remember who has joined
    if known in _MEMBERS:
        return key
    if not cur.execute("SELECT 1 FROM annotation_annotators WHERE session_id = ? AND annotator = ?",
                       [sid, key]).fetchall():
        raise ProbekitError(f"{key!r} has not joined session {sid}: enter your name on the Annotate page first")
    _MEMBERS.add(known)
    return key


# ---------------------------------------------------------------- assignment (raters per item)
def _assigned(sid: str, key: str) -> set[int]:
    return {r[0] for r in _store().fetch("SELECT query_index FROM annotation_assignments WHERE session_id = ? "
                                         "AND annotator = ?", [sid, key])}


def _claim(entry: dict, key: str, query_index: int | None = None) -> int | None:
    """Give ``key`` the query ``query_index`` (or the first open one) if it still needs raters.

    Runs under a process lock: the app is the only process holding the database, so this keeps every
    query at exactly ``raters_per_item`` annotators even when several claim at once.
    """
    meta = entry["meta"]
    sid, limit = meta["session_id"], meta["raters_per_item"]
    store = _store()
    with _ASSIGN_LOCK:
        counts = dict(store.fetch("SELECT query_index, count(*) FROM annotation_assignments WHERE session_id = ? "
                                  "GROUP BY query_index", [sid]))
        mine = _assigned(sid, key)
        if query_index is not None:
            if query_index in mine:
                return query_index
            candidates = [query_index] if counts.get(query_index, 0) < limit else []
        else:
            candidates = [qi for qi in sorted(entry["by_query"]) if qi not in mine and counts.get(qi, 0) < limit]
        if not candidates:
            return None
        with store.transaction() as cur:
            cur.execute("INSERT INTO annotation_assignments VALUES (?, ?, ?, ?)", [sid, key, candidates[0], _now()])
        return candidates[0]


# ---------------------------------------------------------------- the annotator's side
def _done(sid: str, key: str) -> dict[str, tuple]:
    """item_id -> (kind, score, event_id, elapsed_ms) of the annotator's effective events."""
    rows = _store().fetch("SELECT item_id, kind, score, event_id, elapsed_ms FROM annotation_current "
                          "WHERE session_id = ? AND annotator = ?", [sid, key])
    return {r[0]: tuple(r[1:]) for r in rows}


def _queue(entry: dict, key: str) -> list[int]:
    """The queries this annotator works on, in session order (all of them without raters_per_item)."""
    if entry["meta"]["raters_per_item"] is None:
        return sorted(entry["by_query"])
    return sorted(_assigned(entry["meta"]["session_id"], key))


def next_query(session_id: str, annotator: str) -> int | None:
    """The query the annotator should see now: the first of theirs with an answer not yet rated or skipped
    (so a reload, or an undo into an earlier query, resumes exactly there); None when all are done."""
    entry = _load(session_id)
    sid = entry["meta"]["session_id"]
    key = _member_key(sid, annotator)
    done = _done(sid, key)
    for qi in _queue(entry, key):
        if any(it["item_id"] not in done for it in entry["by_query"][qi]):
            return qi
    if entry["meta"]["raters_per_item"] is not None:
        return _claim(entry, key)
    return None


def _member_key(sid: str, annotator) -> str:
    if (_store().path, sid, annotator_key(annotator)) in _MEMBERS:
        return annotator_key(annotator)
    cur = _store().cursor()
    try:
        return _member(cur, sid, annotator)
    finally:
        cur.close()


def query_view(session_id: str, annotator: str, query_index: int) -> dict:
    """One query as its annotator sees it: text and answers in display order with *their own* ratings.

    Blind sessions return no gold answers, gold marks, ranks or model scores at all.
    """
    entry = _load(session_id)
    meta = entry["meta"]
    sid = meta["session_id"]
    key = _member_key(sid, annotator)
    if isinstance(query_index, bool) or not isinstance(query_index, int | np.integer) or \
            int(query_index) not in entry["by_query"]:
        raise ProbekitError(f"session {sid} has no query {query_index!r}")
    qi = int(query_index)
    q = entry["queries"].iloc[qi]
    done = _done(sid, key)
    answers = []
    for it in entry["by_query"][qi]:
        kind, score, event, elapsed = done.get(it["item_id"], (None, None, None, None))
        row = {"item_id": it["item_id"], "position": int(it["display_order"]), "answer": it["answer"],
               "status": kind, "score": None if score is None else int(score)}
        if not meta["blind"]:
            row.update(rank=int(it["rank"]), model_score=float(it["model_score"]), gold=bool(it["is_gold"]))
        answers.append(row)
    view = {"session_id": sid, "query_index": qi, "query": q["query_text"], "subject": q["subject"],
            "relation": q["relation"], "blind": bool(meta["blind"]), "answers": answers,
            "complete": all(a["status"] is not None for a in answers)}
    if not meta["blind"]:
        view["golds"] = list(q["golds"])
    return view


def _check_score(score) -> int:
    if isinstance(score, bool) or not isinstance(score, int | np.integer) or not 1 <= int(score) <= 5:
        raise ProbekitError(f"a rating must be a whole number from 1 to 5 (see the rubric); got {score!r}")
    return int(score)


def _check_elapsed(elapsed_ms) -> int | None:
    if elapsed_ms is None:
        return None
    if isinstance(elapsed_ms, bool) or not isinstance(elapsed_ms, int | float | np.integer | np.floating) \
            or not np.isfinite(elapsed_ms) or elapsed_ms < 0:
        raise ProbekitError(f"elapsed time must be a non-negative number of milliseconds, got {elapsed_ms!r}")
    return int(min(elapsed_ms, _MAX_ELAPSED_MS))


def _write(fn):
    """Run one short write transaction, retrying when DuckDB reports a transaction conflict."""
    store = _store()
    for attempt in range(_RETRIES):
        try:
            with store.transaction() as cur:
                return fn(cur)
        except duckdb.TransactionException:
            if attempt == _RETRIES - 1:
                raise ProbekitError("the database is busy; please try again") from None
            time.sleep(0.002 * (attempt + 1))
    return None  # pragma: no cover


def _current_event(cur, item_id: str, key: str) -> int | None:
    rows = cur.execute("""
        SELECT max(event_id) FILTER (WHERE kind <> 'undo' AND event_id NOT IN (
                   SELECT supersedes FROM annotation_events
                   WHERE item_id = $1 AND annotator = $2 AND kind = 'undo'))
        FROM annotation_events WHERE item_id = $1 AND annotator = $2
        """, [item_id, key]).fetchall()
    return rows[0][0] if rows else None


def _since_last(cur, sid: str, key: str, now: datetime) -> int | None:
    """Milliseconds since the annotator's previous action (or joining): the default time per answer.
    Gaps over :data:`_MAX_GAP_MS` are breaks, not answering time, and give None."""
    rows = cur.execute("SELECT max(t) FROM (SELECT max(created_at) AS t FROM annotation_events WHERE session_id = ? "
                       "AND annotator = ? UNION ALL SELECT joined_at FROM annotation_annotators WHERE session_id = ? "
                       "AND annotator = ?)", [sid, key, sid, key]).fetchall()
    if not rows or rows[0][0] is None:
        return None
    ms = int((now - rows[0][0]).total_seconds() * 1000)
    return ms if 0 <= ms <= _MAX_GAP_MS else None


def _item_of(entry: dict, item_id) -> int:
    sid = entry["meta"]["session_id"]
    if not isinstance(item_id, str) or item_id not in entry["item_query"]:
        other = isinstance(item_id, str) and _store().fetch(
            "SELECT session_id FROM annotation_items WHERE item_id = ?", [item_id])
        if other:
            raise ProbekitError(f"answer {item_id!r} belongs to another session ({other[0][0]}), not {sid}")
        raise ProbekitError(f"session {sid} has no answer {item_id!r}")
    return entry["item_query"][item_id]


def _record(session_id, item_id, annotator, kind: str, score, elapsed_ms) -> int:
    entry = _load(session_id)
    sid = entry["meta"]["session_id"]
    qi = _item_of(entry, item_id)
    elapsed_ms = _check_elapsed(elapsed_ms)
    key = _member_key(sid, annotator)
    if entry["meta"]["raters_per_item"] is not None and _claim(entry, key, qi) is None:
        raise ProbekitError(f"this query already has its {entry['meta']['raters_per_item']} annotator(s); "
                            "it is not assigned to you (use the next query you are given)")

    def write(cur):
        previous = _current_event(cur, item_id, key)
        now = _now()
        elapsed = elapsed_ms if elapsed_ms is not None else _since_last(cur, sid, key, now)
        rows = cur.execute("INSERT INTO annotation_events (session_id, item_id, annotator, kind, score, supersedes, "
                           "elapsed_ms, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING event_id",
                           [sid, item_id, key, kind, score, previous, elapsed, now]).fetchall()
        return int(rows[0][0])

    return _write(write)


def rate(session_id: str, item_id: str, annotator: str, score: int, *, elapsed_ms: float | None = None) -> int:
    """Record the annotator's 1..5 rating of one answer (rating it again replaces their earlier rating);
    returns the committed event id. Refused with a message, writing nothing: a score outside 1..5 or not a
    whole number, an unknown session or answer, an answer of another session, a name that has not joined,
    a query assigned to other annotators."""
    score = _check_score(score)
    return _record(session_id, item_id, annotator, "rate", score, elapsed_ms)


def skip(session_id: str, item_id: str, annotator: str, *, elapsed_ms: float | None = None) -> int:
    """Mark an answer as skipped (cannot judge); it counts as done but never enters the statistics."""
    return _record(session_id, item_id, annotator, "skip", None, elapsed_ms)


def undo(session_id: str, annotator: str, *, event_id: int | None = None) -> dict | None:
    """Take back the annotator's last effective rating or skip (or ``event_id``, which must be theirs and
    still in effect) by appending an event that supersedes it; their earlier rating of that answer, if
    any, applies again. Returns {event_id, item_id, query_index} of what was undone, None if nothing left."""
    entry = _load(session_id)
    sid = entry["meta"]["session_id"]
    key = _member_key(sid, annotator)
    if event_id is not None and (isinstance(event_id, bool) or not isinstance(event_id, int | np.integer)):
        raise ProbekitError(f"event id must be a whole number, got {event_id!r}")

    def write(cur):
        live = """SELECT e.event_id, e.item_id, e.annotator FROM annotation_events e
                  WHERE e.session_id = ? AND e.kind IN ('rate', 'skip')
                    AND NOT EXISTS (SELECT 1 FROM annotation_events u
                                    WHERE u.kind = 'undo' AND u.supersedes = e.event_id)"""
        if event_id is None:
            rows = cur.execute(live + " AND e.annotator = ? ORDER BY e.event_id DESC LIMIT 1", [sid, key]).fetchall()
            if not rows:
                return None
        else:
            rows = cur.execute(live + " AND e.event_id = ?", [sid, int(event_id)]).fetchall()
            if not rows:
                raise ProbekitError(f"event {event_id} is not an effective rating in session {sid}")
            if rows[0][2] != key:
                raise ProbekitError("you can only undo your own ratings")
        target, item = int(rows[0][0]), rows[0][1]
        cur.execute("INSERT INTO annotation_events (session_id, item_id, annotator, kind, score, supersedes, "
                    "elapsed_ms, created_at) VALUES (?, ?, ?, 'undo', NULL, ?, NULL, ?)",
                    [sid, item, key, target, _now()])
        return {"event_id": target, "item_id": item, "query_index": entry["item_query"][item]}

    return _write(write)


def progress(session_id: str, annotator: str) -> dict:
    """The annotator's answers done (rated or skipped) out of their total, queries done, and time per answer."""
    entry = _load(session_id)
    sid = entry["meta"]["session_id"]
    key = _member_key(sid, annotator)
    done = _done(sid, key)
    queue = _queue(entry, key)
    if entry["meta"]["raters_per_item"] is not None:  # plus the queries still open to them
        counts = dict(_store().fetch("SELECT query_index, count(*) FROM annotation_assignments WHERE session_id = ? "
                                     "GROUP BY query_index", [sid]))
        mine = set(queue)
        queue += [qi for qi in entry["by_query"] if qi not in mine
                  and counts.get(qi, 0) < entry["meta"]["raters_per_item"]]
    items = [it["item_id"] for qi in queue for it in entry["by_query"][qi]]
    n_done = sum(i in done for i in items)
    times = [v[3] / 1000 for v in done.values() if v[3] is not None]
    return {"done": n_done, "total": len(items),
            "rated": sum(v[0] == "rate" for v in done.values()), "skipped": sum(v[0] == "skip" for v in done.values()),
            "queries_done": sum(all(it["item_id"] in done for it in entry["by_query"][qi]) for qi in queue),
            "queries_total": len(queue),
            "seconds_per_answer": float(np.median(times)) if times else None,
            "mean_seconds_per_answer": float(np.mean(times)) if times else None}


def my_ratings(session_id: str, annotator: str) -> pd.DataFrame:
    """The annotator's own effective ratings and skips (never anyone else's)."""
    entry = _load(session_id)
    sid = entry["meta"]["session_id"]
    key = _member_key(sid, annotator)
    return _store().fetch_df("SELECT item_id, kind, score, elapsed_ms, created_at FROM annotation_current "
                             "WHERE session_id = ? AND annotator = ? ORDER BY event_id", [sid, key])


# ---------------------------------------------------------------- the organiser's side
def items_frame(session_id: str) -> pd.DataFrame:
    """Every answer of the session with its query, rank, model score and gold flag (organiser view)."""
    entry = _load(session_id)
    q = entry["queries"][["query_index", "query_id", "relation", "subject", "query_text", "golds",
                          "best_gold_rank"]]
    out = entry["items"].merge(q, on="query_index", how="left")
    out["golds"] = out["golds"].map(json.dumps)
    cols = ["session_id", "item_id", "query_index", "query_id", "relation", "subject", "query_text", "golds",
            "best_gold_rank", "rank", "display_order", "answer", "answer_id", "model_score", "is_gold"]
    return out[cols].sort_values(["query_index", "rank"]).reset_index(drop=True)


def ratings_frame(session_id: str, *, include_skips: bool = False) -> pd.DataFrame:
    """Current ratings (one row per answer and annotator) joined with the answers (organiser view)."""
    entry = _load(session_id)
    sid = entry["meta"]["session_id"]
    kinds = "('rate', 'skip')" if include_skips else "('rate')"
    cur = _store().fetch_df(f"SELECT event_id, item_id, annotator, kind, score, elapsed_ms, created_at AS rated_at "
                            f"FROM annotation_current WHERE session_id = ? AND kind IN {kinds}", [sid])
    out = items_frame(sid).merge(cur, on="item_id", how="inner")
    out["score"] = out["score"].astype("Int64")
    return out.sort_values(["query_index", "rank", "annotator"]).reset_index(drop=True)


def events_frame(session_id: str) -> pd.DataFrame:
    """The full append-only event log of the session (rate, skip, undo), oldest first."""
    sid = _load(session_id)["meta"]["session_id"]
    return _store().fetch_df("SELECT event_id, session_id, item_id, annotator, kind, score, supersedes, elapsed_ms, "
                             "created_at FROM annotation_events WHERE session_id = ? ORDER BY event_id", [sid])


def overview(session_id: str) -> pd.DataFrame:
    """Per annotator: answers rated, skipped, median seconds per answer, last activity."""
    sid = _load(session_id)["meta"]["session_id"]
    return _store().fetch_df("""
        SELECT a.display_name AS annotator, count(c.event_id) FILTER (WHERE c.kind = 'rate') AS rated,
               count(c.event_id) FILTER (WHERE c.kind = 'skip') AS skipped,
               median(c.elapsed_ms) / 1000.0 AS "median s/answer", max(c.created_at) AS last_activity
        FROM annotation_annotators a
        LEFT JOIN annotation_current c ON c.session_id = a.session_id AND c.annotator = a.annotator
        WHERE a.session_id = ? GROUP BY a.display_name, a.joined_at ORDER BY a.joined_at""", [sid])


def stats(session_id: str, *, threshold: int = 5, consensus: str = "median", ks: Sequence[int] = (1, 10)) -> dict:
    """Everything the Results page shows, as frames: Table 5 (consensus and per annotator), shares of gold
    vs expert hits, expert-adjusted acc@k next to gold acc@k, agreement overall and per relation, pairwise
    kappas and the candidate missing facts."""
    entry = _load(session_id)
    meta = entry["meta"]
    ratings = ratings_frame(meta["session_id"])
    items = items_frame(meta["session_id"]).rename(columns={"query_index": "query"})
    queries = entry["queries"].rename(columns={"query_index": "query"})
    ratings = ratings.rename(columns={"query_index": "query"})
    scores = agreement.consensus(ratings, method=consensus)
    ks = sorted({min(int(k), meta["k"]) for k in ks})  # a top-3 session reports top-1 and top-3
    kmax = max(ks)
    per_annotator = {a: agreement.table5(items, part.set_index("item_id")["score"].astype(int), ks=ks)
                     for a, part in ratings.groupby("annotator")}
    facts = agreement.missing_facts(items, ratings, scores, threshold=threshold)
    facts = facts[["query", "query_id", "relation", "subject", "query_text", "golds", "rank", "answer", "score",
                   "ratings", "raters"]]
    return {
        "session": meta, "n_ratings": int(len(ratings)), "annotators": sorted(ratings["annotator"].unique()),
        "table5": agreement.table5(items, scores, ks=ks), "table5_by_annotator": per_annotator,
        "shares": agreement.shares(items, scores, k=min(kmax, meta["k"]), threshold=threshold),
        "accuracy": agreement.expert_accuracy(queries, items, scores, threshold=threshold, ks=ks),
        "agreement": agreement.agreement(ratings, items),
        "kappa": agreement.pairwise_kappa(ratings),
        "missing_facts": facts,
    }


def stats_json(result: dict) -> dict:
    """:func:`stats` with frames as lists of records (for ``--format json``)."""
    def conv(v):
        if isinstance(v, pd.DataFrame):
            return json.loads(v.to_json(orient="records", date_format="iso", force_ascii=False))
        if isinstance(v, dict):
            return {str(k): conv(x) for k, x in v.items()}
        if isinstance(v, datetime):
            return v.isoformat()
        return v

    return conv(result)


# ---------------------------------------------------------------- exports
def export_frame(session_id: str, what: str = "ratings") -> pd.DataFrame:
    """``ratings`` (current ratings and skips with their answers), ``events`` (the full log) or ``items``
    (the session's answers); each row also names the session."""
    if what not in EXPORT_TABLES:
        raise ProbekitError(f"unknown export table {what!r}; available: {', '.join(EXPORT_TABLES)}")
    meta = get_session(session_id)
    frame = {"ratings": lambda: ratings_frame(meta["session_id"], include_skips=True),
             "events": lambda: events_frame(meta["session_id"]),
             "items": lambda: items_frame(meta["session_id"])}[what]()
    frame = frame.drop(columns=["session_id"], errors="ignore")
    for i, c in enumerate(("session_id", "name", "model", "dataset", "probe", "k", "blind")):
        frame.insert(i, "session_name" if c == "name" else c, meta[c])
    return frame


def frame_bytes(frame: pd.DataFrame, fmt: str) -> bytes:
    """A table as CSV, Parquet or JSON Lines bytes."""
    return table_bytes(frame, fmt, formats=EXPORT_FORMATS)


def export(session_id: str, path: str | Path, *, fmt: str | None = None, what: str = "ratings") -> Path:
    """Write :func:`export_frame` to ``path`` (format from ``fmt`` or the suffix), atomically and safely
    (:func:`probekit.store.export.write_table`)."""
    path = Path(path)
    safe_target(path)
    return write_table(export_frame(session_id, what), path, fmt=fmt, formats=EXPORT_FORMATS)
