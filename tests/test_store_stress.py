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

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT

from probekit import annotations as ann
from probekit import store
from probekit.types import Query, Ranking

RATER = textwrap.dedent("""
    import json, sys
    from probekit import annotations as ann
    from probekit.store import db
    sid, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    who = ann.join(sid, name)
    items = ann.items_frame(sid).item_id.tolist()
    acked, refused = [], 0
    print("ready", flush=True)
    sys.stdin.readline()  # all start together
    for i in range(n):
        try:
            acked.append(ann.rate(sid, items[i % len(items)], who, 1 + (i + len(name)) % 5))
        except Exception as e:
            refused += 1
            print("refused", type(e).__name__, str(e)[:200], file=sys.stderr, flush=True)
    db.close_all()
    print(json.dumps({"who": who, "acked": acked, "refused": refused}), flush=True)
""")

PROCESSES, RATINGS = 8, 120


@pytest.mark.timeout(900)
def test_every_acknowledged_rating_is_stored_under_its_expert(tmp_path):
    rankings = [Ranking(Query(f"q{q}", f"s{q}", "r", "[X] r [Y].", golds=("a",)), (0, 1), ("a", "b"),
                        (1.0, 0.0), (1,)) for q in range(RATINGS // 2)]
    sid = ann.from_rankings(rankings, name="stress", k=2)
    store.close_all()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROBEKIT_DB_MAX_HOLD_S": "0.2", "PROBEKIT_DB_IDLE_CLOSE_S": "0.05"}
    procs = [subprocess.Popen([sys.executable, "-c", RATER, sid, f"expert {j}", str(RATINGS)], cwd=ROOT, env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for j in range(PROCESSES)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [(p.communicate(timeout=800), p.returncode) for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    reports = []
    for (out, err), rc in results:
        assert rc == 0, f"a rater exited with {rc}: {err[-2000:]}"
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert [r["refused"] for r in reports] == [0] * PROCESSES, [r["refused"] for r in reports]
    stored = dict(store.get_store().fetch(
        "SELECT event_id, annotator FROM annotation_events WHERE session_id = ? AND kind = 'rate'", [sid]))
    for r in reports:
        assert len(r["acked"]) == len(set(r["acked"])) == RATINGS
        missing = [e for e in r["acked"] if e not in stored]
        assert not missing, f"{len(missing)} acknowledged ratings of {r['who']} are not stored: {missing[:10]}"
        assert {stored[e] for e in r["acked"]} == {r["who"]}
    assert len(stored) == PROCESSES * RATINGS
