"""Review and adjudication: a reviewer reads the blind ratings of a disputed answer and records a final verdict.

An answer is *disputed* when two or more raters scored it and their scores are ``min_spread`` or more apart. The
reviewer sees the query, the answer and its ratings as "rater 1", "rater 2", … sorted by score, renumbered for
every answer so that no one can be followed from answer to answer; names only where the organiser allows it
(``show_names``). Gold marks follow the session's blind setting.

A verdict is one more row (table ``annotation_verdicts``, role ``reviewer``) beside the ratings, which stay as
they were; recording another verdict on the same answer supersedes the earlier one (both rows are kept, the
latest is in effect; :func:`.stats.verdicts` reads them). Statistics (:func:`.stats.stats`) use the verdict in
place of the raters' consensus where one exists and say on how many answers; agreement and rater quality read
the ratings only.

A reviewer who is not the organiser acts through a reviewer link (:func:`.access.issue_token` with
``role="reviewer"``): the ``reviewer_*`` calls take its token, check it on every call (a revoked link stops at
once; an expert's link is refused), and reach only the disputed answers of the link's session, always blind,
recording the verdict under the link's name.
"""

from __future__ import annotations

import pandas as pd

from ..errors import ProbekitError, positive_int
from .access import Expert, verify_token
from .rating import _check_score, _item_of, _write
from .sessions import MAX_NAME, _check_text, _load, _now, _store
from .stats import ratings_frame, verdicts


def disputed(session_id: str, *, min_spread: int = 2) -> pd.DataFrame:
    """Answers rated by two or more raters whose scores are at least ``min_spread`` apart, most disputed first:
    ``item_id``, ``query_index``, ``relation``, ``query``, ``answer``, ``scores`` (sorted, no names), ``spread``
    and ``verdict`` (the score in effect, or None)."""
    min_spread = positive_int("min_spread", min_spread, maximum=4)
    sid = _load(session_id)["meta"]["session_id"]
    ratings = ratings_frame(sid)
    cols = ["item_id", "query_index", "relation", "query", "answer", "scores", "spread", "verdict"]
    if ratings.empty:
        return pd.DataFrame(columns=cols)
    groups = ratings.groupby(["item_id", "query_index", "relation", "query_text", "answer", "rank"])["score"]
    per = groups.agg(scores=lambda s: sorted(int(v) for v in s), spread=lambda s: int(s.max() - s.min()),
                     raters="count").reset_index()
    per = per[(per["raters"] >= 2) & (per["spread"] >= min_spread)]
    per = per.sort_values(["spread", "query_index", "rank"], ascending=[False, True, True], kind="stable")
    verdict = verdicts(sid).set_index("item_id")["score"]
    per["verdict"] = per["item_id"].map(verdict).astype("Int64")
    return per.rename(columns={"query_text": "query"})[cols].reset_index(drop=True)


def review_view(session_id: str, item_id: str, *, show_names: bool = False) -> dict:
    """What a reviewer sees of one answer: query, answer, its ratings blind (``rater 1``… sorted by score; names
    only with ``show_names``), gold answers and mark unless the session is blind, and the verdict in effect."""
    entry = _load(session_id)
    meta = entry["meta"]
    qi = _item_of(entry, item_id)
    item = next(it for it in entry["by_query"][qi] if it["item_id"] == item_id)
    q = entry["queries"].iloc[qi]
    rated = ratings_frame(meta["session_id"])
    rated = rated[rated["item_id"] == item_id].sort_values(["score", "event_id"])
    ratings = [{"rater": name if show_names else f"rater {i}", "score": int(score)}
               for i, (name, score) in enumerate(zip(rated["annotator"], rated["score"]), start=1)]
    current = verdicts(meta["session_id"])
    current = current[current["item_id"] == item_id]
    view = {"session_id": meta["session_id"], "item_id": item_id, "query": q["query_text"],
            "relation": q["relation"], "answer": item["answer"], "ratings": ratings, "names_shown": bool(show_names),
            "verdict": None if current.empty else {"score": int(current["score"].iloc[0]),
                                                    "reviewer": current["reviewer"].iloc[0],
                                                    "note": current["note"].iloc[0]}}
    if not meta["blind"]:
        view.update(golds=list(q["golds"]), gold=bool(item["is_gold"]), rank=int(item["rank"]))
    return view


def record_verdict(session_id: str, item_id: str, reviewer: str, score: int, *, note: str = "") -> int:
    """Record ``reviewer``'s final score for one answer (one more row; the ratings are untouched); returns its
    event id. Refused with one line, writing nothing: a score outside 1..5, an unknown session or answer, an
    answer of another session, no reviewer name, an answer nobody has rated."""
    score = _check_score(score)
    reviewer = _check_text(reviewer, "reviewer's name", limit=MAX_NAME)
    note = _check_text(note, "note", required=False, limit=1000)
    entry = _load(session_id)
    sid = entry["meta"]["session_id"]
    _item_of(entry, item_id)
    if not _store().fetch("SELECT 1 FROM annotation_current WHERE session_id = ? AND item_id = ? AND kind = 'rate' "
                          "LIMIT 1", [sid, item_id]):
        raise ProbekitError(f"answer {item_id!r} has no rating yet: a verdict settles ratings that disagree")

    def write(cur):
        rows = cur.execute("INSERT INTO annotation_verdicts (session_id, item_id, reviewer, score, note, created_at) "
                           "VALUES (?, ?, ?, ?, ?, ?) RETURNING event_id",
                           [sid, item_id, reviewer, score, note or None, _now()]).fetchall()
        return int(rows[0][0])

    return _write(write)


# ---------------------------------------------------------------- a reviewer's link
def reviewer_of(token, *, session_id: str | None = None) -> Expert:
    """Who the reviewer link ``token`` lets in (role ``reviewer``); an expert's link, a wrong or revoked token,
    or one of another session than ``session_id`` is refused with one line."""
    return verify_token(token, session_id=session_id, role="reviewer")


def _disputed_item(sid: str, item_id) -> None:
    entry = _load(sid)
    _item_of(entry, item_id)
    scores = ratings_frame(sid)
    scores = scores.loc[scores["item_id"] == item_id, "score"]
    if len(scores) < 2 or scores.max() == scores.min():
        raise ProbekitError(f"answer {item_id!r} is not disputed (its raters agree or fewer than two rated it): "
                            "a reviewer link settles answers whose ratings disagree")


def reviewer_disputed(token, *, min_spread: int = 2) -> pd.DataFrame:
    """The disputed answers of the reviewer link's session, as :func:`disputed` gives them (scores without names)."""
    who = reviewer_of(token)
    return disputed(who.session_id, min_spread=min_spread)


def reviewer_view(token, item_id: str) -> dict:
    """:func:`review_view` of one disputed answer of the link's session, always blind (rater 1, rater 2…): the
    organiser's permission to show names is for the organiser's own review only."""
    who = reviewer_of(token)
    _disputed_item(who.session_id, item_id)
    return review_view(who.session_id, item_id, show_names=False)


def reviewer_verdict(token, item_id: str, score: int, *, note: str = "") -> int:
    """Record the link's reviewer's verdict (under the link's name) on one disputed answer of its session;
    returns the event id. Refused with one line, writing nothing: an expert's link or a wrong or revoked token,
    an answer of another session or one that is not disputed, a score outside 1..5."""
    who = reviewer_of(token)
    _check_score(score)
    _disputed_item(who.session_id, item_id)
    return record_verdict(who.session_id, item_id, who.name, score, note=note)
