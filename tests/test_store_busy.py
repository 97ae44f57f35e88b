"""Five processes rating into one database: the store is busy, never stuck, so no rating is refused.

The rule (probekit.store.db): a process that finds the file held waits; it gives up only when one and the same
process has held the file for the whole lock wait. Here the lock wait is shorter than the time the four other
processes take to have their turns (each holds the file up to ``PROBEKIT_DB_MAX_HOLD_S``), so a rule that counted
the whole wait would refuse ratings (as 2 of 500 were refused with the 20 s wait of a busy clinic)."""

from __future__ import annotations

import os

from _raters import run_raters

from probekit import annotations as ann
from probekit import store
from probekit.types import Query, Ranking

PROCESSES, RATINGS = 5, 100


def test_five_processes_x_100_ratings_all_stored_exactly_once(tmp_path):
    rankings = [Ranking(Query(f"q{q}", f"s{q}", "r", "[X] r [Y].", golds=("a",)), (0, 1), ("a", "b"),
                        (1.0, 0.0), (1,)) for q in range(RATINGS // 2)]
    sid = ann.from_rankings(rankings, name="five experts", k=2)
    store.close_all()
    env = {**os.environ, "PROBEKIT_DB_LOCK_WAIT_S": "3", "PROBEKIT_DB_MAX_HOLD_S": "1.0",
           "PROBEKIT_DB_IDLE_CLOSE_S": "0.3"}
    reports = run_raters(sid, processes=PROCESSES, ratings=RATINGS, env=env)
    assert [r["refused"] for r in reports] == [0] * PROCESSES
    total, distinct = store.get_store().fetch(
        "SELECT count(*), count(DISTINCT event_id) FROM annotation_events WHERE session_id = ? AND kind = 'rate'",
        [sid])[0]
    assert (total, distinct) == (PROCESSES * RATINGS, PROCESSES * RATINGS)
    per_expert = store.get_store().fetch(
        "SELECT annotator, count(*) FROM annotation_events WHERE session_id = ? GROUP BY annotator ORDER BY 1",
        [sid])
    assert [n for _, n in per_expert] == [RATINGS] * PROCESSES
