"""metrics: acc@k macro/micro, per relation and summary against naive loops on hand-made rankings."""

from __future__ import annotations

import math
import random

import pytest

from probekit import metrics
from probekit.errors import ProbekitError
from probekit.types import Query, Ranking


def _ranking(qid: str, relation: str, gold_ranks) -> Ranking:
    golds = tuple(f"g{i}" for i in range(len(gold_ranks)))
    q = Query(qid, "s", relation, "[X] r [Y]", golds=golds)
    return Ranking(q, (0, 1, 2), ("a", "b", "c"), (3.0, 2.0, 1.0), tuple(gold_ranks), n_candidates=100)


# Hand-made: relation r1 has 4 queries, r2 one query (macro != micro), r3 two.
HAND = [
    _ranking("q1", "r1", [1]),
    _ranking("q2", "r1", [7, 2]),  # best gold counts
    _ranking("q3", "r1", [None, 12]),  # one gold is not a candidate
    _ranking("q4", "r1", [None]),  # no gold among the candidates: never a hit
    _ranking("q5", "r2", [5]),  # rank exactly k=5 is a hit at 5, not at 4
    _ranking("q6", "r3", [3, 3]),  # tied golds
    _ranking("q7", "r3", []),  # no gold answers at all
]


def _naive(rankings, k, average):
    def hit(r):
        ranks = [x for x in r.gold_ranks if x is not None]
        return 1.0 if ranks and min(ranks) <= k else 0.0

    if average == "micro":
        return sum(hit(r) for r in rankings) / len(rankings)
    rels = []
    for r in rankings:
        if r.query.relation not in rels:
            rels.append(r.query.relation)
    accs = []
    for rel in rels:
        rs = [r for r in rankings if r.query.relation == rel]
        accs.append(sum(hit(r) for r in rs) / len(rs))
    return sum(accs) / len(accs)


def test_hand_values():
    # k=1: hits q1 -> r1 1/4, r2 0, r3 0 -> macro 1/12, micro 1/7
    assert metrics.acc_at_k(HAND, k=1) == pytest.approx(1 / 12)
    assert metrics.acc_at_k(HAND, k=1, average="micro") == pytest.approx(1 / 7)
    # k=5: q1, q2, q5, q6 -> r1 2/4, r2 1, r3 1/2 -> macro 2/3, micro 4/7
    assert metrics.acc_at_k(HAND, k=5) == pytest.approx(2 / 3)
    assert metrics.acc_at_k(HAND, k=5, average="micro") == pytest.approx(4 / 7)
    assert metrics.acc_at_k(HAND, k=4, average="micro") == pytest.approx(3 / 7)
    assert metrics.acc_at_k(HAND, k=12, average="micro") == pytest.approx(5 / 7)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 10, 12, 100])
@pytest.mark.parametrize("average", ["macro", "micro"])
def test_against_naive_loop(k, average):
    assert metrics.acc_at_k(HAND, k=k, average=average) == pytest.approx(_naive(HAND, k, average))


def test_random_rankings_against_naive_loop():
    rng = random.Random(0)
    rankings = []
    for i in range(300):
        rel = f"r{rng.randrange(7)}"
        golds = [rng.choice([None, rng.randrange(1, 40)]) for _ in range(rng.randrange(0, 4))]
        rankings.append(_ranking(f"q{i}", rel, golds))
    for k in (1, 5, 10, 20):
        for average in ("macro", "micro"):
            assert metrics.acc_at_k(rankings, k=k, average=average) == pytest.approx(_naive(rankings, k, average))
        per = metrics.per_relation(rankings, metrics=(f"acc@{k}",))
        for rel, accs in per.items():
            mine = [r for r in rankings if r.query.relation == rel]
            assert accs[f"acc@{k}"] == pytest.approx(_naive(mine, k, "micro"))


def test_per_relation_and_summary():
    per = metrics.per_relation(HAND, metrics=("acc@1", "acc@5"))
    assert list(per) == ["r1", "r2", "r3"]  # order of first appearance
    assert per["r2"] == {"acc@1": 0.0, "acc@5": 1.0} and per["r1"]["acc@5"] == 0.5
    s = metrics.summary(HAND)
    assert s["n_queries"] == 7
    assert s["relations"]["r1"]["n"] == 4 and s["relations"]["r2"]["n"] == 1
    assert list(s["macro"]) == list(s["micro"]) == s["metrics"] == metrics.metric_names()
    assert s["macro"]["acc@5"] == pytest.approx(2 / 3) and s["micro"]["acc@10"] == pytest.approx(4 / 7)


def test_single_relation_macro_equals_micro():
    rs = [r for r in HAND if r.query.relation == "r1"]
    for k in (1, 5, 12):
        assert metrics.acc_at_k(rs, k=k) == metrics.acc_at_k(rs, k=k, average="micro")


def test_bad_input():
    assert math.isnan(metrics.acc_at_k([], k=1))
    with pytest.raises(ProbekitError, match="k must be a positive integer"):
        metrics.acc_at_k(HAND, k=0)
    with pytest.raises(ProbekitError, match="unknown metric 'acc@2.5'"):
        metrics.per_relation(HAND, metrics=("acc@1", "acc@2.5"))
    with pytest.raises(ProbekitError, match="unknown average 'weighted'"):
        metrics.acc_at_k(HAND, k=1, average="weighted")
