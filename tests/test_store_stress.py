"""Many processes handing one database file back and forth: every acknowledged rating is stored, under its expert.

The rule (probekit.annotations.rating): a rating acknowledged to the caller (``rate`` returned its event id) is
committed, so it is in the store afterwards, exactly once. Each rater process here reports the event ids it was
given; the test then looks every one of them up, so a write that was reported as done but lost (a commit into a
connection on a file another process had meanwhile, a write-ahead log not replayed, a retry that swallowed a
failure) shows as a missing id, not merely as a short count. The holds and idle closes are cut to a fraction of
their defaults so the file changes hands (close, checkpoint, reopen, replay) hundreds of times, and every process
must exit cleanly (a process that aborts at exit after acknowledging leaves its last writes to the log replay).
Before the store held its lock file from connect to close, this failed in 3 of 4 runs under ``stress --cpu 2``
(an acknowledged event id stored under another expert; ratings refused), and passed 6 of 6 after."""

from __future__ import annotations

import os

import pytest
from _raters import run_raters

from probekit import annotations as ann
from probekit import store
from probekit.types import Query, Ranking

PROCESSES, RATINGS = 8, 120


@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_every_acknowledged_rating_is_stored_under_its_expert(tmp_path):
    rankings = [Ranking(Query(f"q{q}", f"s{q}", "r", "[X] r [Y].", golds=("a",)), (0, 1), ("a", "b"),
                        (1.0, 0.0), (1,)) for q in range(RATINGS // 2)]
    sid = ann.from_rankings(rankings, name="stress", k=2)
    store.close_all()
    env = {**os.environ, "PROBEKIT_DB_MAX_HOLD_S": "0.2", "PROBEKIT_DB_IDLE_CLOSE_S": "0.05"}
    reports = run_raters(sid, processes=PROCESSES, ratings=RATINGS, env=env, timeout=800)
    assert [r["refused"] for r in reports] == [0] * PROCESSES, [r["refused"] for r in reports]
    stored = dict(store.get_store().fetch(
        "SELECT event_id, annotator FROM annotation_events WHERE session_id = ? AND kind = 'rate'", [sid]))
    for r in reports:
        assert len(r["acked"]) == len(set(r["acked"])) == RATINGS
        missing = [e for e in r["acked"] if e not in stored]
        assert not missing, f"{len(missing)} acknowledged ratings of {r['who']} are not stored: {missing[:10]}"
        assert {stored[e] for e in r["acked"]} == {r["who"]}
    assert len(stored) == PROCESSES * RATINGS
