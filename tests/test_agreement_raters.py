"""probekit.metrics.raters: bias and consistency against naive loops, Dawid–Skene against a loop-by-loop EM and
on simulated panels where one rater is random, the weighted consensus and the expert-adjusted acc@k."""

import numpy as np
import pandas as pd
import pytest

from probekit.errors import ProbekitError
from probekit.metrics import agreement, raters


def simulate(seed, *, n=60, good=4, random=1, exact=0.7, generous=None):
    """A panel: a true score per answer; good raters report it with probability ``exact``, else one point off;
    random raters pick 1..5 uniformly; ``generous`` (a rater index) adds one point to what it would report."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 6, n)
    rows = []
    for j in range(good + random):
        for i in range(n):
            if j >= good:
                s = int(rng.integers(1, 6))
            else:
                s = int(truth[i]) if rng.random() < exact else int(np.clip(truth[i] + rng.choice([-1, 1]), 1, 5))
            if j == generous:
                s = min(s + 1, 5)
            rows.append({"item_id": i, "annotator": f"r{j}", "score": s})
    return pd.DataFrame(rows), truth


@pytest.mark.parametrize("seed", range(5))
def test_the_random_rater_gets_the_lowest_reliability(seed):
    ratings, _ = simulate(seed)
    model = raters.dawid_skene(ratings)
    assert model.reliability.idxmin() == "r4", model.reliability.round(3).to_dict()
    assert model.reliability["r4"] < 0.35 < model.reliability.drop("r4").min()  # chance is 1/5
    assert np.allclose(model.posteriors.sum(axis=1), 1) and model.iterations < raters.MAX_ITER


def _naive_dawid_skene(ratings, *, iters, smoothing):
    """Dawid & Skene's EM written out with loops: the same start (vote shares) and the same number of rounds."""
    items = sorted(ratings.item_id.unique())
    names = sorted(ratings.annotator.unique())
    by_item = {i: [(r.annotator, r.score - 1) for r in ratings.itertuples() if r.item_id == i] for i in items}
    post = {}
    for i in items:
        votes = [0.0] * 5
        for _, said in by_item[i]:
            votes[said] += 1
        post[i] = [v / sum(votes) for v in votes]
    for _ in range(iters):
        priors = [sum(post[i][c] for i in items) / len(items) for c in range(5)]
        conf = {}
        for j in names:
            conf[j] = []
            for c in range(5):
                row = [smoothing] * 5
                for i in items:
                    for who, said in by_item[i]:
                        if who == j:
                            row[said] += post[i][c]
                conf[j].append([v / sum(row) for v in row])
        for i in items:
            like = [priors[c] * np.prod([conf[j][c][said] for j, said in by_item[i]]) for c in range(5)]
            post[i] = [v / sum(like) for v in like]
    priors = [sum(post[i][c] for i in items) / len(items) for c in range(5)]
    return {j: sum(priors[c] * conf[j][c][c] for c in range(5)) for j in names}, post


def test_dawid_skene_against_a_naive_loop():
    ratings, _ = simulate(7, n=25, good=2, random=1)
    ratings = ratings.drop(index=ratings.index[::7])  # some answers rated by fewer raters
    model = raters.dawid_skene(ratings, max_iter=15, tol=1e-300, smoothing=0.5)
    reliability, post = _naive_dawid_skene(ratings, iters=15, smoothing=0.5)
    assert model.iterations == 15
    assert model.reliability.to_dict() == pytest.approx(reliability, rel=1e-9)
    for i, p in post.items():
        assert model.posteriors.loc[i].tolist() == pytest.approx(p, rel=1e-9, abs=1e-12)


def test_bias_and_consistency_against_naive_loops():
    ratings, _ = simulate(3, generous=1)
    table = raters.rater_quality(ratings).set_index("annotator")
    wide = ratings.pivot(index="item_id", columns="annotator", values="score")
    for j in wide.columns:
        diffs, own, rest = [], [], []
        for i in wide.index:
            others = [wide.loc[i, o] for o in wide.columns if o != j]
            own.append(wide.loc[i, j])
            rest.append(sum(others) / len(others))
            diffs.append(own[-1] - rest[-1])
        assert table.loc[j, "bias"] == pytest.approx(sum(diffs) / len(diffs), rel=1e-9)
        mx, my = np.mean(own), np.mean(rest)
        r = sum((a - mx) * (b - my) for a, b in zip(own, rest)) / np.sqrt(
            sum((a - mx) ** 2 for a in own) * sum((b - my) ** 2 for b in rest))
        assert table.loc[j, "consistency"] == pytest.approx(r, rel=1e-9)
        assert table.loc[j, "shared"] == table.loc[j, "ratings"] == 60
    assert table.bias.idxmax() == "r1" and table.loc["r1", "bias"] > 0.5  # the generous one
    assert table.consistency.idxmin() == "r4"  # the random one


def test_weighted_consensus():
    ratings, _ = simulate(4, n=30)
    equal = raters.weighted_consensus(ratings, {f"r{j}": 1.0 for j in range(5)})
    assert equal.to_dict() == agreement.consensus(ratings).to_dict()  # equal weights: the lower median
    for item, group in ratings.groupby("item_id"):  # naive: smallest score carrying half the weight
        w = {"r0": 3.0, "r1": 1.0, "r2": 0.5}
        ss = sorted((r.score, w.get(r.annotator, 0.0)) for r in group.itertuples())
        total, acc = sum(x for _, x in ss), 0.0
        want = None
        for s, x in ss:
            acc += x
            if acc >= total / 2:
                want = s
                break
        assert raters.weighted_consensus(group, w)[item] == want
    lone = pd.DataFrame({"item_id": [1, 1], "annotator": ["a", "b"], "score": [2, 4]})
    assert raters.weighted_consensus(lone, {})[1] == 2  # nobody weighs: equal weights
    with pytest.raises(ProbekitError, match="non-negative"):
        raters.weighted_consensus(lone, {"a": -1})


def test_adjusted_accuracy_discounts_a_random_rater():
    """Two careful raters and one random one, one answer per query at rank 1 (the truth: every other answer is a
    5). With all three the median holds; with the random rater and one careful one, the plain lower median is
    the smaller score (the random rater pulls it down), while weighted by reliability it follows the careful one."""
    rng = np.random.default_rng(0)
    rows, answers, queries = [], [], []
    for q in range(40):
        truth = 5 if q % 2 else 2
        answers.append({"item_id": q, "query": q, "relation": "r", "rank": 1, "is_gold": False})
        queries.append({"query": q, "relation": "r", "best_gold_rank": None})
        rows += [{"item_id": q, "annotator": "a", "score": truth}, {"item_id": q, "annotator": "b", "score": truth},
                 {"item_id": q, "annotator": "z", "score": int(rng.integers(1, 6))}]
    ratings, answers, queries = pd.DataFrame(rows), pd.DataFrame(answers), pd.DataFrame(queries)
    model = raters.dawid_skene(ratings)
    table = raters.adjusted_accuracy(queries, answers, ratings, model.reliability, ks=[1]).set_index("relation")
    assert table.loc["all", "reliability-weighted expert acc (≥5)"] == pytest.approx(0.5)  # the truth
    assert table.loc["all", "expert acc (≥5)"] == pytest.approx(0.5)  # two of three agree: the median holds too
    # one careful rater and the random one: only the weights can side with the careful one
    assert model.reliability["z"] < model.reliability["a"]
    two = ratings[ratings.annotator != "b"]
    table = raters.adjusted_accuracy(queries, answers, two, model.reliability, ks=[1]).set_index("relation")
    assert table.loc["all", "reliability-weighted expert acc (≥5)"] == pytest.approx(0.5)
    plain = np.mean([min(5 if q % 2 else 2, s) >= 5 for q, s in
                     zip(range(40), ratings[ratings.annotator == "z"].score)])
    assert table.loc["all", "expert acc (≥5)"] == pytest.approx(plain) and plain < 0.5
