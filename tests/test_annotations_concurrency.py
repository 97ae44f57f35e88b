"""Reliability of annotation storage: concurrent annotators lose nothing, and a process killed with
SIGKILL keeps every rating it acknowledged."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from conftest import ROOT

from probekit import annotations as ann
from probekit import store
from probekit.types import Query, Ranking


def big_session(n_queries: int, k: int = 10, **kw) -> str:
    rankings = []
    for q in range(n_queries):
        query = Query(f"q{q}", f"s{q}", f"r{q % 4}", "[X] relates to [Y].", golds=(f"a{q}-1",))
        rankings.append(Ranking(query, tuple(range(k)), tuple(f"a{q}-{r}" for r in range(1, k + 1)),
                                tuple(float(-r) for r in range(k)), (1,)))
    return ann.from_rankings(rankings, name="load", k=k, **kw)


def expected_score(i: int, j: int) -> int:
    return (7 * i + j) % 5 + 1


def run_threads(n: int, target) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def wrap(j):
        try:
            barrier.wait()
            target(j)
        except BaseException as e:  # noqa: BLE001 - collected and asserted empty
            errors.append(e)

    threads = [threading.Thread(target=wrap, args=(j,)) for j in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


@pytest.mark.heavy
def test_8_threads_x_500_ratings_all_stored_none_duplicated():
    sid = big_session(50)  # 500 answers
    items = ann.items_frame(sid).item_id.tolist()
    names = [ann.join(sid, f"expert {j}") for j in range(8)]

    def annotate(j):
        for i, item in enumerate(items):
            ann.rate(sid, item, names[j], expected_score(i, j), elapsed_ms=100)

    t0 = time.perf_counter()
    errors = run_threads(8, annotate)
    seconds = time.perf_counter() - t0
    assert errors == []
    db = store.get_store()
    total, distinct_ids, distinct_pairs = db.fetch(
        "SELECT count(*), count(DISTINCT event_id), count(DISTINCT (item_id, annotator)) FROM annotation_events "
        "WHERE session_id = ?", [sid])[0]
    assert (total, distinct_ids, distinct_pairs) == (4000, 4000, 4000)
    current = ann.ratings_frame(sid)
    assert len(current) == 4000 and current.groupby("annotator").size().tolist() == [500] * 8
    position = {item: i for i, item in enumerate(items)}
    for row in current.itertuples():
        assert row.score == expected_score(position[row.item_id], names.index(row.annotator))
    print(f"\n8 threads x 500 ratings: {total} stored, {total - distinct_pairs} duplicated, {seconds:.2f} s "
          f"({4000 / seconds:.0f} ratings/s)")


def test_same_annotator_two_tabs_and_claims_under_contention():
    sid = big_session(4, k=2)
    who = ann.join(sid, "alice")
    item = ann.items_frame(sid).item_id[0]
    errors = run_threads(2, lambda j: [ann.rate(sid, item, who, 1 + (i + j) % 5) for i in range(100)])
    assert errors == []
    assert len(ann.events_frame(sid)) == 200
    assert len(ann.my_ratings(sid, who)) == 1  # one current rating per (answer, annotator)

    shared = big_session(6, k=2, raters_per_item=2)
    names = [ann.join(shared, f"e{j}") for j in range(8)]
    got: dict[str, int | None] = {}
    assert run_threads(8, lambda j: got.__setitem__(names[j], ann.next_query(shared, names[j]))) == []
    claims = store.get_store().fetch("SELECT query_index, count(*) FROM annotation_assignments WHERE session_id = ? "
                                     "GROUP BY ALL ORDER BY 1", [shared])
    assert claims == [(0, 2), (1, 2), (2, 2), (3, 2)]  # 8 annotators, exactly 2 per query
    assert sorted(v for v in got.values()) == [0, 0, 1, 1, 2, 2, 3, 3]


CHILD = """
import sys
from probekit import annotations as ann
sid, name, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
who = ann.join(sid, name)
items = ann.items_frame(sid).item_id.tolist()
print("ready", flush=True)
for i in range(start, len(items)):
    event = ann.rate(sid, items[i], who, i % 5 + 1)
    print("ack", event, items[i], i % 5 + 1, flush=True)
"""


def rate_until_killed(sid: str, name: str, start: int, n_acks: int) -> list[tuple[int, str, int]]:
    """Run a rating process, SIGKILL it right after its ``n_acks``-th acknowledgement; return the acks."""
    store.close_all()  # DuckDB: one process holds the file
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, sid, name, str(start)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    acks = []
    try:
        for line in proc.stdout:
            if line.startswith("ack"):
                _, event, item, score = line.split()
                acks.append((int(event), item, int(score)))
                if len(acks) == n_acks:
                    proc.send_signal(signal.SIGKILL)
                    break
    finally:
        proc.kill()
        proc.wait(30)
    assert len(acks) == n_acks, proc.stderr.read()
    assert proc.returncode == -signal.SIGKILL
    return acks


def test_sigkill_after_n_acknowledged_ratings_loses_none():
    sid = big_session(40)  # 400 answers
    t0 = time.perf_counter()
    first = rate_until_killed(sid, "kim", 0, 57)
    found = ann.events_frame(sid)  # reopens the file: DuckDB replays its write-ahead log
    by_id = found.set_index("event_id")
    assert all(by_id.loc[e, "item_id"] == item and by_id.loc[e, "score"] == s for e, item, s in first)
    assert len(first) <= len(found) <= len(first) + 1  # at most one committed but not yet acknowledged
    # a second process resumes after the first's last stored rating, and is killed too
    after_first = len(found)
    second = rate_until_killed(sid, "kim", after_first, 120)
    found = ann.events_frame(sid)
    assert {e for e, _, _ in first + second} <= set(found.event_id)
    # again at most one committed but not yet acknowledged by the second process (the first's is in after_first)
    assert found.event_id.is_unique and after_first + len(second) <= len(found) <= after_first + len(second) + 1
    assert len(ann.my_ratings(sid, "kim")) == len(found)  # no answer rated twice across the restarts
    print(f"\nSIGKILL after 57 and 120 acks: {len(found)} ratings found, all {len(first) + len(second)} acknowledged "
          f"ones present ({time.perf_counter() - t0:.1f} s incl. 2 process starts)")
