"""Five processes rating into one database: the store is busy, never stuck, so no rating is refused.

The rule (probekit.store.db): a process that finds the file held waits; it gives up only when one and the same
process has held the file for the whole lock wait. Here the lock wait is shorter than the time the four other
processes take to have their turns (each holds the file up to ``PROBEKIT_DB_MAX_HOLD_S``), so a rule that counted
the whole wait would refuse ratings (as 2 of 500 were refused with the 20 s wait of a busy clinic)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from conftest import ROOT

from probekit import annotations as ann
from probekit import store
from probekit.types import Query, Ranking

RATER = textwrap.dedent("""
    import sys
    from probekit import annotations as ann
    sid, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    who = ann.join(sid, name)
    items = ann.items_frame(sid).item_id.tolist()
    refused = 0
    print("ready", flush=True)
    sys.stdin.readline()  # all start together
    for i in range(n):
        try:
            ann.rate(sid, items[i % len(items)], who, 1 + (i + len(name)) % 5)
        except Exception as e:
            refused += 1
            print("refused", type(e).__name__, str(e)[:200], file=sys.stderr, flush=True)
    print("refused", refused, flush=True)
""")

PROCESSES, RATINGS = 5, 100


def test_five_processes_x_100_ratings_all_stored_exactly_once(tmp_path):
    rankings = [Ranking(Query(f"q{q}", f"s{q}", "r", "[X] r [Y].", golds=("a",)), (0, 1), ("a", "b"),
                        (1.0, 0.0), (1,)) for q in range(RATINGS // 2)]
    sid = ann.from_rankings(rankings, name="five experts", k=2)
    store.close_all()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROBEKIT_DB_LOCK_WAIT_S": "3", "PROBEKIT_DB_MAX_HOLD_S": "1.0",
           "PROBEKIT_DB_IDLE_CLOSE_S": "0.3"}
    procs = [subprocess.Popen([sys.executable, "-c", RATER, sid, f"expert {j}", str(RATINGS)], cwd=ROOT, env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for j in range(PROCESSES)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [p.communicate(timeout=600) for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    for out, err in results:
        assert out.strip().splitlines()[-1] == "refused 0", err[-2000:]
    total, distinct = store.get_store().fetch(
        "SELECT count(*), count(DISTINCT event_id) FROM annotation_events WHERE session_id = ? AND kind = 'rate'",
        [sid])[0]
    assert (total, distinct) == (PROCESSES * RATINGS, PROCESSES * RATINGS)
    per_expert = store.get_store().fetch(
        "SELECT annotator, count(*) FROM annotation_events WHERE session_id = ? GROUP BY annotator ORDER BY 1",
        [sid])
    assert [n for _, n in per_expert] == [RATINGS] * PROCESSES
