"""Paired comparison of two runs (probekit.metrics.paired), each rule against scipy or a naive loop of its
definition, and the behaviour a researcher relies on: a planted difference is found, no difference is not.

The rules: exact McNemar p = min(1, 2 P(X <= min(b, c))), X ~ Binomial(b + c, 1/2); Holm multiplies the i-th
smallest of m p-values by m - i + 1 and keeps them non-decreasing; Benjamini-Hochberg multiplies by m / i and
keeps them non-increasing from the largest; the bootstrap resamples queries within each relation."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from probekit.errors import ProbekitError
from probekit.metrics import paired


def frames(seed: int, *, n: int = 3000, rate_a: float = 0.50, rate_b: float = 0.50, relations: int = 5,
           same: bool = False):
    """Two runs' results frames over the same ``n`` queries: hit (rank 1) or miss (rank 50) drawn per query."""
    rng = np.random.default_rng(seed)
    rels = [f"r{i % relations}" for i in range(n)]
    base = {"relation": rels, "query_id": [f"q{i}" for i in range(n)], "subject": [f"s{i}" for i in range(n)],
            "template": "[X] treats [Y].", "golds": [["g"]] * n, "top_names": [["g"]] * n}
    hits_a = rng.random(n) < rate_a
    hits_b = hits_a.copy() if same else rng.random(n) < rate_b
    rank = lambda h: np.where(h, 1, 50)  # noqa: E731
    return (pd.DataFrame({**base, "best_gold_rank": rank(hits_a)}),
            pd.DataFrame({**base, "best_gold_rank": rank(hits_b)}))


def test_mcnemar_exact_is_the_binomial_test_of_the_discordant_pairs():
    for b, c in [(0, 0), (1, 0), (8, 2), (30, 45), (3, 3), (100, 60)]:
        naive = 1.0 if b + c == 0 else min(1.0, 2 * sum(math.comb(b + c, i) for i in range(min(b, c) + 1))
                                           / 2 ** (b + c))
        assert paired.mcnemar_exact(b, c) == pytest.approx(naive, rel=1e-9)
        if b + c:
            assert paired.mcnemar_exact(b, c) == pytest.approx(stats.binomtest(b, b + c, 0.5).pvalue, rel=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_holm_and_bh_against_their_definitions(seed):
    p = list(np.random.default_rng(seed).random(7) ** 3) + [float("nan")]
    m = 7
    order = sorted(range(m), key=lambda i: p[i])
    holm, bh = [0.0] * m, [0.0] * m
    for i, idx in enumerate(order):  # naive: the running maximum of (m - i) p over the sorted order
        holm[idx] = min(1.0, max((m - j) * p[order[j]] for j in range(i + 1)))
    for i, idx in enumerate(order):  # naive: the minimum over ranks >= i of m p / rank
        bh[idx] = min(1.0, min(m / (j + 1) * p[order[j]] for j in range(i, m)))
    got_holm, got_bh = paired.holm(p), paired.benjamini_hochberg(p)
    assert got_holm[:m] == pytest.approx(holm) and math.isnan(got_holm[m])
    assert got_bh[:m] == pytest.approx(bh) and math.isnan(got_bh[m])


def test_a_planted_difference_is_found_and_none_is_not():
    """3,000 paired queries, A right 2 points more often than B (the discordant pairs carry it): p < 0.05 and an
    interval above 0; the identical pair: p = 1, an interval of exactly 0."""
    a, b = frames(0, same=True)
    flip = np.flatnonzero(a["best_gold_rank"].to_numpy() == 1)[:60]  # 60 of A's hits become B's misses: 2 points
    b.loc[flip, "best_gold_rank"] = 50
    cmp = paired.compare_paired(a, b, metric="acc@1", seed=1)
    micro = cmp.row("micro")
    assert micro["n"] == 3000 and micro["diff"] == pytest.approx(0.02)
    assert micro["test"] == "McNemar, exact" and micro["p"] < 0.05 and 0 < micro["lo"] < 0.02 < micro["hi"]
    assert cmp.row("macro")["p"] < 0.05
    same = paired.compare_paired(a, a, metric="acc@1", seed=1)
    assert same.row("micro")["p"] == 1.0 and same.row("micro")["lo"] == same.row("micro")["hi"] == 0.0
    text = cmp.sentence(a="base", b="rewired")
    assert text.startswith("base − rewired = +2.00 points [") and "McNemar, exact; 3,000 paired queries" in text


def test_p_values_are_calibrated_when_nothing_differs():
    """Two runs drawn from the same hit rate, 200 seeds: about 5 % of McNemar p-values fall below 0.05 (an exact
    test is conservative: at most 5 % in expectation; 200 draws allow up to 9 % at 3 binomial sd)."""
    below = [paired.compare_paired(*frames(seed, n=400, relations=2), metric="acc@1", n_boot=20, n_perm=20,
                                   seed=seed).row("micro")["p"] < 0.05 for seed in range(200)]
    assert 0.0 <= np.mean(below) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 200)


def test_bootstrap_interval_matches_the_normal_approximation_on_many_queries():
    """For a mean of many paired differences the percentile interval is close to diff ± 1.96 sd / sqrt(n)."""
    a, b = frames(3, n=3000, rate_a=0.55, rate_b=0.45, relations=1)
    cmp = paired.compare_paired(a, b, metric="acc@1", n_boot=4000, seed=2)
    d = (a["best_gold_rank"] == 1).astype(float) - (b["best_gold_rank"] == 1).astype(float)
    half = 1.96 * d.std(ddof=1) / math.sqrt(len(d))
    r = cmp.row("micro")
    assert r["lo"] == pytest.approx(d.mean() - half, abs=0.15 * half)
    assert r["hi"] == pytest.approx(d.mean() + half, abs=0.15 * half)


def test_graded_metrics_use_the_sign_flip_test_and_relations_are_adjusted():
    a, b = frames(4, n=600)
    a["best_gold_rank"] = np.random.default_rng(5).integers(1, 30, len(a))
    cmp = paired.compare_paired(a, b, metric="MRR", n_boot=200, n_perm=400, seed=0, correction="bh")
    rel = cmp.table[cmp.table.relation.str.startswith("r")]
    assert set(cmp.table["test"]) == {"sign-flip permutation", "sign-flip permutation, by relation"}
    assert list(rel["p adjusted"]) == pytest.approx(paired.benjamini_hochberg(list(rel["p"])))
    assert ((rel["p"] >= 1 / 401) & (rel["p"] <= 1)).all()  # the observed assignment is counted
    again = paired.compare_paired(a, b, metric="MRR", n_boot=200, n_perm=400, seed=0, correction="bh")
    pd.testing.assert_frame_equal(cmp.table, again.table)  # seeded
    assert json.loads(json.dumps(cmp.to_dict()))["correction"] == "bh"


def test_runs_that_share_no_query_or_cannot_have_the_metric_are_refused():
    a, b = frames(6, n=50)
    other = b.assign(subject=[f"x{i}" for i in range(len(b))])
    with pytest.raises(ProbekitError, match="share no full query"):
        paired.compare_paired(a, other)
    with pytest.raises(ProbekitError, match="run B gives 1 answer"):
        paired.compare_paired(a, b, metric="acc@10", depths=(None, 1))
    with pytest.raises(ProbekitError, match="unknown correction 'holms'; did you mean 'holm'"):
        paired.compare_paired(a, b, correction="holms")


def test_runs_compare_command(capsys, tiny_encoder):
    """`runs compare A B` on two stored runs: the sentence, the table and JSON."""
    from probekit.bench import runs
    from probekit.cli.main import main
    from probekit.datasets import load_dataset
    from probekit.types import Ranking

    ds = load_dataset("demo")
    queries = ds.queries[:120]
    ids = []
    for shift in (0, 3):
        rankings = [Ranking(q, (0,), ("x",), (1.0,), tuple(1 + (i + shift) % 7 for i, _ in enumerate(q.golds)))
                    for q in queries]
        ids.append(runs.save_run(rankings, model=tiny_encoder, dataset=ds, probe="retrieval", k=10))
    assert main(["runs", "compare", *ids, "--metric", "acc@1", "--resamples", "200"]) == 0
    out = capsys.readouterr().out
    assert "A − B = " in out and "paired queries, micro acc@1" in out and "Holm's step-down" in out
    assert main(["runs", "compare", *ids, "--format", "json", "--resamples", "100"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["a"] == ids[0] and data["metric"] == "acc@10" and data["rows"][-1]["relation"] == "micro"
    assert [r["relation"] for r in data["rows"]][:-2] == sorted({q.relation for q in queries})
