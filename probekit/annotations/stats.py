"""The organiser's side: answers, ratings and the event log as frames, statistics (MedLAMA Table 5,
expert-adjusted accuracy, agreement, candidate missing facts) and exports via :mod:`probekit.store.export`.
Organiser-side reads see everything (gold marks, every annotator's ratings)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import pandas as pd

from ..errors import ProbekitError
from ..metrics import agreement, agreement_ordinal, raters
from ..store.export import safe_target, table_bytes, write_table
from .sessions import _load, _store, get_session

EXPORT_FORMATS = ("csv", "parquet", "jsonl")
EXPORT_TABLES = ("ratings", "events", "items", "verdicts")
# annotators by the name they typed (events store the case-insensitive key)
_NAMES = ("LEFT JOIN annotation_annotators a ON a.session_id = c.session_id AND a.annotator = c.annotator")
_NAME = "coalesce(a.display_name, c.annotator)"


# ---------------------------------------------------------------- the organiser's side
def data_version(session_id: str) -> tuple[int, int]:
    """Changes whenever the session's ratings or annotators do (last event id, annotators): a key for
    memoising exports."""
    sid = _load(session_id)["meta"]["session_id"]
    return tuple(_store().fetch(
        "SELECT (SELECT coalesce(max(event_id), 0) FROM annotation_events WHERE session_id = $1), "
        "(SELECT count(*) FROM annotation_annotators WHERE session_id = $1)", [sid])[0])


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
    """Current ratings (one row per answer and annotator, names as typed) joined with the answers (organiser
    view)."""
    entry = _load(session_id)
    sid = entry["meta"]["session_id"]
    kinds = "('rate', 'skip')" if include_skips else "('rate')"
    cur = _store().fetch_df(f"SELECT c.event_id, c.item_id, {_NAME} AS annotator, c.kind, c.score, c.elapsed_ms, "
                            f"c.created_at AS rated_at FROM annotation_current c {_NAMES} "
                            f"WHERE c.session_id = ? AND c.kind IN {kinds}", [sid])
    out = items_frame(sid).merge(cur, on="item_id", how="inner")
    out["score"] = out["score"].astype("Int64")
    return out.sort_values(["query_index", "rank", "annotator"]).reset_index(drop=True)


def events_frame(session_id: str) -> pd.DataFrame:
    """The full append-only event log of the session (rate, skip, undo), oldest first."""
    sid = _load(session_id)["meta"]["session_id"]
    return _store().fetch_df(f"SELECT c.event_id, c.session_id, c.item_id, {_NAME} AS annotator, c.kind, c.score, "
                             f"c.supersedes, c.elapsed_ms, c.created_at FROM annotation_events c {_NAMES} "
                             "WHERE c.session_id = ? ORDER BY c.event_id", [sid])


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


def verdicts(session_id: str) -> pd.DataFrame:
    """A reviewer's verdicts in effect (:mod:`.review`; the latest per answer): ``item_id``, ``reviewer``,
    ``role``, ``score``, ``note``, ``event_id``, ``created_at``."""
    sid = _load(session_id)["meta"]["session_id"]
    return _store().fetch_df("""
        SELECT item_id, reviewer, role, score, note, event_id, created_at FROM (
            SELECT *, row_number() OVER (PARTITION BY item_id ORDER BY event_id DESC) AS rn
            FROM annotation_verdicts WHERE session_id = ?) WHERE rn = 1 ORDER BY event_id""", [sid])


def apply_verdicts(scores: pd.Series, verdict_frame: pd.DataFrame) -> pd.Series:
    """``scores`` (one per item id) with each verdict's score in place of the consensus."""
    out = scores.copy()
    if len(verdict_frame):
        out = pd.concat([out.drop(verdict_frame["item_id"], errors="ignore"),
                         verdict_frame.set_index("item_id")["score"].astype("int64")]).rename(scores.name)
    return out.astype("int64")


def stats(session_id: str, *, threshold: int = 5, consensus: str = "median", ks: Sequence[int] = (1, 10)) -> dict:
    """Everything the Results page shows, as frames: Table 5 (consensus and per annotator), shares of gold
    vs expert hits among the answers (``shares``, ``answer_shares``: MedLAMA §5.3's acc@10), expert-adjusted
    acc@k per query next to gold acc@k (``accuracy``) and their 95 % intervals in its rows (``accuracy_intervals``:
    how sure a share of a few dozen rated queries is), agreement overall and per relation, pairwise kappas,
    ordinal agreement (``ordinal``: ICC, weighted kappa, ordinal alpha), rater quality (``raters``: bias,
    consistency, Dawid–Skene reliability), expert acc@k weighted by that reliability beside the plain one
    (``adjusted_accuracy``) and the candidate missing facts. Where a reviewer recorded a verdict
    (:mod:`.review`), it replaces the consensus (plain and weighted) for that answer: ``verdicts`` lists them
    and ``verdict_note`` says so; agreement and rater quality read the ratings only."""
    entry = _load(session_id)
    meta = entry["meta"]
    ratings = ratings_frame(meta["session_id"])
    items = items_frame(meta["session_id"]).rename(columns={"query_index": "query"})
    queries = entry["queries"].rename(columns={"query_index": "query"})
    ratings = ratings.rename(columns={"query_index": "query"})
    decided = verdicts(meta["session_id"])
    scores = apply_verdicts(agreement.consensus(ratings, method=consensus), decided)
    ks = sorted({min(int(k), meta["k"]) for k in ks})  # a top-3 session reports top-1 and top-3
    kmax = max(ks)
    per_annotator = {a: agreement.table5(items, part.set_index("item_id")["score"].astype(int), ks=ks)
                     for a, part in ratings.groupby("annotator")}
    model = raters.dawid_skene(ratings) if len(ratings) else None
    weighted = apply_verdicts(raters.weighted_consensus(ratings, model.reliability if model else {}), decided)
    facts = agreement.missing_facts(items, ratings, scores, threshold=threshold)
    facts = facts[["query", "query_id", "relation", "subject", "query_text", "golds", "rank", "answer", "score",
                   "ratings", "raters"]]
    accuracy = agreement.expert_accuracy(queries, items, scores, threshold=threshold, ks=ks)
    return {
        "session": meta, "n_ratings": int(len(ratings)), "annotators": sorted(ratings["annotator"].unique()),
        "table5": agreement.table5(items, scores, ks=ks), "table5_by_annotator": per_annotator,
        "shares": agreement.shares(items, scores, k=min(kmax, meta["k"]), threshold=threshold),
        "answer_shares": agreement.answer_shares(items, scores, ks=ks, threshold=threshold),
        "accuracy": accuracy,
        "accuracy_intervals": agreement.expert_accuracy_intervals(queries, items, scores, threshold=threshold, ks=ks),
        "agreement": agreement.agreement(ratings, items),
        "kappa": agreement.pairwise_kappa(ratings),
        "ordinal": agreement_ordinal.ordinal_agreement(ratings),
        "raters": raters.rater_quality(ratings, model=model),
        "adjusted_accuracy": raters.adjusted_accuracy(queries, items, ratings, {}, threshold=threshold, ks=ks,
                                                      plain=accuracy, weighted=weighted),
        "verdicts": decided,
        "verdict_note": (f"a reviewer's verdict replaces the raters' consensus on {len(decided)} answer(s)"
                         if len(decided) else "no reviewer verdicts: every score is the raters' consensus"),
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
    """``ratings`` (current ratings and skips with their answers), ``events`` (the full log), ``items``
    (the session's answers) or ``verdicts`` (every reviewer verdict, superseded ones too); each row also names
    the session."""
    if what not in EXPORT_TABLES:
        raise ProbekitError(f"unknown export table {what!r}; available: {', '.join(EXPORT_TABLES)}")
    meta = get_session(session_id)
    frame = {"ratings": lambda: ratings_frame(meta["session_id"], include_skips=True),
             "events": lambda: events_frame(meta["session_id"]),
             "items": lambda: items_frame(meta["session_id"]),
             "verdicts": lambda: _store().fetch_df("SELECT * FROM annotation_verdicts WHERE session_id = ? "
                                                   "ORDER BY event_id", [meta["session_id"]])}[what]()
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
