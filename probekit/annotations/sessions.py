"""Annotation sessions: created from any probe's rankings, a fresh probe or a stored run; sampling, listing.

An organiser creates a *session* from any probe's rankings (:func:`from_rankings`), from a fresh probe of a
seeded sample of dataset queries (:func:`from_probe`) or from a stored benchmark run (:func:`from_run`).
Each query's top-k answers become *items*, shown in an order shuffled once per session (seeded). Sessions,
their queries and items never change once created, so they are read once per process (:func:`load`).

Storage: component ``annotations`` of :mod:`probekit.store` (schema in :mod:`probekit.store.schema`).
"""

from __future__ import annotations

import json
import random
import secrets
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import numpy as np
import pandas as pd

from ..errors import ProbekitError, command, positive_int
from ..memo import Memo
from ..store import component_store
from ..types import Query, Ranking, normalize_name

COMPONENT = "annotations"
MAX_NAME = 60
"""The longest annotator or organiser name."""

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
_MAX_ELAPSED_MS = 24 * 3600 * 1000
_MAX_GAP_MS = 10 * 60 * 1000
_RETRIES = 8


_SESSION_COLUMNS = ["session_id", "name", "organiser", "created_at", "source", "source_run", "model", "model_revision",
                    "dataset", "dataset_version", "probe", "probe_options", "vocab", "relations", "n_queries", "k",
                    "blind", "raters_per_item", "seed", "exclude_subject", "selection"]
SUBJECT_NOTE = ("Sessions from a fresh probe leave out each query's own subject from its answers (as the Probe page "
                "does): models often rank the subject itself high (\"aspirin may treat aspirin\"), an answer that "
                "says nothing about the relation and only costs the experts time.")
"""The one-line note on the organiser's page."""


def _store():
    return component_store(COMPONENT)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)

# ---------------------------------------------------------------- memo of immutable rows
# Sessions, queries and items never change once created, so they are read once per process and store.
_MEMO: Memo[tuple, dict] = Memo(max_entries=64)
"""Loaded sessions (metadata, queries, items), the most recently used kept: a server holds a few sessions at once."""
_ASSIGN_LOCK = threading.Lock()


def _load(session_id) -> dict:
    """The session's metadata, queries and items (memoised), or a ProbekitError naming the session."""
    if not isinstance(session_id, str) or not session_id.strip():
        raise ProbekitError(f"give a session id (see `{command()} annotations list`)")
    session_id = session_id.strip()
    store = _store()
    key = (store.path, session_id)
    hit = _MEMO.get(key)
    if hit is not None:
        return hit
    cols = _SESSION_COLUMNS
    rows = store.fetch(f"SELECT {', '.join(cols)} FROM annotation_sessions WHERE session_id = ?", [session_id])
    if not rows:
        raise ProbekitError(f"no annotation session {session_id!r} (see `{command()} annotations list`)")
    meta = dict(zip(cols, rows[0]))
    meta["probe_options"] = json.loads(meta["probe_options"] or "{}")
    meta["relations"] = json.loads(meta["relations"] or "[]")
    meta["selection"] = json.loads(meta["selection"]) if meta["selection"] else None
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
    _MEMO.put(key, entry)
    return entry


def get_session(session_id: str) -> dict:
    """A session's settings (name, organiser, source, model, dataset, k, blind, raters per item, seed…)."""
    return dict(_load(session_id)["meta"])


def list_sessions() -> pd.DataFrame:
    """Stored sessions, newest first, with their counts of queries, answers, annotators and ratings."""
    return _store().fetch_df("""
        SELECT s.session_id, s.name, s.organiser, s.created_at, s.source, s.model, s.dataset, s.probe, s.k,
               s.blind, s.raters_per_item, s.n_queries, json_extract_string(s.selection, '$.rule') AS selection,
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


def _check_int(value, what: str, *, low: int, high: int | None = None) -> int:
    return positive_int(what, value, minimum=low, maximum=high)


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
                  probe_options: dict | None = None, vocab: str | None = None,
                  exclude_subject: bool | None = None, selection: dict | None = None) -> str:
    """Create a session from any probe's rankings (in the given query order); returns the session id.

    The top ``k`` answers of each ranking become items; their display order is shuffled per query with
    ``seed``. ``raters_per_item`` None means every annotator rates every query; a number n hands each query
    to the first n annotators who reach it. ``exclude_subject`` records whether the rankings left out each
    query's own subject (None: unknown); ``selection`` the rule that chose the queries and its parameters
    (:mod:`.queue`). Everything is written in one transaction.
    """
    name = _check_text(name, "session name")
    organiser = _check_text(organiser, "organiser name", required=False, limit=MAX_NAME)
    k = _check_int(k, "k", low=1, high=100)
    raters_per_item = _check_int(raters_per_item, "raters per item", low=1, high=100) if raters_per_item else None
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
        gold = r.gold_flags()
        order = rng.permutation(top)  # order[pos] = rank index shown at display position pos
        for pos, idx in enumerate(order):
            idx = int(idx)
            irows.append((f"{sid}:{qi}:{pos}", sid, qi, pos, idx + 1, r.names[idx], int(r.ids[idx]),
                          float(r.scores[idx]), gold[idx]))
    relations = sorted({r.query.relation for r in rankings})
    store = _store()
    with store.transaction() as cur:
        cur.execute(f"INSERT INTO annotation_sessions ({', '.join(_SESSION_COLUMNS)}) "
                    f"VALUES ({', '.join('?' * len(_SESSION_COLUMNS))})",
                    [sid, name, organiser, _now(), source, source_run, model, model_revision, dataset,
                     dataset_version, probe, json.dumps(probe_options or {}, sort_keys=True, default=str), vocab,
                     json.dumps(relations), len(rankings), k, bool(blind), raters_per_item, seed,
                     None if exclude_subject is None else bool(exclude_subject),
                     None if selection is None else json.dumps(selection, sort_keys=True, default=str)])
        cur.executemany("INSERT INTO annotation_queries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", qrows)
        cur.executemany("INSERT INTO annotation_items VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", irows)
    return sid


def from_probe(model, dataset, *, name: str, relations: Sequence[str] | None = None, n_queries: int = 15,
               k: int = 10, probe="retrieval", options: dict | None = None, vocab: str = "heads+tails", seed: int = 0,
               exclude_subject: bool = True, progress=None, **session) -> str:
    """Probe a seeded sample of ``dataset``'s queries with ``model`` and make a session of the top-k answers.

    ``exclude_subject`` (default on, stored with the session; see :data:`SUBJECT_NOTE`) leaves each query's
    own subject out of its answers: through the probe's ``exclude_subject`` option when it has one, else by
    ranking a few more answers and dropping the subject's names (:func:`drop_subject`).
    """
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
    exclude_subject = bool(exclude_subject)
    options = dict(options or {})
    native = any(o.name == "exclude_subject" for o in probe.options)
    if native:
        options["exclude_subject"] = exclude_subject
    extra = _SUBJECT_MARGIN if exclude_subject and not native else 0
    groups: dict[str | None, list[Query]] = defaultdict(list)
    for q in queries:
        groups[q.relation if vocab == "relation" else None].append(q)
    by_id: dict[str, Ranking] = {}
    for rel, qs in groups.items():
        for r in probe.rank(model, qs, dataset.candidates(vocab, rel), k=k + extra, progress=progress, **options):
            by_id[r.query.id] = drop_subject(r, k) if extra else r
    return from_rankings([by_id[q.id] for q in queries], name=name, k=k, seed=seed, source="probe",
                         model=model.id, model_revision=getattr(model, "revision", None), dataset=dataset.name,
                         dataset_version=dataset.version, probe=probe.name, probe_options=options, vocab=vocab,
                         exclude_subject=exclude_subject, **session)


_SUBJECT_MARGIN = 3
"""Answers ranked beyond k when the subject is dropped here: room for the subject and two case variants."""


def drop_subject(ranking: Ranking, k: int) -> Ranking:
    """``ranking`` without the answers named like its query's subject, cut to the top ``k``.

    Gold ranks behind a dropped answer move up by one per dropped answer. The ranking holds only its top
    answers, so a subject ranked beyond them is not seen: gold ranks within the kept top ``k`` (all that
    acc@k for k up to the session's k needs) are exact.

    >>> from probekit.types import Query, Ranking
    >>> q = Query("q", "Aspirin", "may_treat", "[X] may treat [Y].", golds=("pain",))
    >>> r = drop_subject(Ranking(q, (0, 1, 2), ("aspirin", "pain", "fever"), (0.9, 0.8, 0.7), (2,)), 2)
    >>> r.names, r.gold_ranks
    (('pain', 'fever'), (1,))
    """
    subject = normalize_name(ranking.query.subject)
    if not subject:
        keep, dropped = list(range(len(ranking.names)))[:k], []
    else:
        dropped = [i + 1 for i, n in enumerate(ranking.names) if normalize_name(n) == subject]
        keep = [i for i, n in enumerate(ranking.names) if normalize_name(n) != subject][:k]
    gold_ranks = tuple(None if g is None or g in dropped else g - sum(d < g for d in dropped)
                       for g in ranking.gold_ranks)
    return Ranking(ranking.query, tuple(ranking.ids[i] for i in keep), tuple(ranking.names[i] for i in keep),
                   tuple(ranking.scores[i] for i in keep), gold_ranks,
                   n_candidates=max(0, ranking.n_candidates - len(dropped)) if ranking.n_candidates else 0)


def from_run(run_id: str, *, name: str, relations: Sequence[str] | None = None, n_queries: int = 15, k: int = 10,
             seed: int = 0, allow_partial: bool = False, **session) -> str:
    """A session over a seeded sample of a stored benchmark run's queries (no probing needed).

    Only a finished (``done``) run, unless ``allow_partial``: a cancelled, failed, interrupted or still
    running run holds only some relations, and a sample of it would silently leave the others out."""
    from ..bench import runs

    if not allow_partial:
        meta = runs.get_run(run_id)
        if meta["status"] != "done":
            from ..bench import results

            status = "interrupted" if meta["run_id"] in results.mark_stale() else meta["status"]
            n_done = results.store().fetch("SELECT count(*) FROM run_results WHERE run_id = ?", [meta["run_id"]])[0][0]
            raise ProbekitError(f"run {meta['run_id']} is {status}, not finished ({n_done}/{meta['n_queries']} "
                                f"queries stored): resume it first (`{command()} bench --save` with the same "
                                f"settings), or pass --allow-partial to sample only what it stored")
    run = runs.load_run(run_id)
    meta = run.meta
    k = _check_int(k, "k", low=1, high=100)
    if meta.get("k") and k > int(meta["k"]):
        raise ProbekitError(f"run {meta['run_id']} kept only the top {meta['k']} answers; choose k ≤ {meta['k']}")
    rankings = run.rankings()
    have = sorted({r.query.relation for r in rankings})
    unknown = [r for r in (relations or []) if r not in have]
    if unknown:
        raise ProbekitError(f"run {meta['run_id']} has no relation {unknown[0]!r}; "
                            + (f"available: {', '.join(have)}" if have else "it has no results stored yet"))
    pool = [r for r in rankings if not relations or r.query.relation in relations]
    picked = sample(pool, n=n_queries, seed=seed, relation=lambda r: r.query.relation)
    options = meta.get("options")
    if not isinstance(options, dict):
        options = {}
    return from_rankings(picked, name=name, k=k, seed=seed, source="run", source_run=meta["run_id"],
                         model=meta.get("model"), model_revision=meta.get("model_revision"),
                         dataset=meta.get("dataset"), dataset_version=meta.get("dataset_version"),
                         probe=meta.get("probe"), probe_options=options, vocab=meta.get("vocab"),
                         exclude_subject=options.get("exclude_subject"), **session)


