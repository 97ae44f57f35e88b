"""probekit.metrics.agreement against published numbers, hand computations and naive loops."""

import math

import numpy as np
import pandas as pd
import pytest

from probekit.errors import ProbekitError
from probekit.metrics import agreement


def _long(matrix, annotators):
    """Annotators × units matrix (None = missing) to long ratings."""
    rows = [{"item_id": u, "annotator": a, "score": v}
            for a, row in zip(annotators, matrix) for u, v in enumerate(row) if v is not None]
    return pd.DataFrame(rows)


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", example C: 4 observers, 12 units, missing data.
KRIPP = [[1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
         [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
         [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
         [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None]]


def test_krippendorff_textbook_example():
    ratings = _long(KRIPP, "ABCD")
    assert round(agreement.krippendorff_alpha(ratings, level="ordinal"), 3) == 0.815  # published: 0.815
    assert round(agreement.krippendorff_alpha(ratings, level="nominal"), 3) == 0.743  # published: 0.743
    assert round(agreement.krippendorff_alpha(ratings, level="interval"), 3) == 0.849  # published: 0.849


def test_alpha_undefined_cases():
    one = pd.DataFrame({"item_id": [1, 2], "annotator": ["a", "a"], "score": [1, 5]})
    assert agreement.krippendorff_alpha(one) is None  # a single annotator
    same = pd.DataFrame({"item_id": [1, 1, 2, 2], "annotator": ["a", "b"] * 2, "score": [3, 3, 3, 3]})
    assert agreement.krippendorff_alpha(same) is None  # one value throughout
    perfect = pd.DataFrame({"item_id": [1, 1, 2, 2], "annotator": ["a", "b"] * 2, "score": [1, 1, 5, 5]})
    assert agreement.krippendorff_alpha(perfect) == pytest.approx(1.0)


def test_quadratic_kappa_by_hand():
    # A = 1 2 3 4 5, B = 1 2 3 5 4. Weights (i-j)^2/16; observed disagreement (1/16 + 1/16)/5 = 1/40;
    # uniform margins give expected disagreement sum_ij (i-j)^2 / (25*16) = 100/400 = 1/4; kappa = 1 - 0.1 = 0.9.
    ratings = _long([[1, 2, 3, 4, 5], [1, 2, 3, 5, 4]], ["A", "B"])
    table = agreement.pairwise_kappa(ratings)
    assert table.to_dict(orient="records") == [{"annotator_a": "A", "annotator_b": "B", "n": 5,
                                                "kappa": pytest.approx(0.9)}]


def _naive_weighted_kappa(a, b):
    cats = [1, 2, 3, 4, 5]
    n = len(a)
    obs = np.zeros((5, 5))
    for x, y in zip(a, b):
        obs[x - 1, y - 1] += 1 / n
    pa = [sum(x == c for x in a) / n for c in cats]
    pb = [sum(y == c for y in b) / n for c in cats]
    num = den = 0.0
    for i in range(5):
        for j in range(5):
            w = (i - j) ** 2 / 16
            num += w * obs[i, j]
            den += w * pa[i] * pb[j]
    return 1 - num / den


def test_kappa_pairs_only_shared_items_against_naive_loop():
    rng = np.random.default_rng(3)
    a = rng.integers(1, 6, 40)
    b = np.clip(a + rng.integers(-1, 2, 40), 1, 5)
    c = rng.integers(1, 6, 40)
    rows = [{"item_id": i, "annotator": "a", "score": int(a[i])} for i in range(40)]
    rows += [{"item_id": i, "annotator": "b", "score": int(b[i])} for i in range(40)]
    rows += [{"item_id": i, "annotator": "c", "score": int(c[i])} for i in range(0, 40, 2)]  # c rated half
    table = agreement.pairwise_kappa(pd.DataFrame(rows)).set_index(["annotator_a", "annotator_b"])
    assert table.loc[("a", "b"), "kappa"] == pytest.approx(_naive_weighted_kappa(list(a), list(b)))
    assert table.loc[("a", "c"), "n"] == 20
    assert table.loc[("a", "c"), "kappa"] == pytest.approx(_naive_weighted_kappa(list(a[::2]), list(c[::2])))


def test_consensus_methods():
    r = pd.DataFrame({"item_id": [1, 1, 2, 2, 2, 3], "annotator": ["a", "b", "a", "b", "c", "a"],
                      "score": [4, 5, 1, 5, 2, 3]})
    assert agreement.consensus(r).to_dict() == {1: 4, 2: 2, 3: 3}  # lower median
    assert agreement.consensus(r, method="mean").to_dict() == {1: 4, 2: 3, 3: 3}  # 4.5 rounds half down
    assert agreement.consensus(r, method="max").to_dict() == {1: 5, 2: 5, 3: 3}
    with pytest.raises(ProbekitError, match="consensus"):
        agreement.consensus(r, method="mode")
    with pytest.raises(ProbekitError, match="1..5"):
        agreement.consensus(pd.DataFrame({"item_id": [1], "annotator": ["a"], "score": [6]}))


def _paper_set():
    """15 queries x top-10 = 150 answers laid out exactly as MedLAMA Table 5 (agreement.MEDLAMA_TABLE5): the rank-1
    answers fill the top-1 cells, ranks 2-10 the rest of the top-10 cells. Queries 0-4 have a gold answer at
    rank 1; the other 11 gold hits sit at ranks 2-10 of queries 0-10, one each; queries 11-14 have none in the
    top 10 (query 11's best gold is at rank 25)."""
    table = agreement.MEDLAMA_TABLE5

    def cells(key, minus=None):
        out = []
        for score in (5, 4, 3, 2, 1):
            out += [score] * (table[key][score] - (table[minus][score] if minus else 0))
        return out

    top1 = [(True, s) for s in cells(("top-1", "gold hit"))] + [(False, s) for s in cells(("top-1", "not gold"))]
    rest_gold = cells(("top-10", "gold hit"), ("top-1", "gold hit"))
    rest_other = cells(("top-10", "not gold"), ("top-1", "not gold"))
    assert len(top1) == 15 and len(rest_gold) + len(rest_other) == 135
    answers, scores, queries = [], {}, []
    gold_slots = {(i, 2 + (i % 9)) for i in range(len(rest_gold))}  # (query, rank), one per query 0..10
    gold_iter, other_iter = iter(rest_gold), iter(rest_other)
    for q in range(15):
        for rank in range(1, 11):
            item = f"{q}:{rank}"
            if rank == 1:
                gold, score = top1[q]
            elif (q, rank) in gold_slots:
                gold, score = True, next(gold_iter)
            else:
                gold, score = False, next(other_iter)
            answers.append({"item_id": item, "query": q, "relation": f"r{q % 3}", "rank": rank, "is_gold": gold,
                            "answer": f"answer {q}/{rank}"})
            scores[item] = score
        gold_ranks = [a["rank"] for a in answers if a["query"] == q and a["is_gold"]]
        queries.append({"query": q, "relation": f"r{q % 3}", "best_gold_rank": min(gold_ranks) if gold_ranks
                        else (25 if q == 11 else None)})
    return pd.DataFrame(answers), pd.Series(scores), pd.DataFrame(queries)


def test_table5_reproduces_the_papers_table_and_its_consistent_share():
    """MedLAMA §5.3: "the acc@10 is 10.6% (16/150) under gold answers, but under the expert annotation the acc@10
    is 25.3% (38/150)". Table 5 itself has 13 + 20 = 33 top-10 answers rated 5; its Sum column (38) adds the
    top-1 columns (4 + 1) to the top-10 ones, counting those five answers twice. So the consistent share is
    33/150 = 22.0%; the 38 is reproduced only by that double count."""
    answers, scores, _ = _paper_set()
    table = agreement.table5(answers, scores).set_index(["answers", "gold"])
    for (k, label), cell in agreement.MEDLAMA_TABLE5.items():  # every printed cell
        for score, count in cell.items():
            assert table.loc[(k, label), str(score)] == count, (k, label, score)
    assert table.loc[("top-1", "all"), "total"] == 15 and table.loc[("top-10", "all"), "total"] == 150
    assert table.loc[("top-10", "gold hit"), "total"] == 16
    assert table.loc[("top-10", "all"), "5"] == 33
    printed_sum = {5: 38, 4: 14, 3: 59, 2: 54, 1: 0}  # Table 5's "Sum" column
    for score, total in printed_sum.items():
        assert table.loc[("top-1", "all"), str(score)] + table.loc[("top-10", "all"), str(score)] == total
    s = agreement.shares(answers, scores, k=10)
    assert (s["answers"], s["gold_hits"], s["expert_hits"]) == (150, 16, 33)
    assert f"{100 * s['gold_share']:.1f}% vs {100 * s['expert_share']:.1f}%" == "10.7% vs 22.0%"  # paper: 10.6 (cut)
    assert "33/150 = 22.0%" in agreement.MEDLAMA_NOTE and "33/150 = 22.0%" in agreement.__doc__
    # every cell against a naive loop
    for k in (1, 10):
        for label in ("gold hit", "not gold", "all"):
            for sc in range(1, 6):
                naive = sum(1 for a in answers.itertuples() if a.rank <= k and scores[a.item_id] == sc
                            and (label == "all" or a.is_gold == (label == "gold hit")))
                assert table.loc[(f"top-{k}", label), str(sc)] == naive
            assert table.loc[(f"top-{k}", label), "total"] == sum(table.loc[(f"top-{k}", label), str(s)]
                                                                  for s in range(1, 6))


def test_share_of_answers_next_to_accuracy_per_query():
    """The paper's acc@10 is a share of answers (33/150); per query, a query is an expert hit when any of its
    top-10 answers is rated 5, a different (here larger) number. Both against naive loops."""
    answers, scores, queries = _paper_set()
    table = agreement.answer_shares(answers, scores, ks=(1, 10)).set_index("k")
    for k in (1, 10):
        top = [a for a in answers.itertuples() if a.rank <= k]
        assert table.loc[k, "rated answers"] == len(top)
        assert table.loc[k, "expert share (≥5)"] == pytest.approx(sum(scores[a.item_id] == 5 for a in top) / len(top))
        assert table.loc[k, "gold share"] == pytest.approx(sum(a.is_gold for a in top) / len(top))
    assert (table.loc[10, "rated ≥5"], table.loc[10, "gold hits"]) == (33, 16)
    per_query = agreement.expert_accuracy(queries, answers, scores).set_index(["k", "relation"])
    naive = np.mean([any(scores[f"{q}:{r}"] == 5 for r in range(1, 11)) for q in range(15)])
    assert per_query.loc[(10, "all"), "expert acc (≥5)"] == pytest.approx(naive)
    assert per_query.loc[(10, "all"), "expert acc (≥5)"] != pytest.approx(table.loc[10, "expert share (≥5)"])


def test_expert_accuracy_against_naive_loop():
    answers, scores, queries = _paper_set()
    scores = scores.drop("14:7")  # query 14 is not fully rated: left out at k=10, kept at k=1
    for threshold in (5, 4):
        table = agreement.expert_accuracy(queries, answers, scores, threshold=threshold)
        col = f"expert acc (≥{threshold})"
        for k in (1, 10):
            rows = table[table.k == k].set_index("relation")
            kept = [q for q in range(15) if all(f"{q}:{r}" in scores for r in range(1, k + 1))]
            assert rows.loc["all", "n"] == len(kept)
            expert = [any(scores[f"{q}:{r}"] >= threshold for r in range(1, k + 1)) for q in kept]
            best = queries.set_index("query").best_gold_rank
            gold = [not pd.isna(best[q]) and best[q] <= k for q in kept]
            assert rows.loc["all", col] == pytest.approx(np.mean(expert))
            assert rows.loc["all", "gold acc"] == pytest.approx(np.mean(gold))
            assert rows.loc["all", "gold or expert acc"] == pytest.approx(np.mean(np.logical_or(expert, gold)))
            per_rel = [np.mean([e for q, e in zip(kept, expert) if q % 3 == r]) for r in range(3)]
            assert rows.loc["macro", col] == pytest.approx(np.mean(per_rel))
    assert math.isnan(agreement.expert_accuracy(queries, answers, scores, ks=[20]).iloc[0]["gold acc"])


def test_missing_facts_are_non_gold_fives():
    answers, scores, _ = _paper_set()
    ratings = pd.DataFrame({"item_id": scores.index, "annotator": "a", "score": scores.values})
    facts = agreement.missing_facts(answers, ratings, scores)
    assert len(facts) == 20 and not facts.is_gold.any() and (facts.score == 5).all()  # §5.3: "20 ... not gold"
    assert list(facts.columns[:6]) == list(answers.columns) and facts.ratings.iloc[0] == [5]
    assert len(agreement.missing_facts(answers, ratings, scores, threshold=4)) == 28  # + 8 rated 4


def test_agreement_overall_and_per_relation():
    ratings = _long(KRIPP, "ABCD")
    answers = pd.DataFrame({"item_id": range(12), "relation": ["x"] * 6 + ["y"] * 6})
    table = agreement.agreement(ratings, answers).set_index("relation")
    assert list(table.index) == ["all", "x", "y"]
    assert round(table.loc["all", "alpha (ordinal)"], 3) == 0.815
    assert table.loc["x", "items"] == 6 and table.loc["all", "annotators"] == 4
    assert table.loc["all", "items rated twice+"] == 11  # unit 12 has one rating


def test_bad_inputs():
    answers, scores, queries = _paper_set()
    with pytest.raises(ProbekitError, match="threshold"):
        agreement.shares(answers, scores, threshold=6)
    with pytest.raises(ProbekitError, match="ks"):
        agreement.table5(answers, scores, ks=[0])
    with pytest.raises(ProbekitError, match="lacks"):
        agreement.table5(answers.drop(columns=["is_gold"]), scores)
